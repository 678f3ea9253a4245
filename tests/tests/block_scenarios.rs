//! The block-scenario suite: races between threads of one block (shared
//! memory, same-block global memory) and barrier misuse, each kernel of
//! `vigil_kernels::block_races` launched through the public host API on a
//! sanitized context with its verdict asserted: the exact set of distinct
//! reports, each by kind and both source lines (found by the `// @marker`
//! comments), or no report, plus the kernel's result where it has one.
//!
//! Written once ([`scenarios`]) and instantiated per backend like
//! `race_scenarios.rs`, with the same expected verdicts on both (up to
//! which of a race's two accesses came first, which the GPU's scheduling
//! decides: see `common::unordered`). A divergent barrier is the same
//! typed error on both ([`Error::DivergentBarrier`]): the CPU backend fails
//! the launch, the GPU's sanitized barriers note each thread's call and
//! the next synchronisation returns it (docs/src/design/block.md).

use vigil::{DivergentBarrier, Error, LaunchConfig};

#[macro_use]
mod common;

mod cpu {
    scenario_tests!(super::common::cpu_context;
        tree_reduce_missing_barrier, tree_reduce_fixed,
        transpose_tile_reused_without_barrier, transpose_tile_fixed,
        warp_handoff_without_barrier, warp_handoff_with_barrier,
        warp_neighbours_without_sync, warp_neighbours_full_vote, warp_neighbours_half_votes,
        warp_neighbours_sync_warp,
        shared_atomics, shared_atomics_and_a_plain_store,
        shared_failed_exchanges_and_a_load, shared_exchange_and_a_load,
        divergent_barrier_returned_threads, divergent_barrier_two_calls,
        early_exit_of_whole_warps, early_exit_of_odd_threads, early_exit_of_one_thread,
        early_exit_mid_warp, early_exit_after_the_barrier,
        global_same_block_race, global_same_block_fixed,
        line_runs_own_words, line_runs_other_warp, line_runs_after_barrier, line_runs_wide_then_narrow,
        line_runs_quad_then_narrow, line_runs_quad_after_barrier,
        large_array_race, large_array_fixed, same_block_table_full, same_block_table_full_of_lines,
        lines_fit_the_table, read_only_lines_need_no_table, read_only_beside_a_race, read_only_beside_a_barrier,
        owned_lines_need_no_table,
        big_tile_reused_without_barrier, big_tile_fixed,
        dynamic_reduce_missing_barrier, dynamic_reduce_fixed,
        same_block_flag_release_acquire, same_block_flag_relaxed_store,
        same_block_flag_relaxed_load, same_block_flag_relaxed,
        same_block_fences_on_both_sides, same_block_fence_on_writer_only,
        same_block_fence_on_reader_only,
        same_block_lock_fences, same_block_lock_acq_rel_fences, same_block_lock_acquire_release,
        same_block_lock_unlock_without_fence, same_block_lock_acquire_then_relaxed_unlock,
        same_block_unrelated_acquire, same_block_transitive_release_acquire,
        same_block_lane_handoff, same_block_shared_flag_with_fences,
        same_block_shared_flag_writer_fence_only,
        near_static_limit_race, near_static_limit_fixed);
}

// GPU cases take turns: the same-block table's count of unchecked words
// is one per device, and another context's collection takes it
// (docs/src/design/address-space.md, "What a device's contexts share").
mod gpu {
    scenario_tests!(super::common::gpu_context, super::common::gpu_turn;
        tree_reduce_missing_barrier, tree_reduce_fixed,
        transpose_tile_reused_without_barrier, transpose_tile_fixed,
        warp_handoff_without_barrier, warp_handoff_with_barrier,
        warp_neighbours_without_sync, warp_neighbours_full_vote, warp_neighbours_half_votes,
        warp_neighbours_sync_warp,
        shared_atomics, shared_atomics_and_a_plain_store,
        shared_failed_exchanges_and_a_load, shared_exchange_and_a_load,
        divergent_barrier_returned_threads, divergent_barrier_two_calls,
        early_exit_of_whole_warps, early_exit_of_odd_threads, early_exit_of_one_thread,
        early_exit_mid_warp, early_exit_after_the_barrier,
        global_same_block_race, global_same_block_fixed,
        line_runs_own_words, line_runs_other_warp, line_runs_after_barrier, line_runs_wide_then_narrow,
        line_runs_quad_then_narrow, line_runs_quad_after_barrier,
        large_array_race, large_array_fixed, same_block_table_full, same_block_table_full_of_lines,
        lines_fit_the_table, read_only_lines_need_no_table, read_only_beside_a_race, read_only_beside_a_barrier,
        owned_lines_need_no_table,
        big_tile_reused_without_barrier, big_tile_fixed,
        dynamic_reduce_missing_barrier, dynamic_reduce_fixed,
        same_block_flag_release_acquire, same_block_flag_relaxed_store,
        same_block_flag_relaxed_load, same_block_flag_relaxed,
        same_block_fences_on_both_sides, same_block_fence_on_writer_only,
        same_block_fence_on_reader_only,
        same_block_lock_fences, same_block_lock_acq_rel_fences, same_block_lock_acquire_release,
        same_block_lock_unlock_without_fence, same_block_lock_acquire_then_relaxed_unlock,
        same_block_unrelated_acquire, same_block_transitive_release_acquire,
        same_block_lane_handoff, same_block_shared_flag_with_fences,
        same_block_shared_flag_writer_fence_only,
        near_static_limit_race, near_static_limit_fixed);
}

kernel_file_verdicts!(
    "block_races.rs",
    include_str!("../kernels/src/block_races.rs")
);

/// [`check`]s a scenario's outcome, if its backend ran it (`None`: the
/// backend is not on this machine, and the skip was already reported).
fn expect(what: &str, outcome: Option<vigil::Result<()>>, expected: &[Verdict]) {
    if let Some(outcome) = outcome {
        check(what, outcome, expected);
    }
}

