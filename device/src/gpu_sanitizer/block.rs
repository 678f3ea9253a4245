//! Races between threads of one CTA on the GPU (issue 12): shared-memory
//! accesses, barriers and warp collectives of a sanitized entry. The rules
//! and layouts are `vigil_shared::block`'s; this file is their PTX half.
//!
//! State, all in the CTA's `.shared` memory (only sanitized entries
//! declare or touch it):
//!
//! - the CTA's barrier arrivals (`arch::block_arrivals`): every thread
//!   adds one before it waits at a barrier, so a thread's barrier interval
//!   is `arrivals / threads`;
//! - every lane's warp-collective state (`arch::block_lanes`): how many
//!   collectives it joined and the last one's mask;
//! - per shared array, a shadow beside it (`shared_mem::__storage_checked`):
//!   for each 4-byte word its barrier interval and three records (the
//!   interval's last write, its first reader, another reader).
//!
//! Shared memory starts with what an earlier block left: each region has a
//! header holding its block's stamp, and the first thread of a block that
//! finds another stamp clears the region while the others wait.
//!
//! A write swaps itself into the word's write record and then reads the
//! reader records; a read stores itself into a reader record and then
//! reads the write record; a `fence.sc.cta` between makes at least one of
//! two racing accesses see the other. Records lost to concurrent updates
//! of one word only lose detection. A race is reported once per block,
//! array and (kind, both sites), as a `GpuReportRecord` whose access word
//! marks it `BlockSpace::Shared` (the host names the array, the offset and
//! the other thread of the same block).

use core::panic::Location;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use vigil_shared::abi::{AccessSite, RaceReport, ReportKind};
use vigil_shared::block::{
    barrier_interval, block_stamp, busy, pack_array, race_between, reader_slot, record_kind,
    report_key, BlockRecord, BlockSpace, LaneSync, ShadowLayout, MAX_BLOCK_THREADS, REPORTED, WORD,
};
use vigil_shared::gpu::{GpuReportRecord, GpuRuntime, SideEntry};
use vigil_shared::{AccessKind, Scope};

use super::cta::{lane, CtaState};
use super::hooks::linear_block;
use super::report::Reporter;
use crate::arch::ptx as arch;
use crate::sanitizer::SharedAccess;

/// The calling thread's block: its stamp, the thread and the block size.
#[derive(Clone, Copy)]
struct Block {
    stamp: u32,
    thread: u32,
    threads: u32,
}

impl Block {
    #[inline(always)]
    fn current() -> Block {
        let cta = CtaState::current();
        let (thread, threads) = lane();
        Block {
            stamp: block_stamp(cta.launch, linear_block()),
            thread,
            threads,
        }
    }
}

/// The atomic of type `A` at byte `offset` of the region at `base`.
///
/// # Safety
/// `base + offset` must be aligned shared memory of the CTA, live for the CTA.
#[inline(always)]
unsafe fn at<A>(base: *mut u8, offset: usize) -> &'static A {
    // SAFETY: forwarded from the caller.
    unsafe { &*(base.add(offset) as *const A) }
}

/// Makes the region whose header is `header` this block's: when the header
/// holds another stamp, one thread clears the region (`clear`) and stamps
/// it while the others wait.
#[inline(always)]
fn fresh(header: &AtomicU32, stamp: u32, clear: &dyn Fn()) {
    if header.load(Ordering::Acquire) != stamp {
        claim(header, stamp, clear);
    }
}

#[inline(never)]
fn claim(header: &AtomicU32, stamp: u32, clear: &dyn Fn()) {
    loop {
        let h = header.load(Ordering::Acquire);
        if h == stamp {
            return;
        }
        if h != busy(stamp)
            && header
                .compare_exchange(h, busy(stamp), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            clear();
            header.store(stamp, Ordering::Release);
            return;
        }
        arch::backoff();
    }
}

/// The CTA's barrier-arrival count.
#[inline(always)]
fn arrivals(b: Block) -> &'static AtomicU32 {
    let base = arch::block_arrivals();
    // SAFETY: the arrival block is 8 bytes of the CTA's shared memory.
    let (header, count) = unsafe { (at::<AtomicU32>(base, 0), at::<AtomicU32>(base, 4)) };
    fresh(header, b.stamp, &|| count.store(0, Ordering::Relaxed));
    count
}

