//! CTA entry and exit of a sanitized entry point
//! (docs/src/design/engine.md).
//!
//! Entry: the block's first thread claims a slot of its SM, initialises
//! the slot's thread state if it was never used and broadcasts the
//! sanitizer thread through shared memory; after a barrier every thread
//! joins its share of the entries of the stream's previous kernel's exit
//! clock and of the stream's join list, and a second barrier (when there
//! was anything to join) ends the entry. The claim makes the state the
//! CTA's alone, so the entry takes no lock: three round trips (the
//! claim's two atomics, the header's reads) while the block waits. Exit:
//! a barrier (every thread of the block is done), every thread publishes
//! its share of the clock into the stream's ring, and after a barrier the
//! first thread marks the epoch published and frees the slot. Sharing the
//! `O(num_threads)` clock work among the block keeps a CTA's entry and
//! exit short.
//!
//! Only the first CTA of a launch in each slot does that work: the slot's
//! clock remembers the launch it joined, and whether the launch's ring
//! slot already holds it ([`ThreadClocks::enter_claimed_cta`],
//! [`ThreadClocks::ring_current`]), so the CTAs after it skip the join
//! and publish their own entry alone. A grid of many small CTAs (one
//! element per thread) pays `O(num_threads)` per slot, not per CTA.

use core::sync::atomic::AtomicU32;

use super::memory::GpuAtomics;
use vigil_shared::abi::STREAM_RING_SLOTS;
use vigil_shared::clock::ThreadClocks;
use vigil_shared::engine::EngineMemory;
use vigil_shared::gpu::{
    finish_cta_exit, join_clock_part, publish_cta_exit_part, slot_tid, GpuRuntime, SmSlots,
    StreamClocks, MAX_JOINS,
};
use vigil_shared::read_only::ReadOnlyRanges;

use super::memory::RuntimeMemory;
use super::report::Reporter;
use super::slots::SmSlotWords;
use crate::arch::ptx as arch;

/// What every thread of a CTA needs to find its sanitizer thread; it
/// lives in the module's `.shared` block (`arch::cta_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct CtaState {
    /// The device's [`GpuRuntime`].
    pub runtime: u64,
    /// The launching context's report buffer (the stream's
    /// [`StreamClocks::reports`]).
    pub reports: u64,
    /// The sanitizer thread (the claimed slot's).
    pub tid: u32,
    /// Context-wide launch id (reports name the kernel by it).
    pub launch: u32,
    /// SM the CTA runs on.
    pub smid: u32,
    /// Slot it holds there (below
    /// [`MAX_SLOTS_PER_SM`](vigil_shared::gpu::MAX_SLOTS_PER_SM)).
    pub slot: u16,
    /// Nonzero when the slot's clock must join the launch's inputs (the
    /// first CTA of the launch in this slot).
    pub join: u16,
    /// Ranges no thread of the launch writes: reads inside them skip the
    /// same-block check ([`vigil_shared::read_only`]).
    pub read_only: ReadOnlyRanges,
}
const _: () = assert!(core::mem::size_of::<CtaState>() <= vigil_shared::block::CTA_STATE_BYTES);

impl CtaState {
    /// The state the entry hook stored for this CTA.
    #[inline(always)]
    pub fn current() -> CtaState {
        // SAFETY: written by `enter` before the barrier every thread passed.
        unsafe { (arch::cta_state() as *const CtaState).read() }
    }

    /// The runtime it points to.
    #[inline(always)]
    pub fn runtime(&self) -> &'static GpuRuntime {
        // SAFETY: the host passes a live runtime for the whole launch.
        unsafe { &*(self.runtime as *const GpuRuntime) }
    }

    /// The side table and the launching context's report buffer.
    #[inline(always)]
    pub fn reporter(&self) -> Reporter<'static> {
        // SAFETY: the host passes a live runtime and stream clocks whose
        // report buffer lives as long as its context.
        unsafe { Reporter::new(self.runtime(), self.reports) }
    }

    /// The SM slot it holds, counted over the device's SMs.
    #[inline(always)]
    pub fn device_slot(&self, rt: &GpuRuntime) -> u32 {
        self.smid * rt.slots_per_sm.max(1) + u32::from(self.slot)
    }
}

