//! The plain CPU backend runs the scenario suites' kernels as the
//! sanitized one does: every kernel of the race, scale, block and
//! spin-wait scenarios (`vigil_kernels::{races, scale_races, block_races,
//! spin_waits}`) is launched on a plain and on a sanitized CPU context,
//! and both runs end (no livelock, no timeout, no panic) with the same
//! final memory wherever the kernel's result does not depend on how
//! blocks interleave.
//!
//! Both runs yield to a block's other threads at the same points (every
//! read a spin-wait may repeat), so on one worker, where blocks run one
//! after another, they interleave threads identically and even a racy
//! kernel ends with the same memory; on several workers only the cases
//! marked deterministic are compared. The race verdicts are the suites'
//! business: here a sanitized run's reports are set aside.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;
use vigil::{Context, DeviceBuffer, Error, Kernel, KernelArgs, LaunchConfig, Module, Stream};
use vigil_kernels::{block_races as blk, races as r, scale_races as sc, spin_waits as sw};

/// Ordering and scope codes of `vigil_kernels::races::{ordering, scope}`.
const RELAXED: u32 = 0;
const ACQUIRE: u32 = 1;
const RELEASE: u32 = 2;
const ACQ_REL: u32 = 3;
const SEQ_CST: u32 = 4;
const DEVICE: u32 = 1;

/// A CPU context, plain or sanitized, with a stream, the kernels' module
/// and the final memory of the buffers a case keeps.
struct Bench {
    ctx: Context,
    stream: Stream,
    module: Module,
    kept: RefCell<Vec<Vec<u8>>>,
}

impl Bench {
    /// A CPU context with `workers` virtual SMs and a launch timeout, so
    /// that a launch that never ends fails the test instead of hanging it.
    fn new(sanitize: bool, workers: usize) -> Bench {
        let ctx = Context::builder()
            .cpu()
            .sanitize(sanitize)
            .cpu_workers(workers)
            .launch_timeout(Some(Duration::from_secs(60)))
            .build()
            .expect("a CPU context");
        let stream = Stream::new(&ctx).expect("stream");
        let module = Module::from_ptx(&ctx, vigil_tests::KERNELS_PTX).expect("kernels module");
        Bench {
            ctx,
            stream,
            module,
            kept: RefCell::new(Vec::new()),
        }
    }

    /// `n` zeroed elements.
    fn zeros<T: bytemuck::Pod>(&self, n: usize) -> DeviceBuffer<T> {
        self.from(&vec![T::zeroed(); n])
    }

    /// A buffer holding `data`.
    fn from<T: bytemuck::Pod>(&self, data: &[T]) -> DeviceBuffer<T> {
        DeviceBuffer::from_slice(&self.stream, data).expect("buffer")
    }

    /// Launches `K` and waits for it: the launch must end (a sanitized
    /// run may report races; any other error fails the case).
    fn run<K: Kernel, A: KernelArgs<K::Params>>(&self, config: LaunchConfig, args: A) {
        let k = self.module.kernel::<K>().expect("kernel in the module");
        let launched = self.stream.launch(&k, config, args);
        match launched.and_then(|()| self.ctx.synchronize()) {
            Ok(()) | Err(Error::Races(_)) => {}
            Err(e) => panic!("{} did not end well: {e}", K::NAME),
        }
    }

    /// Keeps `buf`'s final memory for the comparison.
    fn keep<T: bytemuck::Pod>(&self, buf: &DeviceBuffer<T>) {
        let v = buf.to_vec(&self.stream).expect("copy back");
        self.kept
            .borrow_mut()
            .push(bytemuck::cast_slice(&v).to_vec());
    }
}

/// One case: launches on a bench, keeping the buffers to compare.
struct Case {
    name: &'static str,
    /// Virtual SMs: with 1 blocks run one after another.
    workers: usize,
    /// The final memory does not depend on how blocks on several workers
    /// interleave (with one worker it never does).
    deterministic: bool,
    run: fn(&Bench),
}

/// `case!(name, workers, deterministic, |b| body)`.
macro_rules! case {
    ($name:literal, $workers:expr, $det:expr, |$b:ident| $body:block) => {
        Case {
            name: $name,
            workers: $workers,
            deterministic: $det,
            run: |$b: &Bench| $body,
        }
    };
}

