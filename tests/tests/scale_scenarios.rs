//! The scale-scenario suite: everyday GPU patterns
//! (`vigil_kernels::scale_races`) with 64 and 1,024 blocks through the
//! public host API on a sanitized context: many blocks releasing into one
//! word, a consumer lagging behind its producers, mixed-width atomics, a
//! wide access coming second, an in-place stencil, coalesced tiles of 4-,
//! 8- and 16-byte elements (the GPU checks these a warp's line at a time)
//! overlapping or not, a global spin lock every block takes in turn, an
//! in-place transpose on a 2-D grid, a chained scan (ordering transitive
//! through every block), one grid launched on two streams, and every
//! block reading a buffer larger than
//! the record pool (counted as history lost). Each case asserts the
//! verdict: the exact set of distinct reports by kind and both source
//! lines (found by `// @marker`), and for every report the earlier
//! access's block, thread and SM; never a sanitizer error.
//!
//! Written once ([`scenarios`]) and instantiated per backend like
//! `race_scenarios.rs` (the GPU cases skip without a GPU). Verdicts are
//! compared up to which access of a race came second
//! ([`common::unordered`]): on a GPU the blocks' order is not fixed.

use std::collections::BTreeSet;
use vigil::{RaceReports, ReportKind};

mod common;

macro_rules! scale_scenarios {
    ($backend:ident, $make:expr, $turn:expr) => {
        mod $backend {
            scale_scenarios!(@tests $make, $turn;
                last_block_reduction_fence_and_relaxed, last_block_reduction_acq_rel,
                last_block_reduction_without_release,
                fence_grid_barrier,
                lagging_consumer_of_producers, lagging_consumer_relaxed_stores,
                mixed_width_atomics_race, same_width_atomics_do_not,
                wide_access_second, in_place_stencil,
                coalesced_tiles_disjoint, coalesced_tiles_overlapping_by_a_warp,
                coalesced_tiles_off_by_one, coalesced_tiles_reading_the_next,
                coalesced_tiles_next_read_by_a_later_launch,
                spin_lock_acquire_release, spin_lock_relaxed_with_fences,
                spin_lock_relaxed, spin_lock_without_release, spin_lock_without_acquire,
                transpose_in_place_naive, transpose_in_place_by_swaps,
                same_grid_on_two_streams, same_grid_on_two_streams_ordered_by_an_event,
                chained_scan_release_acquire, chained_scan_relaxed_publish);
            scale_scenarios!(@once $make, $turn; freed_buffers_give_their_records_back,
                reads_past_the_record_pool_are_counted);
        }
    };
    (@once $make:expr, $turn:expr; $($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let _turn = $turn();
            super::scenarios::$name($make)
        }
    )*};
    (@tests $make:expr, $turn:expr; $($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let _turn = $turn();
            for blocks in super::BLOCKS {
                super::scenarios::$name($make, blocks)
            }
        }
    )*};
}

/// Grid sizes every scenario runs with.
const BLOCKS: [u32; 2] = [64, 1024];

scale_scenarios!(cpu, super::common::cpu_context, || ());
// GPU scenarios take turns: the GPU sanitizer's record pool and side
// table are one per device (docs/src/design/address-space.md, "What a
// device's contexts share").
scale_scenarios!(gpu, super::common::gpu_context, super::common::gpu_turn);

/// The line of `scale_races.rs` that carries `// @marker`.
fn line_of(marker: &str) -> u32 {
    let source = include_str!("../kernels/src/scale_races.rs");
    common::marker_line(source, "scale_races.rs", marker)
}

/// Checks a synchronisation's outcome: the distinct (kind, current line,
/// prior line) triples equal `expected` (markers), and every report names
/// the earlier access's location, block and thread, on one of the `sms`
/// SMs the backend has. Returns the reports for further checks.
fn check(
    what: &str,
    outcome: vigil::Result<()>,
    sms: usize,
    expected: &[(ReportKind, &str, &str)],
) -> RaceReports {
    let (got, reports) = distinct_reports(what, outcome, sms);
    let want = triples(expected);
    assert_eq!(
        got, want,
        "{what}: distinct reports (kind, current line, prior line) differ:\n{reports}"
    );
    // (With 1,024 blocks the stencil makes more reports than the buffer
    // keeps: the rest are counted as dropped, as documented.)
    reports
}

