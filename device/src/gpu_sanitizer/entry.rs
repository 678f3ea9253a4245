//! CTA entry and exit of a sanitized entry point: the top of the GPU
//! sanitizer's layers, which runs a CTA's body between them.
//!
//! Entry writes the CTA's state into its `.shared` block, clears the
//! synchronisation state and the same-block state an earlier CTA left in
//! the CTA's `.shared` memory, and ends with one barrier. No slot is
//! claimed, no clock joined: what the host ordered before the launch is
//! in its record, read where a check needs it. The same-block layer's
//! per-CTA device memory is a region of the CTA's SM that the CTA claims
//! in the SM's region mask at entry and frees at exit.
//!
//! Exit: after the same-block layer's exit barrier (it sees threads that
//! returned early), the first thread logs what the CTA acquired of other
//! launches, if anything (`vigil_shared::race::sync::cta_exit`), for the
//! launches ordered after this one.

use vigil_shared::copies_in_flight::QueueArea;
use vigil_shared::gpu::{
    extension_mask, extension_run, free_share, launch_flags, run_mask, GpuRuntime,
    EXTENSIONS_PER_SM, REGIONS_PER_SM, REGION_MASK_SMS,
};
use vigil_shared::race::memory::launch_record;
use vigil_shared::race::serial::lane_of;
use vigil_shared::race::sync::CtaSync;
use vigil_shared::read_only::ReadOnlyRanges;

use core::sync::atomic::Ordering;

use super::cta::{lane, linear_block, record_words, sync_words, CtaState};
use crate::arch::ptx as arch;
use crate::atomic::sealed::{ArchAnd, ArchOr};
use vigil_shared::{Ordering as MemoryOrder, Scope};

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

/// The mask of the regions held on SM `smid` of the runtime at
/// `runtime`: an address computed from the entry's parameters, so that
/// the claim goes out without a load before it. Device-scoped atomics on
/// it: only the device's CTAs claim its regions, and a `core` atomic
/// would be system-scoped (a release of one a `MEMBAR.SYS`).
#[inline(always)]
fn region_mask(runtime: u64, smid: u32) -> *mut u32 {
    // SAFETY (of the offset): the runtime's REGION_MASK_SMS region masks
    // follow its descriptor, live as long as the runtime.
    ((runtime + GpuRuntime::REGION_MASKS_AT as u64) as *mut u32)
        .wrapping_add((smid % REGION_MASK_SMS) as usize)
}

/// The extension mask of the SM whose region mask is `region_mask`.
#[inline(always)]
fn extension_masks_after(region_mask: *mut u32) -> *mut u32 {
    // SAFETY (of the offset): the extension masks follow the region
    // masks, as many, live as long as the runtime.
    region_mask.wrapping_add(REGION_MASK_SMS as usize)
}

/// A claim of extension regions of an SM (see [`ExtensionClaim::issue`]).
struct ExtensionClaim {
    /// The SM's extension mask.
    at: *mut u32,
    /// The share asked for ...
    mask: u32,
    /// ... how many that is ...
    wanted: u32,
    /// ... and the mask as the claim found it.
    before: u32,
}

impl ExtensionClaim {
    /// Sets the bits of the extension regions of the SM whose region mask
    /// is `region_mask` that a CTA trying region `guess` first asks for
    /// (`wanted`, [`extension_mask`]); `None` when it asks for none. The
    /// caller issues the region's claim before it
    /// [`finish`](Self::finish)es this one, so that both round trips
    /// overlap; it learns only then whether the SM has extension regions
    /// at all (every SM has a mask).
    ///
    /// Relaxed, so that the region's acquire does not hold it back: the
    /// regions' previous holders ran on the same SM and released them
    /// after a fence (`release_regions`), and this CTA touches them only
    /// once the result is back and past the region's acquire and the
    /// entry's barrier.
    #[inline(always)]
    fn issue(region_mask: *mut u32, guess: u32, wanted: u32) -> Option<ExtensionClaim> {
        let wanted = wanted.min(EXTENSIONS_PER_SM);
        let mask = extension_mask(guess % REGIONS_PER_SM, wanted);
        if mask == 0 {
            return None;
        }
        let at = extension_masks_after(region_mask);
        Some(ExtensionClaim {
            at,
            mask,
            wanted,
            before: Self::set(at, mask),
        })
    }

