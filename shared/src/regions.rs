//! How the CTAs of one SM hand its same-block regions
//! ([`REGIONS_PER_SM`] regions and [`EXTENSIONS_PER_SM`] extension
//! regions) on to each other: the word that says which are held, the
//! claim a CTA's entry makes and the give-back its exit makes.
//!
//! A region's next holder must see everything its last holder that wrote
//! there wrote. An SM's held regions and held extension regions share one
//! 64-bit word ([`masks_bits`]; the runtime's
//! [`REGION_MASKS_AT`](crate::gpu::GpuRuntime::REGION_MASKS_AT)), so that
//! one read-modify-write claims both and one gives both back, and the
//! claim's acquire reads the very word the last holder released:
//!
//! - **Claim** ([`claim_region`], then [`ExtensionShare::keep`]): an
//!   acquiring read-modify-write that sets the bits of the region a CTA
//!   tries and of the extension share it asks for ([`CLAIM`]). A second
//!   try (its region or part of its share was taken) is another one, for
//!   what it tries then. Extensions never wait: a CTA that waited for
//!   them could wait for CTAs that wait for it.
//! - **First need** ([`claim_once`]): a CTA claims when one of its
//!   threads first needs its regions, not at entry (a CTA that needs
//!   none makes no claim); the first thread to get there claims for the
//!   whole CTA and publishes what it holds in a word of the CTA's, and the
//!   others wait for it.
//! - **Give-back** ([`give_back`]): one read-modify-write that clears all
//!   of a CTA's bits, a release when one of its threads wrote in its
//!   regions, relaxed when none did. The next holder still synchronises
//!   with the last holder that wrote, whose release sequence every later
//!   read-modify-write of the word continues.
//!
//! Generic over the atomics ([`AtomicFamily`], [`ClaimWord`]): the device
//! runs it on the GPU's device-scoped atomics and a CTA-scoped word of
//! its `.shared` state, and `shared/tests/loom_protocols.rs` model-checks
//! the hand-over and the first need with loom's.

use core::sync::atomic::Ordering as MemOrder;

use crate::atomic::{AtomicFamily, AtomicU64Ops};
use crate::gpu::{
    extension_mask, extension_run, free_share, run_mask, EXTENSIONS_PER_SM, REGIONS_PER_SM,
};

/// Where an SM's extension-region bits start in its masks word (its
/// region bits are the low 32).
pub const EXTENSION_SHIFT: u32 = 32;

/// The bits of region `region` (none when `None`) and of the extension
/// regions in `extensions` (bit `e`: extension region `e`) in an SM's
/// masks word.
pub const fn masks_bits(region: Option<u32>, extensions: u32) -> u64 {
    let region = match region {
        Some(r) => 1 << r,
        None => 0,
    };
    region | (extensions as u64) << EXTENSION_SHIFT
}

/// The region bits of a masks word.
pub const fn held_regions(masks: u64) -> u32 {
    masks as u32
}

/// The extension-region bits of a masks word.
pub const fn held_extensions(masks: u64) -> u32 {
    (masks >> EXTENSION_SHIFT) as u32
}

/// The ordering of a CTA's claims in its SM's masks word.
pub const CLAIM: MemOrder = MemOrder::Acquire;

/// The ordering of the read-modify-write that gives a CTA's regions back:
/// a release when one of its threads wrote in them (`used`), relaxed
/// otherwise, so that a CTA that needed no same-block record waits for no
/// fence as it exits.
pub const fn release(used: bool) -> MemOrder {
    if used {
        MemOrder::Release
    } else {
        MemOrder::Relaxed
    }
}

/// Sets `bits` in the masks word with the claims' ordering: what it held
/// before.
#[inline(always)]
fn claim_bits<F: AtomicFamily>(word: &F::U64, bits: u64) -> u64 {
    word.fetch_or(bits, CLAIM)
}

/// Clears `bits` in the masks word, relaxed: regions the CTA claimed and
/// did nothing in.
#[inline(always)]
fn drop_bits<F: AtomicFamily>(word: &F::U64, bits: u64) {
    word.fetch_and(!bits, MemOrder::Relaxed);
}

/// The extension regions a CTA asks for beside its region, claimed in the
/// same read-modify-write as the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtensionShare {
    /// The share asked for (bit `e`: extension region `e`; 0: none) ...
    pub mask: u32,
    /// ... and how many regions a share is.
    pub wanted: u32,
}

impl ExtensionShare {
    /// The share of `wanted` extension regions (at most
    /// [`EXTENSIONS_PER_SM`]) of a CTA trying region `guess` first: the
    /// aligned share at its guess's ([`extension_mask`]), so that CTAs
    /// resident together ask for disjoint shares.
    #[inline(always)]
    pub const fn of(guess: u32, wanted: u32) -> ExtensionShare {
        let wanted = if wanted < EXTENSIONS_PER_SM {
            wanted
        } else {
            EXTENSIONS_PER_SM
        };
        ExtensionShare {
            mask: extension_mask(guess % REGIONS_PER_SM, wanted),
            wanted,
        }
    }