/// This thread's linear index in the block and the block's size: the
/// lanes that share the CTA's entry and exit work.
#[inline(always)]
pub(super) fn lane() -> (u32, u32) {
    let (t, d) = (arch::thread_idx(), arch::block_dim());
    ((t.z * d.y + t.y) * d.x + t.x, d.x * d.y * d.z)
}

/// This thread's indices of `0..n` in a grid-stride loop over the whole
/// grid (the runtime's own entries: range access, shadow reclaim).
#[inline(always)]
pub(super) fn grid_stride(n: u64) -> GridStride {
    let (lane, lanes) = lane();
    let g = arch::grid_dim();
    let threads = u64::from(lanes) * u64::from(g.x * g.y * g.z);
    let first = u64::from(super::hooks::linear_block()) * u64::from(lanes) + u64::from(lane);
    GridStride {
        next: first,
        end: n,
        stride: threads.max(1),
    }
}

/// The iterator of [`grid_stride`] (a plain loop: `step_by` doubles the
/// entries' code with its checks).
pub(super) struct GridStride {
    next: u64,
    end: u64,
    stride: u64,
}

impl Iterator for GridStride {
    type Item = u64;

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        let i = self.next;
        (i < self.end).then(|| {
            self.next = i.saturating_add(self.stride);
            i
        })
    }
}

/// `len` u32 atomics at device address `addr`.
///
/// # Safety
/// The range must be live device memory for the launch.
#[inline(always)]
unsafe fn words(addr: u64, len: usize) -> &'static [AtomicU32] {
    // SAFETY: forwarded from the caller.
    unsafe { core::slice::from_raw_parts(addr as *const AtomicU32, len) }
}

/// What the host passes a sanitized entry after the user's parameters
/// ([`vigil_shared::gpu::HIDDEN_PARAMS`], in order).
#[derive(Clone, Copy, Debug)]
pub struct LaunchArgs {
    /// The device's [`GpuRuntime`].
    pub runtime: u64,
    /// The launching stream's [`StreamClocks`].
    pub stream: u64,
    /// The kernel's number on that stream.
    pub kernel: u32,
    /// The context-wide launch id.
    pub launch: u32,
    /// The launch's read-only ranges
    /// ([`ReadOnlyRanges::from_words`]).
    pub read_only: [u64; 2 * vigil_shared::read_only::READ_ONLY_RANGES],
}

/// Runs `body` as one CTA of a sanitized launch.
///
/// # Safety
/// `args.runtime` and `args.stream` must be the device addresses of a
/// live [`GpuRuntime`] and [`StreamClocks`] of matching sizes, and no
/// thread of the launch may write inside `args.read_only`, as the host's
/// sanitized launch passes them.
#[inline(always)]
pub unsafe fn run_cta(args: LaunchArgs, body: impl FnOnce()) {
    // SAFETY: forwarded from the caller.
    unsafe { enter(args) };
    body();
    // SAFETY: as above.
    unsafe { exit(args.stream, args.kernel) };
}

/// The memory, constants and thread clocks of the CTA's sanitizer thread.
struct Cta {
    mem: RuntimeMemory<'static>,
    n: usize,
    num_sms: u32,
}

impl Cta {
    /// # Safety
    /// `rt` must be a live runtime (run_cta's contract).
    #[inline(always)]
    unsafe fn new(rt: &'static GpuRuntime) -> Cta {
        // SAFETY: forwarded from the caller.
        let mem = unsafe { RuntimeMemory::new(rt) };
        let cfg = mem.config();
        Cta {
            n: cfg.num_threads as usize,
            num_sms: cfg.num_sms / rt.slots_per_sm.max(1),
            mem,
        }
    }

    #[inline(always)]
    fn clocks(&self, tid: u32) -> ThreadClocks<'_, GpuAtomics> {
        let cfg = self.mem.config();
        ThreadClocks::new(
            self.mem.thread_state(tid),
            cfg.num_threads,
            cfg.clock_buffer_size,
        )
    }

    #[inline(always)]
    fn slots(&self) -> &'static [AtomicU32] {
        let rt = self.mem.runtime();
        // SAFETY: the slot table holds `SmSlots` for every SM.
        unsafe { words(rt.slot_table, self.num_sms as usize * SmSlots::WORDS) }
    }

    /// Ring slot `slot` of the stream clocks at `stream`.
    #[inline(always)]
    fn ring_slot(&self, stream: u64, slot: u32) -> &'static [AtomicU32] {
        let addr = StreamClocks::ring_slot(stream, self.n as u32, slot);
        // SAFETY: the stream's clocks hold a header and a 3-slot ring.
        unsafe { words(addr, self.n) }
    }
}

