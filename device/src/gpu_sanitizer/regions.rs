//! The regions of its SM a CTA holds (`vigil_shared::regions`): the
//! same-block layer's per-CTA device memory (its same-block table and
//! extension regions, its window shadow, the lane states past `.shared`,
//! its queues of copies in flight), claimed when the CTA first needs them
//! and given back at its exit.
//!
//! A CTA whose accesses never reach that memory (a streaming kernel's,
//! whose reads are of read-only views and whose writes are to
//! thread-owned partitions) claims nothing: its entry waits for no
//! claim, whose acquire is a round trip that also invalidates the SM's
//! L1 for every CTA on it, and its exit gives nothing back. A CTA that
//! keeps lane states or copies in flight in its region claims at entry,
//! as does one whose launch asks it to (`launch_flags::CLAIM_AT_ENTRY`:
//! it checks shared memory through the window shadow, or CTAs of an
//! earlier launch of its kernel claimed in their body).
//!
//! The claim is made once a CTA (`vigil_shared::regions::claim_once`,
//! on a word of the CTA's `.shared` state at the CTA's scope): the first
//! thread that needs the regions claims for the CTA and publishes what it
//! holds; a thread that comes meanwhile waits for it.

use core::mem::offset_of;
use core::sync::atomic::{AtomicU64, Ordering};

use vigil_shared::block::WINDOW_AT;
use vigil_shared::gpu::{GpuRuntime, EXTENSIONS_PER_SM, REGIONS_PER_SM, REGION_MASK_SMS};
use vigil_shared::regions::{
    claim_once, claim_region, give_back, ClaimWord, ExtensionShare, CLAIMING, UNCLAIMED,
};

use super::cta::{lane, CtaState};
use super::device_atomics::{DeviceAtomics, DeviceU64};
use crate::arch::ptx as arch;

/// The byte of the CTA's state that holds its regions (`CtaState::regions`).
const AT: usize = offset_of!(CtaState, regions);

/// The CTA's word of its regions in its `.shared` state, at the CTA's
/// scope.
struct StateWord;

impl ClaimWord for StateWord {
    #[inline(always)]
    fn load_acquire(&self) -> u32 {
        arch::cta_state_word_acquire::<AT>()
    }

    #[inline(always)]
    fn cas_relaxed(&self, current: u32, new: u32) -> bool {
        arch::cta_state_word_cas::<AT>(current, new) == current
    }

    #[inline(always)]
    fn store_release(&self, value: u32) {
        arch::cta_state_word_release::<AT>(value)
    }

    #[inline(always)]
    fn wait(&self) {
        arch::backoff()
    }
}

/// The regions a CTA holds on its SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HeldRegions {
    /// Its own region of the SM ...
    pub slot: u32,
    /// ... the first of the SM's extension regions it holds ...
    pub extension: u32,
    /// ... and how many.
    pub extensions: u32,
}

// A packed word stays below the claim's two markers.
const _: () = assert!(REGIONS_PER_SM <= 1 << 16 && EXTENSIONS_PER_SM < 1 << 8);

impl HeldRegions {
    /// The regions as the state's word keeps them.
    #[inline(always)]
    fn packed(self) -> u32 {
        self.slot | self.extension << 16 | self.extensions << 24
    }

    /// The regions the state's word `w` names; `None` while unclaimed or
    /// being claimed.
    #[inline(always)]
    fn unpacked(w: u32) -> Option<HeldRegions> {
        (w < CLAIMING).then(|| HeldRegions::decoded(w))
    }

    /// The regions a word below [`CLAIMING`] names.
    #[inline(always)]
    fn decoded(w: u32) -> HeldRegions {
        HeldRegions {
            slot: w & 0xffff,
            extension: (w >> 16) & 0xff,
            extensions: w >> 24,
        }
    }

    /// Its region, counted over the device's SMs (the same-block layer's
    /// index of its per-CTA memory), on SM `smid`.
    #[inline(always)]
    pub fn device_slot(self, smid: u32) -> u32 {
        smid * REGIONS_PER_SM + self.slot
    }

    /// Its first extension region on SM `smid`, counted as the same-block
    /// table of runtime `rt` counts regions (after every SM's own
    /// regions; meaningful when it holds any).
    #[inline(always)]
    pub fn extension_slot(self, rt: &GpuRuntime, smid: u32) -> u32 {
        rt.block_table_slots + smid * EXTENSIONS_PER_SM + self.extension
    }
}

/// The CTA's regions, claimed now if no thread of it has yet: one load
/// from `.shared` once they are.
#[inline(always)]
pub(super) fn held() -> HeldRegions {
    held_if_claimed().unwrap_or_else(claim_at_first_need)
}

/// The CTA's regions if a thread of it claimed them (none is claimed
/// here): one load from `.shared`, and no call, so that the whole-warp
/// calls of the same-block check keep their frames. Their callers claim
/// first ([`claim_if_unclaimed`]).
#[inline(always)]
pub(super) fn held_if_claimed() -> Option<HeldRegions> {
    HeldRegions::unpacked(StateWord.load_acquire())
}

/// Claims the CTA's regions if no thread of it has yet, or waits for the
/// thread claiming them: inlined where an access is about to be checked
/// against its block, ahead of the calls that check it.
#[inline(always)]
pub(super) fn claim_if_unclaimed() {
    if arch::cta_state_word::<AT>() >= CLAIMING {
        claim_at_first_need();
    }
}

