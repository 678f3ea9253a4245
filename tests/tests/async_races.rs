//! Races through asynchronous copies: each kernel of
//! `vigil_kernels::async_races` in a racy form and its fixed twin,
//! launched sanitized with its verdict asserted (the exact set of
//! distinct reports, each by kind and both source lines, one of them the
//! copy's issuing line), plus the kernel's result where the form is
//! race-free.
//!
//! The CPU backend models a copy as an access in flight between its issue
//! and its completion, so it runs every form. The GPU sanitizer does the
//! same (each thread's `cp.async` copies in flight, each block's bulk and
//! tensor copies; docs/src/sanitizer/bounds.md): it runs every form but
//! one whose copy its queue completed early (a thread with more than 8
//! `cp.async` copies in flight). Dependent launches run on both (a
//! dependent block is ordered after the kernel before it only from its
//! `grid_dependency::wait()`).

use vigil::{DeviceBuffer, DeviceTensorMap, DeviceTensorMapMut, LaunchConfig, TiledLayout};

#[macro_use]
mod common;

mod cpu {
    scenario_tests!(super::common::cpu_context;
        cp_async_waited_then_barrier, cp_async_own_read_after_wait,
        cp_async_own_read_before_wait, cp_async_read_after_barrier_before_wait,
        cp_async_read_by_another_thread_unsynced, cp_async_destination_stored_after_wait,
        cp_async_destination_stored_in_flight, cp_async_destination_copied_twice,
        cp_async_older_group_waited, cp_async_newer_group_waited, cp_async_wrong_group_count,
        cp_async_source_overwritten_after_wait, cp_async_source_overwritten_before_wait,
        bulk_source_overwritten_after_wait, bulk_source_overwritten_before_wait,
        bulk_load_read_after_the_wait, bulk_load_read_before_the_wait,
        mbarrier_right_phase, mbarrier_wrong_phase,
        bulk_store_waited_before_release, bulk_store_released_before_wait,
        tensor_load_beside_an_ordered_store, tensor_load_and_an_unordered_store,
        dependent_reads_after_its_wait, dependent_reads_before_its_wait,
        serialized_launch_reads_before_its_wait,
        bulk_store_source_overwritten_after_read_wait, bulk_store_source_overwritten_in_flight,
        tensor_store_beside_an_ordered_load, tensor_store_and_an_unordered_load,
        cp_async_source_written_after_its_wait, cp_async_source_written_before_its_wait,
        cp_async_waited_before_return, cp_async_completed_by_return,
        cp_async_many_in_flight_waited, cp_async_many_in_flight_newest_read,
        cp_async_many_in_flight_oldest_read,
        bulk_load_waited_by_one_then_barrier, bulk_load_read_after_barrier_before_wait,
        bulk_load_destination_stored_in_flight, bulk_load_waited_by_every_thread,
        bulk_store_waited_then_barrier, bulk_store_read_after_its_read_wait,
        bulk_store_read_never_waited, bulk_store_older_group_waited,
        bulk_store_newer_group_in_flight,
        tensor_load_read_after_the_wait, tensor_load_read_before_the_wait,
        tensor_store_source_overwritten_after_read_wait,
        tensor_store_source_overwritten_in_flight,
        pipeline_stage_waited, pipeline_stage_read_before_its_wait);
}

