//! The allocator's errors: what it says when the device is out of
//! memory, and the translation of the buddy tree's refusals. [`VmmError`]
//! itself is a leaf type of the crate's error layer; a failed driver call
//! becomes one through [`DriverError::during`](super::super::driver::DriverError::during).

use crate::buddy_allocator::BuddyError;
use cudarc::driver::sys;

pub use crate::error::{VmmError, VmmResult};

impl VmmError {
    /// True when the device ran out of physical memory (the caching pool
    /// empties its cache and retries once on this).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, VmmError::Driver { code, .. } if *code == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32)
    }

    /// The buddy tree's refusal, in terms of pointers of the real half that
    /// starts at `real_start`.
    pub(crate) fn from_buddy(e: BuddyError, real_start: u64, real_end: u64) -> VmmError {
        match e {
            BuddyError::ZeroSize => VmmError::ZeroSize,
            BuddyError::TooLarge { size, capacity } => VmmError::TooLarge { size, capacity },
            BuddyError::OutOfSpace {
                size,
                needed,
                largest_free,
            } => VmmError::OutOfAddressSpace {
                size,
                needed,
                largest_free,
            },
            BuddyError::OutOfRange { offset, .. } => VmmError::ForeignPointer {
                ptr: real_start + offset,
                real_start,
                real_end,
            },
            BuddyError::Interior { offset, block } => VmmError::InteriorPointer {
                ptr: real_start + offset,
                base: real_start + block.offset,
                size: block.size,
            },
            BuddyError::NotAllocated { offset } => VmmError::NotAllocated {
                ptr: real_start + offset,
            },
            BuddyError::Geometry {
                capacity,
                min_block,
            } => VmmError::Geometry {
                capacity,
                min_block,
            },
        }
    }
}