/// A one-kernel case over zeroed `u32` buffers of the given lengths and
/// scalar arguments, keeping every buffer: `simple!("name" on workers:
/// kernel, config, [lengths], scalars...)`, with `interleaved` after the
/// worker count when the final memory depends on how blocks interleave.
macro_rules! simple {
    ($name:literal on $workers:literal $($interleaved:ident)?: $k:ty, $config:expr,
     [$($len:expr),*] $(, $scalar:expr)*) => {
        case!($name, $workers, simple!(@deterministic $($interleaved)?), |b| {
            let mut bufs: Vec<DeviceBuffer<u32>> = vec![$(b.zeros($len)),*];
            simple!(@launch b, $k, $config, bufs, [$($len),*] $(, $scalar)*);
            for buf in &bufs {
                b.keep(buf);
            }
        })
    };
    (@deterministic) => { true };
    (@deterministic interleaved) => { false };
    (@launch $b:ident, $k:ty, $config:expr, $bufs:ident, [$l0:expr] $(, $s:expr)*) => {{
        let [a] = &mut $bufs[..] else { unreachable!() };
        $b.run::<$k, _>($config, (a, $($s,)*));
    }};
    (@launch $b:ident, $k:ty, $config:expr, $bufs:ident, [$l0:expr, $l1:expr] $(, $s:expr)*) => {{
        let [a, c] = &mut $bufs[..] else { unreachable!() };
        $b.run::<$k, _>($config, (a, c, $($s,)*));
    }};
    (@launch $b:ident, $k:ty, $config:expr, $bufs:ident, [$l0:expr, $l1:expr, $l2:expr] $(, $s:expr)*) => {{
        let [a, c, d] = &mut $bufs[..] else { unreachable!() };
        $b.run::<$k, _>($config, (a, c, d, $($s,)*));
    }};
}

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig::new(blocks, threads)
}

/// Sixteen values, some not positive, for the counting kernels.
const SIGNED: [i32; 16] = [3, -1, 0, 7, 2, -5, 9, 1, -2, 4, 0, 6, -8, 5, 1, -3];

/// The race scenarios' kernels.
fn race_cases() -> Vec<Case> {
    vec![
        simple!("race_raw" on 1: r::race_raw, cfg(2, 1), [1, 1]),
        simple!("race_raw on two workers" on 2 interleaved: r::race_raw, cfg(2, 1), [1, 1]),
        simple!("race_war" on 1: r::race_war, cfg(2, 1), [1, 1]),
        simple!("race_waw" on 1: r::race_waw, cfg(2, 1), [1]),
        simple!("disjoint_writes" on 4: r::disjoint_writes, cfg(4, 64), [256]),
        case!("adjacent_bytes", 4, true, |b| {
            let mut data = b.zeros::<u8>(4);
            b.run::<r::adjacent_bytes, _>(cfg(4, 1), (&mut data,));
            b.keep(&data);
        }),
        simple!("flag_handoff release/acquire" on 2:
            r::flag_handoff, cfg(2, 1), [1, 1, 1], RELEASE, ACQUIRE, DEVICE),
        simple!("flag_handoff relaxed" on 1:
            r::flag_handoff, cfg(2, 1), [1, 1, 1], RELAXED, RELAXED, DEVICE),
        simple!("transitive_chain" on 3:
            r::transitive_chain, cfg(3, 1), [1, 2, 1], ACQUIRE, RELEASE),
        simple!("transitive_chain, middle relaxed" on 1:
            r::transitive_chain, cfg(3, 1), [1, 2, 1], RELAXED, RELAXED),
        simple!("atomic_counter" on 4: r::atomic_counter, cfg(8, 64), [1]),
        simple!("atomic_plain_mix" on 1: r::atomic_plain_mix, cfg(2, 1), [1]),
        simple!("fenced_relaxed with fences" on 2: r::fenced_relaxed, cfg(2, 1), [1, 1, 1], 1u32),
        simple!("fenced_relaxed without fences" on 1:
            r::fenced_relaxed, cfg(2, 1), [1, 1, 1], 0u32),
        simple!("persistent_spin" on 2:
            r::persistent_spin, cfg(2, 64), [64, 1, 64], RELEASE, ACQUIRE),
        simple!("persistent_spin relaxed" on 1:
            r::persistent_spin, cfg(2, 64), [64, 1, 64], RELAXED, RELAXED),
        simple!("many_races" on 1: r::many_races, cfg(2, 256), [4096], 16u32),
        case!("count_positive_racy", 1, true, |b| {
            let (data, mut count) = (b.from(&SIGNED), b.zeros::<u32>(1));
            b.run::<r::count_positive_racy, _>(cfg(4, 4), (&data, &mut count));
            b.keep(&count);
        }),
        case!("count_positive_racy on four workers", 4, false, |b| {
            let (data, mut count) = (b.from(&SIGNED), b.zeros::<u32>(1));
            b.run::<r::count_positive_racy, _>(cfg(4, 4), (&data, &mut count));
            b.keep(&count);
        }),
        case!("count_positive_fixed", 4, true, |b| {
            let (data, mut count) = (b.from(&SIGNED), b.zeros::<u32>(1));
            b.run::<r::count_positive_fixed, _>(cfg(4, 4), (&data, &mut count));
            b.keep(&count);
        }),
        simple!("fill_all" on 4: r::fill_all, cfg(3, 32), [1000], 7u32),
        case!("add_one", 4, true, |b| {
            let data = b.from(&(0..1000u32).collect::<Vec<_>>());
            let mut out = b.zeros::<u32>(1000);
            b.run::<r::add_one, _>(cfg(3, 32), (&data, &mut out));
            b.keep(&out);
        }),
        simple!("volatile_flag with fences" on 2:
            r::volatile_flag, cfg(2, 1), [1, 1, 1], 1u32, 0u32),
        simple!("volatile_flag without fences" on 1:
            r::volatile_flag, cfg(2, 1), [1, 1, 1], 0u32, 0u32),
        simple!("volatile_flag between warps" on 1:
            r::volatile_flag, cfg(1, 64), [1, 1, 1], 1u32, 1u32),
        simple!("volatile_flag between warps, no fences" on 1:
            r::volatile_flag, cfg(1, 64), [1, 1, 1], 0u32, 1u32),
        simple!("volatile_beside volatile" on 1: r::volatile_beside, cfg(2, 1), [1, 1], 0u32),
        simple!("volatile_beside plain" on 1: r::volatile_beside, cfg(2, 1), [1, 1], 1u32),
        simple!("volatile_beside atomic" on 1: r::volatile_beside, cfg(2, 1), [1, 1], 2u32),
    ]
}

