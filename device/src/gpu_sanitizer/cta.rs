//! CTA entry and exit of a sanitized entry point (design 3.2).
//!
//! Entry: the block's first thread claims a slot of its SM, initialises
//! the slot's thread state if it was never used, acquires the exit clocks
//! of the stream's previous kernel and of the stream's join list, and
//! broadcasts the sanitizer thread through shared memory; a barrier makes
//! it visible to the block before any access. Exit: a barrier (every
//! thread of the block is done), then the first thread publishes the
//! clock into the stream's ring and frees the slot.

use core::sync::atomic::AtomicU32;

use vigil_shared::atomic::CoreAtomics;
use vigil_shared::clock::ThreadClocks;
use vigil_shared::engine::{Engine, EngineMemory};
use vigil_shared::gpu::{slot_tid, GpuRuntime, SmSlots, StreamClocks, MAX_JOINS};

use super::memory::RuntimeMemory;
use super::slots::SmSlotWords;
use crate::arch::ptx as arch;

/// What every thread of a CTA needs to find its sanitizer thread; it
/// lives in the module's `.shared` block (`arch::cta_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct CtaState {
    /// The device's [`GpuRuntime`].
    pub runtime: u64,
    /// The sanitizer thread (the claimed slot's).
    pub tid: u32,
    /// Context-wide launch id (reports name the kernel by it).
    pub launch: u32,
    /// SM the CTA runs on.
    pub smid: u32,
    /// Slot it holds there.
    pub slot: u32,
}
const _: () = assert!(core::mem::size_of::<CtaState>() <= 32);

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
}

#[inline(always)]
fn first_thread() -> bool {
    arch::thread_idx_x() == 0 && arch::thread_idx_y() == 0 && arch::thread_idx_z() == 0
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

/// Runs `body` as one CTA of a sanitized launch.
///
/// # Safety
/// `runtime` and `stream` must be the device addresses of a live
/// [`GpuRuntime`] and [`StreamClocks`] of matching sizes, as the host's
/// sanitized launch passes them.
#[inline(always)]
pub unsafe fn run_cta(runtime: u64, stream: u64, kernel: u32, launch: u32, body: impl FnOnce()) {
    // SAFETY: forwarded from the caller.
    unsafe { enter(runtime, stream, kernel, launch) };
    body();
    // SAFETY: as above.
    unsafe { exit(stream, kernel) };
}

#[inline(never)]
unsafe fn enter(runtime: u64, stream: u64, kernel: u32, launch: u32) {
    if first_thread() {
        // SAFETY: the caller passes a live runtime.
        let rt = unsafe { &*(runtime as *const GpuRuntime) };
        // SAFETY: as above.
        let mem = unsafe { RuntimeMemory::new(rt) };
        let cfg = mem.config();
        let num_sms = cfg.num_sms / rt.slots_per_sm.max(1);
        let smid = arch::smid();
        // SAFETY: the slot table holds `SmSlots` for every SM.
        let table = unsafe { words(rt.slot_table, num_sms as usize * SmSlots::WORDS) };
        let slot = SmSlotWords::of(table, smid).claim(rt.slots_per_sm, || {});
        let tid = slot_tid(rt.rank, smid, num_sms, rt.slots_per_sm.max(1), slot);
        let engine = Engine::new(&mem, cfg);
        // Lazy initialisation: the host only zeroes the thread states.
        let clocks = ThreadClocks::<CoreAtomics>::new(
            mem.thread_state(tid),
            cfg.num_threads,
            cfg.clock_buffer_size,
        );
        if clocks.tid() != tid || clocks.get(tid) == 0 {
            engine.init_thread(tid);
        }
        let n = cfg.num_threads as usize;
        // SAFETY: the stream's clocks hold a header and a 3-slot ring.
        let (ring, sc) = unsafe {
            (
                words(stream + StreamClocks::RING_OFFSET, 3 * n),
                &*(stream as *const StreamClocks),
            )
        };
        engine.kernel_entry(tid, ring, kernel);
        // A join source is one clock: a one-slot ring read as kernel 1.
        for &clock in &sc.joins[..(sc.join_count as usize).min(MAX_JOINS)] {
            // SAFETY: the host lists live `num_threads`-entry clocks.
            engine.kernel_entry(tid, unsafe { words(clock, n) }, 1);
        }
        let state = CtaState {
            runtime,
            tid,
            launch,
            smid,
            slot,
        };
        // SAFETY: the CTA's shared block is 32 bytes, 16-aligned.
        unsafe { (arch::cta_state() as *mut CtaState).write(state) };
    }
    arch::sync_threads();
}

#[inline(never)]
unsafe fn exit(stream: u64, kernel: u32) {
    // Every thread's accesses are done (and visible to the first thread)
    // before the clock is published and the slot handed on.
    arch::sync_threads();
    if first_thread() {
        let st = CtaState::current();
        let rt = st.runtime();
        // SAFETY: the launch's runtime and stream are live (run_cta's contract).
        let mem = unsafe { RuntimeMemory::new(rt) };
        let cfg = mem.config();
        let n = cfg.num_threads as usize;
        let num_sms = cfg.num_sms / rt.slots_per_sm.max(1);
        // SAFETY: as above.
        let (ring, table) = unsafe {
            (
                words(stream + StreamClocks::RING_OFFSET, 3 * n),
                words(rt.slot_table, num_sms as usize * SmSlots::WORDS),
            )
        };
        Engine::new(&mem, cfg).kernel_exit(st.tid, ring, kernel);
        SmSlotWords::of(table, st.smid).release(st.slot);
    }
}
