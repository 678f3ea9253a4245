//! [`GpuSanitizer`]: the [`Sanitizer`] of sanitized entries.
//!
//! Every hook reads its CTA's state from `.shared` memory, skips
//! addresses outside the managed half at once (local, shared, foreign
//! memory: never dereferenced) and runs the race engine
//! (`vigil_shared::race`). The commonest access, a whole warp's coalesced
//! load or store of whole lines (`f32`, `f64` or `float4` per lane), is
//! recognised inline at the site and takes the line hook
//! ([`check_line`]): the lanes of each line are one access of the CTA,
//! checked by their lowest lane against the line's header. Lanes of one
//! warp making the very same plain access (a value every lane loads) are
//! checked once; every other access is checked word by word by its lane.
//! An atomic several lanes make on one word is checked once, its leader
//! holding the word's record while every lane performs its operation.

use core::panic::Location;

use vigil_shared::abi::{AccessSite, RaceReport};
use vigil_shared::gpu::{
    GpuReportRecord, GpuRuntime, PriorRecord, HOST_SITE_TAG, RANGE_UNIT_BYTES,
};
use vigil_shared::race::atomic::atomic;
use vigil_shared::race::check::RaceFound;
use vigil_shared::race::desc::{AccessDesc, SiteLanes, SiteWord};
use vigil_shared::race::line::{
    access_line, line_fast, line_rest, LineAccess, LineFast, LineOutcome, LINE_BYTES,
};
use vigil_shared::{AccessKind, Ordering, Scope};

use super::block_table::BlockTable;
use super::cta::{lane, linear_block, note_general_path, CtaState};
use super::memory::GpuMemory;
use super::warp::{atomic_keys, Group};
use crate::arch::ptx as arch;
use crate::sanitizer::{AtomicAccess, Sanitizer};
use vigil_shared::block_line::LineStep;
use vigil_shared::copies_in_flight::InFlightCopy;

/// The GPU race sanitizer: the type sanitized entry points run their body
/// with (`name::<GpuSanitizer>`). Zero-sized; its state is the CTA's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuSanitizer;

/// The side-table and grouping name of a kernel access site.
#[inline(always)]
fn location_of(loc: &'static Location<'static>) -> u64 {
    loc as *const Location<'static> as u64
}

/// The site word of an access by `thread` at `location` covering `lanes`.
#[inline(always)]
fn site_word(st: &CtaState, location: u64, thread: u32, lanes: SiteLanes) -> SiteWord {
    SiteWord::new(st.tid, location, thread, lanes)
}

#[inline(always)]
fn check_access(addr: u64, size: u32, write: bool, loc: &'static Location<'static>) {
    let location = location_of(loc);
    if warp_line(addr, size, write, location) {
        // `size` is the site's constant: one arm is left.
        match size {
            4 => check_line::<4>(addr, write, location, (0, 0)),
            8 => check_line::<8>(addr, write, location, (0, 0)),
            _ => check_line::<16>(addr, write, location, (0, 0)),
        }
    } else {
        check_plain(addr, size, write, location, (0, 0));
    }
}

/// The line hook's test, inlined at every plain access site: the whole
/// warp makes this site's accesses of 4, 8 or 16 bytes together, lane `i`
/// at `base + i * size` from a line's first byte (a coalesced load or
/// store of `f32`s, `f64`s or `float4`s: one, two or four whole lines). A
/// handful of instructions; any other access takes [`check_plain`].
#[inline(always)]
fn warp_line(addr: u64, size: u32, write: bool, location: u64) -> bool {
    const WARP: u32 = u32::MAX;
    if !matches!(size, 4 | 8 | 16) || arch::active_mask() != WARP {
        return false;
    }
    let base = addr.wrapping_sub(u64::from(arch::lane_id() * size));
    // A `Location` is 8-aligned: its low bit can carry the kind. Lanes of
    // two sites the compiler merged into one instruction differ here.
    let site = arch::match_any_u64(WARP, location | u64::from(write));
    let start = arch::match_any_u64(WARP, base);
    // `base` is the same on every lane: so is the alignment test.
    site & start == WARP && base % LINE_BYTES == 0
}

