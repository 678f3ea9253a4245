//! The helper-scenario suite: kernels whose barriers, fences, warp
//! collectives and shared arrays sit in helper functions that name no
//! sanitizer type (`vigil_kernels::helpers`). Each is checked exactly as
//! the same code inside a kernel's body: the same set of distinct
//! reports, by kind and both source lines (`// @marker` comments), on
//! the CPU backend and on the GPU, for the racy and the fixed variant;
//! and the kernel's result where it has one. One kernel keeps the old,
//! generic form (`sync_threads_in::<S>()` in a helper generic over `S`),
//! which still compiles and is checked the same way.

use vigil::LaunchConfig;

#[macro_use]
mod common;

mod cpu {
    scenario_tests!(super::common::cpu_context;
        tree_in_helpers_missing_barrier, tree_in_helpers_fixed,
        legacy_helper_missing_barrier, legacy_helper_fixed,
        neighbours_in_a_helper_without_sync, neighbours_in_a_helper_with_sync_warp,
        fences_in_helpers, fence_in_the_writer_helper_only, fence_in_the_reader_helper_only,
        dependent_waits_in_a_helper, dependent_reads_early_in_a_helper,
        dynamic_shared_in_a_helper_missing_barrier, dynamic_shared_in_a_helper_fixed,
        stack_phases_in_helpers_unsynced, stack_phases_in_helpers);
}

mod gpu {
    scenario_tests!(super::common::gpu_context, super::common::gpu_turn;
        tree_in_helpers_missing_barrier, tree_in_helpers_fixed,
        legacy_helper_missing_barrier, legacy_helper_fixed,
        neighbours_in_a_helper_without_sync, neighbours_in_a_helper_with_sync_warp,
        fences_in_helpers, fence_in_the_writer_helper_only, fence_in_the_reader_helper_only,
        dependent_waits_in_a_helper, dependent_reads_early_in_a_helper,
        dynamic_shared_in_a_helper_missing_barrier, dynamic_shared_in_a_helper_fixed,
        stack_phases_in_helpers_unsynced, stack_phases_in_helpers);
}

kernel_file_verdicts!("helpers.rs", include_str!("../kernels/src/helpers.rs"));

mod scenarios {
    use super::common::codes::*;
    use super::common::{Bench, MakeContext};
    use super::{check, race, LaunchConfig, Verdict};
    use vigil::{DeviceBuffer, Kernel, KernelArgs};
    use vigil_kernels::helpers::*;

    /// Runs tree-reduction kernel `K` (one block of 64 threads) on
    /// `1..=64` with `skip_barrier`, checks its verdict, and its sum when
    /// race-free.
    fn tree_case<K: Kernel>(make: MakeContext, skip_barrier: u32, expected: &[Verdict])
    where
        for<'a> (&'a DeviceBuffer<u32>, &'a mut DeviceBuffer<u32>, u32): KernelArgs<K::Params>,
    {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let input: Vec<u32> = (1..=64).collect();
        let x = DeviceBuffer::from_slice(&b.stream, &input).expect("buffer");
        let mut out = b.zeros(1);
        let outcome = b.run::<K, _>(
            LaunchConfig::new(1, HELPER_TREE_THREADS),
            (&x, &mut out, skip_barrier),
        );
        let what = format!("{}, skip_barrier {skip_barrier}", K::NAME);
        check(&what, outcome, expected);
        if expected.is_empty() {
            assert_eq!(
                out.to_vec(&b.stream).unwrap(),
                [(1..=64).sum::<u32>()],
                "{what}"
            );
        }
    }

    /// A barrier left out inside a helper: the stride-8 round's reads race
    /// with the stride-16 round's writes.
    pub fn tree_in_helpers_missing_barrier(make: MakeContext) {
        tree_case::<helper_tree_reduce>(
            make,
            1,
            &[race(WAR, "helper-tree-write", "helper-tree-read")],
        );
    }

    /// Every barrier in a helper, none missing: race-free (a barrier the
    /// sanitizer did not see would make every round race).
    pub fn tree_in_helpers_fixed(make: MakeContext) {
        tree_case::<helper_tree_reduce>(make, 0, &[]);
    }

