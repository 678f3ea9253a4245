//! The window shadow's device memory (`vigil_shared::block::WindowShadow`):
//! the shadow of the shared memory a `.shared` shadow does not cover
//! (arrays too large for one, dynamic shared memory), per CTA region of
//! each SM, sized from the launches' shared windows: a window of `W`
//! bytes needs `W` covered in as many regions as an SM holds such CTAs.
//!
//! The first sanitized launch whose shared window (the sanitized entry's
//! static shared memory plus the launch's dynamic) is larger than the
//! region covers gets a new, larger region, whose address the runtime
//! descriptor then holds; the old region stays alive (kernels of other
//! streams may still run on it) until the sanitizer goes. A region starts
//! with its own size, so a kernel that reads either address reads the
//! matching size. The total is capped ([`WINDOW_SHADOW_CAP`]): shared
//! memory past what the cap covers goes unchecked, counted per array, and
//! so does shared memory past a region the device had no memory for.

use std::mem::offset_of;

use vigil_shared::block::WindowShadow;
use vigil_shared::gpu::{GpuRuntime, REGIONS_PER_SM};

use super::device_memory::DeviceBlock;
use super::growing::{GrowingRegion, RegionLayout};
use crate::error::Result;

/// The most device memory the window shadow takes (1 GiB).
pub(crate) const WINDOW_SHADOW_CAP: u64 = 1 << 30;

/// Windows are covered in steps of this many bytes, so that launches of
/// slightly different footprints share a region.
const WINDOW_STEP: u64 = 4096;

/// Shared memory the driver may reserve at the start of a block's window
/// (1 KiB on sm_80 and later), before the kernel's own.
const RESERVED_SHARED: u64 = 1024;

/// Shared memory of an SM (sm_90's 228 KiB, the most of any supported
/// GPU): an SM holds at most this over a block's window CTAs at once.
const SM_SHARED: u64 = 228 * 1024;

/// The window shadow's regions: the current one (what the runtime holds)
/// and the ones it replaced.
#[derive(Debug, Default)]
pub(crate) struct WindowRegions(GrowingRegion<WindowShadow>);

impl RegionLayout for WindowShadow {
    fn covers(&self, other: &Self) -> bool {
        self.words >= other.words && self.regions >= other.regions
    }

    fn bytes(&self, sms: u64) -> u64 {
        WindowShadow::bytes(self, sms)
    }

    fn header(&self) -> [u64; 2] {
        [self.words, self.regions]
    }
}

impl WindowRegions {
    /// The layout a launch whose shared window is `window` bytes needs on
    /// `sms` SMs: the window rounded up to [`WINDOW_STEP`], for as many
    /// CTAs as an SM holds with it, grown to cover `current` too where
    /// [`WINDOW_SHADOW_CAP`] allows (a launch's own need first).
    pub(crate) fn layout_for(window: u64, sms: u64, current: Option<WindowShadow>) -> WindowShadow {
        let window = (window + RESERVED_SHARED).next_multiple_of(WINDOW_STEP);
        let regions = (SM_SHARED / window).clamp(1, u64::from(REGIONS_PER_SM));
        let own = WindowShadow::covering(window, regions);
        let fits = |l: &WindowShadow| l.bytes(sms) <= WINDOW_SHADOW_CAP;
        let own = if fits(&own) {
            own
        } else {
            // Even one launch's need is past the cap: fewer words per slot.
            let per_word = sms.max(1) * regions * WindowShadow::ENTRY as u64;
            WindowShadow {
                words: (WINDOW_SHADOW_CAP - WindowShadow::HEADER as u64) / per_word,
                regions,
            }
        };
        let Some(cur) = current else { return own };
        let words = own.words.max(cur.words);
        let most_regions = (WINDOW_SHADOW_CAP - WindowShadow::HEADER as u64)
            / (sms.max(1) * words * WindowShadow::ENTRY as u64);
        let both = WindowShadow {
            words,
            regions: own.regions.max(cur.regions.min(most_regions)),
        };
        if fits(&both) {
            both
        } else {
            own
        }
    }

    /// Makes the region cover a `window`-byte shared window on `sms` SMs
    /// (the context is bound), replacing the runtime's (`runtime`) region
    /// when it covers less. A region the device has no memory for is not
    /// an error: the launch runs with the region it has, and the arrays
    /// past it are counted unchecked.
    pub(crate) fn ensure(&mut self, runtime: &DeviceBlock, sms: u64, window: u64) -> Result<()> {
        let layout = Self::layout_for(window, sms, self.0.layout());
        self.0
            .ensure(runtime, offset_of!(GpuRuntime, block_shadow), sms, layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_rounded_up_and_sized_by_residency() {
        let l = WindowRegions::layout_for(1, 132, None);
        assert_eq!((l.words, l.regions), (1024, 32));
        assert_eq!(WindowRegions::layout_for(3072, 132, None).words, 1024);
        assert_eq!(WindowRegions::layout_for(3073, 132, None).words, 2048);
        // A 227 KiB window: one CTA per SM.
        let big = WindowRegions::layout_for(227 * 1024, 132, None);
        assert_eq!(big.regions, 1);
        assert!(big.words * 4 >= 227 * 1024 && big.bytes(132) <= WINDOW_SHADOW_CAP);
        // A 48 KiB window: four CTAs per SM.
        assert_eq!(WindowRegions::layout_for(47 * 1024, 132, None).regions, 4);
    }

    #[test]
    fn growing_keeps_what_fits_and_the_launch_first() {
        let small = WindowRegions::layout_for(4096, 132, None);
        let big = WindowRegions::layout_for(200 * 1024, 132, Some(small));
        // Both needs at once are past the cap: the launch's own need wins,
        // with as many regions as still fit.
        assert!(big.words * 4 >= 200 * 1024);
        assert!(big.regions >= 1 && big.bytes(132) <= WINDOW_SHADOW_CAP);
        // A smaller window later keeps every region its CTAs need; the
        // large window's words stay only where both fit under the cap.
        let again = WindowRegions::layout_for(4096, 132, Some(big));
        assert_eq!(again.regions, small.regions);
        assert!(again.words >= small.words && again.bytes(132) <= WINDOW_SHADOW_CAP);
        let both = WindowShadow {
            words: big.words,
            regions: small.regions,
        };
        assert_eq!(
            again.words >= big.words,
            both.bytes(132) <= WINDOW_SHADOW_CAP
        );
    }
}
