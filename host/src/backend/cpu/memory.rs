//! Buffers of the CPU backend: zeroed host memory from the context's
//! allocator (the sanitizer's arena in sanitized mode), reported to the
//! sanitizer; copies and fills run at once under the context's queue.

use super::hooks::{HostAllocation, TransferInfo};
use super::CpuBackend;
use crate::backend::transfer::Transfer;
use crate::error::Result;
use crate::types::StreamId;
use std::panic::Location;

/// Alignment of CPU-backend buffers in bytes (at least; more for element
/// types that need it), as `cuMemAlloc` aligns device buffers.
pub const HOST_ALIGN: usize = 256;

/// The alignment of a CPU-backend buffer whose elements need `align`.
fn host_align(align: usize) -> u64 {
    HOST_ALIGN.max(align) as u64
}

impl CpuBackend {
    /// Allocates `bytes > 0` zeroed bytes aligned for `align`.
    pub(crate) fn allocate(&self, bytes: usize, align: usize) -> Result<u64> {
        let size = bytes as u64;
        let ptr = self.allocator().allocate(size, host_align(align))?;
        self.notify(|s| s.on_alloc(HostAllocation { ptr, size }));
        Ok(ptr)
    }

    /// Frees what [`CpuBackend::allocate`] returned.
    ///
    /// # Safety
    /// `ptr` came from `allocate` on this backend with `bytes` and `align`,
    /// and is freed once, with no view of it left.
    pub(crate) unsafe fn release(&self, ptr: u64, bytes: usize, align: usize) -> Result<()> {
        let size = bytes as u64;
        self.notify(|s| s.on_free(HostAllocation { ptr, size }));
        // SAFETY: allocated by this context's allocator with this size and
        // alignment (the caller's contract).
        unsafe { self.allocator().deallocate(ptr, size, host_align(align)) }
    }

    /// Runs a copy or fill on `stream` now, in issue order (told to the
    /// sanitizer first: its device accesses are the stream's; it fails
    /// when the sanitizer cannot check it).
    pub(crate) fn transfer(
        &self,
        stream: StreamId,
        op: Transfer<'_>,
        caller: &'static Location<'static>,
    ) -> Result<()> {
        let _q = self.queue();
        if let Some(s) = self.sanitizer() {
            s.on_transfer(&TransferInfo {
                kind: op.kind(),
                stream,
                reads: op.device_reads(),
                writes: op.device_writes(),
                caller,
            })?;
        }
        let at = |addr: u64| std::ptr::with_exposed_provenance_mut::<u8>(addr as usize);
        // SAFETY: every device range is a live host allocation of this
        // backend, borrowed by the caller (exclusively where written), and
        // no kernel runs on it meanwhile: the context's operations run one
        // at a time and the borrow keeps other launches off it.
        unsafe {
            match op {
                Transfer::FromHost { dst, src } => {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), at(dst), src.len())
                }
                Transfer::ToHost { dst, src } => {
                    std::ptr::copy_nonoverlapping(at(src), dst.as_mut_ptr(), dst.len())
                }
                Transfer::DeviceToDevice { dst, src, bytes } => {
                    std::ptr::copy(at(src), at(dst), bytes)
                }
                Transfer::Zero { dst, bytes } => std::ptr::write_bytes(at(dst), 0, bytes),
            }
        }
        Ok(())
    }
}
