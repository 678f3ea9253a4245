//! How the CTAs of one SM hand its same-block regions
//! ([`crate::gpu::REGIONS_PER_SM`] regions and
//! [`crate::gpu::EXTENSIONS_PER_SM`] extension regions) on to each other:
//! the word that says which are held, and the orderings a CTA's entry
//! claims them with and its exit gives them back with.
//!
//! A region's next holder must see everything its last holder that wrote
//! there wrote. An SM's held regions and held extension regions share one
//! 64-bit word ([`masks_bits`]; the runtime's
//! [`REGION_MASKS_AT`](crate::gpu::GpuRuntime::REGION_MASKS_AT)), so that
//! one read-modify-write claims both and one gives both back, and the
//! claim's acquire reads the very word the last holder released:
//!
//! - **Claim**: an acquiring read-modify-write that sets the bits of the
//!   region a CTA tries and of the extension share it asks for
//!   ([`CLAIM`]). A second try (its region or its share was taken) is
//!   another one, for what it tries then.
//! - **Release** ([`release`]): one read-modify-write that clears all of
//!   a CTA's bits, a release when one of its threads wrote in its
//!   regions, relaxed when none did. The next holder still synchronises
//!   with the last holder that wrote, whose release sequence every later
//!   read-modify-write of the word continues.
//!
//! The device's entry and exit follow these; `shared/tests/loom_protocols.rs`
//! model-checks the hand-over with them.

use crate::Ordering;

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
pub const CLAIM: Ordering = Ordering::Acquire;

/// The ordering of the read-modify-write that gives a CTA's regions back:
/// a release when one of its threads wrote in them (`used`), relaxed
/// otherwise, so that a CTA that needed no same-block record waits for no
/// fence as it exits.
pub const fn release(used: bool) -> Ordering {
    if used {
        Ordering::Release
    } else {
        Ordering::Relaxed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{EXTENSIONS_PER_SM, REGIONS_PER_SM};

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