/// As [`check`], for a race whose pairs depend on the order blocks run
/// in (a GPU runs them in any order): at least one report, each one of
/// `allowed`.
fn check_among(
    what: &str,
    outcome: vigil::Result<()>,
    sms: usize,
    allowed: &[(ReportKind, &str, &str)],
) -> RaceReports {
    let (got, reports) = distinct_reports(what, outcome, sms);
    let allowed = triples(allowed);
    assert!(!got.is_empty(), "{what}: no race reported");
    assert!(
        got.is_subset(&allowed),
        "{what}: unexpected (kind, current line, prior line) {:?}:\n{reports}",
        got.difference(&allowed).collect::<Vec<_>>()
    );
    reports
}

fn triples(markers: &[(ReportKind, &str, &str)]) -> BTreeSet<(u32, u32, u32)> {
    markers
        .iter()
        .map(|(k, c, p)| common::unordered((*k as u32, line_of(c), line_of(p))))
        .collect()
}

/// The distinct (kind, current line, prior line) triples of an outcome,
/// each report checked to name both accesses fully.
fn distinct_reports(
    what: &str,
    outcome: vigil::Result<()>,
    sms: usize,
) -> (BTreeSet<(u32, u32, u32)>, RaceReports) {
    let reports = match outcome {
        Ok(()) => RaceReports::new(),
        Err(vigil::Error::Races(r)) => r,
        Err(e) => panic!("{what}: synchronisation failed: {e}"),
    };
    let mut got = BTreeSet::new();
    for r in reports.iter() {
        assert!(!r.kind.is_error(), "{what}: sanitizer error\n{reports}");
        let cur = r.current.location.as_ref().expect("current location");
        let prior = r.prior.location.as_ref();
        let prior = prior.unwrap_or_else(|| panic!("{what}: no earlier location\n{r}"));
        assert!(
            r.prior.block.is_some() && r.prior.thread.is_some(),
            "{what}: earlier block/thread missing\n{r}"
        );
        // Where the earlier access ran is not kept (a serial names a
        // CTA, not an SM); when a backend knows it, it is a real SM.
        assert!(
            r.prior.smid.is_none_or(|sm| (sm as usize) < sms),
            "{what}: earlier access on SM {:?} of {sms}\n{r}",
            r.prior.smid
        );
        got.insert(common::unordered((r.kind as u32, cur.line, prior.line)));
    }
    (got, reports)
}

mod scenarios {
    use super::common::codes::*;
    use super::common::{Bench, MakeContext};
    use super::{check, check_among};
    use vigil::LaunchConfig;
    use vigil_kernels::scale_races::*;

    fn one_thread_blocks(blocks: u32) -> LaunchConfig {
        LaunchConfig::new(blocks, 1)
    }

    /// `blocks`, at most the bound environment variable `var` gives
    /// (`default` without it).
    fn bounded_blocks(blocks: u32, var: &str, default: u32) -> u32 {
        let bound = std::env::var(var).ok().and_then(|v| v.parse().ok());
        blocks.min(bound.unwrap_or(default))
    }

    /// `last_block_reduction` with `fence_code`; checks the sum.
    fn reduction(
        make: MakeContext,
        blocks: u32,
        fence_code: u32,
    ) -> Option<(vigil::Result<()>, usize)> {
        let b = Bench::new(make, 2)?;
        let (mut partials, mut counter, mut result) = (
            b.zeros_of::<u32>(blocks as usize),
            b.zeros_of::<u32>(1),
            b.zeros_of::<u32>(1),
        );
        b.stream
            .launch(
                &b.kernel::<last_block_reduction>(),
                one_thread_blocks(blocks),
                (&mut partials, &mut counter, &mut result, fence_code),
            )
            .expect("launch");
        let verdict = b.sync();
        assert_eq!(
            result.to_vec(&b.stream).unwrap(),
            [blocks * (blocks + 1) / 2]
        );
        Some((verdict, b.sms()))
    }

    pub fn last_block_reduction_fence_and_relaxed(make: MakeContext, blocks: u32) {
        for code in [RELEASE, ACQ_REL, SEQ_CST] {
            let Some((out, w)) = reduction(make, blocks, code) else {
                return;
            };
            check("threadFenceReduction, fence + relaxed", out, w, &[]);
        }
    }

    pub fn last_block_reduction_acq_rel(make: MakeContext, blocks: u32) {
        let Some((out, w)) = reduction(make, blocks, 0) else {
            return;
        };
        check("threadFenceReduction, acq_rel", out, w, &[]);
    }

    pub fn last_block_reduction_without_release(make: MakeContext, blocks: u32) {
        let Some((out, w)) = reduction(make, blocks, ACQUIRE) else {
            return;
        };
        check(
            "threadFenceReduction, acquire fence only",
            out,
            w,
            &[(RAW, "reduce-read", "reduce-partial")],
        );
    }

