//! The race-scenario suite: every case is a real kernel
//! (`vigil_kernels::races`) launched through the public host API on a
//! sanitized context, with its verdict asserted: the exact set of distinct
//! reports, each by kind and both source locations (file and line, found
//! by the `// @marker` comments in `races.rs`), or no report at all.
//!
//! The suite is written once ([`scenarios`]) and instantiated per backend
//! by [`race_scenarios!`]: one line per backend, so backends cannot drift.
//!
//! Most cases run on one CPU worker so that blocks run in index order and
//! the kind of a race (which access came second) is deterministic; every
//! block is its own sanitizer thread whatever the worker count, so races
//! between blocks are seen either way. The
//! persistent-kernel cases use two workers, so the spinning block really
//! waits for a block running beside it.

#[macro_use]
mod common;

/// Instantiates every scenario for one backend: a module `$backend` with
/// one `#[test]` per scenario, each calling `scenarios::<name>($make)`.
macro_rules! race_scenarios {
    ($backend:ident, $make:expr) => {
        mod $backend {
            scenario_tests!($make;
                block_vs_block_raw, block_vs_block_war, block_vs_block_waw,
                disjoint_writes, adjacent_bytes_of_one_word,
                two_kernels_on_one_stream, two_streams_unordered,
                two_streams_ordered_by_an_event, two_streams_ordered_by_host_sync,
                host_sync_after_many_streams,
                release_acquire_device_scope, release_acquire_system_scope,
                relaxed_flag, block_scope_atomics_across_blocks,
                release_without_acquire, acquire_without_release,
                transitive_chain_acquire_release, transitive_chain_middle_does_not_acquire,
                transitive_chain_middle_does_not_release,
                atomic_counters, atomic_and_plain_mixed,
                fences_with_relaxed_atomics, relaxed_atomics_without_fences,
                persistent_spin_release_acquire, persistent_spin_relaxed,
                volatile_flag_between_blocks_with_fences,
                volatile_flag_between_blocks_without_fences,
                volatile_flag_between_warps_with_fences,
                volatile_flag_between_warps_without_fences,
                volatile_beside_volatile, volatile_beside_plain, volatile_beside_atomic,
                report_buffer_overflow, a_reused_buffer_starts_clean,
                two_streams_on_disjoint_halves,
                disjoint_halves_then_a_reader_of_both_unordered,
                disjoint_halves_then_a_reader_of_both_after_an_event,
                read_only_reader_then_an_unordered_writer,
                read_only_reader_then_a_writer_after_an_event,
                partitioned_writers_on_unordered_streams,
                partitioned_writers_ordered_by_an_event);
        }
    };
}

race_scenarios!(cpu, super::common::cpu_context);
race_scenarios!(gpu, super::common::gpu_context);

kernel_file_verdicts!("races.rs", include_str!("../kernels/src/races.rs"));

mod scenarios {
    use super::common::codes::*;
    use super::common::{Bench, MakeContext};
    use super::{check, race};
    use vigil::{DeviceBuffer, LaunchConfig, Stream};
    use vigil_kernels::races::*;

    /// Two one-thread blocks.
    fn two_blocks() -> LaunchConfig {
        LaunchConfig::new(2, 1)
    }

    /// Runs `race_raw`-like kernels of two one-thread blocks on one worker.
    macro_rules! two_block_case {
        ($make:expr, $k:ty, ($($arg:ident),*)) => {{
            let Some(b) = Bench::new($make, 1) else { return };
            $(let mut $arg = b.zeros(1);)*
            b.stream
                .launch(&b.kernel::<$k>(), two_blocks(), ($(&mut $arg,)*))
                .expect("launch");
            b.sync()
        }};
    }

    pub fn block_vs_block_raw(make: MakeContext) {
        let out = two_block_case!(make, race_raw, (data, out));
        check("RAW", out, &[race(RAW, "raw-read", "raw-write")]);
    }

