//! A region of device memory the runtime descriptor points to and the
//! host grows: the first launch that needs more than the current region
//! holds gets a new, larger one, whose address the runtime then holds;
//! the old region stays alive (kernels of other streams may still run on
//! it) until the sanitizer goes. A region starts with its layout, so a
//! kernel that reads either address reads the matching layout. The
//! window shadow (`window.rs`) and the threads' queues of copies in
//! flight (`copy_queues.rs`) are two.

use super::device_memory::DeviceBlock;
use crate::error::Result;

/// What a [`GrowingRegion`] needs of its layout.
pub(crate) trait RegionLayout: Copy + std::fmt::Debug {
    /// True when this layout serves every launch `other` serves.
    fn covers(&self, other: &Self) -> bool;
    /// Bytes of a region of this layout on `sms` SMs.
    fn bytes(&self, sms: u64) -> u64;
    /// The region's first two `u64`s (the device reads its layout there).
    fn header(&self) -> [u64; 2];
}

/// The current region (what the runtime holds), its layout, and the
/// regions it replaced.
#[derive(Debug)]
pub(crate) struct GrowingRegion<L> {
    layout: Option<L>,
    /// A layout that could not be allocated: not tried again unless a
    /// launch needs less.
    refused: Option<L>,
    current: Option<DeviceBlock>,
    retired: Vec<DeviceBlock>,
}

impl<L> Default for GrowingRegion<L> {
    fn default() -> Self {
        GrowingRegion {
            layout: None,
            refused: None,
            current: None,
            retired: Vec::new(),
        }
    }
}

impl<L: RegionLayout> GrowingRegion<L> {
    /// The current region's layout (none yet: `None`).
    pub(crate) fn layout(&self) -> Option<L> {
        self.layout
    }

    /// Makes the region one of `layout` on `sms` SMs unless the current
    /// one (or one the device refused) covers it: a new region, its
    /// address written at byte `field` of the runtime descriptor
    /// `runtime` (the context is bound). A region the device has no
    /// memory for is not an error: launches run with the region there is,
    /// and what it does not cover goes unchecked, as each user says.
    pub(crate) fn ensure(
        &mut self,
        runtime: &DeviceBlock,
        field: usize,
        sms: u64,
        layout: L,
    ) -> Result<()> {
        let covered = |by: Option<L>| by.is_some_and(|l| l.covers(&layout));
        if covered(self.layout) || covered(self.refused) {
            return Ok(());
        }
        let Ok(block) = DeviceBlock::zeroed(layout.bytes(sms) as usize) else {
            self.refused = Some(layout);
            return Ok(());
        };
        let [a, b] = layout.header();
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&a.to_le_bytes());
        header[8..].copy_from_slice(&b.to_le_bytes());
        block.write(&header)?;
        runtime.write_at(field, &block.addr.to_le_bytes())?;
        if let Some(old) = self.current.replace(block) {
            self.retired.push(old);
        }
        self.layout = Some(layout);
        Ok(())
    }
}