    pub fn fence_grid_barrier(make: MakeContext, blocks: u32) {
        // Every block must be resident: one worker per block. On the CPU
        // backend, many more spinning workers than cores mostly wait on
        // preempted lock holders (64 take about a minute on 2 cores), so
        // the barrier runs over at most 8 blocks here unless
        // VIGIL_GRID_BARRIER_BLOCKS raises the bound.
        let blocks = bounded_blocks(blocks, "VIGIL_GRID_BARRIER_BLOCKS", 8);
        let Some(b) = Bench::new(make, blocks as usize) else {
            return;
        };
        let (mut data, mut counter, mut out) = (
            b.zeros_of::<u32>(blocks as usize),
            b.zeros_of::<u32>(1),
            b.zeros_of::<u32>(blocks as usize),
        );
        b.stream
            .launch(
                &b.kernel::<fence_grid_barrier>(),
                one_thread_blocks(blocks),
                (&mut data, &mut counter, &mut out, SEQ_CST),
            )
            .expect("launch");
        check("fence + relaxed grid barrier", b.sync(), b.sms(), &[]);
        let want: Vec<u32> = (0..blocks).map(|i| (i + 1) % blocks + 1).collect();
        assert_eq!(out.to_vec(&b.stream).unwrap(), want);
    }

    /// `lagging_consumer` with `store_code`, on one worker (the consumer,
    /// the last block, runs after every producer published).
    fn lagging(
        make: MakeContext,
        blocks: u32,
        store_code: u32,
    ) -> Option<(vigil::Result<()>, usize)> {
        let b = Bench::new(make, 1)?;
        let n = blocks as usize;
        let (mut tiles, mut flags, mut out) =
            (b.zeros_of::<u32>(n), b.zeros_of::<u32>(n), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<lagging_consumer>(),
                one_thread_blocks(blocks),
                (&mut tiles, &mut flags, &mut out, store_code),
            )
            .expect("launch");
        let verdict = b.sync();
        assert_eq!(out.to_vec(&b.stream).unwrap(), [(blocks - 1) * blocks / 2]);
        Some((verdict, b.sms()))
    }

    pub fn lagging_consumer_of_producers(make: MakeContext, blocks: u32) {
        let Some((out, w)) = lagging(make, blocks, RELEASE) else {
            return;
        };
        check("lagging consumer", out, w, &[]);
    }

    pub fn lagging_consumer_relaxed_stores(make: MakeContext, blocks: u32) {
        let Some((out, w)) = lagging(make, blocks, 0) else {
            return;
        };
        check(
            "lagging consumer, relaxed flags",
            out,
            w,
            &[(RAW, "lag-read", "lag-tile")],
        );
    }

    fn mixed(
        make: MakeContext,
        blocks: u32,
        same_width: u32,
    ) -> Option<(vigil::Result<()>, usize)> {
        let b = Bench::new(make, 1)?;
        let mut data = b.zeros_of::<u64>(1);
        b.stream
            .launch(
                &b.kernel::<mixed_width_atomics>(),
                one_thread_blocks(blocks),
                (&mut data, same_width),
            )
            .expect("launch");
        let verdict = b.sync();
        let v = data.to_vec(&b.stream).unwrap()[0];
        let (wide, narrow) = if same_width != 0 {
            (u64::from(blocks), 0)
        } else {
            (u64::from(blocks / 2), u64::from(blocks / 2))
        };
        assert_eq!(v, wide + (narrow << 32));
        Some((verdict, b.sms()))
    }

    pub fn mixed_width_atomics_race(make: MakeContext, blocks: u32) {
        let Some((out, w)) = mixed(make, blocks, 0) else {
            return;
        };
        check(
            "u64 and u32 atomics on overlapping bytes",
            out,
            w,
            &[
                (SIZE, "mixed-u32", "mixed-u64"),
                (SIZE, "mixed-u64", "mixed-u32"),
            ],
        );
    }

    pub fn same_width_atomics_do_not(make: MakeContext, blocks: u32) {
        let Some((out, w)) = mixed(make, blocks, 1) else {
            return;
        };
        check("u64 atomics only", out, w, &[]);
    }

