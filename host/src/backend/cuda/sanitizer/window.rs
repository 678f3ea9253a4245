//! The window shadow's device memory (`vigil_shared::block::WindowShadow`):
//! the shadow of the shared memory a `.shared` shadow does not cover
//! (arrays too large for one, dynamic shared memory), per CTA slot, sized
//! from the launches' shared windows.
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
use vigil_shared::gpu::GpuRuntime;

use super::device_memory::DeviceBlock;
use crate::error::Result;

/// The most device memory the window shadow takes (1 GiB: on an H100's
/// 1,980 slots, about 66 KiB of shared window per slot).
pub(crate) const WINDOW_SHADOW_CAP: u64 = 1 << 30;

/// Windows are covered in steps of this many bytes, so that launches of
/// slightly different footprints share a region.
const WINDOW_STEP: u64 = 4096;

/// Shared memory the driver may reserve at the start of a block's window
/// (1 KiB on sm_80 and later), before the kernel's own.
const RESERVED_SHARED: u64 = 1024;

/// The window shadow's regions: the current one (what the runtime holds)
/// and the ones it replaced.
#[derive(Debug, Default)]
pub(crate) struct WindowRegions {
    /// Words per slot the current region covers (0: none yet).
    words: u64,
    /// Words per slot a region could not be allocated for (0: none
    /// failed): not tried again for as many or more.
    refused: u64,
    current: Option<DeviceBlock>,
    retired: Vec<DeviceBlock>,
}

impl WindowRegions {
    /// The words per slot a region for a `window`-byte shared window gets
    /// with `slots` slots: the window rounded up to [`WINDOW_STEP`], at
    /// most what [`WINDOW_SHADOW_CAP`] holds.
    pub(crate) fn words_for(window: u64, slots: u64) -> u64 {
        let window = (window + RESERVED_SHARED).next_multiple_of(WINDOW_STEP);
        let want = WindowShadow::covering(window).words;
        let per_word = slots.max(1) * WindowShadow::ENTRY as u64;
        let most = (WINDOW_SHADOW_CAP - WindowShadow::HEADER as u64) / per_word;
        want.min(most)
    }

    /// Makes the region cover a `window`-byte shared window for `slots`
    /// slots (the context is bound), replacing the runtime's (`runtime`)
    /// region when it is smaller. A region the device has no memory for
    /// is not an error: the launch runs with the region it has, and the
    /// arrays past it are counted unchecked.
    pub(crate) fn ensure(&mut self, runtime: &DeviceBlock, slots: u64, window: u64) -> Result<()> {
        let words = Self::words_for(window, slots);
        if words <= self.words || (self.refused != 0 && words >= self.refused) {
            return Ok(());
        }
        let layout = WindowShadow { words };
        let Ok(block) = DeviceBlock::zeroed(layout.bytes(slots) as usize) else {
            self.refused = words;
            return Ok(());
        };
        block.write(&words.to_le_bytes())?;
        runtime.write_at(
            offset_of!(GpuRuntime, block_shadow),
            &block.addr.to_le_bytes(),
        )?;
        if let Some(old) = self.current.replace(block) {
            self.retired.push(old);
        }
        self.words = words;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_rounded_up_and_capped() {
        assert_eq!(WindowRegions::words_for(1, 10), 1024);
        assert_eq!(WindowRegions::words_for(3072, 10), 1024);
        assert_eq!(WindowRegions::words_for(3073, 10), 2048);
        let slots = 1980;
        let capped = WindowRegions::words_for(227 * 1024, slots);
        assert!(WindowShadow { words: capped }.bytes(slots) <= WINDOW_SHADOW_CAP);
        assert!(WindowShadow { words: capped + 1 }.bytes(slots) > WINDOW_SHADOW_CAP);
        // A 48 KiB window fits the cap on an H100.
        assert_eq!(WindowRegions::words_for(48 * 1024 - 1024, slots), 12 * 1024);
    }
}
