//! CTA entry and exit of a sanitized entry point: the top of the GPU
//! sanitizer's layers, which runs a CTA's body between them.
//!
//! Entry writes the CTA's state into its `.shared` block, clears the
//! synchronisation state and the same-block state an earlier CTA left in
//! the CTA's `.shared` memory, and ends with one barrier. No slot is
//! claimed, no clock joined: what the host ordered before the launch is
//! in its record, read where a check needs it. The same-block layer's
//! per-CTA device memory is a region of the CTA's SM that the CTA claims
//! when it first needs it ([`super::regions`]: at entry only for a CTA
//! that keeps lane states or copies in flight there) and frees at exit.
//!
//! Exit: after the same-block layer's exit barrier (it sees threads that
//! returned early), the first thread logs what the CTA acquired of other
//! launches, if anything (`vigil_shared::race::sync::cta_exit`), for the
//! launches ordered after this one.

use vigil_shared::copies_in_flight::QueueArea;
use vigil_shared::gpu::{launch_flags, GpuRuntime};
use vigil_shared::race::memory::launch_record;
use vigil_shared::race::sync::CtaSync;
use vigil_shared::read_only::ReadOnlyRanges;

use core::sync::atomic::Ordering;

use super::cta::{lane, linear_block, sync_words, CtaState};
use super::regions;
use crate::arch::ptx as arch;

/// What the host passes a sanitized entry after the user's parameters
/// ([`vigil_shared::gpu::HIDDEN_PARAMS`], in order).
#[derive(Clone, Copy, Debug)]
pub struct LaunchArgs {
    /// The device's [`GpuRuntime`].
    pub runtime: u64,
    /// The launch's record in the launch ring.
    pub record: u64,
    /// The launch's first serial.
    pub base: u32,
    /// The context-wide launch id.
    pub launch: u32,
    /// Extension regions each CTA asks for
    /// ([`vigil_shared::gpu::extensions_wanted`]).
    pub extensions: u32,
    /// The launch's serials (its record's `launch_record::COUNT`).
    pub count: u32,
    /// Its [`launch_flags`] (`launch_record::FLAGS`).
    pub flags: u32,
    /// Its lane reference (`launch_record::TAG`).
    pub tag: u32,
    /// Its device rank (`launch_record::DEVICE`).
    pub device: u32,
    /// The bound of its own lane in its host order (the record's
    /// `launch_record::BOUNDS` word of the lane of `base`).
    pub own_bound: u32,
    /// Its entry's path word with what to tell there
    /// (`launch_record::PATH_WORD`).
    pub path_word: u64,
    /// The runtime's `real_base`.
    pub real_base: u64,
    /// The launch's read-only ranges ([`ReadOnlyRanges::from_words`]).
    pub read_only: [u64; ReadOnlyRanges::WORDS],
}

/// Runs `body` as one CTA of a sanitized launch.
///
/// # Safety
/// `args.runtime` and `args.record` must be the device addresses of a
/// live [`GpuRuntime`] and of this launch's record in its launch ring,
/// and no thread of the launch may write inside `args.read_only`, as the
/// host's sanitized launch passes them.
#[inline(always)]
#[track_caller]
pub unsafe fn run_cta(args: LaunchArgs, body: impl FnOnce()) {
    // The entry's call site: a `Location` of the kernel's module.
    let anchor = core::panic::Location::caller() as *const _ as u64;
    // SAFETY: forwarded from the caller.
    unsafe { enter(args, anchor) };
    // Here, not in `enter` and `exit`: their calls stay as small as they
    // are for a launch that keeps no copies.
    let keeps_copies = match CtaState::current().copy_queue() {
        Some(mut q) => {
            q.clear();
            true
        }
        None => false,
    };
    body();
    if keeps_copies {
        // The thread's copies still in flight complete as it returns.
        super::hooks::copies_returned();
    }
    exit();
}