#[inline(never)]
unsafe fn enter(args: LaunchArgs) {
    let LaunchArgs {
        runtime,
        stream,
        kernel,
        launch,
        read_only,
    } = args;
    // SAFETY: the caller passes a live runtime.
    let rt = unsafe { &*(runtime as *const GpuRuntime) };
    // SAFETY: as above.
    let cta = unsafe { Cta::new(rt) };
    let (lane, lanes) = lane();
    super::block::reset_cta(lane, lanes, rt);
    if lane == 0 {
        // Claim a slot and broadcast it. The claim makes the thread state
        // this CTA's alone until its threads run (they wait below, and a
        // CTA's own threads are the only other users of its lock), so the
        // entry takes no lock.
        let smid = arch::smid();
        let slot = SmSlotWords::of(cta.slots(), smid).claim(rt.slots_per_sm, || {});
        let tid = slot_tid(rt.rank, smid, cta.num_sms, rt.slots_per_sm.max(1), slot);
        let clocks = cta.clocks(tid);
        // A new epoch now if the last one was published (its previous
        // CTA's exit), once, rather than at the block's first accesses;
        // the fence state reset and the launch joined, all from one read
        // of the header (the block waits for this thread).
        let join = clocks.enter_claimed_cta(tid, launch);
        // SAFETY: the stream's clocks start with their header.
        let sc = unsafe { &*(stream as *const StreamClocks) };
        let state = CtaState {
            runtime,
            reports: sc.reports,
            tid,
            launch,
            smid,
            slot: slot as u16,
            join: u16::from(join),
            read_only: ReadOnlyRanges::from_words(read_only),
        };
        // SAFETY: the CTA's shared block holds a `CtaState`, 16-aligned.
        unsafe { (arch::cta_state() as *mut CtaState).write(state) };
    }
    arch::sync_threads();
    let state = CtaState::current();
    let clocks = cta.clocks(state.tid);
    // Lane states in the slot's device memory are known once the slot is:
    // cleared here, and a barrier below orders that before the body.
    super::block::reset_slot_lane(lane, lanes);
    if state.join != 0 {
        // The stream's previous kernel, then the join list (events waited
        // on, host synchronisations): each lane its share of the entries.
        if kernel > 0 {
            let prev = cta.ring_slot(stream, (kernel - 1) % STREAM_RING_SLOTS);
            join_clock_part(&clocks, state.tid, prev, lane, lanes);
        }
        // SAFETY: the stream's clocks start with their header.
        let sc = unsafe { &*(stream as *const StreamClocks) };
        for &clock in &sc.joins[..(sc.join_count as usize).min(MAX_JOINS)] {
            // SAFETY: the host lists live `num_threads`-entry clocks.
            join_clock_part(
                &clocks,
                state.tid,
                unsafe { words(clock, cta.n) },
                lane,
                lanes,
            );
        }
    }
    if state.join != 0 || super::block::needs_slot_lanes(lanes) {
        arch::sync_threads();
    }
}

#[inline(never)]
unsafe fn exit(stream: u64, kernel: u32) {
    // Every thread's accesses are done (and visible to the block) before
    // the clock is published and the slot handed on. A barrier site like
    // any other, so that threads that returned early are seen by a
    // divergent `sync_threads` the hardware completes with this barrier.
    super::block::exit_barrier();
    let st = CtaState::current();
    // SAFETY: the launch's runtime is live (run_cta's contract).
    let cta = unsafe { Cta::new(st.runtime()) };
    let clocks = cta.clocks(st.tid);
    let (lane, lanes) = lane();
    let ring = cta.ring_slot(stream, kernel % STREAM_RING_SLOTS);
    // Every thread reads the flag before the barrier below, and only the
    // first thread writes it after: the block takes one path.
    let current = clocks.ring_current();
    publish_cta_exit_part(&clocks, ring, lane, lanes, current);
    // Not `.aligned`: after a divergent barrier, lanes of one warp may
    // meet here and at a `sync_threads` of the body.
    arch::barrier_sync();
    if lane == 0 {
        clocks.lock_exclusive();
        finish_cta_exit(&clocks, st.tid, ring, current);
        clocks.unlock_exclusive();
        SmSlotWords::of(cta.slots(), st.smid).release(u32::from(st.slot));
    }
}