/// Whether a read at `addr` of `size` bytes lies in one of the launch's
/// read-only views.
#[inline(always)]
fn read_only(st: &CtaState, addr: u64, size: u32, write: bool) -> bool {
    !write && st.read_only.covers(addr, u64::from(size))
}

/// The line hook: a whole warp's accesses of `SIZE` bytes tiling whole
/// lines in lane order ([`warp_line`]). Each line's lanes are one access
/// of the CTA: their leader checks the line's header; a split line is
/// checked lane by lane. The same-block half records the line in the
/// CTA's table (a kernel's access; a host copy's has no block). One copy
/// per access size, so that the lanes' layout is constant in each.
///
/// Inlined at the site, so that the lanes that only wait for their
/// leader make no call: a call the whole warp makes has every lane save
/// the registers the call ABI keeps (about 150 bytes each, to local
/// memory) on every access. The leader's work is a call it makes alone
/// ([`line_leader`]); the same-block half ([`check_block`]) is a call
/// the whole warp makes, skipped for a read of the launch's read-only
/// memory (which no thread of it writes) and an access to a thread-owned
/// partition (which only its owner touches, `vigil_shared::read_only`).
/// What is inlined at every site stays small, since the driver compiles
/// it into every sanitized entry.
#[inline(always)]
fn check_line<const SIZE: u32>(addr: u64, write: bool, location: u64, host_at: (u32, u32)) {
    let per = SIZE / 4;
    let group = Group::line_lanes(32 / per);
    let mut outcome = LeaderBits::CLEAN;
    if group.is_leader() {
        outcome = line_leader::<SIZE>(addr, write, location, host_at);
    }
    let outcome = group.leader_bits(outcome);
    if location & HOST_SITE_TAG == 0 && outcome & LeaderBits::NO_BLOCK == 0 {
        // SAFETY: a kernel access's location is the address of its
        // `#[track_caller]` `Location` (`location_of`), static data.
        let loc = unsafe { &*(location as *const Location<'static>) };
        // Here, at the site: a claim inside `check_block` had every lane
        // of the warp save more registers on every access.
        super::regions::claim_if_unclaimed();
        check_block(addr, SIZE, write, loc, group, per);
    }
    if outcome & LeaderBits::SPLIT != 0 {
        check_words(
            addr,
            SIZE,
            write,
            location,
            host_at,
            outcome & LeaderBits::RACED != 0,
        );
    }
}

/// What the leader of a line access found, as bits ([`line_slow`]'s and
/// [`LeaderBits::NO_BLOCK`]).
struct LeaderBits;

impl LeaderBits {
    /// Nothing: checked and recorded.
    const CLEAN: u32 = 0;
    /// The line is split: its lanes check their words.
    const SPLIT: u32 = 1;
    /// A race was reported for the line already.
    const RACED: u32 = 2;
    /// Nothing to check within the block: a read of the launch's
    /// read-only memory, or an access to a thread-owned partition.
    const NO_BLOCK: u32 = 4;
}

/// The leader's half of [`check_line`]: the engine's common cases
/// ([`line_fast`]) in registers, the rest in [`line_slow`]. A call made
/// by the leader lane alone, so that the registers the call ABI keeps
/// are saved for one lane, not for the whole warp.
#[inline(never)]
fn line_leader<const SIZE: u32>(addr: u64, write: bool, location: u64, host_at: (u32, u32)) -> u32 {
    let st = CtaState::current();
    let mut outcome = LeaderBits::CLEAN;
    let acc = line_access::<SIZE>(&st, addr, write, location);
    // `ReadOnlyRanges::skips_block_check`, with the access's read-only
    // test made once.
    if acc.read_only || st.read_only.owned_covers(addr, LINE_BYTES) {
        outcome = LeaderBits::NO_BLOCK;
    }
    let mem = st.memory();
    if mem.manages(addr) {
        let fast = line_fast(&mem, &st.view(&mem), mem.word_of(addr), acc);
        if fast != LineFast::Clean {
            let LineAccess {
                write,
                read_only,
                site,
            } = acc;
            outcome |= line_slow(addr, location, host_at, (write, read_only, site.0), fast);
        }
    }
    outcome
}

/// The line access of the calling leader, `SIZE` bytes a lane.
#[inline(always)]
fn line_access<const SIZE: u32>(
    st: &CtaState,
    addr: u64,
    write: bool,
    location: u64,
) -> LineAccess {
    let lanes = match SIZE {
        4 => SiteLanes::Four,
        8 => SiteLanes::Eight,
        _ => SiteLanes::Sixteen,
    };
    LineAccess {
        write,
        read_only: read_only(st, addr, LINE_BYTES as u32, write),
        site: site_word(st, location, lane().0, lanes),
    }
}

/// The line access [`check_line`]'s fast path did not settle (`fast`):
/// the engine's general path, or the reads that came late to its write;
/// reports what races. Out of line and called by the leaders that need
/// it, so that the hook's common path keeps few registers.
///
/// The access comes as its fields (`write`, `read_only`, the site's
/// bits): a struct argument would be built in local memory by every
/// leader, on the common path too.
#[inline(never)]
fn line_slow(
    addr: u64,
    location: u64,
    host_at: (u32, u32),
    (write, read_only, site): (bool, bool, u64),
    fast: LineFast,
) -> u32 {
    note_general_path();
    let acc = LineAccess {
        write,
        read_only,
        site: SiteWord(site),
    };
    let st = CtaState::current();
    let mem = st.memory();
    let mut bounded = false;
    let outcome = line_rest(
        &mem,
        &st.view(&mem),
        mem.word_of(addr),
        acc,
        fast,
        &mut bounded,
    );
    if bounded {
        st.reporter().count_bounded();
    }
    let race = |r| {
        let bytes = LINE_BYTES as u32;
        report(location, host_at, r, kind_of(write), Scope::Block, bytes)
    };
    match outcome {
        LineOutcome::Clean => LeaderBits::CLEAN,
        LineOutcome::Raced(r) => {
            race(r);
            LeaderBits::CLEAN
        }
        LineOutcome::Split => LeaderBits::SPLIT,
        LineOutcome::RacedSplit(r) => {
            race(r);
            LeaderBits::SPLIT | LeaderBits::RACED
        }
    }
}

/// This lane's words through the engine, one by one (a split line, or an
/// access of no whole line); `quiet` drops what they find (a race the
/// line's leader reported already).
#[inline(never)]
fn check_words(addr: u64, size: u32, write: bool, location: u64, host_at: (u32, u32), quiet: bool) {
    note_general_path();
    let st = CtaState::current();
    let mem = st.memory();
    let view = st.view(&mem);
    let site = site_word(&st, location, lane().0, SiteLanes::Single);
    let mut bounded = false;
    let race = vigil_shared::race::access(
        &mem,
        &view,
        mem.word_of(addr),
        (addr % 4) as u32,
        size,
        write,
        read_only(&st, addr, size, write),
        site,
        &mut bounded,
    );
    if bounded {
        st.reporter().count_bounded();
    }
    if let (Some(r), false) = (race, quiet) {
        report(location, host_at, r, kind_of(write), Scope::Block, size);
    }
}

/// `bytes` bytes at `addr` that the calling thread alone moves (a tensor
/// copy's row), checked against other CTAs: each whole line through its
/// header as one access, the rest in 16-byte units.
#[inline(never)]
pub(super) fn check_range_alone(
    addr: u64,
    bytes: u64,
    write: bool,
    loc: &'static Location<'static>,
) {
    note_general_path();
    let st = CtaState::current();
    let mem = st.memory();
    if !mem.manages(addr) {
        return;
    }
    let location = location_of(loc);
    let units = |from: u64, to: u64, quiet: bool| {
        crate::arch::copy_accesses::units(from as usize, (to - from) as usize, |at, n| {
            check_words(at as u64, n as u32, write, location, (0, 0), quiet)
        })
    };
    let end = addr.saturating_add(bytes);
    let mut at = addr;
    while at < end {
        let line_end = (at / LINE_BYTES + 1) * LINE_BYTES;
        if at % LINE_BYTES != 0 || line_end > end {
            units(at, line_end.min(end), false);
            at = line_end.min(end);
            continue;
        }
        let acc = LineAccess {
            write,
            read_only: read_only(&st, at, LINE_BYTES as u32, write),
            site: site_word(&st, location, lane().0, SiteLanes::Single),
        };
        let mut bounded = false;
        let outcome = access_line(&mem, &st.view(&mem), mem.word_of(at), acc, &mut bounded);
        if bounded {
            st.reporter().count_bounded();
        }
        let bytes = LINE_BYTES as u32;
        match outcome {
            LineOutcome::Clean => {}
            LineOutcome::Raced(r) => {
                report(location, (0, 0), r, kind_of(write), Scope::Block, bytes)
            }
            LineOutcome::Split => units(at, line_end, false),
            LineOutcome::RacedSplit(r) => {
                report(location, (0, 0), r, kind_of(write), Scope::Block, bytes);
                units(at, line_end, true);
            }
        }
        at = line_end;
    }
}

/// A plain access of `size` bytes at `addr` by a host-issued copy or fill
/// (the range-access entry): its site carries `site`, a tag the host
/// resolves to the call site (no `Location` in device memory). A warp's
/// 16-byte units tile whole lines wherever the range is line-aligned:
/// they take the line hook like a kernel's coalesced access, so that the
/// buffer a copy or fill leaves behind is in line mode for the kernels
/// that read it next.
#[inline(always)]
pub(super) fn check_host_access(addr: u64, size: u32, write: bool, site: u64, at: (u32, u32)) {
    if size == RANGE_UNIT_BYTES as u32 && warp_line(addr, size, write, site) {
        check_line::<{ RANGE_UNIT_BYTES as u32 }>(addr, write, site, at);
    } else {
        check_plain(addr, size, write, site, at);
    }
}

/// A plain access that is not a whole warp's whole lines: lanes making
/// the very same access check it once; others each check their words.
/// Then, for a kernel's access, against the other threads of its block.
#[inline(never)]
fn check_plain(addr: u64, size: u32, write: bool, location: u64, host_at: (u32, u32)) {
    let st = CtaState::current();
    let mem = st.memory();
    if mem.manages(addr) {
        let same = Group::of([location | u64::from(write), addr, u64::from(size)]);
        if same.is_leader() {
            check_words(addr, size, write, location, host_at, false);
        }
    }
    if location & HOST_SITE_TAG == 0 {
        // SAFETY: a kernel access's location is the address of its
        // `#[track_caller]` `Location` (`location_of`), static data.
        let loc = unsafe { &*(location as *const Location<'static>) };
        super::block_table::global_access(addr as usize, size as usize, kind_of(write), loc);
    }
}

#[inline(always)]
fn kind_of(write: bool) -> AccessKind {
    if write {
        AccessKind::Write
    } else {
        AccessKind::Read
    }
}

/// The same-block half of a warp's whole-line access (`group`'s lanes,
/// `per` words a lane): recorded by its leader in the line's entry when
/// its lanes agree on everything but the thread; otherwise each lane's
/// words are checked one by one. Out of line: inlined, it tripled the
/// time the driver takes to compile a sanitized entry.
#[inline(never)]
fn check_block(
    addr: u64,
    size: u32,
    write: bool,
    loc: &'static Location<'static>,
    group: Group,
    per: u32,
) {
    let kind = kind_of(write);
    let table = BlockTable::current(addr as usize, kind, size as usize, loc);
    let fields = table.as_ref().and_then(BlockTable::run_fields);
    let (count, interval) = fields.unwrap_or_default();
    if group.all(fields.is_some()) && group.agree(count) && group.agree(interval) {
        let mut recorded = false;
        if group.is_leader() {
            if let Some(t) = &table {
                recorded = t.line_run(addr as usize, per) == LineStep::Recorded;
            }
        }
        if group.leader_says(recorded) {
            // The leader recorded the line for every lane: a lane's own
            // copies in flight and the CTA's bulk copies are still to
            // compare with.
            if super::in_flight::any() {
                line_in_flight(addr, size, write, loc);
            }
            return;
        }
    }
    if table.is_some() {
        super::block_table::global_access(addr as usize, size as usize, kind, loc);
    }
}

/// The calling lane's part of a whole-line access its leader recorded,
/// against the lane's own copies in flight and the CTA's bulk copies. Out of line, so that
/// `check_block` keeps its frame.
#[cold]
#[inline(never)]
fn line_in_flight(addr: u64, size: u32, write: bool, loc: &'static Location<'static>) {
    if let Some(t) = BlockTable::current(addr as usize, kind_of(write), size as usize, loc) {
        t.check_in_flight(addr as usize);
    }
}

/// An atomic through the engine; `perform` does the real operation (with
/// the word's record locked, or held shared) and says whether it wrote.
#[inline(never)]
fn check_atomic(
    access: AtomicAccess,
    loc: &'static Location<'static>,
    perform: &mut dyn FnMut() -> bool,
) {
    note_general_path();
    let st = CtaState::current();
    let mem = st.memory();
    let addr = access.addr as u64;
    let acquires = access.ordering.acquires();
    if !mem.manages(addr) {
        perform();
        // No shadow says which of the block's releases it read.
        if acquires {
            acquire_everything(&st, &mem);
        }
        return;
    }
    // The lanes making this site's atomic on one word together are one
    // CTA's atomics at one moment: the lowest lane checks them as one
    // access, and the others perform theirs while it holds the word's
    // record (so the shadow still sees them in memory order).
    let [word, op] = atomic_keys(&access);
    let group = Group::of([location_of(loc), word, op]);
    if !group.is_leader() {
        group.sync();
        group.any(perform());
        if acquires {
            // What the leader learns of the block's own releases orders
            // this lane's next accesses too: wait until it is noted.
            group.sync();
        }
        return;
    }
    let mut view = st.view(&mem);
    let sync = st.sync();
    let site = site_word(&st, location_of(loc), lane().0, SiteLanes::Single);
    let mut bounded = false;
    let ((), race) = atomic(
        &mem,
        &mut view,
        &sync,
        st.launch_ref,
        mem.word_of(addr),
        (addr % 4) as u32,
        access.size as u32,
        access.engine_op(),
        site,
        &mut bounded,
        || {
            // One lane's write makes the group's access a write (the
            // others' failed compare-exchanges are its reads).
            let wrote = if group.alone() {
                perform()
            } else {
                group.sync();
                group.any(perform())
            };
            ((), wrote)
        },
    );
    if bounded {
        st.reporter().count_bounded();
    }
    super::block::acquired(view.own, true);
    if acquires {
        if bounded {
            // A record it lacked may have held a release of the block.
            acquire_everything(&st, &mem);
        }
        if !group.alone() {
            group.sync();
        }
    }
    if let Some(r) = race {
        report(
            location_of(loc),
            (0, 0),
            r,
            access.kind,
            access.scope,
            access.size as u32,
        );
    }
}

/// The calling thread acquires every release of its CTA so far, for the
/// same-block check (what it read is not followed word by word).
#[inline(never)]
fn acquire_everything(st: &CtaState, mem: &GpuMemory<'static>) {
    super::block::acquire_epochs(next_epoch(st, mem));
}

/// Starts the CTA's next epoch; returns the one before
/// (`vigil_shared::race::sync::acquire_everything`).
#[inline(always)]
fn next_epoch(st: &CtaState, mem: &GpuMemory<'static>) -> u16 {
    let mut view = st.view(mem);
    vigil_shared::race::sync::acquire_everything(&mut view, &st.sync())
}

#[inline(never)]
fn check_fence(ordering: Ordering, scope: Scope) {
    note_general_path();
    let st = CtaState::current();
    let mem = st.memory();
    let mut view = st.view(&mem);
    vigil_shared::race::sync::fence(&mem, &mut view, &st.sync(), ordering, scope);
    if ordering == Ordering::SeqCst {
        // What an SC fence learns is not followed per release.
        acquire_everything(&st, &mem);
    } else if ordering.acquires() {
        super::block::fence_acquired();
    }
}

/// Records a race found by the current access (made at `location`, a
/// `Location` address or a host call site's tag with `host_at`) into the
/// report buffer, and stops the kernel when the runtime says so.
#[cold]
#[inline(never)]
fn report(
    location: u64,
    host_at: (u32, u32),
    r: RaceFound,
    kind: AccessKind,
    scope: Scope,
    size: u32,
) {
    note_general_path();
    let st = CtaState::current();
    let rt: &GpuRuntime = st.runtime();
    let reporter = st.reporter();
    if !reporter.full() {
        let (file_ptr, file_len, (line, col)) = if location & HOST_SITE_TAG != 0 {
            (location, 0, host_at)
        } else {
            // SAFETY: a kernel access's location is the address of its
            // `#[track_caller]` `Location`, static data.
            let loc = unsafe { &*(location as *const Location<'static>) };
            let file = loc.file();
            (
                file.as_ptr() as u64,
                file.len() as u32,
                (loc.line(), loc.column()),
            )
        };
        let site = AccessSite {
            file_ptr,
            file_len,
            line,
            col,
            view_site: 0,
            kernel_id: st.launch,
            block: linear_block(),
            thread: lane().0,
            prior_view_site: 0,
        };
        let first_byte = r.overlap.trailing_zeros().min(3);
        let report = RaceReport {
            kind: r.kind as u32,
            size,
            address: rt.real_base + 4 * r.word + u64::from(first_byte),
            site,
            tid: st.tid,
            device: st.device,
            sm: st.smid,
            epoch: u32::from(st.view(&st.memory()).epoch),
            access: RaceReport::pack_access(kind, scope),
            prior_tid: r.prior.serial(),
            prior_epoch: u32::from(r.prior.epoch()),
            prior_access: RaceReport::pack_access(prior_kind(r.prior), r.prior.scope()),
            overlap_mask: u32::from(r.overlap),
            detail: 0,
        };
        let prior = PriorRecord {
            desc: r.prior.0,
            site: r.prior_site.0,
            word: r.word,
            location,
        };
        reporter.push(&GpuReportRecord { report, prior });
    } else {
        reporter.count_dropped();
    }
    // A host-issued copy is not a kernel thread to stop.
    if rt.flags & GpuRuntime::HALT_ON_RACE != 0 && location & HOST_SITE_TAG == 0 {
        arch::trap();
    }
}

/// A `cp.async` copy completing now: its source read and its destination
/// written again, as the calling thread's accesses made now, against the
/// block's other threads (what they did since its issue is in the
/// records of the interval) and against other blocks. Out of line: a
/// wait's or a return's work, not an access's.
#[inline(never)]
fn recheck_copy(c: &InFlightCopy) {
    let loc = super::in_flight::location(c);
    if c.global_bytes > 0 {
        check_access(c.global, c.global_bytes, false, loc);
    }
    super::block::shared_access(super::in_flight::destination(c), loc);
}

/// The calling thread returns: its `cp.async` copies and the bulk and
/// tensor copies it issued still in flight complete. Called by the entry after the body when the
/// launch keeps copies in flight; out of line, so that the entries of the
/// others stay as small as before.
#[inline(never)]
pub(super) fn copies_returned() {
    note_general_path();
    super::in_flight::returned(recheck_copy);
    super::bulk::returned(recheck_bulk);
}

/// A bulk or tensor copy completing now: its global side again (a
/// tensor copy's rows, from its map's description), as the calling
/// thread's access made now, against other blocks (the CTA's own threads
/// were compared with it while it was in flight).
#[inline(never)]
fn recheck_bulk(c: &vigil_shared::bulk_copies::BulkCopy) {
    let loc = super::bulk::location(c);
    let write = c.writes(false);
    let check =
        |addr: usize, bytes: usize| check_range_alone(addr as u64, bytes as u64, write, loc);
    match c.tensor {
        None => {
            if c.global_bytes > 0 {
                check(c.global as usize, c.global_bytes as usize);
            }
        }
        // SAFETY: the map the copy was issued with, which the host keeps
        // alive with its description for the launch.
        Some(coords) => {
            unsafe { crate::arch::ptx_async::tensor_side(c.global as *const u8, coords) }
                .for_each_range(check)
        }
    }
}

/// The memory-model kind of an earlier access.
fn prior_kind(d: AccessDesc) -> AccessKind {
    match (d.is_atomic(), d.is_write()) {
        (false, false) => AccessKind::Read,
        (false, true) => AccessKind::Write,
        (true, false) => AccessKind::AtomicRead,
        (true, true) => AccessKind::AtomicWrite,
    }
}

impl Sanitizer for GpuSanitizer {
    const ENABLED: bool = true;

    #[inline(always)]
    fn access(addr: usize, size: usize, kind: AccessKind, loc: &'static Location<'static>) {
        check_access(addr as u64, size as u32, kind.writes(), loc);
    }

    #[inline(always)]
    fn atomic<R>(
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: impl FnOnce() -> (R, bool),
    ) -> R {
        let mut op = Some(op);
        let mut result = None;
        // One non-generic engine call for every atomic in the module: the
        // operation goes in behind `dyn`, so the engine's atomic path is
        // compiled once, not once per call site.
        check_atomic(access, loc, &mut || {
            let (r, wrote) = op.take().map(|f| f()).unzip();
            result = r;
            wrote.unwrap_or(false)
        });
        match (result, op) {
            (Some(r), _) => r,
            // The engine runs the operation on every path; if it ever did
            // not, run it here rather than lose it.
            (None, Some(f)) => f().0,
            (None, None) => arch::trap(),
        }
    }

    #[inline(always)]
    fn fence(ordering: Ordering, scope: Scope, _loc: &'static Location<'static>) {
        check_fence(ordering, scope);
    }

    #[inline(always)]
    fn shared_access(access: crate::sanitizer::SharedAccess, loc: &'static Location<'static>) {
        super::block::shared_access(access, loc)
    }

    #[inline(always)]
    fn barrier(loc: &'static Location<'static>) {
        super::block::barrier(loc)
    }

    #[inline(always)]
    fn warp_sync(mask: u32) {
        super::block::warp_sync(mask)
    }

    #[inline(always)]
    fn block_global_access(
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        super::block_table::global_access(addr, size, kind, loc)
    }

    #[inline(always)]
    fn mbarrier_arrival(barrier: u32) {
        super::block::phase_arrival(barrier)
    }

    #[inline(always)]
    fn block_acquire(phase: u32) {
        // The phase's bulk copies complete before the waiter goes on.
        super::bulk::phase_completed(phase, recheck_bulk);
        super::block::acquire_phase(phase, || {
            let st = CtaState::current();
            next_epoch(&st, &st.memory())
        });
    }

    #[inline(always)]
    fn shared_unchecked(_array_bytes: usize) {
        super::block::shared_unchecked()
    }

    #[inline(always)]
    fn grid_dependency_wait() {
        super::cta::prerequisites_waited()
    }

    #[inline(always)]
    fn copy_in_flight(
        shared: crate::sanitizer::SharedAccess,
        global: usize,
        global_bytes: usize,
        loc: &'static Location<'static>,
    ) {
        let copy = super::in_flight::copy_of(shared, global, global_bytes, loc);
        super::in_flight::issued(copy, recheck_copy);
    }

    #[inline(always)]
    fn copy_group_committed() {
        super::in_flight::committed()
    }

    #[inline(always)]
    fn bulk_in_flight(
        shared: crate::sanitizer::SharedAccess,
        global: crate::sanitizer::BulkGlobal,
        phase: u32,
        loc: &'static Location<'static>,
    ) {
        super::bulk::issued(shared, global, phase, loc)
    }

    #[inline(always)]
    fn bulk_group_committed() {
        super::bulk::committed()
    }

    #[inline(always)]
    fn bulk_groups_waited(newest: u32, read: bool) {
        super::bulk::waited(newest, read, recheck_bulk)
    }

    #[inline(always)]
    fn copy_groups_waited(newest: u32) {
        super::in_flight::waited(newest, recheck_copy)
    }

    #[inline(always)]
    fn copy_range_alone(
        addr: usize,
        bytes: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        check_range_alone(addr as u64, bytes as u64, kind.writes(), loc)
    }
}
