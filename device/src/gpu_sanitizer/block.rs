//! Races between threads of one CTA on the GPU (docs/src/design/block.md):
//! shared-memory
//! accesses, barriers and warp collectives of a sanitized entry. The rules
//! and layouts are `vigil_shared::block`'s; this file is their PTX half.
//!
//! State, all in the CTA's `.shared` memory (only sanitized entries
//! declare or touch it):
//!
//! - what the CTA's threads acquired of its own releases
//!   (`vigil_shared::block::BlockAcquired`), its report keys and numbered
//!   shared views (`arch::block_counters`);
//! - the divergent-barrier slot, instance marks and report
//!   (`arch::block_barrier`);
//! - every thread's synchronisation state (`arch::block_lanes` for
//!   threads below `SHARED_LANES`, the CTA slot's region of device memory
//!   for the others): the barriers it passed (its barrier interval: a
//!   barrier lets no thread through before all arrived, so intervals never
//!   overlap in time), how many collectives it joined and the last one's
//!   mask;
//! - per shared array of up to 4,668 bytes, a shadow beside it
//!   (`shared_mem::__storage_checked`): for each 4-byte word its barrier
//!   interval and three records (the interval's last write, its first
//!   reader, another reader).
//!
//! Larger arrays and the dynamic shared memory are shadowed in device
//! memory, per CTA slot and word of the CTA's shared window
//! (`vigil_shared::block::WindowShadow`): the same records, tagged with the
//! block's stamp and interval instead of an interval and a header.
//!
//! Shared memory starts with what an earlier block left. The lane states
//! and counters are cleared at CTA entry, each thread its own word
//! ([`reset_cta`]); an array's shadow, which only kernels with shared
//! arrays have, has a header holding its block's stamp, and the first
//! thread of a block that finds another stamp clears it while the others
//! wait.
//!
//! Barriers are checked too (synccheck's job): every `sync_threads` of a
//! sanitized body notes which call each thread arrives from, and the
//! CTA's exit barrier counts the threads that returned
//! ([`exit_barrier`]); a barrier instance reached from different calls
//! (or by threads that returned) is reported once per CTA as a
//! `DivergenceRecord` ([`checked_barrier`]).
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
    access_interval, add_marks, barrier_site, barrier_slot, barrier_tag, block_stamp, busy,
    divergence_group, marked_divergent, marked_exits, pack_array, race_kind, read_changes_nothing,
    record_kind, report_key, slot_site, slot_tag, view_number, word_mask, BarrierCheck,
    BlockAcquired, BlockRecord, BlockSpace, DivergenceRecord, LaneSync, ShadowLayout, TableWord,
    ThreadGroup, WindowShadow, WordRecords, DIVERGENT_BARRIER_KIND, GLOBAL_LANES,
    MAX_BLOCK_THREADS, REPORTED, SHARED_LANES, UNCHECKED_ARRAYS, VIEWS, WORD,
};
use vigil_shared::gpu::{GpuReportRecord, GpuRuntime, PriorRecord};
use vigil_shared::race::desc::{AccessDesc, SiteLanes, SiteWord, MAX_EPOCH};
use vigil_shared::race::OwnReleases;
use vigil_shared::{AccessKind, Scope};

use super::block_word::BlockWord;
use super::cta::{cta_epoch, lane, linear_block, CtaState};
use super::warp::Group;
use crate::arch::ptx as arch;
use crate::sanitizer::SharedAccess;

/// A shadow word's records, at the CTA's scope.
pub(super) type Records = WordRecords<'static, BlockWord>;

/// The calling thread's block: its stamp, the thread and the block size.
#[derive(Clone, Copy)]
pub(super) struct Block {
    pub stamp: u32,
    pub thread: u32,
    pub threads: u32,
}

impl Block {
    #[inline(always)]
    pub fn current() -> Block {
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
/// `base + offset` must be an aligned `A` of the CTA's (its shared memory,
/// or its slot's part of the runtime's device memory), live for the CTA.
#[inline(always)]
pub(super) unsafe fn at<A>(base: *mut u8, offset: usize) -> &'static A {
    // SAFETY: forwarded from the caller.
    unsafe { &*(base.add(offset) as *const A) }
}

/// Makes the region whose header is `header` this block's: when the header
/// holds another stamp, the lanes of one warp clear the region together
/// (`clear(part, parts)` clears share `part` of `parts`) and stamp it
/// while the others wait.
#[inline(always)]
fn fresh(header: &AtomicU32, stamp: u32, clear: &dyn Fn(u32, u32)) {
    // CTA-scoped: only the block's threads touch its shared memory (a
    // system-scoped acquire invalidated the whole L1 at every access).
    if arch::load_acquire_cta_u32(header) != stamp {
        claim(header, stamp, clear);
    }
}

/// [`fresh`]'s slow half. The lanes that arrive together act as one:
/// their lowest lane reads and claims the header, and every lane clears
/// its share. One thread clearing a tile's 30 KiB shadow alone while the
/// block's other threads polled the header took a quarter of a sanitized
/// transpose's time.
#[inline(never)]
fn claim(header: &AtomicU32, stamp: u32, clear: &dyn Fn(u32, u32)) {
    const STAMPED: u32 = 0;
    const CLAIMED: u32 = 1;
    const WAIT: u32 = 2;
    let mask = arch::active_mask();
    let leader = mask.trailing_zeros();
    let me = arch::lane_id();
    let part = (mask & ((1u32 << me) - 1)).count_ones();
    loop {
        let mut step = WAIT;
        if me == leader {
            let h = arch::load_acquire_cta_u32(header);
            step = if h == stamp {
                STAMPED
            } else if h != busy(stamp)
                && header
                    .compare_exchange(h, busy(stamp), Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                CLAIMED
            } else {
                WAIT
            };
        }
        match arch::shfl_idx(mask, step, leader, 31) {
            STAMPED => return,
            CLAIMED => {
                clear(part, mask.count_ones());
                // Every lane's share is cleared (and, through the warp
                // barrier, visible to the leader) before the stamp.
                arch::sync_warp(mask);
                if me == leader {
                    arch::store_release_cta_u32(header, stamp);
                }
                return;
            }
            _ => arch::backoff(),
        }
    }
}

/// The CTA's block-race counters: what its threads acquired of its own
/// releases, and the keys of the same-block global races it reported.
#[derive(Clone, Copy)]
pub(super) struct Counters {
    /// The last phase acquired as a whole ([`Counters::acquire_phase`]):
    /// its key (high 16 bits) and the epoch it acquired (low 16; 0: none).
    phase: &'static AtomicU32,
    /// [`BlockAcquired::known`].
    known: &'static AtomicU32,
    /// [`BlockAcquired::observed`] (the pad after the view table).
    observed: &'static AtomicU32,
    /// Base of the region (the report keys are at [`Counters::KEYS`]).
    pub base: *mut u8,
}

impl Counters {
    /// Byte offset of the window shadow's address
    /// ([`vigil_shared::block::WINDOW_AT`]).
    const WINDOW: usize = vigil_shared::block::WINDOW_AT;
    /// Byte offset of the report keys.
    pub const KEYS: usize = 16;
    /// Byte offset of the view table: [`VIEWS`] `u32`s, each the low 32
    /// bits of a shared view's allocation site (0: free), numbered from 1.
    const VIEWS_AT: usize = Self::KEYS + 8 * REPORTED;