    /// `write_own_element` launched with the same grid on the bench's
    /// stream and then on a second stream, which waits for an event
    /// recorded after the first launch when `ordered`; the verdict.
    fn same_grid(
        make: MakeContext,
        blocks: u32,
        ordered: bool,
    ) -> Option<(vigil::Result<()>, usize)> {
        let b = Bench::new(make, 2)?;
        let second = vigil::Stream::new(&b.ctx).expect("stream");
        let mut data = b.zeros(blocks as usize);
        let k = b.kernel::<write_own_element>();
        b.stream
            .launch(&k, one_thread_blocks(blocks), (&mut data, 1u32))
            .expect("launch");
        if ordered {
            let done = vigil::Event::new(&b.ctx).expect("event");
            done.record(&b.stream).expect("record");
            second.wait_event(&done).expect("wait");
        }
        second
            .launch(&k, one_thread_blocks(blocks), (&mut data, 2u32))
            .expect("launch");
        Some((b.sync(), b.sms()))
    }

    /// Two launches of one grid on two unordered streams, each block
    /// writing its own element: the same block of each launch races,
    /// whatever the grid (a sanitizer that reuses per-SM or per-slot state
    /// from block to block could take the twin for ordered).
    /// Grids beside `blocks`: a power of two less one, plus one, and a
    /// prime.
    fn same_grids(blocks: u32) -> [u32; 4] {
        [blocks, 63, 65, 67]
    }

    pub fn same_grid_on_two_streams(make: MakeContext, blocks: u32) {
        for grid in same_grids(blocks) {
            let Some((out, sms)) = same_grid(make, grid, false) else {
                return;
            };
            check(
                &format!("same grid of {grid}, two streams"),
                out,
                sms,
                &[(WAW, "own-element", "own-element")],
            );
        }
    }

    /// The same, the second stream waiting for an event recorded after
    /// the first launch: no race.
    pub fn same_grid_on_two_streams_ordered_by_an_event(make: MakeContext, blocks: u32) {
        for grid in same_grids(blocks) {
            let Some((out, sms)) = same_grid(make, grid, true) else {
                return;
            };
            check(&format!("same grid of {grid}, ordered"), out, sms, &[]);
        }
    }