/// The address of the part of the queue area of a CTA of `lanes` threads
/// in region `slot` of SM `smid` (its bulk copies and its threads'
/// queues of copies in flight), in the area `rt` holds now (its layout
/// at its start); 0 when there is none, the SM has no region in the
/// same-block table (`table_sm` false), or the area has no room for the
/// CTA.
/// Two more round trips at entry (the address, then the layout), for
/// launches that keep copies in flight only.
#[inline(always)]
fn copies_part_of(rt: &GpuRuntime, table_sm: bool, smid: u32, slot: u32, lanes: u32) -> u64 {
    // SAFETY: a field of the live runtime, which the host replaces while
    // kernels run (the old area stays alive).
    let base = unsafe { core::ptr::read_volatile(&rt.copy_queues) };
    if base == 0 || !table_sm {
        return 0;
    }
    // SAFETY: the area starts with its header, live device memory of the
    // runtime.
    let header = |at: usize| unsafe { core::ptr::read_volatile((base + at as u64) as *const u64) };
    let area = QueueArea {
        threads: header(QueueArea::THREADS_AT),
        regions: header(QueueArea::REGIONS_AT),
    };
    area.cta_part(smid, slot, lanes).map_or(0, |at| base + at)
}

/// Notes `anchor` in the launch's record (`launch_record::ANCHOR`) for
/// the host, which completes the launch's site locations from it after
/// the launch: the first block writes it (every block would write the
/// same value), with no round trip.
#[inline(always)]
fn note_anchor(record: u64, anchor: u64) {
    // SAFETY: the record's anchor words, 8-aligned (records are multiples
    // of 8 bytes in an 8-aligned ring), live for the launch.
    let at = unsafe {
        &*((record + 4 * launch_record::ANCHOR as u64) as *const core::sync::atomic::AtomicU64)
    };
    at.store(anchor, Ordering::Relaxed);
}

/// The entry of every thread, inlined into the entry point. The first
/// thread's part ([`enter_first`]) is inlined too: what it writes comes
/// from the entry's parameters (the constant bank, no round trip), and a
/// call would save the registers the call ABI keeps, to local memory, on
/// the path every other thread of the CTA waits for at the barrier.
#[inline(always)]
unsafe fn enter(args: LaunchArgs, anchor: u64) {
    let (lane, lanes) = lane();
    super::block::reset_cta(lane, lanes);
    if let Some(word) = ReadOnlyRanges::word_stored_by(lane, lanes) {
        // Selected, not indexed: an indexed array of the entry's
        // parameters would be built in local memory by every thread.
        let value =
            (0..ReadOnlyRanges::WORDS)
                .fold(0, |v, i| if i == word { args.read_only[i] } else { v });
        let state = arch::cta_state() as *mut CtaState;
        // SAFETY: the CTA's shared block holds a `CtaState`, 16-aligned,
        // whose read-only ranges are `ReadOnlyRanges::WORDS` `u64`s
        // (`ReadOnlyRanges::from_words`); no other thread writes this one
        // before the barrier.
        unsafe {
            (&raw mut (*state).read_only)
                .cast::<u64>()
                .add(word)
                .write(value)
        };
    }
    if lane == 0 {
        if ReadOnlyRanges::stored_by_first_thread(lanes) {
            let state = arch::cta_state() as *mut CtaState;
            // SAFETY: as above; only this thread writes them.
            unsafe { (*state).read_only = ReadOnlyRanges::from_words(args.read_only) };
        }
        // SAFETY: forwarded from the caller.
        unsafe { enter_first(&args, anchor, lanes) };
    }
    arch::sync_threads();
    // `lanes` is the same for every thread: all of them or none take it.
    if super::block::needs_slot_lanes(lanes) {
        super::block::reset_slot_lane(lane, lanes);
        arch::sync_threads();
    }
}