    /// Sets `m`'s bits in the mask at `at`: what it held before.
    #[inline(always)]
    fn set(at: *mut u32, m: u32) -> u32 {
        // SAFETY: an extension mask of the live runtime, 4-aligned.
        unsafe { u32::arch_or(at, m, MemoryOrder::Relaxed, Scope::Device) }
    }

    /// The regions the claim keeps, `(first, count)`: none on an SM
    /// without extension regions (`usable` false: all it took goes back);
    /// when its share was taken in part, it tries once more at a share it
    /// saw wholly free ([`free_share`]), keeps the lowest run of the
    /// larger catch and gives the rest back at once.
    #[inline(always)]
    fn finish(self, usable: bool) -> (u32, u32) {
        let got = self.mask & !self.before;
        if !usable {
            if got != 0 {
                // SAFETY: as in `set`; nothing was done in them.
                unsafe { u32::arch_and(self.at, !got, MemoryOrder::Relaxed, Scope::Device) };
            }
            return (0, 0);
        }
        let (mut kept, mut taken) = (got, got);
        if got != self.mask {
            let other = free_share(!(self.before | self.mask), self.wanted);
            if other != 0 {
                let more = other & !Self::set(self.at, other);
                taken |= more;
                if more.count_ones() > got.count_ones() {
                    kept = more;
                }
            }
        }
        let (first, count) = extension_run(kept);
        let rest = taken & !run_mask(first, count);
        if rest != 0 {
            // SAFETY: as in `set`; nothing was done in them.
            unsafe { u32::arch_and(self.at, !rest, MemoryOrder::Relaxed, Scope::Device) };
        }
        (first, count)
    }
}

/// Claims a free region of the SM whose region mask is `mask` (its
/// same-block memory, which no
/// other running CTA holds until `release_regions`), trying region `guess`
/// first: one round trip when it is free. A region taken already makes
/// the returned mask name a free one to try next; an SM holds at most
/// [`REGIONS_PER_SM`] CTAs, so one frees up. Setting a bit another CTA
/// holds changes nothing.
#[inline(always)]
fn claim_region(mask: *mut u32, guess: u32) -> u32 {
    let mut bit = guess % REGIONS_PER_SM;
    loop {
        // Acquire: the region's previous holder finished with it.
        // SAFETY: a region mask of the live runtime, 4-aligned.
        let held = unsafe { u32::arch_or(mask, 1 << bit, MemoryOrder::Acquire, Scope::Device) };
        if held & (1 << bit) == 0 {
            return bit;
        }
        let free = !(held | 1 << bit);
        if free == 0 {
            core::hint::spin_loop();
        } else {
            bit = free.trailing_zeros() % REGIONS_PER_SM;
        }
    }
}

/// The region a CTA tries first: its first warp's slot on the SM over the
/// CTA's warps, distinct among the SM's resident CTAs when the SM gives
/// each CTA consecutive slots, as it does.
#[inline(always)]
fn region_guess(lanes: u32) -> u32 {
    arch::warp_slot() / lanes.div_ceil(32).max(1)
}