/// Blocks of the scale cases, and the elements of their per-block buffers.
const N: u32 = 16;
const LEN: usize = N as usize;

/// The scale scenarios' kernels, at [`N`] blocks.
fn scale_cases() -> Vec<Case> {
    vec![
        simple!("last_block_reduction acq_rel" on 4:
            sc::last_block_reduction, cfg(N, 1), [LEN, 1, 1], 0u32),
        simple!("last_block_reduction release fence" on 4:
            sc::last_block_reduction, cfg(N, 1), [LEN, 1, 1], RELEASE),
        simple!("last_block_reduction acq_rel fence" on 4:
            sc::last_block_reduction, cfg(N, 1), [LEN, 1, 1], ACQ_REL),
        simple!("last_block_reduction sc fence" on 4:
            sc::last_block_reduction, cfg(N, 1), [LEN, 1, 1], SEQ_CST),
        simple!("last_block_reduction acquire fence" on 1:
            sc::last_block_reduction, cfg(N, 1), [LEN, 1, 1], ACQUIRE),
        simple!("fence_grid_barrier" on 8: sc::fence_grid_barrier, cfg(8, 1), [8, 1, 8], RELEASE),
        simple!("lagging_consumer" on 4: sc::lagging_consumer, cfg(N, 1), [LEN, LEN, 1], RELEASE),
        simple!("lagging_consumer relaxed" on 1:
            sc::lagging_consumer, cfg(N, 1), [LEN, LEN, 1], RELAXED),
        case!("mixed_width_atomics", 4, true, |b| {
            let mut data = b.zeros::<u64>(1);
            b.run::<sc::mixed_width_atomics, _>(cfg(N, 1), (&mut data, 0u32));
            b.keep(&data);
        }),
        case!("same_width_atomics", 4, true, |b| {
            let mut data = b.zeros::<u64>(1);
            b.run::<sc::mixed_width_atomics, _>(cfg(N, 1), (&mut data, 1u32));
            b.keep(&data);
        }),
        simple!("wide_access_second" on 1: sc::wide_access_second, cfg(N, 1), [2 * LEN, LEN]),
        case!("in_place_stencil", 1, true, |b| {
            let mut x = b.from(&(1..=N).collect::<Vec<_>>());
            b.run::<sc::in_place_stencil, _>(cfg(N, 1), (&mut x,));
            b.keep(&x);
        }),
        case!("in_place_stencil on four workers", 4, false, |b| {
            let mut x = b.from(&(1..=N).collect::<Vec<_>>());
            b.run::<sc::in_place_stencil, _>(cfg(N, 1), (&mut x,));
            b.keep(&x);
        }),
        case!("coalesced_tiles", 4, true, |b| {
            let t = sc::TILE_THREADS;
            for width in [4u32, 8, 16] {
                let words = (N * t) as usize * width as usize / 4;
                let (mut data, mut out) = (b.zeros::<u32>(words + 16), b.zeros::<u32>(LEN * 64));
                let ops = sc::TILE_WRITE | sc::TILE_READ;
                b.run::<sc::coalesced_tiles, _>(
                    cfg(N, t),
                    (&mut data, &mut out, width, t, ops, 0u32),
                );
                b.keep(&data);
                b.keep(&out);
            }
        }),
        case!("coalesced_tiles overlapping", 1, true, |b| {
            let t = sc::TILE_THREADS;
            let (mut data, mut out) = (b.zeros::<u32>(LEN * 64), b.zeros::<u32>(LEN * 64));
            let ops = sc::TILE_WRITE | sc::TILE_READ;
            b.run::<sc::coalesced_tiles, _>(
                cfg(N, t),
                (&mut data, &mut out, 4u32, t / 2, ops, 1u32),
            );
            b.keep(&data);
            b.keep(&out);
        }),
        simple!("locked_update" on 4:
            sc::locked_update, cfg(N, sc::LOCK_THREADS), [1, sc::LOCK_THREADS as usize], ACQUIRE, RELEASE, 0u32),
        simple!("locked_update relaxed with fences" on 4:
            sc::locked_update, cfg(N, sc::LOCK_THREADS), [1, sc::LOCK_THREADS as usize], RELAXED, RELAXED, 1u32),
        simple!("locked_update relaxed" on 1:
            sc::locked_update, cfg(N, sc::LOCK_THREADS), [1, sc::LOCK_THREADS as usize], RELAXED, RELAXED, 0u32),
        case!("transpose_in_place naive", 1, true, |b| {
            let mut m = b.from(&(0..32 * 32u32).collect::<Vec<_>>());
            b.run::<sc::transpose_in_place, _>(
                LaunchConfig::new((2, 2), (16, 16)),
                (&mut m, 32u32, 0u32),
            );
            b.keep(&m);
        }),
        case!("transpose_in_place by swaps", 4, true, |b| {
            let mut m = b.from(&(0..32 * 32u32).collect::<Vec<_>>());
            b.run::<sc::transpose_in_place, _>(
                LaunchConfig::new((2, 2), (16, 16)),
                (&mut m, 32u32, 1u32),
            );
            b.keep(&m);
        }),
        case!("chained_scan", 4, true, |b| {
            let (mut ticket, mut flags, mut prefix) = (b.zeros(1), b.zeros(LEN), b.zeros(LEN));
            let (mut first, mut out) = (b.zeros(1), b.zeros(2 * LEN));
            b.run::<sc::chained_scan, _>(
                cfg(N, 1),
                (
                    &mut ticket,
                    &mut flags,
                    &mut prefix,
                    &mut first,
                    &mut out,
                    RELEASE,
                ),
            );
            for buf in [&ticket, &flags, &prefix, &first, &out] {
                b.keep::<u32>(buf);
            }
        }),
        simple!("publish_each" on 4: sc::publish_each, cfg(4, 64), [256]),
        case!("every_block_reads_all", 4, true, |b| {
            let data = b.from(&(0..500u32).collect::<Vec<_>>());
            let mut sums = b.zeros::<u32>(LEN * 32);
            b.run::<sc::every_block_reads_all, _>(cfg(N, 32), (&data, &mut sums));
            b.keep(&sums);
        }),
        simple!("write_own_element" on 4: sc::write_own_element, cfg(N, 1), [LEN], 3u32),
    ]
}