mod scenarios {
    use super::common::codes::*;
    use super::common::{Bench, MakeContext};
    use super::{check, expect, line_of, race, DivergentBarrier, Error, LaunchConfig, Verdict};
    use vigil::{DeviceBuffer, Kernel, KernelArgs};
    use vigil_kernels::block_races::*;

    /// Launches `K` as one block of `threads` threads and synchronises.
    fn run_one_block<K: Kernel, A: KernelArgs<K::Params>>(
        b: &Bench,
        threads: u32,
        args: A,
    ) -> vigil::Result<()> {
        b.run::<K, A>(LaunchConfig::new(1, threads), args)
    }

    /// `data` on the device.
    fn upload(b: &Bench, data: &[u32]) -> DeviceBuffer<u32> {
        DeviceBuffer::from_slice(&b.stream, data).expect("buffer")
    }

    /// The contents of `buf`.
    fn download(b: &Bench, buf: &DeviceBuffer<u32>) -> Vec<u32> {
        buf.to_vec(&b.stream).expect("copy back")
    }

    fn tree_reduce_case(make: MakeContext, skip_barrier: u32) -> Option<(vigil::Result<()>, u32)> {
        let b = Bench::new(make, 1)?;
        let input: Vec<u32> = (1..=64).collect();
        let x = upload(&b, &input);
        let mut out = b.zeros(1);
        let outcome =
            run_one_block::<tree_reduce, _>(&b, TREE_THREADS, (&x, &mut out, skip_barrier));
        Some((outcome, download(&b, &out)[0]))
    }

    pub fn tree_reduce_missing_barrier(make: MakeContext) {
        let Some((outcome, _)) = tree_reduce_case(make, 1) else {
            return;
        };
        check(
            "tree reduction missing a barrier",
            outcome,
            &[race(WAR, "tree-write", "tree-read")],
        );
    }

    pub fn tree_reduce_fixed(make: MakeContext) {
        let Some((outcome, sum)) = tree_reduce_case(make, 0) else {
            return;
        };
        check("tree reduction", outcome, &[]);
        assert_eq!(sum, (1..=64).sum::<u32>());
    }