    /// The CTA's counters (reset at its entry: [`reset_cta`]).
    #[inline(always)]
    pub fn get() -> Counters {
        let base = arch::block_counters();
        // SAFETY: the region (`arch::block_counters`) is 16 bytes and the
        // report keys of the CTA's shared memory, 8-aligned: the phase
        // word, the known epoch, the window shadow's address, the keys
        // (`vigil_shared::block::COUNTERS_BYTES`).
        unsafe {
            Counters {
                phase: at(base, 0),
                known: at(base, 4),
                observed: at(base, Self::VIEWS_AT + 4 * VIEWS),
                base,
            }
        }
    }

    /// The window shadow's address for this CTA (0: none).
    #[inline(always)]
    fn window(&self) -> u64 {
        // SAFETY: the `u64` at `WINDOW`, inside the region, 8-aligned.
        unsafe { at::<AtomicU64>(self.base, Self::WINDOW) }.load(Ordering::Relaxed)
    }

    /// The CTA's view table (see [`Counters::VIEWS_AT`]).
    #[inline(always)]
    fn views(&self) -> &'static [AtomicU32] {
        // SAFETY: `VIEWS` u32s inside the region, 4-aligned.
        unsafe {
            core::slice::from_raw_parts(self.base.add(Self::VIEWS_AT) as *const AtomicU32, VIEWS)
        }
    }

    /// The site (low 32 bits) of shared view number `view`, 0 if unknown.
    #[inline(always)]
    fn view_site(&self, view: u32) -> u32 {
        let views = self.views();
        view.checked_sub(1)
            .and_then(|i| views.get(i as usize))
            .map_or(0, |v| v.load(Ordering::Relaxed))
    }

    /// What the CTA's threads acquired of its own releases.
    #[inline(always)]
    pub fn acquired(&self) -> BlockAcquired {
        BlockAcquired {
            known: self.known.load(Ordering::Relaxed) as u16,
            observed: self.observed.load(Ordering::Relaxed) as u16,
        }
    }

    /// A thread of the CTA acquired its own epochs up to `epoch`.
    #[inline(always)]
    pub fn acquire(&self, epoch: u16) {
        if epoch != 0 {
            self.known.fetch_max(u32::from(epoch), Ordering::Relaxed);
        }
    }

    /// The epoch a thread acquiring the phase named `key` as a whole
    /// acquires: the one an earlier thread acquired for the same phase,
    /// or, for a new phase, what `start` returns (it starts the next
    /// epoch). Every thread waiting for one mbarrier phase so starts one
    /// new epoch between them, not one each: epochs are the race
    /// engine's too, and one per waiting thread gives every CTA a
    /// different count of them (the TMA kernels of the benchmark then ran
    /// 17 to 40 times slower sanitized, the engine no longer joining the
    /// CTAs' identical accesses into one entry, it seems).
    #[inline(always)]
    pub fn acquire_phase(&self, key: u32, start: impl FnOnce() -> u16) -> u16 {
        let last = self.phase.load(Ordering::Relaxed);
        let epoch = if last & 0xffff != 0 && last >> 16 == key & 0xffff {
            last as u16
        } else {
            let e = start();
            self.phase
                .store((key & 0xffff) << 16 | u32::from(e), Ordering::Relaxed);
            e
        };
        self.acquire(epoch);
        epoch
    }