mod gpu {
    scenario_tests!(super::common::gpu_context, super::common::gpu_turn;
        cp_async_waited_then_barrier, cp_async_own_read_after_wait,
        cp_async_own_read_before_wait, cp_async_read_after_barrier_before_wait,
        cp_async_read_by_another_thread_unsynced, cp_async_destination_stored_after_wait,
        cp_async_destination_stored_in_flight, cp_async_destination_copied_twice,
        cp_async_older_group_waited, cp_async_newer_group_waited, cp_async_wrong_group_count,
        cp_async_source_overwritten_after_wait, cp_async_source_overwritten_before_wait,
        cp_async_source_written_after_its_wait, cp_async_source_written_before_its_wait,
        cp_async_waited_before_return, cp_async_completed_by_return,
        cp_async_many_in_flight_waited, cp_async_many_in_flight_newest_read,
        bulk_source_overwritten_after_wait, bulk_source_overwritten_before_wait,
        bulk_load_read_after_the_wait, bulk_load_read_before_the_wait,
        mbarrier_right_phase, mbarrier_wrong_phase,
        bulk_store_waited_before_release, bulk_store_released_before_wait,
        tensor_load_beside_an_ordered_store, tensor_load_and_an_unordered_store,
        dependent_reads_after_its_wait, dependent_reads_before_its_wait,
        serialized_launch_reads_before_its_wait,
        bulk_store_source_overwritten_after_read_wait, bulk_store_source_overwritten_in_flight,
        tensor_store_beside_an_ordered_load, tensor_store_and_an_unordered_load,
        bulk_load_waited_by_one_then_barrier, bulk_load_read_after_barrier_before_wait,
        bulk_load_destination_stored_in_flight, bulk_load_waited_by_every_thread,
        bulk_store_waited_then_barrier, bulk_store_read_after_its_read_wait,
        bulk_store_read_never_waited, bulk_store_older_group_waited,
        bulk_store_newer_group_in_flight,
        tensor_load_read_after_the_wait, tensor_load_read_before_the_wait,
        tensor_store_source_overwritten_after_read_wait,
        tensor_store_source_overwritten_in_flight,
        pipeline_stage_waited, pipeline_stage_read_before_its_wait);
}

kernel_file_verdicts!(
    "async_races.rs",
    include_str!("../kernels/src/async_races.rs")
);

mod scenarios {
    use super::common::codes::*;
    use super::common::{Bench, MakeContext, TwoStreams};
    use super::{
        check, race, DeviceBuffer, DeviceTensorMap, DeviceTensorMapMut, LaunchConfig, TiledLayout,
        Verdict,
    };
    use vigil::{Kernel, KernelArgs};
    use vigil_kernels::async_races::*;

    const TILE: usize = ASYNC_RACE_TILE;

