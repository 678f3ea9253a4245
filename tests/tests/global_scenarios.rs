//! The device-global suite: kernels that keep a flag, a lock, a counter
//! and bins in `device_global!`s (`vigil_kernels::globals`), as CUDA
//! programs keep them in `__device__` variables. On sanitized contexts of
//! both backends, each racy and fixed variant gives the same verdict (the
//! distinct reports, by kind and both `// @marker` lines); on plain
//! contexts of both, the fixed variants compute the same results; and the
//! host reads and writes a global by name, each module load with its own
//! copy.

use vigil::{Context, LaunchConfig};

#[macro_use]
mod common;

mod cpu {
    scenario_tests!(super::common::cpu_context;
        flag_with_fences, flag_without_fences, flag_with_the_writer_fence_only,
        lock_released, lock_released_relaxed, histogram_in_a_global,
        globals_from_the_host, results);
}

mod gpu {
    scenario_tests!(super::common::gpu_context, super::common::gpu_turn;
        flag_with_fences, flag_without_fences, flag_with_the_writer_fence_only,
        lock_released, lock_released_relaxed, histogram_in_a_global,
        globals_from_the_host, results);
}

mod plain_cpu {
    scenario_tests!(super::plain_cpu_context; globals_from_the_host, results);
}

mod plain_gpu {
    scenario_tests!(super::plain_gpu_context; globals_from_the_host, results);
}

/// A plain CPU context.
fn plain_cpu_context(workers: usize) -> Option<Context> {
    Some(
        Context::builder()
            .cpu()
            .cpu_workers(workers)
            .build()
            .expect("a plain CPU context"),
    )
}

/// A plain context on GPU 0, or `None` without one.
fn plain_gpu_context(_workers: usize) -> Option<Context> {
    vigil::unstable::testing::require_gpu()?;
    Some(
        Context::builder()
            .gpu(0)
            .build()
            .expect("a plain GPU context"),
    )
}

kernel_file_verdicts!("globals.rs", include_str!("../kernels/src/globals.rs"));

mod scenarios {
    use super::common::codes::*;
    use super::common::{Bench, MakeContext};
    use super::{check, race, LaunchConfig, Verdict};
    use vigil::{DeviceBuffer, Error, Module};
    use vigil_kernels::globals::*;
    use vigil_tests::KERNELS_PTX;

    /// Blocks of [`global_lock()`].
    const LOCK_BLOCKS: u32 = 64;

    /// [`global_flag()`] with `fences` on a fresh module: its verdict, and
    /// the payload the consumer read.
    fn flag_case(make: MakeContext, fences: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let mut out = b.zeros(1);
        let outcome = b.run::<global_flag, _>(LaunchConfig::new(2, 1), (&mut out, fences));
        let what = format!("a flag in a device global, fences {fences}");
        check(&what, outcome, expected);
        assert_eq!(out.to_vec(&b.stream).unwrap(), [42], "{what}");
    }

    /// Release fence, volatile store / volatile polls, acquire fence.
    pub fn flag_with_fences(make: MakeContext) {
        flag_case(make, 3, &[]);
    }

    /// Volatile accesses are relaxed: without fences nothing is ordered.
    pub fn flag_without_fences(make: MakeContext) {
        flag_case(
            make,
            0,
            &[race(RAW, "global-payload-read", "global-payload-write")],
        );
    }

    /// The reader's acquire fence is missing.
    pub fn flag_with_the_writer_fence_only(make: MakeContext) {
        flag_case(
            make,
            1,
            &[race(RAW, "global-payload-read", "global-payload-write")],
        );
    }

    /// [`global_lock()`] over [`LOCK_BLOCKS`] blocks with `release`: its
    /// verdict, and the count when race-free.
    fn lock_case(make: MakeContext, release: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let outcome = b.run::<global_lock, _>(LaunchConfig::new(LOCK_BLOCKS, 32), (release,));
        let what = format!("a lock in a device global, release {release}");
        check(&what, outcome, expected);
        let total = b.module.global::<u32>("TOTAL").expect("TOTAL");
        if expected.is_empty() {
            assert_eq!(total.read(&b.stream).unwrap(), [LOCK_BLOCKS], "{what}");
        }
    }

    /// Acquiring compare-exchange, release store: race-free.
    pub fn lock_released(make: MakeContext) {
        lock_case(make, 1, &[]);
    }