    /// An arrival on the mbarrier whose phase keys are `barrier` with
    /// either parity: its next phase has begun, so the phase remembered
    /// for it, if any, is forgotten (a wait two phases later has the same
    /// key and must not take the older phase's epoch).
    #[inline(always)]
    pub fn phase_arrival(&self, barrier: u32) {
        let last = self.phase.load(Ordering::Relaxed);
        if last & 0xffff != 0 && (last >> 16) & 0x7fff == barrier & 0x7fff {
            let _ = self
                .phase
                .compare_exchange(last, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// A thread of the CTA observed (read relaxed) its own epochs up to
    /// `epoch`.
    #[inline(always)]
    pub fn observe(&self, epoch: u16) {
        if epoch != 0 {
            self.observed.fetch_max(u32::from(epoch), Ordering::Relaxed);
        }
    }
}

/// One thread's lane state ([`LaneSync`]), in `.shared` or in the slot's
/// device memory: only the CTA's threads touch it, so its loads and
/// stores are CTA-scoped (a global one may hit the L1; a release is a
/// CTA fence, not a system one).
#[repr(transparent)]
struct LaneWord(AtomicU64);

impl LaneWord {
    #[inline(always)]
    fn load(&self) -> LaneSync {
        LaneSync(arch::load_relaxed_cta(&self.0))
    }

    #[inline(always)]
    fn load_acquire(&self) -> LaneSync {
        LaneSync(arch::load_acquire_cta(&self.0))
    }

    #[inline(always)]
    fn store(&self, state: LaneSync) {
        arch::store_relaxed_cta(&self.0, state.0)
    }

    #[inline(always)]
    fn store_release(&self, state: LaneSync) {
        arch::store_release_cta(&self.0, state.0)
    }
}

/// The lane states of the CTA's threads (reset at its entry: [`reset_cta`],
/// [`reset_slot_lane`]): the first [`SHARED_LANES`] in the CTA's `.shared`
/// memory, the others in its slot's region of device memory
/// ([`GpuRuntime::block_lanes`]).
#[derive(Clone, Copy)]
struct Lanes {
    shared: &'static [LaneWord],
    global: &'static [LaneWord],
}

impl Lanes {
    /// The lane states of a block of `threads` threads (a block of at
    /// most [`SHARED_LANES`] reads nothing but its size).
    #[inline(always)]
    fn of(threads: u32) -> Lanes {
        let n = (threads as usize).min(MAX_BLOCK_THREADS);
        // SAFETY: the lane block is a header and `SHARED_LANES` u64s of
        // the CTA's shared memory.
        let shared = unsafe {
            core::slice::from_raw_parts(
                arch::block_lanes().add(8) as *const LaneWord,
                n.min(SHARED_LANES),
            )
        };
        let global = if n > SHARED_LANES {
            Self::slot_lanes(n - SHARED_LANES)
        } else {
            &[]
        };
        Lanes { shared, global }
    }

    /// The first `n` lane states of the CTA slot's region; none when the
    /// runtime has no region (those threads' accesses go unchecked).
    /// Inlined: a call here was one more in every access's path.
    #[inline(always)]
    fn slot_lanes(n: usize) -> &'static [LaneWord] {
        let cta = CtaState::current();
        let rt = cta.runtime();
        // Claimed at entry by a CTA with lane states in its region.
        let Some(held) = super::regions::held_if_claimed() else {
            return &[];
        };
        let slot = held.device_slot(cta.smid);
        if rt.block_lanes == 0 || slot >= rt.block_table_slots {
            return &[];
        }
        let first = rt.block_lanes as *const LaneWord;
        // SAFETY: the region holds `GLOBAL_LANES` u64s per slot for
        // `block_table_slots` slots, live device memory of the runtime.
        unsafe { core::slice::from_raw_parts(first.add(slot as usize * GLOBAL_LANES), n) }
    }

    /// Thread `t`'s lane state, if it has one.
    #[inline(always)]
    fn get(&self, t: u32) -> Option<&'static LaneWord> {
        let t = t as usize;
        if t < SHARED_LANES {
            self.shared.get(t)
        } else {
            self.global.get(t - SHARED_LANES)
        }
    }
}

/// Thread `lane` of `lanes`' share of clearing the block-race state the
/// CTA's shared memory holds from an earlier CTA (its lane state, if in
/// `.shared`; the first thread the counters), at the CTA's entry, before
/// the barrier that ends the entry: every thread clears its own word
/// instead of one clearing all while the others wait.
///
/// The first thread also notes the runtime `rt`'s window shadow for the
/// CTA.
#[inline(always)]
pub(super) fn reset_cta(lane: u32, lanes: u32) {
    if (lane as usize) < SHARED_LANES {
        if let Some(l) = Lanes::of(lanes.min(SHARED_LANES as u32)).get(lane) {
            l.store(LaneSync::default());
        }
    }
    reset_barrier_check(lane);
    if lane == 0 {
        let c = Counters::get();
        c.phase.store(0, Ordering::Relaxed);
        c.known.store(0, Ordering::Relaxed);
        c.observed.store(0, Ordering::Relaxed);
        for i in 0..REPORTED {
            // SAFETY: the key slots, inside the region, 8-aligned.
            unsafe { at::<AtomicU64>(c.base, Counters::KEYS + 8 * i) }.store(0, Ordering::Relaxed);
        }
        for v in c.views() {
            v.store(0, Ordering::Relaxed);
        }
    }
}

/// Thread `lane` of `lanes`' share of clearing what an earlier CTA of the
/// slot left in its lane state in device memory (threads past
/// [`SHARED_LANES`]), once the CTA holds its slot, when
/// [`needs_slot_lanes`]; a barrier must follow before the body
/// (`entry::enter`'s second).
#[inline(always)]
pub(super) fn reset_slot_lane(lane: u32, lanes: u32) {
    if let Some(l) = Lanes::of(lanes).get(lane) {
        l.store(LaneSync::default());
    }
}

/// True when a block of `lanes` threads keeps lane states in its slot's
/// device memory.
#[inline(always)]
pub(super) fn needs_slot_lanes(lanes: u32) -> bool {
    lanes as usize > SHARED_LANES
}

/// The calling thread's `sync_threads` at `loc`: it arrives, waits, and
/// its next accesses are in the next interval; a barrier the threads of
/// the CTA reached from different calls is reported (see [`checked_barrier`]).
#[inline(never)]
pub(super) fn barrier(loc: &'static Location<'static>) {
    checked_barrier(barrier_site(location_address(loc)), location_address(loc));
}

/// The CTA's exit barrier: every thread arrives once its accesses are
/// done, as at a barrier site of its own, so that a `sync_threads` the
/// hardware completes with threads that returned early is seen as
/// divergent.
///
/// A warp whose threads all arrive together does nothing else: the
/// barrier counts them for the threads at a `sync_threads` of the same
/// instance, which learn from the count that it was divergent and report
/// it ([`checked_barrier`]). A warp that arrives in parts (some of its
/// threads returned, or are at a `sync_threads`) counts its part into the
/// instance's marks first ([`partial_exit`]): the barrier's count is not
/// reliable inside a diverged warp (on an H200, a block of one warp whose
/// upper half returned while its lower half waited at a `sync_threads`
/// counted no exit arrival).
#[inline(always)]
pub(super) fn exit_barrier() {
    let (thread, threads) = lane();
    if arch::active_mask() == warp_members(thread, threads) {
        arch::barrier_red_popc(true);
    } else {
        partial_exit();
    }
}

/// The lanes of thread `thread`'s warp in a block of `threads`.
#[inline(always)]
fn warp_members(thread: u32, threads: u32) -> u32 {
    let here = threads.saturating_sub(thread & !31).min(32);
    u32::MAX >> (32 - here.max(1))
}

/// [`exit_barrier`] for the part of a warp that arrives at the exit
/// together: its first thread counts the part's threads into the marks
/// of the instance they arrive at, then they arrive without the
/// reduction's predicate. Their lane states keep the barriers they
/// passed (the instance's reporter finds them by it).
#[cold]
#[inline(never)]
fn partial_exit() {
    let b = Block::current();
    if let Some(l) = Lanes::of(b.threads).get(b.thread) {
        let barriers = l.load().barriers();
        let tag = barrier_tag(b.stamp, barriers);
        let group = Group::of([tag]);
        if group.is_leader() {
            mark_instance(barriers, tag, group.size(), false);
        }
    }
    arch::barrier_red_popc(false);
}

/// Adds `exits` exit arrivals and, if `divergent`, the divergence mark to
/// the marks of the instance tagged `tag` that follows `barriers`
/// barriers (`vigil_shared::block::add_marks`).
#[inline(always)]
fn mark_instance(barriers: u32, tag: u64, exits: u32, divergent: bool) {
    let marks = instance_marks_word(barriers);
    let mut seen = marks.load(Ordering::Relaxed);
    loop {
        let next = add_marks(seen, tag, exits, divergent);
        match marks.compare_exchange(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => seen = now,
        }
    }
}

/// The address of a `Location` (what records and reports carry).
#[inline(always)]
fn location_address(loc: &'static Location<'static>) -> u64 {
    loc as *const Location<'static> as u64
}

/// Arrives at barrier 0 from `site` (`location`: its `Location`'s
/// address) and waits, checking that the barrier instance is reached from
/// one call by every thread (synccheck's check).
///
/// Before arriving, a thread counts the barrier in its lane state and
/// compares its site with the instance's first arrival's (the barrier
/// slot, claimed by the first; `vigil_shared::block::barrier_slot`); a
/// different one sets the divergence mark of the instance's marks
/// (`vigil_shared::block::instance_marks`). The barrier
/// (`barrier.red.popc`, not `.aligned`: a diverged warp is allowed and
/// seen) orders that before every thread's return, so all of them see
/// the marks, and it counts the threads of whole warps that arrived from
/// the CTA's exit ([`exit_barrier`]; the parts of diverged warps count
/// themselves into the marks): an instance with the divergence mark or
/// with exit arrivals is divergent, and each thread at a `sync_threads`
/// counts itself into the report's groups, the last one finding the exit
/// threads and writing it ([`report_divergence`]). Nothing waits beyond
/// the barrier itself, so the check adds no way to hang; the hardware
/// completes a barrier with whatever barrier the other threads reach, so
/// the block runs on (its barrier intervals stay per thread, as before),
/// and the divergence is reported once per CTA.
#[inline(always)]
fn checked_barrier(site: u32, location: u64) {
    let b = Block::current();
    let Some(l) = Lanes::of(b.threads).get(b.thread) else {
        arch::barrier_red_popc(false);
        return;
    };
    let state = l.load();
    let barriers = state.barriers();
    let tag = barrier_tag(b.stamp, barriers);
    let slot = barrier_slot_word();
    let mine = barrier_slot(tag, site);
    // The lanes of a warp arriving together from one site settle the
    // slot once: one shared-memory exchange a warp, not one a thread on
    // the same word.
    let group = Group::of([mine]);
    let mut first = 0;
    if group.is_leader() {
        let mut seen = slot.load(Ordering::Relaxed);
        while slot_tag(seen) != tag {
            match slot.compare_exchange(seen, mine, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => seen = mine,
                Err(now) => seen = now,
            }
        }
        first = slot_site(seen);
        if first != site {
            mark_instance(barriers, tag, 0, true);
        }
    }
    // The slot now holds this instance's first arrival: its site alone
    // says which group the thread reports in (one shuffle, not two).
    let first = group.leader_bits(first);
    l.store(state.passed_barrier());
    // Whole warps at the exit, which only the barrier's count sees; the
    // marks hold the rest.
    let whole = arch::barrier_red_popc(false);
    let marks = instance_marks_word(barriers).load(Ordering::Relaxed);
    let exits = whole + marked_exits(marks, tag);
    if exits != 0 || marked_divergent(marks, tag) {
        let instance = Instance {
            first,
            barriers,
            exits,
        };
        report_divergence(b, instance, site, location);
    }
}

/// A divergent barrier instance as its threads at a `sync_threads` see
/// it.
#[derive(Clone, Copy)]
struct Instance {
    /// The site of its first arrival at a `sync_threads`.
    first: u32,
    /// Barriers the block passed before it (the exit's threads' count).
    barriers: u32,
    /// Threads that arrived from the CTA's exit (they do not count
    /// themselves into the report).
    exits: u32,
}

/// The CTA's barrier slot.
#[inline(always)]
fn barrier_slot_word() -> &'static AtomicU64 {
    // SAFETY: the barrier state is `BarrierCheck::BYTES` of the CTA's
    // shared memory, 8-aligned (`arch::block_barrier`).
    unsafe { at(arch::block_barrier(), BarrierCheck::SLOT) }
}