    pub fn block_vs_block_war(make: MakeContext) {
        let out = two_block_case!(make, race_war, (data, out));
        check("WAR", out, &[race(WAR, "war-write", "war-read")]);
    }

    pub fn block_vs_block_waw(make: MakeContext) {
        let out = two_block_case!(make, race_waw, (data));
        check("WAW", out, &[race(WAW, "waw-second", "waw-first")]);
    }

    pub fn disjoint_writes(make: MakeContext) {
        let Some(b) = Bench::new(make, 2) else { return };
        let mut data = b.zeros(256);
        b.stream
            .launch(
                &b.kernel::<disjoint_writes>(),
                LaunchConfig::new(4, 64),
                (&mut data,),
            )
            .expect("launch");
        check("disjoint writes", b.sync(), &[]);
        let want: Vec<u32> = (0..256).collect();
        assert_eq!(data.to_vec(&b.stream).unwrap(), want);
    }

    pub fn adjacent_bytes_of_one_word(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else { return };
        let mut data = DeviceBuffer::<u8>::alloc_zeroed(&b.stream, 4).expect("buffer");
        b.stream
            .launch(
                &b.kernel::<adjacent_bytes>(),
                LaunchConfig::new(4, 1),
                (&mut data,),
            )
            .expect("launch");
        check("adjacent bytes", b.sync(), &[]);
        assert_eq!(data.to_vec(&b.stream).unwrap(), [1, 2, 3, 4]);
    }

    /// `write_one` on `first`, then `read_one` on `second` (after `between`).
    fn write_then_read(
        make: MakeContext,
        between: impl FnOnce(&Bench, &Stream, &Stream),
        same_stream: bool,
    ) -> vigil::Result<()> {
        let Some(b) = Bench::new(make, 1) else {
            return Ok(());
        };
        write_then_read_on(&b, between, same_stream)
    }

    /// [`write_then_read`] on an existing bench.
    fn write_then_read_on(
        b: &Bench,
        between: impl FnOnce(&Bench, &Stream, &Stream),
        same_stream: bool,
    ) -> vigil::Result<()> {
        let other = Stream::new(&b.ctx).expect("stream");
        let second = if same_stream { &b.stream } else { &other };
        let (mut data, mut out) = (b.zeros(1), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<write_one>(),
                LaunchConfig::new(1, 1),
                (&mut data, 5u32),
            )
            .expect("write launch");
        between(b, &b.stream, second);
        second
            .launch(
                &b.kernel::<read_one>(),
                LaunchConfig::new(1, 1),
                (&mut data, &mut out),
            )
            .expect("read launch");
        b.sync()
    }

    pub fn two_kernels_on_one_stream(make: MakeContext) {
        let out = write_then_read(make, |_, _, _| {}, true);
        check("one stream", out, &[]);
    }

    pub fn two_streams_unordered(make: MakeContext) {
        let out = write_then_read(make, |_, _, _| {}, false);
        check(
            "two unordered streams",
            out,
            &[race(RAW, "read-one", "write-one")],
        );
    }

    pub fn two_streams_ordered_by_an_event(make: MakeContext) {
        let out = write_then_read(
            make,
            |_, first, second| {
                let ev = first.record_event().expect("record");
                second.wait_event(&ev).expect("wait");
            },
            false,
        );
        check("streams ordered by an event", out, &[]);
    }

    pub fn two_streams_ordered_by_host_sync(make: MakeContext) {
        let out = write_then_read(
            make,
            |b, _, _| b.sync().expect("nothing races before the sync"),
            false,
        );
        check("streams ordered by host sync", out, &[]);
    }