    /// The extension regions the CTA keeps, `(first, count)`, of this
    /// share, whose claim ([`claim_region`]) found the extension bits
    /// `before`: none on an SM without extension regions (`usable` false:
    /// all it took goes back); when its share was taken in part, it tries
    /// once more at a share it saw wholly free ([`free_share`]), keeps
    /// the lowest run of the larger catch and gives the rest back at
    /// once.
    #[inline(always)]
    pub fn keep<F: AtomicFamily>(self, word: &F::U64, before: u32, usable: bool) -> (u32, u32) {
        let got = self.mask & !before;
        if !usable {
            if got != 0 {
                drop_bits::<F>(word, masks_bits(None, got));
            }
            return (0, 0);
        }
        let (mut kept, mut taken) = (got, got);
        if got != self.mask {
            let other = free_share(!(before | self.mask), self.wanted);
            if other != 0 {
                let more = other & !held_extensions(claim_bits::<F>(word, masks_bits(None, other)));
                taken |= more;
                if more.count_ones() > got.count_ones() {
                    kept = more;
                }
            }
        }
        let (first, count) = extension_run(kept);
        let rest = taken & !run_mask(first, count);
        if rest != 0 {
            drop_bits::<F>(word, masks_bits(None, rest));
        }
        (first, count)
    }
}

/// Claims a free region of the SM whose masks word is `word` (its
/// same-block memory, which no other running CTA holds until
/// [`give_back`]), trying region `guess` first, together with the
/// extension regions of `share`: the region, and the extension bits as
/// the first claim found them (for [`ExtensionShare::keep`]). One round
/// trip when the region is free. A region taken already makes the
/// returned mask name a free one to try next; an SM holds at most
/// [`REGIONS_PER_SM`] CTAs, so one frees up. Setting a bit another CTA
/// holds changes nothing.
#[inline(always)]
pub fn claim_region<F: AtomicFamily>(
    word: &F::U64,
    guess: u32,
    share: ExtensionShare,
) -> (u32, u32) {
    let mut bit = guess % REGIONS_PER_SM;
    // Acquire: the regions' previous holders finished with them.
    let first = claim_bits::<F>(word, masks_bits(Some(bit), share.mask));
    let extensions = held_extensions(first);
    let mut held = held_regions(first);
    while held & (1 << bit) != 0 {
        let free = !(held | 1 << bit);
        if free == 0 {
            // A plain spin (no back-off): every region is held only while
            // one is being given back, as an SM holds at most
            // REGIONS_PER_SM CTAs.
            core::hint::spin_loop();
        } else {
            bit = free.trailing_zeros() % REGIONS_PER_SM;
        }
        held = held_regions(claim_bits::<F>(word, masks_bits(Some(bit), 0)));
    }
    (bit, extensions)
}

/// Gives region `region` and the `count` extension regions from `first`
/// back, in one read-modify-write of the SM's masks word `word`:
/// everything the CTA did in their memory is done; `used` when one of its
/// threads wrote there ([`release`]).
#[inline(always)]
pub fn give_back<F: AtomicFamily>(word: &F::U64, region: u32, first: u32, count: u32, used: bool) {
    word.fetch_and(
        !masks_bits(Some(region), run_mask(first, count)),
        release(used),
    );
}

/// A CTA's word of the regions it holds ([`claim_once`]), shared by its
/// threads: atomic at the CTA's scope.
pub trait ClaimWord {
    /// The word, read with acquire semantics.
    fn load_acquire(&self) -> u32;
    /// Swaps `current` for `new`, relaxed; whether it did.
    fn cas_relaxed(&self, current: u32, new: u32) -> bool;
    /// Stores `value` with release semantics.
    fn store_release(&self, value: u32);
    /// Waits a little before the word is read again.
    fn wait(&self);
}

/// A [`ClaimWord`] before any thread of its CTA claimed.
pub const UNCLAIMED: u32 = u32::MAX;

/// A [`ClaimWord`] while one thread of its CTA claims.
pub const CLAIMING: u32 = u32::MAX - 1;

/// The regions the CTA whose word is `word` holds, as `claim` names them
/// (any value below [`CLAIMING`]), claimed once per CTA: by the first
/// thread that gets here, which publishes them with a release; a thread
/// that comes meanwhile waits for that, and every caller acquires what
/// the claimer did before it (the regions' last holder's writes, which
/// the claim acquired, among them).
#[inline(always)]
pub fn claim_once<W: ClaimWord>(word: &W, claim: impl FnOnce() -> u32) -> u32 {
    let mut claim = Some(claim);
    loop {
        let w = word.load_acquire();
        if w < CLAIMING {
            return w;
        }
        if w == UNCLAIMED && word.cas_relaxed(UNCLAIMED, CLAIMING) {
            if let Some(claim) = claim.take() {
                let held = claim();
                debug_assert!(
                    held < CLAIMING,
                    "a claim names its regions below the markers"
                );
                word.store_release(held);
                return held;
            }
        }
        word.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_and_extensions_never_share_a_bit() {
        for r in 0..REGIONS_PER_SM {
            let word = masks_bits(Some(r), u32::MAX >> (32 - EXTENSIONS_PER_SM));
            assert_eq!(held_regions(word), 1 << r);
            assert_eq!(held_extensions(word), u32::MAX >> (32 - EXTENSIONS_PER_SM));
        }
        let e = masks_bits(None, 0b1010);
        assert_eq!((held_regions(e), held_extensions(e)), (0, 0b1010));
    }
}