/// The marks of the CTA's barrier instance that follows `barriers`
/// barriers (`BarrierCheck::marks`).
#[inline(always)]
fn instance_marks_word(barriers: u32) -> &'static AtomicU64 {
    // SAFETY: as in `barrier_slot_word`.
    unsafe { at(arch::block_barrier(), BarrierCheck::marks(barriers)) }
}

/// Thread `lane`'s share of clearing the divergent-barrier state an
/// earlier CTA left (the first thread clears the slot and the flag), for
/// the CTA's entry, before its barrier. (The tags make stale values
/// practically never match; clearing makes it certain.)
#[inline(always)]
fn reset_barrier_check(lane: u32) {
    if lane == 0 {
        barrier_slot_word().store(0, Ordering::Relaxed);
        for barriers in [0, 1] {
            instance_marks_word(barriers).store(0, Ordering::Relaxed);
        }
    }
}

/// After a divergent barrier instance: the calling thread, at `site`
/// (`location`), counts itself into its group; the last thread to do so
/// adds the threads that arrived from the exit ([`returned_threads`])
/// and writes the report (once per CTA).
#[cold]
#[inline(never)]
fn report_divergence(b: Block, divergent: Instance, site: u32, location: u64) {
    let region = arch::block_barrier();
    // SAFETY: offsets of `BarrierCheck` inside the CTA's barrier state,
    // aligned for their types.
    let word = |o: usize| unsafe { at::<AtomicU32>(region, o) };
    // SAFETY: as above.
    let long = |o: usize| unsafe { at::<AtomicU64>(region, o) };
    fresh(word(BarrierCheck::HEADER), b.stamp, &|part, _| {
        if part != 0 {
            return;
        }
        for o in [BarrierCheck::DONE, BarrierCheck::MIXED] {
            word(o).store(0, Ordering::Relaxed);
        }
        for o in [BarrierCheck::FIRST, BarrierCheck::OTHER] {
            long(o).store(0, Ordering::Relaxed);
        }
        // The returned threads' group is built by the reporter alone.
        for g in [DivergenceRecord::FIRST, DivergenceRecord::OTHER] {
            let e = ThreadGroup::EMPTY;
            word(BarrierCheck::group(g, 0)).store(e.count, Ordering::Relaxed);
            word(BarrierCheck::group(g, 4)).store(e.first, Ordering::Relaxed);
            word(BarrierCheck::group(g, 8)).store(e.last, Ordering::Relaxed);
            long(BarrierCheck::group(g, 16)).store(e.low, Ordering::Relaxed);
        }
    });
    let g = divergence_group(divergent.first, site);
    let t = b.thread;
    word(BarrierCheck::group(g, 0)).fetch_add(1, Ordering::Relaxed);
    word(BarrierCheck::group(g, 4)).fetch_min(t, Ordering::Relaxed);
    word(BarrierCheck::group(g, 8)).fetch_max(t, Ordering::Relaxed);
    if t < 64 {
        long(BarrierCheck::group(g, 16)).fetch_or(1 << t, Ordering::Relaxed);
    }
    if g == DivergenceRecord::FIRST {
        long(BarrierCheck::FIRST).store(location, Ordering::Relaxed);
    } else {
        let other = long(BarrierCheck::OTHER);
        if let Err(o) = other.compare_exchange(0, location, Ordering::Relaxed, Ordering::Relaxed) {
            if o != location {
                word(BarrierCheck::MIXED).store(1, Ordering::Relaxed);
            }
        }
    }
    // Every thread of the CTA arrived at the block's first divergent
    // instance (no thread returned before it: an exit is a barrier
    // site), so those that count themselves are the block less the
    // exit's.
    let waiting = b.threads.saturating_sub(divergent.exits);
    if word(BarrierCheck::DONE).fetch_add(1, Ordering::AcqRel) + 1 != waiting {
        return;
    }
    // Past any block's size: a later divergence of the CTA, which may
    // have fewer threads waiting, never completes a second report.
    word(BarrierCheck::DONE).store(u32::MAX / 2, Ordering::Relaxed);
    let group = |g: usize| ThreadGroup {
        count: word(BarrierCheck::group(g, 0)).load(Ordering::Relaxed),
        first: word(BarrierCheck::group(g, 4)).load(Ordering::Relaxed),
        last: word(BarrierCheck::group(g, 8)).load(Ordering::Relaxed),
        reserved: 0,
        low: long(BarrierCheck::group(g, 16)).load(Ordering::Relaxed),
    };
    let returned = if divergent.exits == 0 {
        ThreadGroup::EMPTY
    } else {
        returned_threads(b.threads, divergent)
    };
    let cta = CtaState::current();
    let rt = cta.runtime();
    let record = DivergenceRecord {
        kind: DIVERGENT_BARRIER_KIND,
        mixed: word(BarrierCheck::MIXED).load(Ordering::Relaxed),
        first: long(BarrierCheck::FIRST).load(Ordering::Relaxed),
        other: long(BarrierCheck::OTHER).load(Ordering::Relaxed),
        threads: b.threads,
        block: linear_block(),
        device: rt.rank,
        sm: cta.smid,
        kernel_id: cta.launch,
        reserved: 0,
        groups: [group(0), group(1), returned],
        tail: [0; 2],
    };
    cta.reporter().push(bytemuck::cast_ref(&record));
    if rt.flags & GpuRuntime::HALT_ON_RACE != 0 {
        arch::trap();
    }
}