    /// A host synchronisation orders the work before it however many
    /// streams the context used before (a long-running test process, a
    /// server): 40 streams each run a kernel and are synchronised, then
    /// the ordered write-sync-read of two more streams is race-free.
    pub fn host_sync_after_many_streams(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else {
            return;
        };
        for _ in 0..40 {
            let s = Stream::new(&b.ctx).expect("stream");
            let mut x = b.zeros(1);
            s.launch(
                &b.kernel::<write_one>(),
                LaunchConfig::new(1, 1),
                (&mut x, 1u32),
            )
            .expect("launch");
            b.sync().expect("each stream's own buffer: no race");
        }
        let out = write_then_read_on(&b, |b, _, _| b.sync().expect("no race before"), false);
        check("host sync after 40 streams", out, &[]);
    }

    /// `flag_handoff` with the given codes; returns what `synchronize` said
    /// and checks the value handed off.
    fn handoff(make: MakeContext, store: u32, load: u32, scope: u32) -> vigil::Result<()> {
        let Some(b) = Bench::new(make, 1) else {
            return Ok(());
        };
        let (mut data, mut flag, mut out) = (b.zeros(1), b.zeros(1), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<flag_handoff>(),
                two_blocks(),
                (&mut data, &mut flag, &mut out, store, load, scope),
            )
            .expect("launch");
        let verdict = b.sync();
        assert_eq!(out.to_vec(&b.stream).unwrap(), [42]);
        verdict
    }

    const HANDOFF_RACE: (&str, &str) = ("handoff-read", "handoff-write");

    pub fn release_acquire_device_scope(make: MakeContext) {
        check(
            "release/acquire, device",
            handoff(make, RELEASE, ACQUIRE, DEVICE),
            &[],
        );
    }

    pub fn release_acquire_system_scope(make: MakeContext) {
        check(
            "release/acquire, system",
            handoff(make, RELEASE, ACQUIRE, SYSTEM),
            &[],
        );
    }

    pub fn relaxed_flag(make: MakeContext) {
        let (c, p) = HANDOFF_RACE;
        check(
            "relaxed flag",
            handoff(make, RELAXED, RELAXED, DEVICE),
            &[race(RAW, c, p)],
        );
    }

    pub fn block_scope_atomics_across_blocks(make: MakeContext) {
        let (c, p) = HANDOFF_RACE;
        check(
            "block-scope flag",
            handoff(make, RELEASE, ACQUIRE, BLOCK),
            &[
                race(SCOPE, "handoff-flag-load", "handoff-flag-store"),
                race(RAW, c, p),
            ],
        );
    }

    pub fn release_without_acquire(make: MakeContext) {
        let (c, p) = HANDOFF_RACE;
        check(
            "release without acquire",
            handoff(make, RELEASE, RELAXED, DEVICE),
            &[race(RAW, c, p)],
        );
    }

    pub fn acquire_without_release(make: MakeContext) {
        let (c, p) = HANDOFF_RACE;
        check(
            "acquire without release",
            handoff(make, RELAXED, ACQUIRE, DEVICE),
            &[race(RAW, c, p)],
        );
    }

    fn chain(make: MakeContext, mid_load: u32, mid_store: u32) -> vigil::Result<()> {
        let Some(b) = Bench::new(make, 1) else {
            return Ok(());
        };
        let (mut data, mut flags, mut out) = (b.zeros(1), b.zeros(2), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<transitive_chain>(),
                LaunchConfig::new(3, 1),
                (&mut data, &mut flags, &mut out, mid_load, mid_store),
            )
            .expect("launch");
        let verdict = b.sync();
        assert_eq!(out.to_vec(&b.stream).unwrap(), [7]);
        verdict
    }

    pub fn transitive_chain_acquire_release(make: MakeContext) {
        check(
            "chain, middle acquires and releases",
            chain(make, ACQUIRE, RELEASE),
            &[],
        );
    }

    pub fn transitive_chain_middle_does_not_acquire(make: MakeContext) {
        check(
            "chain, middle does not acquire",
            chain(make, RELAXED, RELEASE),
            &[race(RAW, "chain-read", "chain-write")],
        );
    }