    /// The old generic helper with a barrier left out.
    pub fn legacy_helper_missing_barrier(make: MakeContext) {
        tree_case::<legacy_tree_reduce>(
            make,
            1,
            &[race(WAR, "legacy-tree-write", "legacy-tree-read")],
        );
    }

    /// The old generic helper, race-free.
    pub fn legacy_helper_fixed(make: MakeContext) {
        tree_case::<legacy_tree_reduce>(make, 0, &[]);
    }

    /// One warp exchanging through a helper's own shared array with
    /// `sync`; the exchanged values checked when race-free.
    fn neighbours_case(make: MakeContext, sync: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let input: Vec<u32> = (100..132).collect();
        let x = DeviceBuffer::from_slice(&b.stream, &input).expect("buffer");
        let mut out = b.zeros(32);
        let outcome = b.run::<helper_neighbours, _>(LaunchConfig::new(1, 32), (&x, &mut out, sync));
        let what = format!("neighbour exchange in a helper, sync {sync}");
        check(&what, outcome, expected);
        if expected.is_empty() {
            let want: Vec<u32> = (0..32).map(|l| input[(l + 1) % 32]).collect();
            assert_eq!(out.to_vec(&b.stream).unwrap(), want, "{what}");
        }
    }

    /// No collective between a lane's store and its neighbour's load.
    pub fn neighbours_in_a_helper_without_sync(make: MakeContext) {
        neighbours_case(
            make,
            0,
            &[race(RAW, "helper-neighbour-read", "helper-neighbour-write")],
        );
    }

    /// `sync_warp` in the helper orders them.
    pub fn neighbours_in_a_helper_with_sync_warp(make: MakeContext) {
        neighbours_case(make, 1, &[]);
    }

    /// Two one-thread blocks hand `data[0]` over through a relaxed flag,
    /// with the fences of `fences` (bit 0 the writer's, bit 1 the
    /// reader's), all in helpers.
    fn fenced_case(make: MakeContext, fences: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (mut data, mut flag, mut out) = (b.zeros(1), b.zeros(1), b.zeros(1));
        let outcome = b.run::<helper_fenced_flag, _>(
            LaunchConfig::new(2, 1),
            (&mut data, &mut flag, &mut out, fences),
        );
        let what = format!("a flag between blocks through helpers, fences {fences}");
        check(&what, outcome, expected);
        assert_eq!(out.to_vec(&b.stream).unwrap(), [9], "{what}");
    }

    /// A release fence in the writer's helper, an acquire fence in the
    /// reader's: race-free.
    pub fn fences_in_helpers(make: MakeContext) {
        fenced_case(make, 3, &[]);
    }

    /// The reader's helper has no acquire fence.
    pub fn fence_in_the_writer_helper_only(make: MakeContext) {
        fenced_case(make, 1, &[race(RAW, "helper-consume", "helper-publish")]);
    }

    /// The writer's helper has no release fence.
    pub fn fence_in_the_reader_helper_only(make: MakeContext) {
        fenced_case(make, 2, &[race(RAW, "helper-consume", "helper-publish")]);
    }

    /// The async-races suite's `pdl_writer`, then [`helper_pdl_reader()`]
    /// in `mode` as a programmatic dependent launch on the same stream:
    /// race-free for mode 0; for mode 1, races each naming the early read.
    fn dependent_case(make: MakeContext, mode: u32) {
        use vigil_kernels::async_races::{pdl_writer, ASYNC_RACE_THREADS};
        let Some(b) = Bench::new(make, 2) else {
            return;
        };
        let n = 2 * ASYNC_RACE_THREADS as usize;
        let (mut y, mut z) = (b.zeros(n), b.zeros(n));
        let config = LaunchConfig::new(2, ASYNC_RACE_THREADS);
        b.stream
            .launch(&b.kernel::<pdl_writer>(), config, (&mut y,))
            .expect("pdl_writer");
        let outcome = b.run::<helper_pdl_reader, _>(
            config.with_programmatic_stream_serialization(),
            (&y, &mut z, mode),
        );
        let what = format!("a dependent launch waiting in a helper, mode {mode}");
        if mode == 0 {
            check(&what, outcome, &[]);
            let got = z.to_vec(&b.stream).expect("z");
            assert_eq!(got, (1..=n as u32).collect::<Vec<_>>(), "{what}");
        } else {
            // The write is the other file's (`async_races.rs`): checked by line.
            let reports = match outcome {
                Err(vigil::Error::Races(r)) => r,
                other => panic!("{what}: expected races, got {other:?}"),
            };
            let early = super::line_of("helper-pdl-early-read");
            assert!(
                reports.iter().all(|r| {
                    r.current.location.as_ref().is_some_and(|l| l.line == early)
                        || r.prior.location.as_ref().is_some_and(|l| l.line == early)
                }),
                "{what}: {reports}"
            );
            assert!(!reports.is_empty(), "{what}");
        }
    }