/// The threads of a block of `threads` that arrived at divergent
/// instance `divergent` from the CTA's exit: those whose lane state still
/// counts the barriers before it (every other thread counted the
/// instance before arriving, and none can pass another barrier while the
/// reporting thread has not arrived at it). A thread without a lane state
/// is not found by name: the group then counts it but names only those
/// found.
#[inline(never)]
fn returned_threads(threads: u32, divergent: Instance) -> ThreadGroup {
    let lanes = Lanes::of(threads);
    let mut group = ThreadGroup::EMPTY;
    for t in 0..threads {
        if let Some(l) = lanes.get(t) {
            if l.load().barriers() == divergent.barriers {
                group = group.with(t);
            }
        }
    }
    ThreadGroup {
        count: divergent.exits,
        ..group
    }
}

/// The calling thread acquired what the engine says of its CTA's own
/// releases (an atomic's read: `acquires` when it acquired).
#[inline(always)]
pub(super) fn acquired(own: OwnReleases, acquires: bool) {
    let c = Counters::get();
    if acquires {
        c.acquire(own.acquired);
    }
    c.observe(own.observed);
}

/// The calling thread's acquire fence: what the CTA's relaxed reads
/// observed of its own releases is acquired.
#[inline(always)]
pub(super) fn fence_acquired() {
    let c = Counters::get();
    c.acquire(c.acquired().observed);
}

/// The calling thread acquired its CTA's own releases up to `epoch`
/// (one the engine could not name word by word: see
/// `vigil_shared::race::sync::acquire_everything`).
#[inline(always)]
pub(super) fn acquire_epochs(epoch: u16) {
    Counters::get().acquire(epoch);
}

/// The calling thread arrives on the mbarrier whose phase keys are
/// `barrier` with either parity ([`Counters::acquire_phase`]).
#[inline(always)]
pub(super) fn phase_arrival(barrier: u32) {
    Counters::get().phase_arrival(barrier);
}

/// The calling thread acquired the phase named `key` as a whole
/// ([`Counters::acquire_phase`]; `start` starts the next epoch).
#[inline(always)]
pub(super) fn acquire_phase(key: u32, start: impl FnOnce() -> u16) {
    Counters::get().acquire_phase(key, start);
}

/// The calling lane is about to join a collective over `mask`: its state
/// says so before the collective, and a `bar.warp.sync` over the same
/// lanes makes that visible to them before any of them passes it.
#[inline(never)]
pub(super) fn warp_sync(mask: u32) {
    let b = Block::current();
    if let Some(l) = Lanes::of(b.threads).get(b.thread) {
        l.store_release(l.load().joined(mask));
    }
    arch::sync_warp(mask);
}

/// The calling thread declared a shared array (or dynamic view) that
/// neither a `.shared` shadow (`shared_mem::__shadow_bytes`) nor the
/// window shadow covers: the block's first thread counts it in the
/// same-block table's header, which the host reads at each collection
/// and reports as arrays left unchecked.
#[cold]
#[inline(never)]
pub(super) fn shared_unchecked() {
    if lane().0 != 0 {
        return;
    }
    let rt = CtaState::current().runtime();
    if rt.block_table == 0 {
        return;
    }
    // SAFETY: the table's header holds the count at `UNCHECKED_ARRAYS`,
    // 8-aligned device memory of the runtime.
    unsafe { at::<AtomicU64>(rt.block_table as *mut u8, UNCHECKED_ARRAYS) }
        .fetch_add(1, Ordering::Relaxed);
}

/// Where the words of a checked access are, for its reports.
#[derive(Clone, Copy)]
pub(super) enum Space {
    /// A shared view: its first byte and size, its allocation site (the
    /// low 32 bits of the `Location`'s address; 0: unknown), and whether
    /// the words are its own `.shared` shadow's (every record there is of
    /// this view) or the window shadow's (records carry view numbers).
    Shared {
        array: usize,
        bytes: usize,
        site: u32,
        own_shadow: bool,
    },
    /// Global memory.
    Global,
}

/// The side of a copy in flight that an access races with.
struct CopySide {
    /// The first byte they share.
    at: u64,
    /// The side's first byte and size.
    start: u64,
    bytes: u32,
    /// The copy's issuing site (a `Location`'s address) and thread.
    location: u64,
    thread: u32,
    /// Whether the copy writes this side (else it reads it).
    writes: bool,
}