    pub fn transitive_chain_middle_does_not_release(make: MakeContext) {
        check(
            "chain, middle does not release",
            chain(make, ACQUIRE, RELAXED),
            &[race(RAW, "chain-read", "chain-write")],
        );
    }

    pub fn atomic_counters(make: MakeContext) {
        let Some(b) = Bench::new(make, 2) else { return };
        let mut counter = b.zeros(1);
        b.stream
            .launch(
                &b.kernel::<atomic_counter>(),
                LaunchConfig::new(8, 128),
                (&mut counter,),
            )
            .expect("launch");
        check("atomic counters", b.sync(), &[]);
        assert_eq!(counter.to_vec(&b.stream).unwrap(), [1024]);
    }

    pub fn atomic_and_plain_mixed(make: MakeContext) {
        let out = two_block_case!(make, atomic_plain_mix, (data));
        check(
            "atomic and plain",
            out,
            &[race(MIX, "mix-plain", "mix-atomic")],
        );
    }

    fn fenced(make: MakeContext, fences: u32) -> vigil::Result<()> {
        let Some(b) = Bench::new(make, 1) else {
            return Ok(());
        };
        let (mut data, mut flag, mut out) = (b.zeros(1), b.zeros(1), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<fenced_relaxed>(),
                two_blocks(),
                (&mut data, &mut flag, &mut out, fences),
            )
            .expect("launch");
        let verdict = b.sync();
        assert_eq!(out.to_vec(&b.stream).unwrap(), [9]);
        verdict
    }

    pub fn fences_with_relaxed_atomics(make: MakeContext) {
        check(
            "release fence + relaxed store / relaxed load + acquire fence",
            fenced(make, 1),
            &[],
        );
    }

    pub fn relaxed_atomics_without_fences(make: MakeContext) {
        check(
            "relaxed atomics without fences",
            fenced(make, 0),
            &[race(RAW, "fence-read", "fence-write")],
        );
    }

    /// `persistent_spin` on two workers: block 1 spins while block 0 runs.
    fn persistent(make: MakeContext, store: u32, load: u32) -> vigil::Result<()> {
        const THREADS: u32 = 64;
        let Some(b) = Bench::new(make, 2) else {
            return Ok(());
        };
        let n = THREADS as usize;
        let (mut data, mut flag, mut out) = (b.zeros(n), b.zeros(1), b.zeros(n));
        b.stream
            .launch(
                &b.kernel::<persistent_spin>(),
                LaunchConfig::new(2, THREADS),
                (&mut data, &mut flag, &mut out, store, load),
            )
            .expect("launch");
        let verdict = b.sync();
        let want: Vec<u32> = (1..=THREADS).collect();
        assert_eq!(out.to_vec(&b.stream).unwrap(), want);
        verdict
    }

    pub fn persistent_spin_release_acquire(make: MakeContext) {
        check(
            "persistent kernel, release/acquire",
            persistent(make, RELEASE, ACQUIRE),
            &[],
        );
    }

    pub fn persistent_spin_relaxed(make: MakeContext) {
        check(
            "persistent kernel, relaxed",
            persistent(make, RELAXED, RELAXED),
            &[race(RAW, "persist-read", "persist-write")],
        );
    }

    /// `volatile_flag` with or without fences, between the blocks of one
    /// worker or between two warps of one block; the payload it read.
    fn volatile_handoff(make: MakeContext, fences: u32, same_block: u32) -> vigil::Result<()> {
        let Some(b) = Bench::new(make, 1) else {
            return Ok(());
        };
        let config = if same_block != 0 {
            LaunchConfig::new(1, 64)
        } else {
            LaunchConfig::new(2, 1)
        };
        let (mut data, mut flag, mut out) = (b.zeros(1), b.zeros(1), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<volatile_flag>(),
                config,
                (&mut data, &mut flag, &mut out, fences, same_block),
            )
            .expect("launch");
        let verdict = b.sync();
        if fences != 0 {
            // Without them the GPU may make the flag visible first.
            assert_eq!(out.to_vec(&b.stream).unwrap(), [9], "the payload");
        }
        verdict
    }