    /// Launches a two-matrix transpose kernel `K` on `side` x `side`
    /// matrices of `T` (one block of `threads`) and checks both results
    /// when the tile is reused after a barrier.
    fn transpose_case<K, T>(
        make: MakeContext,
        side: usize,
        threads: u32,
        reuse_barrier: u32,
    ) -> Option<vigil::Result<()>>
    where
        K: Kernel,
        T: bytemuck::Pod + PartialEq + std::fmt::Debug + From<u16>,
        for<'a> (
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
            &'a mut DeviceBuffer<T>,
            &'a mut DeviceBuffer<T>,
            u32,
        ): KernelArgs<K::Params>,
    {
        let b = Bench::new(make, 1)?;
        let n = side * side;
        let a: Vec<T> = (0..n as u16).map(T::from).collect();
        let bm: Vec<T> = (0..n as u16).map(|v| T::from(v ^ 0x5555)).collect();
        let up = |m: &[T]| DeviceBuffer::from_slice(&b.stream, m).expect("buffer");
        let zeros = || DeviceBuffer::from_slice(&b.stream, &vec![T::from(0); n]).expect("buffer");
        let (da, db) = (up(&a), up(&bm));
        let (mut at, mut bt) = (zeros(), zeros());
        let outcome = b.run_all_checked::<K, _>(
            LaunchConfig::new(1, threads),
            (&da, &db, &mut at, &mut bt, reuse_barrier),
        );
        if reuse_barrier == 1 {
            let t =
                |m: &[T]| -> Vec<T> { (0..n).map(|i| m[(i % side) * side + i / side]).collect() };
            assert_eq!(at.to_vec(&b.stream).expect("copy back"), t(&a));
            assert_eq!(bt.to_vec(&b.stream).expect("copy back"), t(&bm));
        }
        Some(outcome)
    }

    fn small_transpose(make: MakeContext, reuse_barrier: u32) -> Option<vigil::Result<()>> {
        transpose_case::<tile_transpose_twice, u32>(make, TILE, (TILE * TILE) as u32, reuse_barrier)
    }

    /// The 64 x 64 `f32` tile (16 KiB: the GPU checks it through the
    /// window shadow, not a `.shared` one).
    fn big_transpose(make: MakeContext, reuse_barrier: u32) -> Option<vigil::Result<()>> {
        transpose_case::<big_tile_transpose_twice, f32>(
            make,
            BIG_TILE,
            BIG_TILE_THREADS as u32,
            reuse_barrier,
        )
    }

    pub fn transpose_tile_reused_without_barrier(make: MakeContext) {
        expect(
            "transpose tile reused without a barrier",
            small_transpose(make, 0),
            &[race(WAR, "tile-fill", "tile-read")],
        );
    }

    pub fn transpose_tile_fixed(make: MakeContext) {
        expect(
            "transpose tile reused after a barrier",
            small_transpose(make, 1),
            &[],
        );
    }

    pub fn big_tile_reused_without_barrier(make: MakeContext) {
        expect(
            "64x64 f32 transpose tile reused without a barrier",
            big_transpose(make, 0),
            &[race(WAR, "tile-fill", "tile-read")],
        );
    }

    pub fn big_tile_fixed(make: MakeContext) {
        expect(
            "64x64 f32 transpose tile reused after a barrier",
            big_transpose(make, 1),
            &[],
        );
    }

    /// Sums 4 blocks of `REDUCE_THREADS` elements through dynamic shared
    /// memory; returns the outcome and the per-block sums.
    fn dynamic_reduce_case(
        make: MakeContext,
        skip_barrier: u32,
    ) -> Option<(vigil::Result<()>, Vec<u32>)> {
        let b = Bench::new(make, 1)?;
        let blocks = 4;
        let input: Vec<u32> = (0..blocks * REDUCE_THREADS).map(|i| i * 3 + 1).collect();
        let x = upload(&b, &input);
        let mut out = b.zeros(blocks as usize);
        let config = LaunchConfig::new(blocks, REDUCE_THREADS).with_shared_mem(REDUCE_THREADS * 4);
        let outcome = b.run_all_checked::<dynamic_reduce, _>(config, (&x, &mut out, skip_barrier));
        Some((outcome, download(&b, &out)))
    }

    pub fn dynamic_reduce_missing_barrier(make: MakeContext) {
        let Some((outcome, _)) = dynamic_reduce_case(make, 1) else {
            return;
        };
        check(
            "dynamic shared-memory reduction missing a barrier",
            outcome,
            &[race(WAR, "dyn-write", "dyn-read")],
        );
    }

    pub fn dynamic_reduce_fixed(make: MakeContext) {
        let Some((outcome, sums)) = dynamic_reduce_case(make, 0) else {
            return;
        };
        check("dynamic shared-memory reduction", outcome, &[]);
        let n = REDUCE_THREADS;
        let want: Vec<u32> = (0..4)
            .map(|blk| (blk * n..(blk + 1) * n).map(|i| i * 3 + 1).sum())
            .collect();
        assert_eq!(sums, want);
    }

    /// Launches `K`, a `fill_then_read_neighbour` kernel over `n`
    /// elements in one block of `threads`, and checks its verdict (the
    /// same on both backends, every array checked) and, with the barrier,
    /// its result.
    fn stride_case<K>(
        make: MakeContext,
        n: usize,
        threads: usize,
        barrier: u32,
        what: &str,
        expected: &[super::Verdict],
    ) where
        K: Kernel,
        for<'a> (&'a mut DeviceBuffer<u32>, u32): KernelArgs<K::Params>,
    {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let mut out = b.zeros(threads);
        let config = LaunchConfig::new(1, threads as u32);
        let outcome = b.run_all_checked::<K, _>(config, (&mut out, barrier));
        check(what, outcome, expected);
        if barrier == 1 {
            let want: Vec<u32> = (0..threads)
                .map(|t| (n - threads + (t + 1) % threads) as u32)
                .collect();
            assert_eq!(download(&b, &out), want);
        }
    }

    /// `near_limit` (a shared array 4 KiB below the static limit, which
    /// loads sanitized) with or without its barrier.
    fn near_limit_case(make: MakeContext, barrier: u32, expected: &[super::Verdict]) {
        stride_case::<near_limit>(
            make,
            NEAR_LIMIT,
            NEAR_LIMIT_THREADS,
            barrier,
            "a shared array near the static limit",
            expected,
        );
    }

    pub fn near_static_limit_race(make: MakeContext) {
        near_limit_case(make, 0, &[race(WAR, "stride-write", "stride-read")]);
    }

    pub fn near_static_limit_fixed(make: MakeContext) {
        near_limit_case(make, 1, &[]);
    }

    fn handoff_case(make: MakeContext, barrier: u32) -> Option<vigil::Result<()>> {
        let b = Bench::new(make, 1)?;
        let input: Vec<u32> = (0..32).collect();
        let x = upload(&b, &input);
        let mut out = b.zeros(32);
        let outcome = run_one_block::<warp_handoff, _>(&b, 64, (&x, &mut out, barrier));
        if barrier == 1 {
            let want: Vec<u32> = input.iter().map(|v| 2 * v).collect();
            assert_eq!(download(&b, &out), want);
        }
        Some(outcome)
    }

    pub fn warp_handoff_without_barrier(make: MakeContext) {
        expect(
            "producer warp to consumer warp without a barrier",
            handoff_case(make, 0),
            &[race(RAW, "handoff-consume", "handoff-produce")],
        );
    }

    pub fn warp_handoff_with_barrier(make: MakeContext) {
        expect(
            "producer warp to consumer warp with a barrier",
            handoff_case(make, 1),
            &[],
        );
    }

    fn neighbours_case(make: MakeContext, mode: u32) -> Option<vigil::Result<()>> {
        let b = Bench::new(make, 1)?;
        let input: Vec<u32> = (100..132).collect();
        let x = upload(&b, &input);
        let mut out = b.zeros(32);
        let outcome = run_one_block::<warp_neighbours, _>(&b, 32, (&x, &mut out, mode));
        if mode == 1 || mode == 3 {
            let want: Vec<u32> = (0..32).map(|l| input[(l + 1) % 32]).collect();
            assert_eq!(download(&b, &out), want);
        }
        Some(outcome)
    }

    pub fn warp_neighbours_without_sync(make: MakeContext) {
        expect(
            "warp-synchronous exchange without a collective",
            neighbours_case(make, 0),
            &[race(WAR, "neighbour-write", "neighbour-read")],
        );
    }

    pub fn warp_neighbours_full_vote(make: MakeContext) {
        expect(
            "warp-synchronous exchange after a full-warp vote",
            neighbours_case(make, 1),
            &[],
        );
    }

    pub fn warp_neighbours_sync_warp(make: MakeContext) {
        expect(
            "warp-synchronous exchange after sync_warp",
            neighbours_case(make, 3),
            &[],
        );
    }

    pub fn warp_neighbours_half_votes(make: MakeContext) {
        expect(
            "warp-synchronous exchange after half-warp votes",
            neighbours_case(make, 2),
            &[race(WAR, "neighbour-write", "neighbour-read")],
        );
    }

    fn histogram_case(
        make: MakeContext,
        plain_reset: u32,
    ) -> Option<(vigil::Result<()>, Vec<u32>)> {
        let b = Bench::new(make, 1)?;
        let input: Vec<u32> = (0..128).map(|i| i * 7 + 3).collect();
        let x = upload(&b, &input);
        let mut bins = b.zeros(8);
        let outcome = run_one_block::<shared_histogram, _>(&b, 128, (&x, &mut bins, plain_reset));
        Some((outcome, download(&b, &bins)))
    }

    pub fn shared_atomics(make: MakeContext) {
        let Some((outcome, bins)) = histogram_case(make, 0) else {
            return;
        };
        check("shared-memory atomics", outcome, &[]);
        let mut want = vec![0u32; 8];
        for i in 0..128u32 {
            want[((i * 7 + 3) % 8) as usize] += 1;
        }
        assert_eq!(bins, want);
    }

    pub fn shared_atomics_and_a_plain_store(make: MakeContext) {
        let Some((outcome, _)) = histogram_case(make, 1) else {
            return;
        };
        check(
            "shared-memory atomics and a plain store",
            outcome,
            &[race(MIX, "hist-add", "hist-reset")],
        );
    }

    /// `shared_flag` with the flag set to `initial`, one block of 64
    /// threads; the verdict and `out`.
    fn flag_case(make: MakeContext, initial: u32) -> Option<(vigil::Result<()>, Vec<u32>)> {
        let b = Bench::new(make, 1)?;
        let mut out = b.zeros(65);
        let outcome = run_one_block::<shared_flag, _>(&b, 64, (&mut out, initial));
        Some((outcome, download(&b, &out)))
    }

    /// Compare-exchanges that all fail read the flag, like the plain load
    /// beside them: no race, and everyone found the flag set.
    pub fn shared_failed_exchanges_and_a_load(make: MakeContext) {
        let Some((outcome, out)) = flag_case(make, 1) else {
            return;
        };
        check("failed shared compare-exchanges and a load", outcome, &[]);
        assert_eq!(out, vec![1; 65]);
    }

    /// One compare-exchange swaps: an atomic write racing with the plain
    /// load in the same barrier interval.
    pub fn shared_exchange_and_a_load(make: MakeContext) {
        let Some((outcome, out)) = flag_case(make, 0) else {
            return;
        };
        check(
            "a shared compare-exchange and a load",
            outcome,
            &[race(MIX, "flag-load", "flag-cas")],
        );
        // Exactly one thread found the flag clear and swapped it.
        assert_eq!(out[..64].iter().filter(|&&v| v == 0).count(), 1, "{out:?}");
    }

    /// Launches `divergent_barrier` (one block of 32 threads) and returns
    /// the divergence its launch and synchronisation fail with.
    fn divergent_case(make: MakeContext, mode: u32) -> Option<DivergentBarrier> {
        let b = Bench::new(make, 1)?;
        let mut out = b.zeros(32);
        let outcome = run_one_block::<divergent_barrier, _>(&b, 32, (&mut out, mode));
        match outcome {
            Err(Error::DivergentBarrier(d)) => Some(d),
            other => panic!("a divergent barrier must be reported, got {other:?}"),
        }
    }

    /// Asserts `d` is a divergent barrier of block 0 at `marker`'s line
    /// naming `detail` (the threads where they were).
    fn assert_divergent(d: &DivergentBarrier, marker: &str, detail: &[&str]) {
        assert_eq!((d.block.x, d.block.y, d.block.z), (0, 0, 0), "{d}");
        let at = format!("block_races.rs:{}:", line_of(marker));
        assert!(
            d.barrier.contains(&at),
            "barrier {} is not at {at}",
            d.barrier
        );
        for part in detail {
            assert!(
                d.detail.contains(part),
                "`{}` does not say `{part}`",
                d.detail
            );
        }
    }

    pub fn divergent_barrier_returned_threads(make: MakeContext) {
        let Some(e) = divergent_case(make, 0) else {
            return;
        };
        assert_divergent(
            &e,
            "divergent-low",
            &[
                "thread(s) 0..=15 wait here",
                "thread(s) 16..=31 returned without reaching it",
            ],
        );
    }

    pub fn divergent_barrier_two_calls(make: MakeContext) {
        let Some(e) = divergent_case(make, 1) else {
            return;
        };
        let other = format!("block_races.rs:{}:", line_of("divergent-high"));
        assert_divergent(
            &e,
            "divergent-low",
            &[
                "thread(s) 0..=15 wait here",
                "thread(s) 16..=31 wait at the sync_threads at",
                &other,
            ],
        );
    }

    /// Threads of one block of 256 ([`early_exits`]).
    const EXIT_THREADS: u32 = 256;

    /// Launches `early_exits` in `mode` on one block; its outcome and
    /// what the threads that got to its end set.
    fn early_exit_case(make: MakeContext, mode: u32) -> Option<(vigil::Result<()>, Vec<u32>)> {
        let b = Bench::new(make, 1)?;
        let mut out = b.zeros(EXIT_THREADS as usize);
        let outcome = run_one_block::<early_exits, _>(&b, EXIT_THREADS, (&mut out, mode));
        Some((outcome, download(&b, &out)))
    }

    /// The divergence `early_exits` in `mode` fails with, at `marker`,
    /// its text naming `returned` as the threads that returned.
    fn early_exit_divergence(make: MakeContext, mode: u32, marker: &str, returned: &str) {
        let Some((outcome, _)) = early_exit_case(make, mode) else {
            return;
        };
        let Err(Error::DivergentBarrier(d)) = outcome else {
            panic!("a divergent barrier must be reported, got {outcome:?}");
        };
        let returned = format!("thread(s) {returned}");
        assert_divergent(&d, marker, &["wait here", &returned]);
        assert!(d.detail.ends_with(" returned without reaching it"), "{d}");
    }

    /// Whole warps return while the others wait: both groups by name.
    pub fn early_exit_of_whole_warps(make: MakeContext) {
        early_exit_divergence(
            make,
            0,
            "exit-upper-warps",
            "128..=255 returned without reaching it",
        );
    }

    /// Every other thread returns after a barrier all of them passed:
    /// the second barrier is divergent (the GPU names a scattered group of
    /// 128 by its ends and count, the CPU backend thread by thread).
    pub fn early_exit_of_odd_threads(make: MakeContext) {
        early_exit_divergence(make, 1, "exit-odd-threads", "1, ");
    }

    /// One thread in the middle of a warp returns.
    pub fn early_exit_of_one_thread(make: MakeContext) {
        early_exit_divergence(
            make,
            3,
            "exit-one-thread",
            "200 returned without reaching it",
        );
    }

    /// The threads of a warp's upper part and of the warps after it
    /// return: one group, however they arrived at the exit.
    pub fn early_exit_mid_warp(make: MakeContext) {
        early_exit_divergence(
            make,
            4,
            "exit-mid-warp",
            "100..=255 returned without reaching it",
        );
    }

    /// Threads that return after the block's only barrier diverge from
    /// nothing: no report, and the others finish.
    pub fn early_exit_after_the_barrier(make: MakeContext) {
        let Some((outcome, out)) = early_exit_case(make, 2) else {
            return;
        };
        outcome.expect("returning after the last barrier is not divergent");
        let expected: Vec<u32> = (0..EXIT_THREADS).map(|t| u32::from(t < 128)).collect();
        assert_eq!(out, expected);
    }

    /// `large_tile` (an 8 KiB array: past a `.shared` shadow, so the GPU
    /// checks it through the window shadow) with or without its barrier.
    fn large_case(make: MakeContext, barrier: u32, expected: &[super::Verdict]) {
        stride_case::<large_tile>(
            make,
            LARGE,
            LARGE_THREADS,
            barrier,
            "large shared array",
            expected,
        );
    }

    pub fn large_array_race(make: MakeContext) {
        large_case(make, 0, &[race(WAR, "stride-write", "stride-read")]);
    }

    pub fn large_array_fixed(make: MakeContext) {
        large_case(make, 1, &[]);
    }

    /// Words or lines of [`many_words`] or [`many_lines`] (per thread or
    /// per warp) that more than fill the GPU's same-block table of a
    /// block of 1,024 threads, its extension regions included (33 regions
    /// of 1,024 entries at most): 65,536 entries.
    const OVER_THE_TABLE: usize = 64;
    /// Lines per warp the same block touches in [`lines_fit_the_table`]:
    /// 2,048 lines, more than one region holds, fewer than the block's
    /// extension regions add.
    const WITHIN_THE_TABLE: usize = 64;

    /// `per` on the GPU, and what the CPU backend runs instead (its table
    /// grows, and it needs no more to show it).
    fn on_the_gpu(b: &Bench, per: usize, cpu: usize) -> (usize, bool) {
        match b.ctx.device() {
            vigil::DeviceId::Cuda(_) => (per, true),
            _ => (cpu, false),
        }
    }

    /// One block of 1,024 threads writes 64 distinct words each in one
    /// interval: no race on either backend; the GPU's same-block table
    /// runs out and counts the words it skipped, the CPU backend's table
    /// grows and skips none.
    pub fn same_block_table_full(make: MakeContext) {
        table_case::<many_words>(make, OVER_THE_TABLE, |per, i| (i % per) as u32, true);
    }

    /// The same with whole-line accesses: 65,536 lines (2,048 a warp), one
    /// line entry each on the GPU, still more than a block's table holds.
    pub fn same_block_table_full_of_lines(make: MakeContext) {
        table_case::<many_lines>(
            make,
            OVER_THE_TABLE * 32,
            |per, i| (i / 32 % per) as u32,
            true,
        );
    }

    /// 2,048 lines, twice what a block's own region of the GPU's table
    /// holds: the block's extension regions take the rest, and no word
    /// goes unchecked on either backend.
    pub fn lines_fit_the_table(make: MakeContext) {
        table_case::<many_lines>(
            make,
            WITHIN_THE_TABLE,
            |per, i| (i / 32 % per) as u32,
            false,
        );
    }

    /// Launches `K` as one block of 1,024 threads, `per` words a thread or
    /// lines a warp (on the GPU; 16 on the CPU), over a buffer of zeros:
    /// no race, word `i` ends as `want(per, i)`, and words counted
    /// unchecked on the GPU when `over` (only).
    fn table_case<K: Kernel>(
        make: MakeContext,
        per: usize,
        want: impl Fn(usize, usize) -> u32,
        over: bool,
    ) where
        for<'a> (usize, &'a mut DeviceBuffer<u32>): KernelArgs<K::Params>,
    {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (per, gpu) = on_the_gpu(&b, per, 16);
        let want: Vec<u32> = (0..1024 * per).map(|i| want(per, i)).collect();
        let mut out = b.zeros(want.len());
        b.stream
            .launch(
                &b.kernel::<K>(),
                LaunchConfig::new(1, 1024),
                (per, &mut out),
            )
            .expect("launch");
        let reports = b.wait_and_take_reports();
        assert_eq!(reports.len(), 0, "{reports}");
        if gpu && over {
            assert!(reports.unchecked_words() > 0, "{reports}");
            assert!(reports.to_string().contains("went unchecked"), "{reports}");
        } else {
            assert_eq!(reports.unchecked_words(), 0, "{reports}");
        }
        assert_eq!(download(&b, &out), want);
    }

    /// One block of 1,024 threads reads 65,536 whole lines (on the GPU),
    /// as many as `same_block_table_full_of_lines` writes. Passed
    /// read-only (`&DeviceBuffer` for a `GlobalSlice`), nothing of the
    /// launch can write them, and the GPU's same-block table is left out:
    /// no word goes unchecked. The same reads through a writable view fill
    /// the table and count words unchecked on the GPU. No race either way,
    /// on either backend, and every sum right.
    pub fn read_only_lines_need_no_table(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (per, gpu) = on_the_gpu(&b, OVER_THE_TABLE * 32, 64);
        let words = 32 * per * 32;
        let values: Vec<u32> = (0..words as u32).collect();
        let mut data = DeviceBuffer::from_slice(&b.stream, &values).expect("upload");
        let want: Vec<u32> = (0..1024usize)
            .map(|t| {
                let (warp, lane) = (t / 32, t % 32);
                (0..per)
                    .map(|k| values[(warp * per + k) * 32 + lane])
                    .fold(0u32, u32::wrapping_add)
            })
            .collect();

        let mut out = b.zeros(1024);
        b.stream
            .launch(
                &b.kernel::<read_many_lines>(),
                LaunchConfig::new(1, 1024),
                (per, &data, &mut out),
            )
            .expect("launch");
        let reports = b.wait_and_take_reports();
        assert_eq!(reports.len(), 0, "{reports}");
        assert_eq!(reports.unchecked_words(), 0, "read-only: {reports}");
        assert_eq!(download(&b, &out), want);

        let mut out = b.zeros(1024);
        b.stream
            .launch(
                &b.kernel::<read_many_lines_of_writable>(),
                LaunchConfig::new(1, 1024),
                (per, &mut data, &mut out),
            )
            .expect("launch");
        let reports = b.wait_and_take_reports();
        assert_eq!(reports.len(), 0, "{reports}");
        if gpu {
            assert!(reports.unchecked_words() > 0, "writable: {reports}");
        } else {
            assert_eq!(reports.unchecked_words(), 0, "writable: {reports}");
        }
        assert_eq!(download(&b, &out), want);
    }

    /// One block of 1,024 threads writes 65,536 whole lines (on the GPU)
    /// through a grid-stride partition the launch proves: each element
    /// has one owner, so no two threads of the block can race there. The
    /// GPU sanitizer trusts it and leaves the same-block table out (no
    /// word unchecked); with `trust_types(false)` the same writes fill the
    /// table and count words unchecked. No race either way, on either
    /// backend, and every element right.
    pub fn owned_lines_need_no_table(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (per, gpu) = on_the_gpu(&b, OVER_THE_TABLE * 32, 64);
        let want: Vec<u32> = (0..(32 * per * 32) as u32).collect();
        let owned = |b: &Bench| {
            let mut out = b.zeros(want.len());
            b.stream
                .launch(
                    &b.kernel::<many_owned_lines>(),
                    LaunchConfig::new(1, 1024),
                    (&mut out,),
                )
                .expect("launch");
            let reports = b.wait_and_take_reports();
            assert_eq!(reports.len(), 0, "{reports}");
            assert_eq!(download(b, &out), want);
            reports.unchecked_words()
        };
        assert_eq!(owned(&b), 0, "trusted: nothing goes to the table");
        let untrusted = vigil::SanitizerConfig::builder()
            .trust_types(false)
            .build()
            .expect("config");
        let builder = vigil::Context::builder()
            .sanitize(true)
            .sanitizer_config(untrusted);
        let builder = if gpu { builder.gpu(0) } else { builder.cpu() };
        drop(b);
        let checked = owned(&Bench::on(builder.build().expect("context")));
        if gpu {
            assert!(checked > 0, "untrusted: the table overflows");
        } else {
            assert_eq!(checked, 0, "the CPU backend's table grows");
        }
    }

    fn global_case(make: MakeContext, barrier: u32) -> Option<vigil::Result<()>> {
        let b = Bench::new(make, 1)?;
        let (mut data, mut out) = (b.zeros(64), b.zeros(64));
        let outcome = run_one_block::<global_neighbours, _>(&b, 64, (&mut data, &mut out, barrier));
        if barrier == 1 {
            let want: Vec<u32> = (0..64).map(|t| (t + 1) % 64 + 1).collect();
            assert_eq!(download(&b, &out), want);
        }
        Some(outcome)
    }

    pub fn global_same_block_race(make: MakeContext) {
        let Some(outcome) = global_case(make, 0) else {
            return;
        };
        // The earlier access is named as another thread of the same block
        // (its barrier interval), not by cross-block clock details.
        if let Err(vigil::Error::Races(reports)) = &outcome {
            for r in reports.iter() {
                let text = r.to_string();
                assert!(r.prior.same_block, "{text}");
                assert!(text.contains("of the same block"), "{text}");
                assert!(!text.contains("sanitizer thread"), "{text}");
            }
        }
        check(
            "same-block global race",
            outcome,
            &[race(WAR, "global-write", "global-read")],
        );
    }

    pub fn global_same_block_fixed(make: MakeContext) {
        expect(
            "same-block global accesses after a barrier",
            global_case(make, 1),
            &[],
        );
    }

    /// One buffer split in halves: the low half passed read-only (its
    /// words read by several threads each, as whole lines, shifted runs
    /// and single words), the high half written and read across threads
    /// of the block. Returns the verdict, `out`, and what `out` holds once
    /// a barrier orders the writes.
    fn read_only_case(
        make: MakeContext,
        barrier: u32,
    ) -> Option<(vigil::Result<()>, Vec<u32>, Vec<u32>)> {
        const N: usize = 64;
        let b = Bench::new(make, 1)?;
        let table: Vec<u32> = (0..N as u32).map(|i| i * 3 + 1).collect();
        let mut buf = DeviceBuffer::from_slice(&b.stream, &[table.clone(), vec![0; N]].concat())
            .expect("upload");
        let mut out = b.zeros(N);
        let (low, high) = buf.as_slice_mut().split_at_mut(N).expect("split");
        let outcome = run_one_block::<read_only_beside_neighbours, _>(
            &b,
            N as u32,
            (low, high, &mut out, barrier),
        );
        let seen = |t: usize| table[t] + table[(t + 1) % N] + table[t * 7 % N];
        let want = (0..N).map(|t| seen((t + 1) % N)).collect();
        Some((outcome, download(&b, &out), want))
    }

    /// The race on the written half is reported (the read-only half of
    /// the same allocation leaves it checked); the read-only reads, of
    /// words other threads read too, are not.
    pub fn read_only_beside_a_race(make: MakeContext) {
        let Some((outcome, _, _)) = read_only_case(make, 0) else {
            return;
        };
        check(
            "a race beside read-only reads",
            outcome,
            &[race(WAR, "ro-write", "ro-neighbour-read")],
        );
    }

    /// With the barrier: no race, and every thread saw its neighbour's sum.
    pub fn read_only_beside_a_barrier(make: MakeContext) {
        let Some((outcome, out, want)) = read_only_case(make, 1) else {
            return;
        };
        expect("read-only reads beside a barrier", Some(outcome), &[]);
        assert_eq!(out, want);
    }

    fn line_runs_case(
        make: MakeContext,
        mode: u32,
    ) -> Option<(vigil::Result<()>, Vec<u32>, Vec<u32>)> {
        let b = Bench::new(make, 1)?;
        let n = LINE_RUN_THREADS as usize;
        let (mut data, mut out) = (b.zeros(4 * n), b.zeros(n));
        let outcome =
            run_one_block::<line_runs, _>(&b, LINE_RUN_THREADS, (&mut data, &mut out, mode));
        Some((outcome, download(&b, &data), download(&b, &out)))
    }

    /// Each warp reads back and rewrites its own line: one thread per
    /// word throughout, no race.
    pub fn line_runs_own_words(make: MakeContext) {
        let Some((outcome, data, out)) = line_runs_case(make, 0) else {
            return;
        };
        check("a warp's own line, read and rewritten", outcome, &[]);
        assert_eq!(out, (1..=64).collect::<Vec<u32>>());
        assert_eq!(data[..64], (2..=65).collect::<Vec<u32>>());
    }

    /// Each warp reads the other warp's line with no barrier: the two
    /// whole-line runs race.
    pub fn line_runs_other_warp(make: MakeContext) {
        let Some((outcome, ..)) = line_runs_case(make, 1) else {
            return;
        };
        check(
            "another warp's line without a barrier",
            outcome,
            &[race(RAW, "run-read", "run-write")],
        );
    }

    /// The same after a barrier: no race, and every read sees the write.
    pub fn line_runs_after_barrier(make: MakeContext) {
        let Some((outcome, _, out)) = line_runs_case(make, 2) else {
            return;
        };
        check("another warp's line after a barrier", outcome, &[]);
        let want: Vec<u32> = (0..64).map(|t| (t + 32) % 64 + 1).collect();
        assert_eq!(out, want);
    }

    /// One warp writes both lines as 8-byte elements (half a warp a
    /// line); each thread then reads its own 4-byte word, which another
    /// lane wrote.
    pub fn line_runs_wide_then_narrow(make: MakeContext) {
        let Some((outcome, ..)) = line_runs_case(make, 3) else {
            return;
        };
        check(
            "8-byte writes read as 4-byte words",
            outcome,
            &[race(RAW, "run-read", "wide-write")],
        );
    }

    /// One warp writes four lines as 16-byte elements (eight lanes a
    /// line); each thread then reads a 4-byte word another lane wrote.
    pub fn line_runs_quad_then_narrow(make: MakeContext) {
        let Some((outcome, ..)) = line_runs_case(make, 4) else {
            return;
        };
        check(
            "16-byte writes read as 4-byte words",
            outcome,
            &[race(RAW, "run-read", "quad-write")],
        );
    }

    /// The same after a barrier: no race, and each word holds its lane's
    /// value.
    pub fn line_runs_quad_after_barrier(make: MakeContext) {
        let Some((outcome, data, out)) = line_runs_case(make, 5) else {
            return;
        };
        check("16-byte writes read after a barrier", outcome, &[]);
        let want: Vec<u32> = (0..128).map(|w| w / 4 + 1).collect();
        assert_eq!(data[..128], want);
        assert_eq!(out, want[..64]);
    }

    /// The scopes the same-block handoffs run at.
    const HANDOFF_SCOPES: [(u32, &str); 2] = [(BLOCK, "block"), (DEVICE, "device")];

    /// `same_block_flag` at every scope of [`HANDOFF_SCOPES`], with its
    /// verdict checked against `expected` and, when race-free, the payload
    /// the reader saw.
    fn flag_handoff(make: MakeContext, store: u32, load: u32, fences: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        for (sc, name) in HANDOFF_SCOPES {
            let (mut data, mut flag, mut out) = (b.zeros(1), b.zeros(1), b.zeros(1));
            let outcome = run_one_block::<same_block_flag, _>(
                &b,
                HANDOFF_THREADS,
                (&mut data, &mut flag, &mut out, store, load, sc, fences),
            );
            let what = format!(
                "flag between warps: store {store}, load {load}, fences {fences}, {name} scope"
            );
            check(&what, outcome, expected);
            if expected.is_empty() {
                assert_eq!(download(&b, &out), [FLAG_PAYLOAD], "{what}");
            }
        }
    }

    fn flag_race() -> [Verdict; 1] {
        [race(RAW, "bflag-read", "bflag-write")]
    }

    /// A release store read by an acquiring load: race-free.
    pub fn same_block_flag_release_acquire(make: MakeContext) {
        flag_handoff(make, RELEASE, ACQUIRE, 0, &[]);
    }

    /// The writer forgot the release: the acquire reads nothing its block
    /// released, and the payload races.
    pub fn same_block_flag_relaxed_store(make: MakeContext) {
        flag_handoff(make, RELAXED, ACQUIRE, 0, &flag_race());
    }

    /// The reader forgot the acquire.
    pub fn same_block_flag_relaxed_load(make: MakeContext) {
        flag_handoff(make, RELEASE, RELAXED, 0, &flag_race());
    }

    /// Neither side orders anything.
    pub fn same_block_flag_relaxed(make: MakeContext) {
        flag_handoff(make, RELAXED, RELAXED, 0, &flag_race());
    }

    /// Relaxed flag accesses between a release fence and an acquire
    /// fence: race-free.
    pub fn same_block_fences_on_both_sides(make: MakeContext) {
        flag_handoff(make, RELAXED, RELAXED, 3, &[]);
    }

    /// A release fence, but the reader has no acquire.
    pub fn same_block_fence_on_writer_only(make: MakeContext) {
        flag_handoff(make, RELAXED, RELAXED, 1, &flag_race());
    }

    /// An acquire fence after reading a flag nothing released.
    pub fn same_block_fence_on_reader_only(make: MakeContext) {
        flag_handoff(make, RELAXED, RELAXED, 2, &flag_race());
    }

    /// `same_block_lock` at every scope of [`HANDOFF_SCOPES`]: its
    /// verdict, and (when race-free) the counter both holders added to.
    fn lock_case(make: MakeContext, lock_mode: u32, unlock_mode: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        for (sc, name) in HANDOFF_SCOPES {
            let (mut data, mut lock) = (b.zeros(1), b.zeros(1));
            let outcome = run_one_block::<same_block_lock, _>(
                &b,
                HANDOFF_THREADS,
                (&mut data, &mut lock, lock_mode, unlock_mode, sc),
            );
            let what = format!(
                "spin lock between warps: lock {lock_mode}, unlock {unlock_mode}, {name} scope"
            );
            check(&what, outcome, expected);
            if expected.is_empty() {
                assert_eq!(download(&b, &data), [2], "{what}");
            }
        }
    }

    /// The second holder's critical section against the first's, when
    /// the unlock released nothing.
    fn lock_races() -> [Verdict; 2] {
        [
            race(RAW, "lock-read", "lock-write"),
            race(WAW, "lock-write", "lock-write"),
        ]
    }

    /// Taken by a relaxed compare-exchange and an acquire-release fence,
    /// given back by a release fence and a relaxed exchange: race-free.
    pub fn same_block_lock_fences(make: MakeContext) {
        lock_case(make, LOCK_CAS_THEN_FENCE, UNLOCK_FENCE_EXCHANGE, &[]);
    }

    /// Given back by an acquire-release fence and a relaxed store.
    pub fn same_block_lock_acq_rel_fences(make: MakeContext) {
        lock_case(make, LOCK_CAS_THEN_FENCE, UNLOCK_ACQ_REL_FENCE_STORE, &[]);
    }

    /// An acquiring compare-exchange and a release store.
    pub fn same_block_lock_acquire_release(make: MakeContext) {
        lock_case(make, LOCK_ACQUIRE_CAS, UNLOCK_RELEASE_STORE, &[]);
    }

    /// Given back by a relaxed store without a fence: the lock's fence
    /// acquires, but nothing released the first holder's critical section.
    pub fn same_block_lock_unlock_without_fence(make: MakeContext) {
        lock_case(
            make,
            LOCK_CAS_THEN_FENCE,
            UNLOCK_RELAXED_STORE,
            &lock_races(),
        );
    }

    /// An acquiring compare-exchange, and the same unlock.
    pub fn same_block_lock_acquire_then_relaxed_unlock(make: MakeContext) {
        lock_case(make, LOCK_ACQUIRE_CAS, UNLOCK_RELAXED_STORE, &lock_races());
    }

    /// The reader acquired a third warp's release before the writer
    /// wrote, and nothing releases the write: a race.
    pub fn same_block_unrelated_acquire(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (mut data, mut flags, mut out) = (b.zeros(1), b.zeros(3), b.zeros(1));
        let outcome = run_one_block::<same_block_unrelated_acquire, _>(
            &b,
            HANDOFF_THREADS,
            (&mut data, &mut flags, &mut out),
        );
        check(
            "an acquire of an unrelated release",
            outcome,
            &[race(RAW, "unrelated-read", "unrelated-write")],
        );
    }

    /// A release acquired and released again by a third warp: race-free.
    pub fn same_block_transitive_release_acquire(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (mut data, mut flags, mut out) = (b.zeros(1), b.zeros(2), b.zeros(1));
        let outcome = run_one_block::<same_block_transitive, _>(
            &b,
            HANDOFF_THREADS,
            (&mut data, &mut flags, &mut out),
        );
        check("a release passed on through a third warp", outcome, &[]);
        assert_eq!(download(&b, &out), [FLAG_PAYLOAD]);
    }

    /// One lane acquires, `sync_warp` passes it to its warp: race-free.
    pub fn same_block_lane_handoff(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (mut data, mut flag, mut out) = (b.zeros(32), b.zeros(1), b.zeros(32));
        let outcome = run_one_block::<same_block_lane_handoff, _>(
            &b,
            HANDOFF_THREADS,
            (&mut data, &mut flag, &mut out),
        );
        check("one lane acquires for its warp", outcome, &[]);
        assert_eq!(download(&b, &out), (1..=32).collect::<Vec<u32>>());
    }

    /// `same_block_shared_flag` with `fences`; the payload read when the
    /// verdict is race-free.
    fn shared_flag_case(make: MakeContext, fences: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let (mut data, mut out) = (b.zeros(1), b.zeros(1));
        let outcome = run_one_block::<same_block_shared_flag, _>(
            &b,
            HANDOFF_THREADS,
            (&mut data, &mut out, fences),
        );
        let what = format!("a shared volatile flag, fences {fences}");
        check(&what, outcome, expected);
        if expected.is_empty() {
            assert_eq!(download(&b, &out), [FLAG_PAYLOAD], "{what}");
        }
    }

    /// A shared volatile flag between block-scope fences orders global
    /// data: race-free.
    pub fn same_block_shared_flag_with_fences(make: MakeContext) {
        shared_flag_case(make, 3, &[]);
    }

    /// The writer's fence alone: the reader acquires nothing.
    pub fn same_block_shared_flag_writer_fence_only(make: MakeContext) {
        shared_flag_case(make, 1, &[race(RAW, "sflag-read", "sflag-write")]);
    }
}