/// One checked access of the calling thread: what checking a word and
/// reporting a race need.
pub(super) struct Checked {
    /// False for a thread without a lane state (its interval unknown):
    /// its accesses go unchecked.
    pub known: bool,
    pub kind: AccessKind,
    size: usize,
    space: Space,
    /// The region whose [`REPORTED`] report keys dedupe this space's reports.
    keys: *mut u8,
    pub interval: u32,
    pub count: u32,
    /// The CTA's release epoch at the access.
    pub epoch: u16,
    pub thread: u32,
    /// The number its records carry of the shared view it goes through
    /// (window shadow; 0: none).
    view: u32,
    loc: &'static Location<'static>,
    lanes: Lanes,
}

impl Checked {
    /// The calling thread's access of `kind`, `size` bytes in `space`.
    #[inline(always)]
    pub fn new(
        b: Block,
        kind: AccessKind,
        size: usize,
        space: Space,
        keys: *mut u8,
        loc: &'static Location<'static>,
    ) -> Checked {
        let lanes = Lanes::of(b.threads);
        let own_lane = lanes.get(b.thread);
        let own = own_lane.map_or(LaneSync::default(), LaneWord::load);
        let epoch = cta_epoch();
        Checked {
            known: own_lane.is_some(),
            kind,
            size,
            space,
            keys,
            interval: access_interval(own.barriers(), epoch),
            count: own.count(),
            epoch,
            thread: b.thread,
            view: 0,
            loc,
            lanes,
        }
    }

    /// The same access, its records marked with shared view number `view`.
    #[inline(always)]
    fn through_view(self, view: u32) -> Checked {
        Checked { view, ..self }
    }

    /// The address of the access's `Location` (what records keep).
    #[inline(always)]
    pub fn location(&self) -> u64 {
        self.loc as *const Location<'static> as u64
    }

    /// Checks every word of the access at `addr` (its offset `start` in
    /// the space's numbering), `records(w)` giving word `w`'s records of
    /// the current interval (`None`: unchecked).
    #[inline(always)]
    pub fn words(&self, addr: usize, start: usize, records: impl Fn(usize) -> Option<Records>) {
        if !self.known {
            return;
        }
        self.check_in_flight(addr);
        let end = start + self.size;
        let mut w = start / WORD;
        while w * WORD < end {
            let me = self.record(word_mask((w * WORD) as u64, start as u64, end as u64));
            if let Some(r) = records(w) {
                self.word(r, addr - start + w * WORD, me);
            }
            w += 1;
        }
    }

    /// The record of this access's bytes `bytes` (bit `i`: byte `i`) of a
    /// word.
    #[inline(always)]
    fn record(&self, bytes: u8) -> BlockRecord {
        BlockRecord::new(
            self.thread,
            self.kind.is_atomic() && self.kind != AccessKind::AtomicRead,
            bytes,
            self.count,
            self.epoch,
            self.location(),
        )
        .with_view(self.view)
    }

    /// This access at `addr` against the calling thread's own `cp.async`
    /// copies in flight (`super::in_flight`) and the CTA's bulk copies in
    /// flight (`super::bulk`): a destination read or written, or a source
    /// written, before the completion of the copy races with it, although
    /// the copy was issued first.
    #[inline(always)]
    pub fn check_in_flight(&self, addr: usize) {
        if super::in_flight::any() {
            self.race_in_flight(addr);
        }
    }

    /// [`check_in_flight`](Self::check_in_flight)'s report, if any: the
    /// oldest of the thread's copies the access races with, else a bulk
    /// copy, is the earlier side.
    #[cold]
    #[inline(never)]
    fn race_in_flight(&self, addr: usize) {
        let shared = matches!(self.space, Space::Shared { .. });
        let write = self.kind.writes();
        let (lo, hi) = (addr as u64, (addr + self.size) as u64);
        let Some(side) = self.own_copy_in_flight(shared, write, lo, hi).or_else(|| {
            let (c, at) = super::bulk::overlapping(shared, write, lo, hi)?;
            let (start, bytes) = c.side(shared);
            Some(CopySide {
                at,
                start,
                bytes,
                location: c.location,
                thread: c.thread,
                writes: c.writes(shared),
            })
        }) else {
            return;
        };
        let word = side.at & !(WORD as u64 - 1);
        let me = self.record(word_mask(word, lo, hi));
        let theirs = word_mask(word, side.start, side.start + u64::from(side.bytes));
        let prior = BlockRecord::new(
            side.thread,
            false,
            theirs,
            self.count,
            self.epoch,
            side.location,
        );
        let prior_kind = if side.writes {
            AccessKind::Write
        } else {
            AccessKind::Read
        };
        let kind = race_kind(prior_kind, self.kind);
        self.report(word as usize, me, prior, prior_kind, kind);
    }

    /// The oldest of the calling thread's `cp.async` copies in flight an
    /// access of `lo..hi` races with (a copy writes its shared destination
    /// and reads its global source).
    #[inline(always)]
    fn own_copy_in_flight(&self, shared: bool, write: bool, lo: u64, hi: u64) -> Option<CopySide> {
        if !shared && !write {
            return None;
        }
        let q = CtaState::current().copy_queue()?;
        let (copy, at) = q.overlapping(shared, lo, hi)?;
        let (start, bytes) = copy.side(shared);
        Some(CopySide {
            at,
            start,
            bytes,
            location: copy.location,
            thread: self.thread,
            writes: shared,
        })
    }

    /// Whether the CTA acquired one of its own releases made after `prior`
    /// (a record of the access's interval).
    #[inline(always)]
    pub fn released(&self, prior: BlockRecord) -> bool {
        Counters::get().acquired().orders(prior, self.epoch)
    }

    /// Checks and records `me`'s access to the word at `word_addr`.
    #[inline(always)]
    fn word(&self, records: Records, word_addr: usize, me: BlockRecord) {
        let lane = |p: u32| {
            self.lanes
                .get(p)
                .map_or(LaneSync::default(), LaneWord::load_acquire)
        };
        records.access(
            me,
            self.kind,
            || arch::fence(vigil_shared::Ordering::SeqCst, Scope::Block),
            lane,
            |prior| self.released(prior),
            |prior, write_record, kind| {
                self.report(word_addr, me, prior, record_kind(prior, write_record), kind)
            },
        );
    }