/// The block scenarios' kernels (one block each: their schedule is the
/// block's own).
fn block_cases() -> Vec<Case> {
    vec![
        case!("tree_reduce", 1, true, |b| {
            for skip in [0u32, 1] {
                let x = b.from(&(0..64u32).collect::<Vec<_>>());
                let mut out = b.zeros::<u32>(1);
                b.run::<blk::tree_reduce, _>(cfg(1, blk::TREE_THREADS), (&x, &mut out, skip));
                b.keep(&out);
            }
        }),
        case!("warp_handoff", 1, true, |b| {
            for barrier in [0u32, 1] {
                let x = b.from(&(0..32u32).collect::<Vec<_>>());
                let mut out = b.zeros::<u32>(32);
                b.run::<blk::warp_handoff, _>(cfg(1, 64), (&x, &mut out, barrier));
                b.keep(&out);
            }
        }),
        case!("warp_neighbours", 1, true, |b| {
            for mode in 0..4u32 {
                let x = b.from(&(10..42u32).collect::<Vec<_>>());
                let mut out = b.zeros::<u32>(32);
                b.run::<blk::warp_neighbours, _>(cfg(1, 32), (&x, &mut out, mode));
                b.keep(&out);
            }
        }),
        case!("shared_histogram", 1, true, |b| {
            for plain_reset in [0u32, 1] {
                let x = b.from(&(0..64u32).map(|i| i * 5).collect::<Vec<_>>());
                let mut bins = b.zeros::<u32>(8);
                b.run::<blk::shared_histogram, _>(cfg(1, 64), (&x, &mut bins, plain_reset));
                b.keep(&bins);
            }
        }),
        case!("shared_flag", 1, true, |b| {
            for initial in [0u32, 1] {
                let mut out = b.zeros::<u32>(65);
                b.run::<blk::shared_flag, _>(cfg(1, 64), (&mut out, initial));
                b.keep(&out);
            }
        }),
        case!("global_neighbours", 1, true, |b| {
            for barrier in [0u32, 1] {
                let (mut data, mut out) = (b.zeros::<u32>(64), b.zeros::<u32>(64));
                b.run::<blk::global_neighbours, _>(cfg(1, 64), (&mut data, &mut out, barrier));
                b.keep(&data);
                b.keep(&out);
            }
        }),
        case!("dynamic_reduce", 2, true, |b| {
            for skip in [0u32, 1] {
                let x = b.from(&(0..512u32).map(|i| i % 13).collect::<Vec<_>>());
                let mut out = b.zeros::<u32>(2);
                let threads = blk::REDUCE_THREADS;
                let config = cfg(2, threads).with_shared_mem(threads * 4);
                b.run::<blk::dynamic_reduce, _>(config, (&x, &mut out, skip));
                b.keep(&out);
            }
        }),
    ]
}