/// The first thread's part of [`enter`]: the launch's parameters into the
/// CTA's state, the claim of its region when it needs one from the start,
/// its synchronisation state.
///
/// # Safety
/// As [`run_cta`]'s.
#[inline(always)]
unsafe fn enter_first(args: &LaunchArgs, anchor: u64, lanes: u32) {
    let state = arch::cta_state() as *mut CtaState;
    let smid = arch::smid();
    let block = linear_block();
    if block == 0 {
        note_anchor(args.record, anchor);
    }
    let serial = if args.flags & launch_flags::ONE_SERIAL != 0 {
        args.base
    } else {
        args.base + block
    };
    // Field by field: the read-only ranges are other threads' to write.
    // SAFETY: the CTA's shared block holds a `CtaState`, 16-aligned; only
    // this thread writes these fields before the barrier.
    unsafe {
        (*state).runtime = args.runtime;
        (*state).record = args.record;
        (*state).real_base = args.real_base;
        (*state).tid = serial;
        (*state).base = args.base;
        (*state).count = args.count;
        (*state).launch = args.launch;
        (*state).launch_ref = args.tag;
        (*state).device = args.device;
        (*state).smid = smid;
        (*state).own_bound = args.own_bound;
        (*state).extensions_wanted = args.extensions.min(u32::from(u8::MAX)) as u8;
        (*state).general_path = 0;
        (*state).path_word = args.path_word;
    }
    // A CTA whose threads keep lane states or copies in flight in its
    // region needs it from the start, and one of an entry whose CTAs
    // claimed theirs in an earlier launch will likely need it: it claims
    // now, while the other threads wait at the entry's barrier anyway;
    // any other claims when a thread first needs it, if ever.
    let keeps_copies = args.flags & launch_flags::COPIES_IN_FLIGHT != 0;
    let eager = keeps_copies
        || args.flags & launch_flags::CLAIM_AT_ENTRY != 0
        || super::block::needs_slot_lanes(lanes);
    let copies = if eager {
        claim_at_entry(lanes, keeps_copies)
    } else {
        regions::publish_at_entry(None);
        0
    };
    // SAFETY: as above.
    unsafe {
        (*state).region_used = u8::from(eager);
        (*state).copies = copies;
    }
    CtaSync::<vigil_shared::atomic::CoreAtomics>::new(sync_words()).init();
}

/// The claim of the CTA's region at entry, and the address of its part
/// of the queue area of copies in flight when it keeps them (else 0): a
/// call, made by the first thread of the CTAs that claim at entry only,
/// once it wrote the CTA's state.
#[inline(never)]
fn claim_at_entry(lanes: u32, keeps_copies: bool) -> u64 {
    let st = CtaState::current();
    let held = regions::claim(&st);
    let copies = if keeps_copies {
        let rt = st.runtime();
        copies_part_of(
            rt,
            regions::sm_has_regions(rt, st.smid),
            st.smid,
            held.slot,
            lanes,
        )
    } else {
        0
    };
    regions::publish_at_entry(Some(held));
    copies
}

/// The exit of every thread, inlined into the entry point as [`enter`]
/// is; the first thread's work is a call it makes alone
/// ([`exit_first`]).
#[inline(always)]
fn exit() {
    // Every thread's accesses are done. A barrier site like any other, so
    // that threads that returned early are seen by a divergent
    // `sync_threads` the hardware completes with this barrier.
    super::block::exit_barrier();
    if lane().0 == 0 {
        exit_first();
    }
}

/// The first thread's part of [`exit`], once every thread passed the exit
/// barrier.
#[inline(never)]
fn exit_first() {
    // What the CTA acquired of other launches, if anything, goes to the
    // exit log for the launches ordered after this one.
    let st = CtaState::current();
    super::cta::tell_paths(&st, regions::claimed(&st));
    let sync = st.sync();
    if !sync.known().is_none() {
        let mem = st.memory();
        let view = st.view(&mem);
        vigil_shared::race::sync::cta_exit(&mem, &view, &sync);
    }
    // Every thread passed the exit barrier: the regions are unused. A
    // release when a thread wrote in them: a release fence would also
    // invalidate the SM's L1 (its acquire half), which the CTAs still
    // running there pay for, and one that wrote nothing there waits for
    // no fence (for a streaming kernel's output to reach the device's
    // memory).
    regions::give_back_held(&st);
}