    #[cold]
    #[inline(never)]
    fn report(
        &self,
        word_addr: usize,
        me: BlockRecord,
        prior: BlockRecord,
        prior_kind: AccessKind,
        kind: ReportKind,
    ) {
        let here = self.location();
        let prior_location = prior.access_location(here);
        if !self.first_report(report_key(kind, here, prior_location)) {
            return;
        }
        let cta = CtaState::current();
        let rt = cta.runtime();
        let overlap = me.bytes() & prior.bytes();
        let address = word_addr + overlap.trailing_zeros() as usize;
        let (space, detail, view_site, prior_view_site) = match self.space {
            Space::Shared {
                array,
                bytes,
                site,
                own_shadow,
            } => {
                let prior_site = match prior.view() {
                    0 if own_shadow => site,
                    0 => 0,
                    view => {
                        // Another thread numbered the view before it made
                        // the record (an entry never changes once set).
                        arch::fence(vigil_shared::Ordering::SeqCst, Scope::Block);
                        Counters::get().view_site(view)
                    }
                };
                let detail = pack_array(bytes, address - array);
                (BlockSpace::Shared, detail, site, prior_site)
            }
            Space::Global => (BlockSpace::Global, 0, 0, 0),
        };
        let block = linear_block();
        let file = self.loc.file();
        let epoch = self.interval - 1;
        let report = RaceReport {
            kind: kind as u32,
            size: self.size as u32,
            address: address as u64,
            site: AccessSite {
                file_ptr: file.as_ptr() as u64,
                file_len: file.len() as u32,
                line: self.loc.line(),
                col: self.loc.column(),
                view_site,
                kernel_id: cta.launch,
                block,
                thread: self.thread,
                prior_view_site,
            },
            tid: cta.tid,
            device: rt.rank,
            sm: cta.smid,
            epoch,
            access: space.mark(RaceReport::pack_access(self.kind, Scope::Block)),
            prior_tid: cta.tid,
            prior_epoch: epoch,
            prior_access: RaceReport::pack_access(prior_kind, Scope::Block),
            overlap_mask: u32::from(overlap),
            detail,
        };
        // The earlier access is this block's: its serial, its thread and
        // its location (completed from this access's, same module).
        let prior = PriorRecord {
            desc: AccessDesc::plain(cta.tid, epoch as u16, prior_kind.writes(), overlap).0,
            site: SiteWord::new(
                cta.tid,
                prior_location,
                prior.thread().unwrap_or(0),
                SiteLanes::Single,
            )
            .0,
            word: (word_addr / WORD) as u64,
            location: location_address(self.loc),
        };
        cta.reporter().push(&GpuReportRecord { report, prior });
        if rt.flags & GpuRuntime::HALT_ON_RACE != 0 {
            arch::trap();
        }
    }

    /// True when this block has not reported `key` in this space yet
    /// (with every key slot taken, true: a repeat costs a record, a
    /// skipped race would cost the report).
    fn first_report(&self, key: u64) -> bool {
        for i in 0..REPORTED {
            // SAFETY: the key slots of a shadow header or of the counters.
            let slot = unsafe { at::<AtomicU64>(self.keys, 8 * i) };
            match slot.compare_exchange(0, key, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(k) if k == key => return false,
                Err(_) => {}
            }
        }
        true
    }
}

/// A shared-memory access by the calling thread (see the module docs):
/// through the array's `.shared` shadow when it has one, else through the
/// slot's window shadow. An access of size 0 declares an array without a
/// `.shared` shadow ([`shared_declared`]).
///
/// The common case of a tiled kernel, a read that changes nothing, is
/// decided here at the access ([`unchanged_by_read`]); the rest is a
/// call.
#[inline(always)]
pub(super) fn shared_access(access: SharedAccess, loc: &'static Location<'static>) {
    if !unchanged_by_read(&access) {
        shared_access_checked(access, loc);
    }
}

/// Whether `access` is a plain read of one word of an array with a
/// `.shared` shadow that [`shared_access_checked`] would leave as it is,
/// having found no race: the shadow and the word's records are the
/// block's and the current interval's, the word's records say the read
/// changes nothing there ([`read_changes_nothing`]), and the thread has
/// no copy in flight. Loads of the CTA's shared memory only.
#[inline(always)]
fn unchanged_by_read(access: &SharedAccess) -> bool {
    if access.kind != AccessKind::Read || access.shadow == 0 || access.addr < access.array {
        return false;
    }
    let start = access.addr - access.array;
    let end = start + access.size;
    let w = start / WORD;
    let layout = ShadowLayout::of(access.array_bytes);
    if access.size == 0 || (end - 1) / WORD != w || w >= layout.words {
        return false;
    }
    let b = Block::current();
    let shadow = access.shadow as *mut u8;
    // SAFETY: the shadow's header, its first word (as in
    // `shared_access_checked`).
    if arch::load_acquire_cta_u32(unsafe { at::<AtomicU32>(shadow, 0) }) != b.stamp {
        return false;
    }
    let Some(own) = Lanes::of(b.threads).get(b.thread) else {
        return false;
    };
    let interval = access_interval(own.load().barriers(), cta_epoch());
    // SAFETY: `w < layout.words`: inside the shadow, aligned.
    let (current, [write, first, second]) = unsafe {
        (
            at::<AtomicU32>(shadow, layout.interval(w)),
            [0, 1, 2].map(|j| at::<BlockWord>(shadow, layout.record(w, j)).load_relaxed()),
        )
    };
    if arch::load_acquire_cta_u32(current) != interval {
        return false;
    }
    // Only the thread and the bytes: `read_changes_nothing` looks at no
    // other field (the collectives and the epoch matter only to a record
    // that is stored, and a skipped read stores none).
    let me = BlockRecord::new(
        b.thread,
        false,
        word_mask((w * WORD) as u64, start as u64, end as u64),
        0,
        0,
        0,
    );
    read_changes_nothing(
        BlockRecord(write),
        BlockRecord(first),
        BlockRecord(second),
        me,
    ) && !super::in_flight::any()
}