/// Gives the CTA's region and its `count` extension regions from `first`
/// back: everything it did in their memory is done. When it wrote there
/// (`used`), the region's bit is cleared by a release reduction: a release
/// fence would also invalidate the SM's L1 (its acquire half), which the
/// CTAs still running there pay for; with extensions to give back too,
/// one fence serves both. A CTA that wrote nothing there has nothing to
/// order before the next holder's claim and gives them back relaxed: no
/// fence waits for its other stores (a streaming kernel's output) to
/// reach the device's memory. The next holder still synchronises with
/// the last holder that wrote: relaxed read-modify-writes continue that
/// holder's release sequence.
#[inline(always)]
fn release_regions(region_mask: *mut u32, region: u32, first: u32, count: u32, used: bool) {
    let region_order = if count != 0 {
        if used {
            arch::fence(MemoryOrder::Release, Scope::Device);
        }
        // SAFETY: an extension mask of the live runtime, 4-aligned.
        unsafe {
            u32::arch_and(
                extension_masks_after(region_mask),
                !run_mask(first, count),
                MemoryOrder::Relaxed,
                Scope::Device,
            )
        };
        MemoryOrder::Relaxed
    } else if used {
        MemoryOrder::Release
    } else {
        MemoryOrder::Relaxed
    };
    // SAFETY: a region mask of the live runtime, 4-aligned.
    unsafe { u32::arch_and(region_mask, !(1 << region), region_order, Scope::Device) };
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

#[inline(never)]
unsafe fn enter(args: LaunchArgs, anchor: u64) {
    let LaunchArgs {
        runtime,
        record,
        base,
        launch,
        extensions,
        read_only,
    } = args;
    // SAFETY: the caller passes a live runtime.
    let rt = unsafe { &*(runtime as *const GpuRuntime) };
    let (lane, lanes) = lane();
    super::block::reset_cta(lane, lanes);
    let state = arch::cta_state() as *mut CtaState;
    if let Some(word) = ReadOnlyRanges::word_stored_by(lane, lanes) {
        // SAFETY: the CTA's shared block holds a `CtaState`, 16-aligned,
        // whose read-only ranges are `ReadOnlyRanges::WORDS` `u64`s
        // (`ReadOnlyRanges::from_words`); no other thread writes this one
        // before the barrier.
        unsafe {
            (&raw mut (*state).read_only)
                .cast::<u64>()
                .add(word)
                .write(read_only[word])
        };
    }
    if lane == 0 {
        // Every load the entry needs is issued before the region's claim,
        // whose acquire would hold back (and refetch past an invalidated
        // L1) whatever is loaded after it: the entry waits for one round
        // trip.
        let window = super::block::current_window(rt);
        let rec = record_words(record);
        let count = rec[launch_record::COUNT];
        let flags = rec[launch_record::FLAGS];
        let launch_ref = rec[launch_record::TAG];
        let own_bound = rec[launch_record::BOUNDS + lane_of(base)];
        let device = rec[launch_record::DEVICE];
        let real_base = rt.real_base;
        let table_slots = rt.block_table_slots;
        let smid = arch::smid();
        let guess = region_guess(lanes);
        let mask = region_mask(runtime, smid);
        let extension_claim = ExtensionClaim::issue(mask, guess, extensions);
        let slot = claim_region(mask, guess) as u16;
        let table_sm = smid < table_slots / REGIONS_PER_SM;
        let (extension, extensions) =
            extension_claim.map_or((0, 0), |claim| claim.finish(table_sm));
        let block = linear_block();
        if block == 0 {
            note_anchor(record, anchor);
        }
        let copies = if flags & launch_flags::COPIES_IN_FLIGHT != 0 {
            copies_part_of(rt, table_sm, smid, u32::from(slot), lanes)
        } else {
            0
        };
        let serial = if flags & launch_flags::ONE_SERIAL != 0 {
            base
        } else {
            base + block
        };
        super::block::set_window(window);
        // Field by field: the read-only ranges are other threads' to write.
        // SAFETY: as above; only this thread writes these fields before
        // the barrier.
        unsafe {
            (*state).runtime = runtime;
            (*state).record = record;
            (*state).real_base = real_base;
            (*state).tid = serial;
            (*state).base = base;
            (*state).count = count;
            (*state).launch = launch;
            (*state).launch_ref = launch_ref;
            (*state).device = device;
            (*state).smid = smid;
            (*state).own_bound = own_bound;
            (*state).slot = slot;
            (*state).extension = extension as u8;
            (*state).extensions = extensions as u8;
            (*state).region_used = u32::from(copies != 0 || super::block::needs_slot_lanes(lanes));
            (*state).copies = copies;
            if lanes <= ReadOnlyRanges::WORDS as u32 {
                (*state).read_only = ReadOnlyRanges::from_words(read_only);
            }
        }
        CtaSync::<vigil_shared::atomic::CoreAtomics>::new(sync_words()).init();
    }
    arch::sync_threads();
    // `lanes` is the same for every thread: all of them or none take it.
    if super::block::needs_slot_lanes(lanes) {
        super::block::reset_slot_lane(lane, lanes);
        arch::sync_threads();
    }
}

#[inline(never)]
fn exit() {
    // Every thread's accesses are done. A barrier site like any other, so
    // that threads that returned early are seen by a divergent
    // `sync_threads` the hardware completes with this barrier.
    super::block::exit_barrier();
    let (lane, _) = lane();
    if lane == 0 {
        // What the CTA acquired of other launches, if anything, goes to
        // the exit log for the launches ordered after this one.
        let st = CtaState::current();
        let sync = st.sync();
        if !sync.known().is_none() {
            let mem = st.memory();
            let view = st.view(&mem);
            vigil_shared::race::sync::cta_exit(&mem, &view, &sync);
        }
        // Every thread passed the exit barrier: the regions are unused.
        release_regions(
            region_mask(st.runtime, st.smid),
            u32::from(st.slot),
            u32::from(st.extension),
            u32::from(st.extensions),
            st.region_used != 0,
        );
    }
}