/// The claim of [`held`], made by the first thread that gets there; the
/// others wait for its result.
#[inline(never)]
fn claim_at_first_need() -> HeldRegions {
    // Below the markers: the claim's own word, or another thread's.
    HeldRegions::decoded(claim_once(&StateWord, || {
        claim(&CtaState::current()).packed()
    }))
}

/// Claims regions for the CTA whose state is `st` (its runtime, SM,
/// region to try first and extensions wanted) and keeps the runtime's
/// window shadow for it: what the caller stores in the state's word
/// ([`claim_at_first_need`], or the entry's first thread before its
/// barrier: [`publish_at_entry`]).
#[inline(always)]
pub(super) fn claim(st: &CtaState) -> HeldRegions {
    let rt = st.runtime();
    // Loaded before the claim, whose acquire would hold them back.
    let window = current_window(rt);
    let table_sm = sm_has_regions(rt, st.smid);
    let masks = sm_masks(st.runtime, st.smid);
    let guess = region_guess(lane().1);
    let share = ExtensionShare::of(guess, u32::from(st.extensions_wanted));
    let (slot, before) = claim_region::<DeviceAtomics>(masks, guess, share);
    let (extension, extensions) = if share.mask == 0 {
        (0, 0)
    } else {
        share.keep::<DeviceAtomics>(masks, before, table_sm)
    };
    set_window(window);
    HeldRegions {
        slot,
        extension,
        extensions,
    }
}

/// Stores the regions `h` the entry's first thread claimed in the CTA's
/// state, before the entry's barrier (which publishes them).
#[inline(always)]
pub(super) fn publish_at_entry(h: Option<HeldRegions>) {
    let w = h.map_or(UNCLAIMED, HeldRegions::packed);
    // SAFETY: the CTA's shared block holds a `CtaState`, 16-aligned; no
    // other thread reads its regions before the entry's barrier.
    unsafe {
        core::ptr::write_volatile(&raw mut (*(arch::cta_state() as *mut CtaState)).regions, w)
    };
}

/// Gives the regions of the CTA whose state is `st` back, if it claimed
/// any: the exit's first thread, once every thread passed the exit
/// barrier (every claim is done and published).
#[inline(always)]
pub(super) fn give_back_held(st: &CtaState) {
    if let Some(h) = HeldRegions::unpacked(st.regions) {
        give_back::<DeviceAtomics>(
            sm_masks(st.runtime, st.smid),
            h.slot,
            h.extension,
            h.extensions,
            st.region_used != 0,
        );
    }
}

/// Whether the CTA whose state is `st` holds regions: the exit's first
/// thread, once every thread passed the exit barrier.
#[inline(always)]
pub(super) fn claimed(st: &CtaState) -> bool {
    HeldRegions::unpacked(st.regions).is_some()
}

/// Whether SM `smid` has regions in the same-block memory of runtime
/// `rt` (the runtime sizes it for its device's SMs; a CTA on an SM past
/// them checks nothing against its block).
#[inline(always)]
pub(super) fn sm_has_regions(rt: &GpuRuntime, smid: u32) -> bool {
    smid < rt.block_table_slots / REGIONS_PER_SM
}

/// The region a CTA of `lanes` threads tries first: the claiming warp's
/// slot on the SM over the CTA's warps, distinct among the SM's resident
/// CTAs when the SM gives each CTA consecutive slots, as it does. Worked
/// out at the claim, not at entry: a division on the path of every CTA's
/// entry, for a guess most CTAs never need.
#[inline(always)]
fn region_guess(lanes: u32) -> u32 {
    (arch::warp_slot() / lanes.div_ceil(32).max(1)) % REGIONS_PER_SM
}

/// The masks word of SM `smid` of the runtime at `runtime`
/// ([`vigil_shared::regions`]: its held regions and extension regions):
/// an address computed from the state, so that the claim goes out
/// without a load before it. Device-scoped atomics on it: only the
/// device's CTAs claim its regions, and a `core` atomic would be
/// system-scoped (a release of one a `MEMBAR.SYS`).
#[inline(always)]
fn sm_masks(runtime: u64, smid: u32) -> &'static DeviceU64 {
    // SAFETY: the runtime's REGION_MASK_SMS masks words follow its
    // descriptor, 8-aligned, live as long as the runtime; every access
    // to them is atomic.
    unsafe {
        &*((runtime + GpuRuntime::REGION_MASKS_AT as u64) as *const DeviceU64)
            .wrapping_add((smid % REGION_MASK_SMS) as usize)
    }
}

/// The address of the window shadow `rt` holds now. The host replaces the
/// region while kernels run (a larger one): a CTA reads its address once,
/// as it claims its regions ([`set_window`]); the region's header says
/// its size.
#[inline(always)]
fn current_window(rt: &GpuRuntime) -> u64 {
    // SAFETY: a field of the live runtime.
    unsafe { core::ptr::read_volatile(&rt.block_shadow) }
}

/// Keeps `window` ([`current_window`] at the claim) as the CTA's window
/// shadow, in its block-race counters (`vigil_shared::block::WINDOW_AT`),
/// before the claim is published.
#[inline(always)]
fn set_window(window: u64) {
    // SAFETY: the window word of the CTA's `.shared` counters, 8-aligned.
    unsafe { &*(arch::block_counters().add(WINDOW_AT) as *const AtomicU64) }
        .store(window, Ordering::Relaxed);
}