    /// A relaxed unlock releases nothing: each holder's update races with
    /// the one before.
    pub fn lock_released_relaxed(make: MakeContext) {
        lock_case(
            make,
            0,
            &[
                race(RAW, "global-total-read", "global-total-write"),
                race(WAW, "global-total-write", "global-total-write"),
            ],
        );
    }

    /// Atomics on a global array: race-free, the counts right.
    pub fn histogram_in_a_global(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let input: Vec<u32> = (0..4096u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
            .collect();
        let x = DeviceBuffer::from_slice(&b.stream, &input).expect("buffer");
        let outcome = b.run::<global_histogram, _>(LaunchConfig::new(16, 256), (&x,));
        check("a histogram in a device global", outcome, &[]);
        let mut want = [0u32; 8];
        for v in &input {
            want[(v % 8) as usize] += 1;
        }
        let bins = b.module.global::<u32>("BINS").expect("BINS");
        assert_eq!(bins.len(), 8);
        assert_eq!(bins.read(&b.stream).unwrap(), want);
    }

    /// `SEED` through [`read_seed()`] of `module`.
    fn seed_seen_by(b: &Bench, module: &Module) -> u32 {
        let mut out = b.zeros(1);
        let k = module.kernel::<read_seed>().expect("read_seed");
        b.stream
            .launch(&k, LaunchConfig::new(1, 1), (&mut out,))
            .expect("launch");
        b.sync().expect("no race");
        out.to_vec(&b.stream).unwrap()[0]
    }

    /// The host reads a global's initial value, writes it, and the
    /// kernels see the write; another load of the module has its own copy;
    /// a wrong name or element type is a typed error.
    pub fn globals_from_the_host(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let seed = b.module.global::<u32>("SEED").expect("SEED");
        assert_eq!(seed.read(&b.stream).unwrap(), [7]);
        seed.write(&b.stream, &[11]).unwrap();
        assert_eq!(seed_seen_by(&b, &b.module), 11);

        let other = Module::from_ptx(&b.ctx, KERNELS_PTX).expect("a second load");
        let theirs = other.global::<u32>("SEED").expect("SEED");
        assert_eq!(theirs.read(&b.stream).unwrap(), [7]);
        assert_eq!(seed_seen_by(&b, &other), 7);
        assert_eq!(seed_seen_by(&b, &b.module), 11);

        match b.module.global::<u32>("NOT_DECLARED") {
            Err(Error::GlobalNotFound { name, available }) => {
                assert_eq!(name, "NOT_DECLARED");
                for declared in ["PAYLOAD", "READY", "LOCK", "TOTAL", "SEED", "BINS"] {
                    assert!(available.iter().any(|a| a == declared), "{available:?}");
                }
            }
            other => panic!("expected GlobalNotFound, got {:?}", other.map(|g| g.len())),
        }
        match b.module.global::<u64>("SEED") {
            Err(e @ Error::GlobalType { .. }) => {
                assert_eq!(
                    e.to_string(),
                    "device global `SEED` is 4 bytes, not a whole number of 8-byte elements"
                );
            }
            other => panic!("expected GlobalType, got {:?}", other.map(|g| g.len())),
        }
        assert!(seed.write(&b.stream, &[1, 2]).is_err());
    }

    /// The fixed variants' results, on any context (plain ones included).
    pub fn results(make: MakeContext) {
        let Some(b) = Bench::new(make, 2) else {
            return;
        };
        let mut out = b.zeros(1);
        b.stream
            .launch(
                &b.kernel::<global_flag>(),
                LaunchConfig::new(2, 1),
                (&mut out, 3u32),
            )
            .unwrap();
        b.stream
            .launch(
                &b.kernel::<global_lock>(),
                LaunchConfig::new(LOCK_BLOCKS, 32),
                (1u32,),
            )
            .unwrap();
        b.sync().expect("race-free");
        assert_eq!(out.to_vec(&b.stream).unwrap(), [42]);
        let g = |name| b.module.global::<u32>(name).expect("declared");
        assert_eq!(g("PAYLOAD").read(&b.stream).unwrap(), [42]);
        assert_eq!(g("READY").read(&b.stream).unwrap(), [1]);
        assert_eq!(g("LOCK").read(&b.stream).unwrap(), [0]);
        assert_eq!(g("TOTAL").read(&b.stream).unwrap(), [LOCK_BLOCKS]);
    }
}