    /// The wait in a helper orders the reads after it: race-free (a wait
    /// the sanitizer did not see would leave every read racing).
    pub fn dependent_waits_in_a_helper(make: MakeContext) {
        dependent_case(make, 0);
    }

    /// A helper reads before the wait: a race with the primary's write.
    pub fn dependent_reads_early_in_a_helper(make: MakeContext) {
        dependent_case(make, 1);
    }

    /// [`helper_dynamic_reduce()`] over 4 blocks with `skip_barrier`: its
    /// verdict (every shared array checked), and the sums when race-free.
    fn dynamic_case(make: MakeContext, skip_barrier: u32, expected: &[Verdict]) {
        use vigil_kernels::block_races::REDUCE_THREADS;
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let blocks = 4;
        let input: Vec<u32> = (0..blocks * REDUCE_THREADS).map(|i| i * 3 + 1).collect();
        let x = DeviceBuffer::from_slice(&b.stream, &input).expect("buffer");
        let mut out = b.zeros(blocks as usize);
        let config = LaunchConfig::new(blocks, REDUCE_THREADS).with_shared_mem(REDUCE_THREADS * 4);
        let outcome =
            b.run_all_checked::<helper_dynamic_reduce, _>(config, (&x, &mut out, skip_barrier));
        let what = format!("a helper's dynamic shared memory, skip_barrier {skip_barrier}");
        check(&what, outcome, expected);
        if expected.is_empty() {
            let want: Vec<u32> = input
                .chunks(REDUCE_THREADS as usize)
                .map(|c| c.iter().sum())
                .collect();
            assert_eq!(out.to_vec(&b.stream).unwrap(), want, "{what}");
        }
    }

    /// A barrier left out in the helper's reduction.
    pub fn dynamic_shared_in_a_helper_missing_barrier(make: MakeContext) {
        dynamic_case(make, 1, &[race(WAR, "helper-dyn-write", "helper-dyn-read")]);
    }

    /// The helper's reduction with every barrier: race-free.
    pub fn dynamic_shared_in_a_helper_fixed(make: MakeContext) {
        dynamic_case(make, 0, &[]);
    }

    /// [`helper_stack_phases()`] (one block of 256 threads) with
    /// `unsynced`: its verdict, and its result when race-free.
    fn stack_case(make: MakeContext, unsynced: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let input: Vec<f32> = (0..256).map(|i| (i * 7 % 31) as f32).collect();
        let x = DeviceBuffer::from_slice(&b.stream, &input).expect("buffer");
        let mut out = b.zeros_of::<f32>(256);
        let outcome =
            b.run::<helper_stack_phases, _>(LaunchConfig::new(1, 256), (&x, &mut out, unsynced));
        let what = format!("stack phases in helpers, unsynced {unsynced}");
        check(&what, outcome, expected);
        if expected.is_empty() {
            let want: Vec<f32> = (0..256).map(|t| input[t] + t as f32).collect();
            assert_eq!(out.to_vec(&b.stream).unwrap(), want, "{what}");
        }
    }

    /// The first phase's tiles popped without a barrier: the second
    /// phase's stores race with the first's reads.
    pub fn stack_phases_in_helpers_unsynced(make: MakeContext) {
        stack_case(
            make,
            1,
            &[race(WAR, "helper-spread-write", "helper-phase-read")],
        );
    }

    /// Popped with `pop_synced`: race-free.
    pub fn stack_phases_in_helpers(make: MakeContext) {
        stack_case(make, 0, &[]);
    }
}