    pub fn volatile_flag_between_blocks_with_fences(make: MakeContext) {
        let out = volatile_handoff(make, 1, 0);
        check("volatile flag and fences, two blocks", out, &[]);
    }

    pub fn volatile_flag_between_blocks_without_fences(make: MakeContext) {
        let out = volatile_handoff(make, 0, 0);
        let payload = race(RAW, "volatile-payload-read", "volatile-payload-write");
        check("volatile flag, no fences, two blocks", out, &[payload]);
    }

    pub fn volatile_flag_between_warps_with_fences(make: MakeContext) {
        let out = volatile_handoff(make, 1, 1);
        check("volatile flag and fences, two warps", out, &[]);
    }

    pub fn volatile_flag_between_warps_without_fences(make: MakeContext) {
        let out = volatile_handoff(make, 0, 1);
        let payload = race(RAW, "volatile-payload-read", "volatile-payload-write");
        check("volatile flag, no fences, two warps", out, &[payload]);
    }

    /// `volatile_beside` in `mode` on one worker (block 0 first).
    fn beside(make: MakeContext, mode: u32) -> vigil::Result<()> {
        let Some(b) = Bench::new(make, 1) else {
            return Ok(());
        };
        let (mut flag, mut out) = (b.zeros(1), b.zeros(1));
        b.stream
            .launch(
                &b.kernel::<volatile_beside>(),
                two_blocks(),
                (&mut flag, &mut out, mode),
            )
            .expect("launch");
        b.sync()
    }

    pub fn volatile_beside_volatile(make: MakeContext) {
        check("volatile store, volatile load", beside(make, 0), &[]);
    }

    pub fn volatile_beside_plain(make: MakeContext) {
        let mix = race(MIX, "beside-volatile-load", "beside-plain-store");
        check("plain store, volatile load", beside(make, 1), &[mix]);
    }

    pub fn volatile_beside_atomic(make: MakeContext) {
        check("atomic add, volatile load", beside(make, 2), &[]);
    }

    pub fn report_buffer_overflow(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else { return };
        // 256 threads x 16 elements, written by both blocks: 4,096 races,
        // more than the report buffer holds.
        let mut data = b.zeros(4096);
        b.stream
            .launch(
                &b.kernel::<many_races>(),
                LaunchConfig::new(2, 256),
                (&mut data, 16u32),
            )
            .expect("launch");
        let reports = match b.sync() {
            Err(vigil::Error::Races(r)) => r,
            other => panic!("expected races, got {other:?}"),
        };
        assert!(reports.dropped() > 0, "no overflow counted:\n{reports}");
        assert_eq!(reports.len(), 1, "one distinct race expected:\n{reports}");
        let r = &reports.reports()[0];
        assert_eq!(r.kind, WAW);
        let line = super::line_of("many-write");
        assert_eq!(r.current.location.as_ref().map(|l| l.line), Some(line));
        assert_eq!(r.prior.location.as_ref().map(|l| l.line), Some(line));
        let text = reports.to_string();
        assert!(
            text.contains("could not be recorded"),
            "the overflow is not said:\n{text}"
        );
        assert!(
            u64::from(1u32) + reports.duplicates() + reports.dropped() >= 4096,
            "races went uncounted:\n{text}"
        );
        // The context stays usable and clean afterwards.
        let mut fresh = b.zeros(64);
        b.stream
            .launch(
                &b.kernel::<disjoint_writes>(),
                LaunchConfig::new(1, 64),
                (&mut fresh,),
            )
            .expect("launch after the overflow");
        check("after the overflow", b.sync(), &[]);
    }

