//! [`Reservation`]: a range of device virtual addresses reserved with
//! `cuMemAddressReserve` and freed on drop.

use super::error::{cu, VmmError, VmmResult};
use cudarc::driver::sys;

/// A reserved virtual range `[base, base + size)`, aligned to `align`.
/// Nothing is mapped by the reservation itself; whoever maps into it must
/// unmap before it drops.
#[derive(Debug)]
pub struct Reservation {
    base: u64,
    size: u64,
}

impl Reservation {
    /// Reserves `size` bytes aligned to `align` (a power of two). Fails with
    /// [`VmmError::MisalignedReservation`] (after freeing the range) if the
    /// driver does not honour the alignment.
    pub fn new(size: u64, align: u64) -> VmmResult<Reservation> {
        let mut base: sys::CUdeviceptr = 0;
        cu(
            "cuMemAddressReserve",
            // SAFETY: `base` is a valid out-pointer; a fixed address of 0
            // lets the driver choose.
            || unsafe { sys::cuMemAddressReserve(&mut base, size as usize, align as usize, 0, 0) },
            || format!("reserving {size:#x} bytes aligned to {align:#x}"),
        )?;
        let r = Reservation { base, size };
        if !base.is_multiple_of(align) {
            return Err(VmmError::MisalignedReservation { base, size, align });
        }
        Ok(r)
    }

    /// First address.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes reserved.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let (base, size) = (self.base, self.size);
        let r = cu(
            "cuMemAddressFree",
            // SAFETY: the range came from cuMemAddressReserve with this size
            // and is freed once; its owners unmapped what they mapped.
            || unsafe { sys::cuMemAddressFree(base, size as usize) },
            || format!("freeing the reservation {base:#x}+{size:#x}"),
        );
        if let Err(e) = r {
            eprintln!("vigil: {e}");
        }
    }
}