    pub fn wide_access_second(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 1) else { return };
        let n = blocks as usize;
        let (mut data, mut out) = (b.zeros_of::<u32>(2 * n), b.zeros_of::<u32>(n / 2));
        b.stream
            .launch(
                &b.kernel::<wide_access_second>(),
                one_thread_blocks(blocks),
                (&mut data, &mut out),
            )
            .expect("launch");
        let reports = check(
            "16-byte read after a 4-byte write",
            b.sync(),
            b.sms(),
            &[(RAW, "wide-read", "wide-narrow-write")],
        );
        // The reported address is the conflicting element, not the wide
        // access's start; the two accesses are the writer and the reader
        // of that chunk (in either order on a GPU).
        for r in reports.iter() {
            let offset = r.allocation.as_ref().expect("allocation").offset;
            assert_eq!(offset % 16, 8, "{r}");
            let k = offset / 16;
            let prior = r.prior.block.expect("block").x;
            let mut pair = [prior, r.current.block.x];
            pair.sort_unstable();
            assert_eq!(pair, [2 * k as u32, 2 * k as u32 + 1], "{r}");
        }
    }

    pub fn in_place_stencil(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 1) else { return };
        let mut x = b.zeros_of::<u32>(blocks as usize);
        b.stream
            .launch(
                &b.kernel::<in_place_stencil>(),
                one_thread_blocks(blocks),
                (&mut x,),
            )
            .expect("launch");
        // In block order (the CPU), block b + 1 reads what block b wrote,
        // and writes what block b read as its right neighbour; a GPU runs
        // blocks in any order, so the other pairs can come too. A
        // write-after-read report names the neighbour's read, never the
        // writer's own read of its element (`stencil-own`).
        let (in_order, any_order) = (
            [
                (RAW, "stencil-left", "stencil-write"),
                (WAR, "stencil-write", "stencil-right"),
            ],
            [
                (RAW, "stencil-left", "stencil-write"),
                (WAR, "stencil-write", "stencil-right"),
                (RAW, "stencil-right", "stencil-write"),
                (WAR, "stencil-write", "stencil-left"),
            ],
        );
        let reports = if b.ctx.is_cpu() {
            check("in-place stencil", b.sync(), b.sms(), &in_order)
        } else {
            check_among("in-place stencil", b.sync(), b.sms(), &any_order)
        };
        for r in reports.iter() {
            let (cur, prior) = (r.current.block.x, r.prior.block.expect("block").x);
            assert_eq!(cur.abs_diff(prior), 1, "{r}");
        }
    }

    /// The element widths of the coalesced-tile cases: `f32`, `f64` and
    /// `float4` accesses.
    const WIDTHS: [u32; 3] = [4, 8, 16];

    /// One launch of `coalesced_tiles` per entry of `launches`
    /// (`(stride, ops, read_shift)`) on one stream, over `elements`
    /// elements of `width` bytes; returns the verdict, `data`'s words and
    /// `out` (one word a thread).
    fn tiles(
        b: &Bench,
        blocks: u32,
        width: u32,
        elements: usize,
        launches: &[(u32, u32, u32)],
    ) -> (vigil::Result<()>, Vec<u32>, Vec<u32>) {
        let words = width as usize / 4;
        let threads = (blocks * TILE_THREADS) as usize;
        let (mut data, mut out) = (b.zeros_of::<u32>(elements * words), b.zeros_of(threads));
        for &(stride, ops, read_shift) in launches {
            b.stream
                .launch(
                    &b.kernel::<coalesced_tiles>(),
                    LaunchConfig::new(blocks, TILE_THREADS),
                    (&mut data, &mut out, width, stride, ops, read_shift),
                )
                .expect("launch");
        }
        let verdict = b.sync();
        let data = data.to_vec(&b.stream).expect("download");
        (verdict, data, out.to_vec(&b.stream).expect("download"))
    }

    /// The element each report's conflicting byte lies in, checked to be
    /// between two neighbouring blocks and to satisfy `in_overlap`.
    fn check_tile_reports(
        what: &str,
        reports: &vigil::RaceReports,
        width: u32,
        in_overlap: impl Fn(u64) -> bool,
    ) {
        for r in reports.iter() {
            let offset = r.allocation.as_ref().expect("allocation").offset;
            let element = offset / width as u64;
            assert!(in_overlap(element), "{what}: element {element}\n{r}");
            let (cur, prior) = (r.current.block.x, r.prior.block.expect("block").x);
            assert_eq!(cur.abs_diff(prior), 1, "{what}: not neighbours\n{r}");
        }
    }

    /// Every block stores its own tile and reads it back: no race, and
    /// every element holds its index + 1.
    pub fn coalesced_tiles_disjoint(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 2) else { return };
        for width in WIDTHS {
            let n = (blocks * TILE_THREADS) as usize;
            let ops = TILE_WRITE | TILE_READ;
            let (verdict, data, out) = tiles(&b, blocks, width, n, &[(TILE_THREADS, ops, 0)]);
            let what = format!("disjoint {width}-byte tiles");
            check(&what, verdict, b.sms(), &[]);
            let words = width as usize / 4;
            let want: Vec<u32> = (1..=n as u32).collect();
            let firsts: Vec<u32> = data.iter().step_by(words).copied().collect();
            assert_eq!(firsts, want, "{what}: data");
            assert!(
                data.chunks(words).all(|e| e.iter().all(|&w| w == e[0])),
                "{what}"
            );
            assert_eq!(out, want, "{what}: read back");
        }
    }

    /// Tiles a warp apart (a tile-size bug): each block's second warp
    /// stores over its neighbour's first warp, whole lines of it.
    pub fn coalesced_tiles_overlapping_by_a_warp(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 2) else { return };
        let half = TILE_THREADS / 2;
        for width in WIDTHS {
            let n = ((blocks + 1) * half) as usize;
            let (verdict, ..) = tiles(&b, blocks, width, n, &[(half, TILE_WRITE, 0)]);
            let what = format!("{width}-byte tiles overlapping by a warp");
            let reports = check(
                &what,
                verdict,
                b.sms(),
                &[(WAW, "tile-write", "tile-write")],
            );
            let overlap = half as u64..(blocks * half) as u64;
            check_tile_reports(&what, &reports, width, |e| overlap.contains(&e));
        }
    }

    /// Tiles one element too close: each block's last element is its
    /// neighbour's first, and no line of a tile but its first is aligned.
    pub fn coalesced_tiles_off_by_one(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 2) else { return };
        let stride = TILE_THREADS - 1;
        for width in WIDTHS {
            let n = (blocks * stride + 1) as usize;
            let (verdict, ..) = tiles(&b, blocks, width, n, &[(stride, TILE_WRITE, 0)]);
            let what = format!("{width}-byte tiles one element too close");
            let reports = check(
                &what,
                verdict,
                b.sms(),
                &[(WAW, "tile-write", "tile-write")],
            );
            let stride = stride as u64;
            check_tile_reports(&what, &reports, width, |e| e > 0 && e % stride == 0);
        }
    }

    /// Every block stores its tile, then reads the next block's with no
    /// synchronisation between them.
    pub fn coalesced_tiles_reading_the_next(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 2) else { return };
        let ops = TILE_WRITE | TILE_READ;
        for width in WIDTHS {
            let n = ((blocks + 1) * TILE_THREADS) as usize;
            let launch = [(TILE_THREADS, ops, TILE_THREADS)];
            let (verdict, ..) = tiles(&b, blocks, width, n, &launch);
            let what = format!("{width}-byte tiles reading the next");
            let reports = check(&what, verdict, b.sms(), &[(RAW, "tile-read", "tile-write")]);
            let tiles_written = (blocks * TILE_THREADS) as u64;
            let first_tile = TILE_THREADS as u64;
            check_tile_reports(&what, &reports, width, |e| {
                (first_tile..tiles_written).contains(&e)
            });
        }
    }

    /// The fix: the stores in one launch, the reads of the next tile in
    /// the next launch on the same stream. No race, and every block reads
    /// its neighbour's values.
    pub fn coalesced_tiles_next_read_by_a_later_launch(make: MakeContext, blocks: u32) {
        let Some(b) = Bench::new(make, 2) else { return };
        let t = TILE_THREADS;
        for width in WIDTHS {
            let n = ((blocks + 1) * t) as usize;
            let launches = [(t, TILE_WRITE, 0), (t, TILE_READ, t)];
            let (verdict, _, out) = tiles(&b, blocks, width, n, &launches);
            let what = format!("{width}-byte tiles, the next read a launch later");
            check(&what, verdict, b.sms(), &[]);
            let written = blocks * t;
            let want: Vec<u32> = (t..written + t)
                .map(|i| if i < written { i + 1 } else { 0 })
                .collect();
            assert_eq!(out, want, "{what}: read back");
        }
    }

    /// Words of each buffer [`freed_buffers_give_their_records_back`]
    /// fills: half the default record pool (65,536 records).
    const FLAGS_PER_BUFFER: usize = 1 << 15;

    /// One context frees and allocates buffers whose every word takes a
    /// record of the sanitizer's pool (a release head each), four times
    /// the pool's worth in all: each launch is race-free and every flag
    /// set, because a freed buffer gives its records back (without that,
    /// the third buffer would find the pool full: a sanitizer error).
    pub fn freed_buffers_give_their_records_back(make: MakeContext) {
        let Some(b) = Bench::new(make, 2) else {
            return;
        };
        let threads = 256;
        for round in 0..8 {
            let mut flags = b.zeros_of::<u32>(FLAGS_PER_BUFFER);
            b.stream
                .launch(
                    &b.kernel::<publish_each>(),
                    LaunchConfig::new(FLAGS_PER_BUFFER.div_ceil(threads) as u32, threads as u32),
                    (&mut flags,),
                )
                .expect("launch");
            check(&format!("flags, buffer {round}"), b.sync(), b.sms(), &[]);
            let set = flags.to_vec(&b.stream).expect("download");
            assert!(
                set.iter().all(|&f| f == 1),
                "buffer {round}: a flag not set"
            );
        }
    }

    /// Words [`reads_past_the_record_pool_are_counted`] reads: half again
    /// the default record pool (65,536 records).
    const READ_BY_EVERY_BLOCK: usize = 3 << 15;

    /// Eight blocks each read every word of a buffer larger than the
    /// record pool: no race, and the words past the pool, kept with their
    /// newest clocks only, are counted as history lost (a line of the
    /// reports), once: the next collection counts nothing.
    pub fn reads_past_the_record_pool_are_counted(make: MakeContext) {
        let Some(b) = Bench::new(make, 2) else {
            return;
        };
        let (blocks, threads) = (8u32, 256u32);
        let mut data = b.zeros(READ_BY_EVERY_BLOCK);
        let mut sums = b.zeros((blocks * threads) as usize);
        b.stream
            .launch(
                &b.kernel::<every_block_reads_all>(),
                LaunchConfig::new(blocks, threads),
                (&mut data, &mut sums),
            )
            .expect("launch");
        let reports = b.wait_and_take_reports();
        assert_eq!(reports.len(), 0, "{reports}");
        assert!(reports.history_lost() > 0, "{reports}");
        assert!(
            reports
                .to_string()
                .contains("lost part of their word's history"),
            "{reports}"
        );
        assert!(reports.to_json().contains("\"history_lost\":"), "{reports}");
        let again = b.ctx.take_reports();
        assert_eq!(again.history_lost(), 0, "counted twice: {again}");
        assert!(sums.to_vec(&b.stream).unwrap().iter().all(|&s| s == 0));
    }

    /// `locked_update` with the lock taken by ordering code `take`, given
    /// back by `give`, and `fences`; the verdict. When `counts` is set the
    /// lock was meant to work, and every word must count every block.
    fn locked(
        make: MakeContext,
        blocks: u32,
        (take, give, fences): (u32, u32, u32),
        counts: bool,
    ) -> Option<(vigil::Result<()>, usize)> {
        // Every block's holder joins the last holder's release, and every
        // poller joins each new one once (`num_threads` entries each, 1 ms
        // on an H100): sanitized there, 256 blocks took 2 to 20 s, 1,024
        // blocks 34 s (relaxed) and far longer with acquires. The
        // lock is taken by at most 256 blocks here unless
        // VIGIL_SPIN_LOCK_BLOCKS raises the bound.
        let blocks = bounded_blocks(blocks, "VIGIL_SPIN_LOCK_BLOCKS", 256);
        let b = Bench::new(make, 2)?;
        let (mut lock, mut data) = (
            b.zeros_of::<u32>(1),
            b.zeros_of::<u32>(LOCK_THREADS as usize),
        );
        b.stream
            .launch(
                &b.kernel::<locked_update>(),
                LaunchConfig::new(blocks, LOCK_THREADS),
                (&mut lock, &mut data, take, give, fences),
            )
            .expect("launch");
        let verdict = b.sync();
        if counts {
            let data = data.to_vec(&b.stream).expect("download");
            assert!(data.iter().all(|&v| v == blocks), "lost updates: {data:?}");
        }
        Some((verdict, b.sms()))
    }

    /// The races a broken lock lets through: a block's read or write of a
    /// word against another block's write of it.
    const UNLOCKED: [(vigil::ReportKind, &str, &str); 2] = [
        (RAW, "locked-read", "locked-write"),
        (WAW, "locked-write", "locked-write"),
    ];

    /// Taken by an acquire compare-exchange, given back by a release
    /// store: every critical section happens before the next.
    pub fn spin_lock_acquire_release(make: MakeContext, blocks: u32) {
        let Some((out, w)) = locked(make, blocks, (ACQUIRE, RELEASE, 0), true) else {
            return;
        };
        check("spin lock, acquire and release", out, w, &[]);
    }

    /// Relaxed atomics with a fence after the take and before the give
    /// (CUDA's `__threadfence()` lock): as ordered as the above.
    pub fn spin_lock_relaxed_with_fences(make: MakeContext, blocks: u32) {
        let Some((out, w)) = locked(make, blocks, (RELAXED, RELAXED, 1), true) else {
            return;
        };
        check("spin lock, relaxed with fences", out, w, &[]);
    }

    /// Relaxed atomics and no fence: the lock excludes, but orders nothing.
    pub fn spin_lock_relaxed(make: MakeContext, blocks: u32) {
        let Some((out, w)) = locked(make, blocks, (RELAXED, RELAXED, 0), false) else {
            return;
        };
        check_among("spin lock, relaxed", out, w, &UNLOCKED);
    }

    /// An acquire take but a relaxed give: nothing is released.
    pub fn spin_lock_without_release(make: MakeContext, blocks: u32) {
        let Some((out, w)) = locked(make, blocks, (ACQUIRE, RELAXED, 0), false) else {
            return;
        };
        check_among("spin lock without release", out, w, &UNLOCKED);
    }

    /// A release give but a relaxed take: nothing is acquired.
    pub fn spin_lock_without_acquire(make: MakeContext, blocks: u32) {
        let Some((out, w)) = locked(make, blocks, (RELAXED, RELEASE, 0), false) else {
            return;
        };
        check_among("spin lock without acquire", out, w, &UNLOCKED);
    }

    /// The side of a 2-D block of `transpose_in_place`.
    const TILE_SIDE: u32 = 16;

    /// `transpose_in_place` of a square matrix `m[i] = i` on a square grid
    /// of about `blocks` 16 x 16 blocks (the side one less than a multiple
    /// of 16, so the edge blocks are partly idle); the verdict and the
    /// matrix after.
    fn transpose(
        make: MakeContext,
        blocks: u32,
        swap: u32,
    ) -> Option<(vigil::Result<()>, Vec<u32>, usize, usize)> {
        let b = Bench::new(make, 2)?;
        let side = (blocks as f64).sqrt() as u32;
        let n = side * TILE_SIDE - 1;
        let init: Vec<u32> = (0..n * n).collect();
        let mut m = vigil::DeviceBuffer::from_slice(&b.stream, &init).expect("buffer");
        b.stream
            .launch(
                &b.kernel::<transpose_in_place>(),
                LaunchConfig::new((side, side), (TILE_SIDE, TILE_SIDE)),
                (&mut m, n, swap),
            )
            .expect("launch");
        let verdict = b.sync();
        let m = m.to_vec(&b.stream).expect("download");
        Some((verdict, m, n as usize, b.sms()))
    }

    /// The naive in-place transpose: each element's reader and writer
    /// race, between blocks and inside the diagonal blocks.
    pub fn transpose_in_place_naive(make: MakeContext, blocks: u32) {
        let Some((verdict, _, n, w)) = transpose(make, blocks, 0) else {
            return;
        };
        let reports = check(
            "naive in-place transpose",
            verdict,
            w,
            &[(RAW, "naive-read", "naive-write")],
        );
        // Each report is about an element off the diagonal, between the
        // thread of that element, which reads it, and the thread of its
        // mirror image, which writes it (the buffer keeps the first
        // reports, so which blocks they come from depends on the order
        // the blocks ran in).
        for r in reports.iter() {
            let offset = r.allocation.as_ref().expect("allocation").offset as u32;
            let (row, col) = (offset / 4 / n as u32, offset / 4 % n as u32);
            assert_ne!(row, col, "a diagonal element\n{r}");
            let global = |b: vigil::device::Dim3, t: vigil::device::Dim3| {
                (b.x * TILE_SIDE + t.x, b.y * TILE_SIDE + t.y)
            };
            let cur = global(r.current.block, r.current.thread);
            let prior = global(
                r.prior.block.expect("block"),
                r.prior.thread.expect("thread"),
            );
            let mut pair = [cur, prior];
            pair.sort_unstable();
            let mut want = [(col, row), (row, col)];
            want.sort_unstable();
            assert_eq!(pair, want, "not the element's reader and writer\n{r}");
        }
    }

    /// The fix: one thread swaps each pair. No race, and the matrix is
    /// transposed.
    pub fn transpose_in_place_by_swaps(make: MakeContext, blocks: u32) {
        let Some((verdict, m, n, w)) = transpose(make, blocks, 1) else {
            return;
        };
        check("in-place transpose by swaps", verdict, w, &[]);
        for (i, &v) in m.iter().enumerate() {
            let (row, col) = (i / n, i % n);
            assert_eq!(v as usize, col * n + row, "element ({col}, {row})");
        }
    }

    /// `chained_scan` with flags published by ordering code `publish`;
    /// the verdict. With `exact`, the sums and every read of `first[0]`
    /// are checked (a working hand-off guarantees them).
    fn chained(
        make: MakeContext,
        blocks: u32,
        publish: u32,
        exact: bool,
    ) -> Option<(vigil::Result<()>, usize)> {
        let b = Bench::new(make, 2)?;
        let n = blocks as usize;
        let (mut ticket, mut flags, mut prefix, mut first, mut out) = (
            b.zeros_of::<u32>(1),
            b.zeros_of::<u32>(n),
            b.zeros_of::<u32>(n),
            b.zeros_of::<u32>(1),
            b.zeros_of::<u32>(2 * n),
        );
        b.stream
            .launch(
                &b.kernel::<chained_scan>(),
                one_thread_blocks(blocks),
                (
                    &mut ticket,
                    &mut flags,
                    &mut prefix,
                    &mut first,
                    &mut out,
                    publish,
                ),
            )
            .expect("launch");
        let verdict = b.sync();
        if exact {
            let out = out.to_vec(&b.stream).expect("download");
            for (p, pair) in out.chunks(2).enumerate() {
                let p = p as u32;
                assert_eq!(pair, [(p + 1) * (p + 2) / 2, 7], "place {p}");
            }
        }
        Some((verdict, b.sms()))
    }

    /// Release stores and acquire loads: every place is ordered after
    /// every place before it, place 0's write of `first[0]` included.
    pub fn chained_scan_release_acquire(make: MakeContext, blocks: u32) {
        let Some((out, w)) = chained(make, blocks, RELEASE, true) else {
            return;
        };
        check("chained scan, release and acquire", out, w, &[]);
    }

    /// Relaxed publishing stores: the flags order nothing, so a place's
    /// reads race with the writes before it in the chain.
    pub fn chained_scan_relaxed_publish(make: MakeContext, blocks: u32) {
        let Some((out, w)) = chained(make, blocks, RELAXED, false) else {
            return;
        };
        check_among(
            "chained scan, relaxed publishing",
            out,
            w,
            &[
                (RAW, "chain-read", "chain-write"),
                (RAW, "chain-first-read", "chain-first-write"),
            ],
        );
    }
}