    /// A buffer freed and allocated again at the same address must not
    /// inherit the old buffer's shadow: a read on an unordered stream
    /// after the reallocation races with nothing.
    pub fn a_reused_buffer_starts_clean(make: MakeContext) {
        let Some(b) = Bench::new(make, 1) else { return };
        let other = Stream::new(&b.ctx).expect("stream");
        let mut out = b.zeros(1);
        let mut data = b.zeros(1);
        let old = data.device_ptr();
        b.stream
            .launch(
                &b.kernel::<write_one>(),
                LaunchConfig::new(1, 1),
                (&mut data, 5u32),
            )
            .expect("write launch");
        drop(data);
        let mut data = b.zeros(1);
        // Without the reuse the case proves nothing.
        if data.device_ptr() != old {
            eprintln!("the allocator did not reuse the address; nothing to check");
            return;
        }
        other
            .launch(
                &b.kernel::<read_one>(),
                LaunchConfig::new(1, 1),
                (&mut data, &mut out),
            )
            .expect("read launch");
        check("a reused buffer", b.sync(), &[]);
    }

    /// Elements of the buffer the disjoint-halves cases split: four times
    /// a launch's threads, so that the grid-stride loops go round, and
    /// fewer racy words than the report buffer holds.
    const HALVES_LEN: usize = 1024;

    /// Two streams each fill one half of a buffer (`split_at_mut`), with
    /// nothing ordering them; then `between` runs and, when `reader` is
    /// set, a kernel on the first stream reads the whole buffer. Returns
    /// the verdict and what the reader wrote (`data[i] + 1`).
    fn disjoint_halves(
        make: MakeContext,
        between: impl FnOnce(&Stream, &Stream),
        reader: bool,
    ) -> Option<(vigil::Result<()>, Vec<u32>)> {
        let b = Bench::new(make, 2)?;
        let other = Stream::new(&b.ctx).expect("stream");
        let (mut data, mut out) = (b.zeros(HALVES_LEN), b.zeros(HALVES_LEN));
        let (low, high) = data
            .as_slice_mut()
            .split_at_mut(HALVES_LEN / 2)
            .expect("split");
        let fill = b.kernel::<fill_all>();
        let grid = LaunchConfig::new(2, 128);
        b.stream.launch(&fill, grid, (low, 1u32)).expect("launch");
        other.launch(&fill, grid, (high, 2u32)).expect("launch");
        between(&b.stream, &other);
        if reader {
            b.stream
                .launch(&b.kernel::<add_one>(), grid, (&data, &mut out))
                .expect("launch");
        }
        let verdict = b.sync();
        Some((verdict, out.to_vec(&b.stream).expect("download")))
    }

    /// Two unordered streams writing disjoint halves of one buffer: no
    /// race (the shadow is exact to the byte, not to the allocation).
    pub fn two_streams_on_disjoint_halves(make: MakeContext) {
        let Some((verdict, _)) = disjoint_halves(make, |_, _| {}, false) else {
            return;
        };
        check("two streams on disjoint halves", verdict, &[]);
    }

    /// A reader of the whole buffer on the first stream, unordered with
    /// the second: it races with the second half's writer only.
    pub fn disjoint_halves_then_a_reader_of_both_unordered(make: MakeContext) {
        let Some((verdict, _)) = disjoint_halves(make, |_, _| {}, true) else {
            return;
        };
        let half = (HALVES_LEN / 2 * 4) as u64;
        if let Err(vigil::Error::Races(reports)) = &verdict {
            for r in reports.iter() {
                let offset = r.allocation.as_ref().expect("allocation").offset;
                assert!(offset >= half, "a race reported in the ordered half:\n{r}");
            }
        }
        check(
            "a reader of both halves, unordered",
            verdict,
            &[race(RAW, "add-one-read", "fill-all")],
        );
    }