/// The lane states of the CTA's threads.
#[inline(always)]
fn lanes(b: Block) -> &'static [AtomicU64] {
    let base = arch::block_lanes();
    // SAFETY: the lane block is a header and `MAX_BLOCK_THREADS` u64s of
    // the CTA's shared memory.
    let (header, lanes) = unsafe {
        (
            at::<AtomicU32>(base, 0),
            core::slice::from_raw_parts(base.add(8) as *const AtomicU64, MAX_BLOCK_THREADS),
        )
    };
    let n = (b.threads as usize).min(MAX_BLOCK_THREADS);
    fresh(header, b.stamp, &|| {
        for l in &lanes[..n] {
            l.store(0, Ordering::Relaxed)
        }
    });
    &lanes[..n]
}

/// The calling thread arrives at a barrier (before it waits there).
#[inline(never)]
pub(super) fn barrier() {
    arrivals(Block::current()).fetch_add(1, Ordering::Relaxed);
}

/// The calling lane is about to join a collective over `mask`: its state
/// says so before the collective, and a `bar.warp.sync` over the same
/// lanes makes that visible to them before any of them passes it.
#[inline(never)]
pub(super) fn warp_sync(mask: u32) {
    let b = Block::current();
    if let Some(l) = lanes(b).get(b.thread as usize) {
        let next = LaneSync(l.load(Ordering::Relaxed)).joined(mask);
        l.store(next.0, Ordering::Release);
    }
    arch::sync_warp(mask);
}

/// One checked shared-memory access: what the report of a race needs.
struct Checked<'a> {
    access: &'a SharedAccess,
    shadow: *mut u8,
    layout: ShadowLayout,
    interval: u32,
    loc: &'static Location<'static>,
    lanes: &'static [AtomicU64],
}

/// A shared-memory access by the calling thread (see the module docs).
#[inline(never)]
pub(super) fn shared_access(access: SharedAccess, loc: &'static Location<'static>) {
    if access.shadow == 0 || access.size == 0 || access.addr < access.array {
        return;
    }
    let b = Block::current();
    let layout = ShadowLayout::of(access.array_bytes);
    let shadow = access.shadow as *mut u8;
    // SAFETY: the shadow is `layout.bytes()` of the CTA's shared memory,
    // 8-aligned (`__storage_checked`); the header is its first word.
    let header = unsafe { at::<AtomicU32>(shadow, 0) };
    fresh(header, b.stamp, &|| {
        let mut o = 8;
        while o < layout.bytes() {
            // SAFETY: inside the shadow, 8-aligned.
            unsafe { at::<AtomicU64>(shadow, o) }.store(0, Ordering::Relaxed);
            o += 8;
        }
    });
    let lanes = lanes(b);
    let count = lanes
        .get(b.thread as usize)
        .map_or(0, |l| LaneSync(l.load(Ordering::Relaxed)).count());
    let c = Checked {
        access: &access,
        shadow,
        layout,
        interval: barrier_interval(arrivals(b).load(Ordering::Relaxed), b.threads) + 1,
        loc,
        lanes,
    };
    let (start, end) = (
        access.addr - access.array,
        access.addr - access.array + access.size,
    );
    let mut w = start / WORD;
    while w * WORD < end && w < layout.words {
        let lo = (w * WORD).max(start);
        let hi = (w * WORD + WORD).min(end);
        let bytes = (((1u32 << (hi - lo)) - 1) << (lo - w * WORD)) as u8;
        let me = BlockRecord::new(
            b.thread,
            access.kind.is_atomic(),
            bytes,
            count,
            loc as *const Location<'static> as u64,
        );
        c.word(w, me);
        w += 1;
    }
}