    /// `0, 1, 2, ...`: `n` distinct values.
    fn counting(n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| 1000 + i).collect()
    }

    /// Launches `K` as `blocks` blocks of [`ASYNC_RACE_THREADS`] and
    /// synchronises.
    fn run<K: Kernel, A: KernelArgs<K::Params>>(
        b: &Bench,
        blocks: u32,
        args: A,
    ) -> vigil::Result<()> {
        b.run::<K, A>(LaunchConfig::new(blocks, ASYNC_RACE_THREADS), args)
    }

    /// Checks `what`'s outcome against the `expected` reports and, when
    /// race-free, the first `n` values of `out` against `want(i)`.
    fn check_values(
        b: &Bench,
        what: &str,
        outcome: vigil::Result<()>,
        expected: &[Verdict],
        (out, n): (&DeviceBuffer<u32>, usize),
        want: impl Fn(usize) -> u32,
    ) {
        check(what, outcome, expected);
        if expected.is_empty() {
            let got = out.to_vec(&b.stream).expect("values");
            for (i, g) in got.iter().take(n).enumerate() {
                assert_eq!(*g, want(i), "{what}: value {i}");
            }
        }
    }

    /// One block of kernel `K` over `inputs` distinct values `xs` and a
    /// `y` of one element per thread, in `mode`: its verdict, and when
    /// race-free `y[t] == want(xs, t)` for every thread `t`.
    fn tile_case<K: Kernel>(
        make: MakeContext,
        inputs: usize,
        mode: u32,
        expected: &[Verdict],
        want: impl Fn(&[u32], usize) -> u32,
    ) where
        for<'a> (&'a DeviceBuffer<u32>, &'a mut DeviceBuffer<u32>, u32): KernelArgs<K::Params>,
    {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let xs = counting(inputs);
        let x = DeviceBuffer::from_slice(&b.stream, &xs).expect("x");
        let mut y = b.zeros(ASYNC_RACE_THREADS as usize);
        let outcome = run::<K, _>(&b, 1, (&x, &mut y, mode));
        let what = format!("{}, mode {mode}", K::NAME);
        let threads = ASYNC_RACE_THREADS as usize;
        check_values(&b, &what, outcome, expected, (&y, threads), |t| {
            want(&xs, t)
        });
    }

    /// [`tile_case`] of `cp_async_early_read` over one tile.
    fn early_read(
        make: MakeContext,
        mode: u32,
        expected: &[Verdict],
        want: impl Fn(&[u32], usize) -> u32,
    ) {
        tile_case::<cp_async_early_read>(make, TILE, mode, expected, want)
    }

    /// [`tile_case`] of `cp_async_group_count`: a neighbour's chunk of the
    /// tile `mode` reads.
    fn group_count(make: MakeContext, mode: u32, expected: &[Verdict]) {
        let tile = if mode == 0 { 0 } else { TILE };
        tile_case::<cp_async_group_count>(make, 2 * TILE, mode, expected, |xs, t| {
            xs[tile + (4 * t + 4) % TILE]
        })
    }

    /// [`tile_case`] of `bulk_load_read`: element `t` of the tile.
    fn bulk_read(make: MakeContext, mode: u32, expected: &[Verdict]) {
        tile_case::<bulk_load_read>(make, TILE, mode, expected, |xs, t| xs[t])
    }

    /// [`tile_case`] of `mbarrier_wrong_phase`: element `t` of both tiles.
    fn phases(make: MakeContext, mode: u32, expected: &[Verdict]) {
        tile_case::<mbarrier_wrong_phase>(make, 2 * TILE, mode, expected, |xs, t| {
            xs[t] + xs[TILE + t]
        })
    }

    /// Waited for, then a barrier: every thread reads its neighbour's chunk.
    pub fn cp_async_waited_then_barrier(make: MakeContext) {
        early_read(make, 0, &[], |xs, t| xs[(4 * t + 4) % TILE]);
    }

    /// A thread's own chunk after its own wait needs no barrier.
    pub fn cp_async_own_read_after_wait(make: MakeContext) {
        early_read(make, 3, &[], |xs, t| xs[4 * t]);
    }

    /// The issuer reads its own destination before its wait.
    pub fn cp_async_own_read_before_wait(make: MakeContext) {
        early_read(make, 1, &[race(RAW, "cp-own-early", "cp-issue")], |_, _| 0);
    }

    /// A barrier after the issue does not complete the copy: a
    /// neighbour's chunk read before the neighbour waited races.
    pub fn cp_async_read_after_barrier_before_wait(make: MakeContext) {
        early_read(
            make,
            2,
            &[race(RAW, "cp-other-early", "cp-issue")],
            |_, _| 0,
        );
    }

    /// A neighbour's chunk read with neither its wait nor a barrier: a
    /// race the GPU's check at the issue sees too.
    pub fn cp_async_read_by_another_thread_unsynced(make: MakeContext) {
        early_read(
            make,
            4,
            &[race(RAW, "cp-other-unsynced", "cp-issue")],
            |_, _| 0,
        );
    }

    /// The destination stored to after the wait: race-free.
    pub fn cp_async_destination_stored_after_wait(make: MakeContext) {
        tile_case::<cp_async_destination_written>(make, TILE, 2, &[], |_, _| 7);
    }

    /// The issuer stores to its copy's destination before its wait.
    pub fn cp_async_destination_stored_in_flight(make: MakeContext) {
        tile_case::<cp_async_destination_written>(
            make,
            TILE,
            0,
            &[race(WAW, "cp-early-store", "cp-first-copy")],
            |_, _| 7,
        );
    }

    /// A second copy into bytes the first is still writing.
    pub fn cp_async_destination_copied_twice(make: MakeContext) {
        tile_case::<cp_async_destination_written>(
            make,
            TILE,
            1,
            &[race(WAW, "cp-second-copy", "cp-first-copy")],
            |_, _| 7,
        );
    }

    /// `wait_group::<1>` completes the older of two groups.
    pub fn cp_async_older_group_waited(make: MakeContext) {
        group_count(make, 0, &[]);
    }

    /// `wait_group::<0>` completes both.
    pub fn cp_async_newer_group_waited(make: MakeContext) {
        group_count(make, 2, &[]);
    }

    /// `wait_group::<1>` leaves the newer group in flight: reading it is
    /// a race with its copies.
    pub fn cp_async_wrong_group_count(make: MakeContext) {
        group_count(make, 1, &[race(RAW, "group-read", "group-second")]);
    }

    /// `cp_async_source_overwrite` or `bulk_source_overwrite` in `mode`:
    /// when race-free, `y[t] == want(xs, t)`, `xs` the source's original
    /// values.
    fn overwrite<K: Kernel>(
        make: MakeContext,
        mode: u32,
        expected: &[Verdict],
        want: impl Fn(&[u32], usize) -> u32,
    ) where
        for<'a> (&'a mut DeviceBuffer<u32>, &'a mut DeviceBuffer<u32>, u32): KernelArgs<K::Params>,
    {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let xs = counting(TILE);
        let mut x = DeviceBuffer::from_slice(&b.stream, &xs).expect("x");
        let mut y = b.zeros(ASYNC_RACE_THREADS as usize);
        let outcome = run::<K, _>(&b, 1, (&mut x, &mut y, mode));
        let what = format!("{}, mode {mode}", K::NAME);
        let threads = ASYNC_RACE_THREADS as usize;
        check_values(&b, &what, outcome, expected, (&y, threads), |t| {
            want(&xs, t)
        });
    }

    /// What a `cp.async` source case leaves in `y[t]`: its chunk's first
    /// element.
    fn chunk_start(xs: &[u32], t: usize) -> u32 {
        xs[4 * t]
    }

    /// What a bulk source case leaves in `y[t]`: element `t`.
    fn element(xs: &[u32], t: usize) -> u32 {
        xs[t]
    }

    /// The source overwritten after the wait: race-free.
    pub fn cp_async_source_overwritten_after_wait(make: MakeContext) {
        overwrite::<cp_async_source_overwrite>(make, 0, &[], chunk_start);
    }

    /// The source overwritten by the issuer before its wait.
    pub fn cp_async_source_overwritten_before_wait(make: MakeContext) {
        overwrite::<cp_async_source_overwrite>(
            make,
            1,
            &[race(WAR, "src-overwrite", "src-issue")],
            chunk_start,
        );
    }

    /// A neighbour's source chunk written after its wait and a barrier.
    pub fn cp_async_source_written_after_its_wait(make: MakeContext) {
        overwrite::<cp_async_source_written_by_another>(make, 0, &[], chunk_start);
    }

    /// A neighbour's source chunk written after a barrier but before the
    /// neighbour's wait: its copy may not have read it yet.
    pub fn cp_async_source_written_before_its_wait(make: MakeContext) {
        overwrite::<cp_async_source_written_by_another>(
            make,
            1,
            &[race(WAR, "src-other-write", "src-other-issue")],
            chunk_start,
        );
    }

    /// Copies waited for before the barrier: the neighbour's chunk reads.
    pub fn cp_async_waited_before_return(make: MakeContext) {
        tile_case::<cp_async_never_waited>(make, TILE, 0, &[], |xs, t| xs[(4 * t + 4) % TILE]);
    }

    /// Copies never waited for complete when their threads return: a
    /// read of one after a barrier races with it.
    pub fn cp_async_completed_by_return(make: MakeContext) {
        tile_case::<cp_async_never_waited>(
            make,
            TILE,
            1,
            &[race(RAW, "unwaited-read", "unwaited-issue")],
            |_, _| 0,
        );
    }

    /// [`tile_case`] of `cp_async_many_in_flight`.
    fn many(make: MakeContext, mode: u32, expected: &[Verdict]) {
        let words = MANY_IN_FLIGHT * ASYNC_RACE_THREADS as usize;
        tile_case::<cp_async_many_in_flight>(make, words, mode, expected, |xs, t| {
            xs[(MANY_IN_FLIGHT * (t + 1)) % words + MANY_IN_FLIGHT - 1]
        })
    }

    /// More copies in flight than the GPU keeps, all waited for: no race.
    pub fn cp_async_many_in_flight_waited(make: MakeContext) {
        many(make, 0, &[]);
    }

    /// The newest of many copies in flight read by its issuer early.
    pub fn cp_async_many_in_flight_newest_read(make: MakeContext) {
        many(make, 1, &[race(RAW, "many-newest-early", "many-issue")]);
    }

    /// The oldest of many copies in flight read by its issuer early (the
    /// GPU completed it when its queue overflowed: CPU only).
    pub fn cp_async_many_in_flight_oldest_read(make: MakeContext) {
        many(make, 2, &[race(RAW, "many-oldest-early", "many-issue")]);
    }

    /// A bulk load's source overwritten after the mbarrier wait: race-free.
    pub fn bulk_source_overwritten_after_wait(make: MakeContext) {
        overwrite::<bulk_source_overwrite>(make, 0, &[], element);
    }

    /// A bulk load's source overwritten by another thread before the wait
    /// (after a barrier, which does not complete the copy).
    pub fn bulk_source_overwritten_before_wait(make: MakeContext) {
        overwrite::<bulk_source_overwrite>(
            make,
            1,
            &[race(WAR, "bulk-overwrite", "bulk-issue")],
            element,
        );
    }

    /// The tile read after the phase's wait: race-free.
    pub fn bulk_load_read_after_the_wait(make: MakeContext) {
        bulk_read(make, 0, &[]);
    }

    /// The tile read with neither the wait nor a barrier after the issue:
    /// a race the GPU's check at the issue sees too.
    pub fn bulk_load_read_before_the_wait(make: MakeContext) {
        bulk_read(
            make,
            1,
            &[race(RAW, "bulk-load-early-read", "bulk-load-issue")],
        );
    }

    /// Each round waits on its own phase: race-free.
    pub fn mbarrier_right_phase(make: MakeContext) {
        phases(make, 0, &[]);
    }

    /// The second round waits on the first round's parity, which returns
    /// at once: its read races with the second load.
    pub fn mbarrier_wrong_phase(make: MakeContext) {
        phases(make, 1, &[race(RAW, "phase-read", "phase-issue")]);
    }

    /// [`tile_case`] of `bulk_load_by_the_block`: element `t` of the tile.
    fn block_load(make: MakeContext, mode: u32, expected: &[Verdict]) {
        tile_case::<bulk_load_by_the_block>(make, TILE, mode, expected, |xs, t| xs[t])
    }

    /// One thread waits for the phase, a barrier shows the tile to the
    /// rest: race-free.
    pub fn bulk_load_waited_by_one_then_barrier(make: MakeContext) {
        block_load(make, 0, &[]);
    }

    /// A barrier after the issue does not complete the copy: the tile
    /// read before the wait races with it.
    pub fn bulk_load_read_after_barrier_before_wait(make: MakeContext) {
        block_load(
            make,
            1,
            &[race(RAW, "block-load-early-read", "block-load-issue")],
        );
    }

    /// Another thread stores to the tile while the copy writes it.
    pub fn bulk_load_destination_stored_in_flight(make: MakeContext) {
        block_load(
            make,
            2,
            &[race(WAW, "block-load-early-store", "block-load-issue")],
        );
    }

    /// Every thread waits for the phase itself: race-free.
    pub fn bulk_load_waited_by_every_thread(make: MakeContext) {
        block_load(make, 3, &[]);
    }

    /// `bulk_store_read_by_the_block` in `mode`: `out[t] = 4 t + 1` when
    /// race-free.
    fn block_store(make: MakeContext, mode: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let mut y = b.zeros(TILE);
        let mut out = b.zeros(ASYNC_RACE_THREADS as usize);
        let outcome = run::<bulk_store_read_by_the_block, _>(&b, 1, (&mut y, &mut out, mode));
        let what = format!("bulk_store_read_by_the_block, mode {mode}");
        let threads = ASYNC_RACE_THREADS as usize;
        check_values(&b, &what, outcome, expected, (&out, threads), |t| {
            4 * t as u32 + 1
        });
    }

    /// The bulk group waited for, then a barrier: the block reads the
    /// stored data race-free.
    pub fn bulk_store_waited_then_barrier(make: MakeContext) {
        block_store(make, 0, &[]);
    }

    /// `wait_group_read` ends the copy's read of the tile, not its write:
    /// the block's read of the destination races with it.
    pub fn bulk_store_read_after_its_read_wait(make: MakeContext) {
        block_store(
            make,
            1,
            &[race(RAW, "block-store-read", "block-store-issue")],
        );
    }

    /// The destination read with the store never waited for.
    pub fn bulk_store_read_never_waited(make: MakeContext) {
        block_store(
            make,
            2,
            &[race(RAW, "block-store-read", "block-store-issue")],
        );
    }

    /// Kernel `K` over `(y, flag, out, mode)` as two blocks, which must
    /// run at once (block 0 stores a tile of `1 + i` to `y` and raises
    /// `flag`; block 1 reads `y` back into `out` after it): when
    /// race-free, `out[t] == want(t)`.
    fn flag_store<K: Kernel>(
        make: MakeContext,
        mode: u32,
        expected: &[Verdict],
        want: impl Fn(usize) -> u32,
    ) where
        for<'a> (
            &'a mut DeviceBuffer<u32>,
            &'a mut DeviceBuffer<u32>,
            &'a mut DeviceBuffer<u32>,
            u32,
        ): KernelArgs<K::Params>,
    {
        let Some(b) = Bench::new(make, 2) else {
            return;
        };
        let (mut y, mut flag) = (b.zeros(TILE), b.zeros(1));
        let mut out = b.zeros(ASYNC_RACE_THREADS as usize);
        let outcome = run::<K, _>(&b, 2, (&mut y, &mut flag, &mut out, mode));
        let what = format!("{}, mode {mode}", K::NAME);
        let threads = ASYNC_RACE_THREADS as usize;
        check_values(&b, &what, outcome, expected, (&out, threads), want);
    }

    /// `bulk_store_group_count` in `mode`: every other element of a half.
    fn group_store(make: MakeContext, mode: u32, expected: &[Verdict]) {
        flag_store::<bulk_store_group_count>(make, mode, expected, |t| 2 * t as u32 + 1)
    }

    /// `bulk_wait_group::<1>` completes the older of two bulk groups: its
    /// data read by another block after the release is race-free.
    pub fn bulk_store_older_group_waited(make: MakeContext) {
        group_store(make, 0, &[]);
    }

    /// The newer group is still in flight at the release: another block's
    /// read of its data races with it.
    pub fn bulk_store_newer_group_in_flight(make: MakeContext) {
        group_store(
            make,
            1,
            &[race(RAW, "group-read-back", "group-store-second")],
        );
    }

    /// `bulk_store_read_back` in `mode`: every fourth element.
    fn read_back(make: MakeContext, mode: u32, expected: &[Verdict]) {
        flag_store::<bulk_store_read_back>(make, mode, expected, |t| 4 * t as u32 + 1)
    }

    /// The bulk group waited for before the release: race-free.
    pub fn bulk_store_waited_before_release(make: MakeContext) {
        read_back(make, 0, &[]);
    }

    /// The release before the wait does not cover the store in flight.
    pub fn bulk_store_released_before_wait(make: MakeContext) {
        read_back(make, 1, &[race(RAW, "store-read-back", "store-issue")]);
    }

    /// A 1-dimensional tensor of two tiles in boxes of one.
    fn tile_layout() -> TiledLayout<1> {
        TiledLayout::new([2 * TILE as u64], [TILE as u32])
    }

    /// Orders the work issued on `s.b` from now on after `s.a`'s so far,
    /// through an event.
    fn order_b_after_a(s: &TwoStreams) {
        let done = vigil::Event::new(&s.ctx).expect("event");
        done.record(&s.a).expect("record");
        s.b.wait_event(&done).expect("wait");
    }

    /// The next synchronisation of `s` as its outcome (its races, if any).
    fn races_of(s: &TwoStreams) -> vigil::Result<()> {
        match s.races() {
            r if r.is_empty() => Ok(()),
            r => Err(vigil::Error::Races(r)),
        }
    }

    /// A tensor load of the first `TILE` elements of a buffer on one
    /// stream and a plain store to element `at` of it on another, the
    /// streams ordered by an event when `ordered`.
    fn tensor_case(make: MakeContext, at: u32, ordered: bool, expected: &[Verdict]) {
        let Some(ctx) = make(2) else {
            return;
        };
        let s = TwoStreams::new(ctx);
        let mut src = s.zeros(2 * TILE);
        let mut y = s.zeros(TILE);
        {
            let map = DeviceTensorMap::tiled(&s.a, &src, tile_layout()).expect("tensor map");
            s.a.launch(
                &s.kernel::<tensor_load_tile>(),
                LaunchConfig::new(1, ASYNC_RACE_THREADS),
                (&map, &mut y),
            )
            .expect("tensor_load_tile");
        }
        if ordered {
            order_b_after_a(&s);
        }
        s.b.launch(
            &s.kernel::<plain_store_at>(),
            LaunchConfig::new(1, 32),
            (&mut src, at),
        )
        .expect("plain_store_at");
        let what = format!("a tensor load and a store at {at}, ordered: {ordered}");
        check(&what, races_of(&s), expected);
    }

    /// The store waits for the tensor load's launch through an event.
    pub fn tensor_load_beside_an_ordered_store(make: MakeContext) {
        tensor_case(make, 3, true, &[]);
    }

    /// The store on an unordered stream writes inside the loaded box.
    pub fn tensor_load_and_an_unordered_store(make: MakeContext) {
        tensor_case(
            make,
            3,
            false,
            &[race(WAR, "tensor-plain-store", "tensor-load")],
        );
    }

    /// `tensor_load_read` in `mode`, one block over a tensor of two
    /// tiles: `y[t]` is element `t` when race-free.
    fn tensor_read(make: MakeContext, mode: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let xs = counting(2 * TILE);
        let src = DeviceBuffer::from_slice(&b.stream, &xs).expect("src");
        let mut y = b.zeros(ASYNC_RACE_THREADS as usize);
        let outcome = {
            let map = DeviceTensorMap::tiled(&b.stream, &src, tile_layout()).expect("tensor map");
            run::<tensor_load_read, _>(&b, 1, (&map, &mut y, mode))
        };
        let what = format!("tensor_load_read, mode {mode}");
        let threads = ASYNC_RACE_THREADS as usize;
        check_values(&b, &what, outcome, expected, (&y, threads), |t| xs[t]);
    }

    /// The tensor load's tile read after the phase's wait: race-free.
    pub fn tensor_load_read_after_the_wait(make: MakeContext) {
        tensor_read(make, 0, &[]);
    }

    /// A barrier after a tensor load does not complete it: the tile read
    /// before the wait races with it.
    pub fn tensor_load_read_before_the_wait(make: MakeContext) {
        tensor_read(
            make,
            1,
            &[race(RAW, "tensor-early-read", "tensor-read-issue")],
        );
    }

    /// `tensor_store_source_overwrite` in `mode`, one block: the stored
    /// box holds `1 + i` when race-free.
    fn tensor_source(make: MakeContext, mode: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let mut dst = b.zeros(2 * TILE);
        let outcome = {
            let mut map =
                DeviceTensorMapMut::tiled(&b.stream, &mut dst, tile_layout()).expect("tensor map");
            run::<tensor_store_source_overwrite, _>(&b, 1, (&mut map, mode))
        };
        let what = format!("tensor_store_source_overwrite, mode {mode}");
        check_values(&b, &what, outcome, expected, (&dst, TILE), |i| i as u32 + 1);
    }

    /// The tile overwritten after the tensor store's read completed.
    pub fn tensor_store_source_overwritten_after_read_wait(make: MakeContext) {
        tensor_source(make, 0, &[]);
    }

    /// The tile overwritten while the tensor store may still read it.
    pub fn tensor_store_source_overwritten_in_flight(make: MakeContext) {
        tensor_source(
            make,
            1,
            &[race(WAR, "tensor-store-overwrite", "tensor-store-issue")],
        );
    }

    /// [`tile_case`] of `pipeline_stage_read`: element `t` of both tiles.
    fn stages(make: MakeContext, mode: u32, expected: &[Verdict]) {
        tile_case::<pipeline_stage_read>(make, 2 * TILE, mode, expected, |xs, t| {
            xs[t].wrapping_add(xs[TILE + t])
        })
    }

    /// Both stages waited for before they are read: race-free.
    pub fn pipeline_stage_waited(make: MakeContext) {
        stages(make, 0, &[]);
    }

    /// The second stage read after only the first stage's wait.
    pub fn pipeline_stage_read_before_its_wait(make: MakeContext) {
        stages(make, 1, &[race(RAW, "stage-read", "stage-issue")]);
    }

    /// `pdl_writer` then `pdl_reader` in `mode` on one stream, the second
    /// with programmatic stream serialisation when `programmatic`.
    fn dependent_case(make: MakeContext, mode: u32, programmatic: bool, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 2) else {
            return;
        };
        let n = 2 * ASYNC_RACE_THREADS as usize;
        let (mut y, mut z) = (b.zeros(n), b.zeros(n));
        let config = LaunchConfig::new(2, ASYNC_RACE_THREADS);
        b.stream
            .launch(&b.kernel::<pdl_writer>(), config, (&mut y,))
            .expect("pdl_writer");
        let dependent = if programmatic {
            config.with_programmatic_stream_serialization()
        } else {
            config
        };
        let outcome = b.run::<pdl_reader, _>(dependent, (&y, &mut z, mode));
        let what = format!("pdl_reader, mode {mode}, programmatic: {programmatic}");
        check(&what, outcome, expected);
        if expected.is_empty() {
            let got = z.to_vec(&b.stream).expect("z");
            assert_eq!(got, (1..=n as u32).collect::<Vec<_>>(), "{what}");
        }
    }

    /// A dependent reads its primary's output after `grid_dependency::wait()`.
    pub fn dependent_reads_after_its_wait(make: MakeContext) {
        dependent_case(make, 0, true, &[]);
    }

    /// A dependent reads its primary's output before waiting for it.
    pub fn dependent_reads_before_its_wait(make: MakeContext) {
        dependent_case(make, 1, true, &[race(RAW, "pdl-early-read", "pdl-write")]);
    }

    /// Without programmatic stream serialisation the launch starts after
    /// the one before it has finished: an early read is ordered.
    pub fn serialized_launch_reads_before_its_wait(make: MakeContext) {
        dependent_case(make, 1, false, &[]);
    }

    /// `bulk_store_source_overwrite` in `mode`: `y` holds the tile when
    /// race-free.
    fn store_source(make: MakeContext, mode: u32, expected: &[Verdict]) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        let mut y = b.zeros(TILE);
        let outcome = run::<bulk_store_source_overwrite, _>(&b, 1, (&mut y, mode));
        let what = format!("bulk_store_source_overwrite, mode {mode}");
        check(&what, outcome, expected);
        if expected.is_empty() {
            let got = y.to_vec(&b.stream).expect("y");
            assert_eq!(got, (1..=TILE as u32).collect::<Vec<_>>(), "{what}");
        }
    }

    /// The tile is overwritten once the store has read it.
    pub fn bulk_store_source_overwritten_after_read_wait(make: MakeContext) {
        store_source(make, 0, &[]);
    }

    /// The tile is overwritten while the store may still read it.
    pub fn bulk_store_source_overwritten_in_flight(make: MakeContext) {
        store_source(
            make,
            1,
            &[race(WAR, "bulk-store-overwrite", "bulk-store-issue")],
        );
    }

    /// A tensor store of the first `TILE` elements of a buffer on one
    /// stream and a plain load of element `at` on another, the streams
    /// ordered by an event when `ordered`.
    fn tensor_store_case(make: MakeContext, at: u32, ordered: bool, expected: &[Verdict]) {
        let Some(ctx) = make(2) else {
            return;
        };
        let s = TwoStreams::new(ctx);
        let mut dst = s.zeros(2 * TILE);
        let mut out = s.zeros(1);
        {
            let mut map =
                DeviceTensorMapMut::tiled(&s.a, &mut dst, tile_layout()).expect("tensor map");
            s.a.launch(
                &s.kernel::<tensor_store_tile>(),
                LaunchConfig::new(1, ASYNC_RACE_THREADS),
                (&mut map,),
            )
            .expect("tensor_store_tile");
        }
        if ordered {
            order_b_after_a(&s);
        }
        s.b.launch(
            &s.kernel::<plain_load_at>(),
            LaunchConfig::new(1, 32),
            (&dst, &mut out, at),
        )
        .expect("plain_load_at");
        let what = format!("a tensor store and a load at {at}, ordered: {ordered}");
        check(&what, races_of(&s), expected);
        if expected.is_empty() {
            assert_eq!(out.to_vec(&s.a).expect("out"), [at + 1], "{what}");
        }
    }

    /// The load waits for the tensor store's launch through an event.
    pub fn tensor_store_beside_an_ordered_load(make: MakeContext) {
        tensor_store_case(make, 5, true, &[]);
    }

    /// The load on an unordered stream reads inside the stored box.
    pub fn tensor_store_and_an_unordered_load(make: MakeContext) {
        tensor_store_case(
            make,
            5,
            false,
            &[race(RAW, "tensor-plain-load", "tensor-store")],
        );
    }
}