    /// The fix: the first stream waits for an event the second records
    /// after its fill. No race, and the reader sees both halves.
    pub fn disjoint_halves_then_a_reader_of_both_after_an_event(make: MakeContext) {
        let wait = |first: &Stream, second: &Stream| {
            let ev = second.record_event().expect("record");
            first.wait_event(&ev).expect("wait");
        };
        let Some((verdict, out)) = disjoint_halves(make, wait, true) else {
            return;
        };
        check("a reader of both halves after an event", verdict, &[]);
        let half = HALVES_LEN / 2;
        assert!(out[..half].iter().all(|&v| v == 2), "first half");
        assert!(out[half..].iter().all(|&v| v == 3), "second half");
    }

    /// A launch reads `data` through a shared borrow (read-only for it)
    /// while, with `ordered`, a second stream waits for it by an event and
    /// then overwrites `data`. The read-only reads of the first launch
    /// must still be seen by a later launch's writes.
    fn read_only_then_writer(make: MakeContext, ordered: bool) -> Option<vigil::Result<()>> {
        let b = Bench::new(make, 2)?;
        let other = Stream::new(&b.ctx).expect("stream");
        let (mut data, mut out) = (b.zeros(HALVES_LEN), b.zeros(HALVES_LEN));
        let grid = LaunchConfig::new(2, 128);
        b.stream
            .launch(&b.kernel::<add_one>(), grid, (&data, &mut out))
            .expect("launch");
        if ordered {
            let ev = b.stream.record_event().expect("record");
            other.wait_event(&ev).expect("wait");
        }
        other
            .launch(&b.kernel::<fill_all>(), grid, (&mut data, 7u32))
            .expect("launch");
        Some(b.sync())
    }

    /// Unordered: every word is a write-after-read race.
    pub fn read_only_reader_then_an_unordered_writer(make: MakeContext) {
        let Some(verdict) = read_only_then_writer(make, false) else {
            return;
        };
        check(
            "a read-only reader, then an unordered writer",
            verdict,
            &[race(WAR, "fill-all", "add-one-read")],
        );
    }

    /// Ordered by an event: no race.
    pub fn read_only_reader_then_a_writer_after_an_event(make: MakeContext) {
        let Some(verdict) = read_only_then_writer(make, true) else {
            return;
        };
        check(
            "a read-only reader, then a writer after an event",
            verdict,
            &[],
        );
    }

    /// Two launches write every element of one buffer through a
    /// partition (each thread its own element, proven disjoint within
    /// each launch) on two streams, with `ordered`, the second waiting
    /// for the first by an event. The partition says nothing about other
    /// launches: unordered, they race.
    fn partitioned_writers(make: MakeContext, ordered: bool) -> Option<vigil::Result<()>> {
        let b = Bench::new(make, 2)?;
        let other = Stream::new(&b.ctx).expect("stream");
        let mut data = b.zeros(HALVES_LEN);
        let fill = b.kernel::<fill_own>();
        let grid = LaunchConfig::for_num_elems(HALVES_LEN, 128);
        b.stream
            .launch(&fill, grid, (&mut data, 1u32))
            .expect("launch");
        if ordered {
            let ev = b.stream.record_event().expect("record");
            other.wait_event(&ev).expect("wait");
        }
        other
            .launch(&fill, grid, (&mut data, 2u32))
            .expect("launch");
        Some(b.sync())
    }

    /// Unordered: every element is a write-after-write race.
    pub fn partitioned_writers_on_unordered_streams(make: MakeContext) {
        let Some(verdict) = partitioned_writers(make, false) else {
            return;
        };
        check(
            "partitioned writers on unordered streams",
            verdict,
            &[race(WAW, "fill-own", "fill-own")],
        );
    }

    /// Ordered by an event: no race.
    pub fn partitioned_writers_ordered_by_an_event(make: MakeContext) {
        let Some(verdict) = partitioned_writers(make, true) else {
            return;
        };
        check("partitioned writers ordered by an event", verdict, &[]);
    }
}