impl Checked<'_> {
    /// Record `r` of word `w`.
    #[inline(always)]
    fn record(&self, w: usize, r: usize) -> &'static AtomicU64 {
        // SAFETY: `w < layout.words`, inside the shadow, 8-aligned.
        unsafe { at(self.shadow, self.layout.record(w, r)) }
    }

    /// Checks and records `me`'s access to word `w`.
    #[inline(always)]
    fn word(&self, w: usize, me: BlockRecord) {
        // SAFETY: `w < layout.words`, inside the shadow, 4-aligned.
        let interval = unsafe { at::<AtomicU32>(self.shadow, self.layout.interval(w)) };
        let [write, first, second] = [0, 1, 2].map(|r| self.record(w, r));
        if interval.load(Ordering::Acquire) != self.interval {
            // An earlier interval's records: a barrier orders all of them.
            // (Only threads of this interval run now: a barrier lets none
            // through before all arrived.)
            for r in [write, first, second] {
                r.store(0, Ordering::Relaxed);
            }
            interval.store(self.interval, Ordering::Release);
        }
        let kind = self.access.kind;
        let me_t = me.thread().unwrap_or(0);
        if kind == AccessKind::Read {
            let f = first.load(Ordering::Relaxed);
            let claimed = reader_slot(BlockRecord(f), me_t) == 1
                && first
                    .compare_exchange(f, me.0, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
            if !claimed {
                second.store(me.0, Ordering::Relaxed);
            }
            arch::fence(vigil_shared::Ordering::SeqCst, Scope::Block);
            self.check(w, me, BlockRecord(write.load(Ordering::Relaxed)), true);
            return;
        }
        let prior = if kind.is_atomic() {
            // An atomic stands for earlier atomics only: a plain write
            // stays for later accesses to race with.
            let p = write.load(Ordering::Relaxed);
            let q = BlockRecord(p);
            if q.thread().is_none() || q.atomic() {
                let _ = write.compare_exchange(p, me.0, Ordering::Relaxed, Ordering::Relaxed);
            }
            p
        } else {
            write.swap(me.0, Ordering::Relaxed)
        };
        arch::fence(vigil_shared::Ordering::SeqCst, Scope::Block);
        self.check(w, me, BlockRecord(prior), true);
        self.check(w, me, BlockRecord(first.load(Ordering::Relaxed)), false);
        self.check(w, me, BlockRecord(second.load(Ordering::Relaxed)), false);
    }

    /// Reports a race between `prior` (a record of word `w`) and `me`.
    #[inline(always)]
    fn check(&self, w: usize, me: BlockRecord, prior: BlockRecord, write_record: bool) {
        let lane = |p: u32| {
            LaneSync(
                self.lanes
                    .get(p as usize)
                    .map_or(0, |l| l.load(Ordering::Acquire)),
            )
        };
        if let Some(kind) = race_between(prior, write_record, me, self.access.kind, lane) {
            self.report(w, me, prior, record_kind(prior, write_record), kind);
        }
    }

    #[cold]
    #[inline(never)]
    fn report(
        &self,
        w: usize,
        me: BlockRecord,
        prior: BlockRecord,
        prior_kind: AccessKind,
        kind: ReportKind,
    ) {
        let here = self.loc as *const Location<'static> as u64;
        let prior_location = prior.location(here);
        if !self.first_report(report_key(kind, here, prior_location)) {
            return;
        }
        let cta = CtaState::current();
        let rt = cta.runtime();
        let overlap = me.bytes() & prior.bytes();
        let offset = w * WORD + overlap.trailing_zeros() as usize;
        let address = (self.access.array + offset) as u64;
        let block = linear_block();
        let file = self.loc.file();
        let report = RaceReport {
            kind: kind as u32,
            size: self.access.size as u32,
            address,
            site: AccessSite {
                file_ptr: file.as_ptr() as u64,
                file_len: file.len() as u32,
                line: self.loc.line(),
                col: self.loc.column(),
                location_id: 0,
                kernel_id: cta.launch,
                block,
                thread: me.thread().unwrap_or(0),
                reserved: 0,
            },
            tid: cta.tid,
            device: rt.rank,
            sm: cta.smid,
            epoch: self.interval - 1,
            access: BlockSpace::Shared
                .mark(RaceReport::pack_access(self.access.kind, Scope::Block)),
            prior_tid: cta.tid,
            prior_epoch: self.interval - 1,
            prior_access: RaceReport::pack_access(prior_kind, Scope::Block),
            overlap_mask: u32::from(overlap),
            detail: pack_array(self.access.array_bytes, offset),
        };
        let prior = SideEntry {
            location: prior_location,
            word: offset as u32,
            tid: cta.tid,
            epoch: self.interval - 1,
            block,
            thread: prior.thread().unwrap_or(0),
            launch: cta.launch,
        };
        // SAFETY: the runtime's side table and report buffer are live.
        let reporter = unsafe { Reporter::new(rt) };
        reporter.push(&GpuReportRecord { report, prior });
        if rt.flags & GpuRuntime::HALT_ON_RACE != 0 {
            arch::trap();
        }
    }

    /// True when this block has not reported `key` from this array yet
    /// (with every key slot taken, true: a repeat costs a record, a
    /// skipped race would cost the report).
    fn first_report(&self, key: u64) -> bool {
        for i in 0..REPORTED {
            // SAFETY: the header's key slots, inside the shadow, 8-aligned.
            let slot = unsafe { at::<AtomicU64>(self.shadow, 8 + 8 * i) };
            match slot.compare_exchange(0, key, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(k) if k == key => return false,
                Err(_) => {}
            }
        }
        true
    }
}