/// The spin-wait kernels: every pattern between the warps of a block and
/// between blocks, and the shared volatile flag.
fn spin_cases() -> Vec<Case> {
    vec![
        case!("spin_handoff between warps", 1, true, |b| {
            for (pattern, _) in sw::PATTERNS {
                let mut bufs = [b.zeros::<u32>(1), b.zeros(1), b.zeros(1)];
                let [data, flag, out] = &mut bufs;
                b.run::<sw::spin_handoff, _>(cfg(1, 64), (data, flag, out, pattern, 32u32));
                bufs.iter().for_each(|buf| b.keep(buf));
            }
        }),
        case!("spin_handoff between blocks", 2, true, |b| {
            for (pattern, _) in sw::PATTERNS {
                let mut bufs = [b.zeros::<u32>(1), b.zeros(1), b.zeros(1)];
                let [data, flag, out] = &mut bufs;
                b.run::<sw::spin_handoff, _>(cfg(2, 32), (data, flag, out, pattern, 32u32));
                bufs.iter().for_each(|buf| b.keep(buf));
            }
        }),
        simple!("shared_volatile_handoff" on 1:
            sw::shared_volatile_handoff, cfg(1, 64), [1, 1], 32u32),
    ]
}

/// Runs every case plain and sanitized; compares the final memory of the
/// deterministic ones.
fn plain_and_sanitized_agree(cases: Vec<Case>) {
    // One bench per sanitizer setting and worker count, shared by the
    // cases (loading the kernels' module is most of a small case's time).
    let mut benches: HashMap<(bool, usize), Bench> = HashMap::new();
    for case in cases {
        let mut outcome = |sanitize: bool| {
            let b = benches
                .entry((sanitize, case.workers))
                .or_insert_with(|| Bench::new(sanitize, case.workers));
            (case.run)(b);
            b.kept.take()
        };
        let (plain, sanitized) = (outcome(false), outcome(true));
        assert_eq!(plain.len(), sanitized.len(), "{}", case.name);
        if case.deterministic {
            assert_eq!(
                plain, sanitized,
                "{}: plain and sanitized runs differ",
                case.name
            );
        }
    }
}

#[test]
fn race_scenario_kernels_run_alike_plain_and_sanitized() {
    plain_and_sanitized_agree(race_cases());
}

#[test]
fn scale_scenario_kernels_run_alike_plain_and_sanitized() {
    plain_and_sanitized_agree(scale_cases());
}

#[test]
fn block_scenario_kernels_run_alike_plain_and_sanitized() {
    plain_and_sanitized_agree(block_cases());
}

#[test]
fn spin_wait_kernels_run_alike_plain_and_sanitized() {
    plain_and_sanitized_agree(spin_cases());
}
