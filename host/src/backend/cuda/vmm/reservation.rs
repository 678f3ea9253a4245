//! [`Reservation`]: a range of device virtual addresses reserved with
//! `cuMemAddressReserve` and freed on drop.

use super::super::driver::virtual_memory as driver;
use super::error::{VmmError, VmmResult};

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
        let base = driver::address_reserve(size as usize, align as usize)
            .map_err(|e| e.during(|| format!("reserving {size:#x} bytes aligned to {align:#x}")))?;
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
        // SAFETY: the range came from cuMemAddressReserve with this size
        // and is freed once; its owners unmapped what they mapped.
        let r = unsafe { driver::address_free(base, size as usize) }
            .map_err(|e| e.during(|| format!("freeing the reservation {base:#x}+{size:#x}")));
        if let Err(e) = r {
            eprintln!("vigil: {e}");
        }
    }
}