/// [`shared_access`] checked and recorded in full.
#[inline(never)]
fn shared_access_checked(access: SharedAccess, loc: &'static Location<'static>) {
    super::cta::note_general_path();
    if access.size == 0 {
        if access.shadow == 0 {
            shared_declared(access.array, access.array_bytes);
        }
        return;
    }
    if access.addr < access.array {
        return;
    }
    if matches!(access.kind, AccessKind::AtomicRead | AccessKind::AtomicRmw) {
        // Shared memory keeps no release heads: a read of a shared flag
        // may have read any release of the block so far, and those ended
        // the epochs before the current one (a saturated epoch is shared).
        let now = cta_epoch();
        let released = if now >= MAX_EPOCH { now } else { now - 1 };
        let c = Counters::get();
        if c.acquired().observed < released {
            c.observe(released);
        }
    }
    if access.shadow == 0 {
        return window_access(access, loc);
    }
    let b = Block::current();
    let layout = ShadowLayout::of(access.array_bytes);
    let shadow = access.shadow as *mut u8;
    // SAFETY: the shadow is `layout.bytes()` of the CTA's shared memory,
    // 8-aligned (`__storage_checked`); the header is its first word.
    let header = unsafe { at::<AtomicU32>(shadow, 0) };
    let bytes = layout.bytes();
    fresh(header, b.stamp, &move |part, parts| {
        // The bounds in registers and the stores at the CTA's scope: the
        // block's other warps wait for this loop.
        let (shadow, bytes, stride) = (shadow, bytes, 8 * parts as usize);
        let mut o = 8 + 8 * part as usize;
        while o < bytes {
            // SAFETY: inside the shadow, 8-aligned.
            unsafe { at::<BlockWord>(shadow, o) }.store_relaxed(0);
            o += stride;
        }
    });
    // SAFETY: the header's key slots follow its first 8 bytes.
    let keys = unsafe { shadow.add(8) };
    let space = array_space(&access, true);
    let c = Checked::new(b, access.kind, access.size, space, keys, loc);
    c.words(access.addr, access.addr - access.array, |w| {
        if w >= layout.words {
            return None;
        }
        // SAFETY: `w < layout.words`: inside the shadow, aligned.
        let (interval, records) = unsafe {
            (
                at::<AtomicU32>(shadow, layout.interval(w)),
                WordRecords {
                    write: at(shadow, layout.record(w, 0)),
                    first: at(shadow, layout.record(w, 1)),
                    second: at(shadow, layout.record(w, 2)),
                },
            )
        };
        let current = arch::load_acquire_cta_u32(interval) == c.interval;
        Some(renewed(records, current, || {
            arch::store_release_cta_u32(interval, c.interval)
        }))
    });
}

/// Where reports of an access to `access`'s array place it (checked in
/// the array's own `.shared` shadow, or in the window shadow).
#[inline(always)]
fn array_space(access: &SharedAccess, own_shadow: bool) -> Space {
    Space::Shared {
        array: access.array,
        bytes: access.array_bytes,
        site: site_bits(access),
        own_shadow,
    }
}

/// The low 32 bits of the address of `access`'s view's allocation site
/// (what records and reports carry; 0: unknown).
#[inline(always)]
fn site_bits(access: &SharedAccess) -> u32 {
    access
        .site
        .map_or(0, |l| l as *const Location<'static> as u64 as u32)
}

/// `records` made the current interval's: when they are not (`current`
/// false), an earlier interval's records, which a barrier or an acquire
/// orders before every access of this one, are forgotten and `mark`
/// notes the current interval. (A thread still in the earlier interval
/// may wipe newer records again: that only loses detection.)
#[inline(always)]
fn renewed(records: Records, current: bool, mark: impl FnOnce()) -> Records {
    if !current {
        records.clear();
        mark();
    }
    records
}

/// The calling CTA's part of the window shadow
/// ([`GpuRuntime::block_shadow`]): the region, its layout and the slot.
#[derive(Clone, Copy)]
struct Window {
    base: *mut u8,
    layout: WindowShadow,
    slot: u64,
}

impl Window {
    /// The CTA's window shadow; `None` when the runtime has none yet or
    /// the slot is past its slots.
    #[inline(always)]
    fn current() -> Option<Window> {
        let cta = CtaState::current();
        let rt = cta.runtime();
        if !super::regions::sm_has_regions(rt, cta.smid) {
            return None;
        }
        // The claim keeps the window shadow the CTA uses.
        let held = super::regions::held();
        let base = Counters::get().window() as *mut u8;
        if base.is_null() {
            return None;
        }
        // SAFETY: the region starts with its header (words per slot, slots
        // per SM); live device memory of the runtime.
        let header = |at_byte| unsafe { at::<AtomicU64>(base, at_byte) }.load(Ordering::Relaxed);
        let words = header(WindowShadow::WORDS_AT);
        let regions = header(WindowShadow::REGIONS_AT);
        let layout = WindowShadow { words, regions };
        let slot = layout.slot(cta.smid, held.slot)?;
        Some(Window { base, layout, slot })
    }
}

/// A shared array (or dynamic view) at `array`, `bytes` long, without a
/// `.shared` shadow was declared: the block's first thread counts it as
/// unchecked when the window shadow does not cover it.
#[inline(never)]
fn shared_declared(array: usize, bytes: usize) {
    let start = u64::from(arch::shared_window_offset(array));
    let covered = Window::current().is_some_and(|w| w.layout.covers(start, bytes as u64));
    if !covered {
        shared_unchecked();
    }
}

/// A shared-memory access through the window shadow: the records of the
/// word at window offset `4w` are entry `w` of the slot, current when its
/// tag is the block's stamp and the thread's interval.
#[inline(never)]
fn window_access(access: SharedAccess, loc: &'static Location<'static>) {
    super::cta::note_general_path();
    let Some(window) = Window::current() else {
        return;
    };
    let b = Block::current();
    let counters = Counters::get();
    // SAFETY: the counters' key slots.
    let keys = unsafe { counters.base.add(Counters::KEYS) };
    // Views over the same bytes (a tile pushed where a popped one was)
    // share these records: each record names its view by number.
    let view = view_number(counters.views(), site_bits(&access));
    let c = Checked::new(
        b,
        access.kind,
        access.size,
        array_space(&access, false),
        keys,
        loc,
    )
    .through_view(view);
    let tag = WindowShadow::tag(b.stamp, c.interval);
    let start = arch::shared_window_offset(access.addr) as usize;
    c.words(access.addr, start, |w| {
        if w as u64 >= window.layout.words {
            return None;
        }
        let e = window.layout.entry(window.slot, w as u64) as usize;
        // SAFETY: `w < words`: the slot's entry `w`, live device memory
        // of the runtime, 32-aligned.
        let (t, [r0, r1, r2]) = unsafe {
            (
                at::<AtomicU64>(window.base, e),
                [1, 2, 3].map(|j| at::<BlockWord>(window.base, e + 8 * j)),
            )
        };
        // Only this CTA touches its slot's entries while it runs: CTA
        // scope suffices.
        let current = arch::load_acquire_block(t) == tag;
        let records = WordRecords {
            write: r0,
            first: r1,
            second: r2,
        };
        Some(renewed(records, current, || {
            // The CTA writes its regions from here on: every later write
            // is to an entry it renewed in its interval.
            super::cta::mark_region_used();
            arch::store_release_block(t, tag)
        }))
    });
}
