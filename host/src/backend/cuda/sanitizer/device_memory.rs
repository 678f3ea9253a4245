//! The GPU sanitizer's own memory: plain device allocations (runtime
//! descriptor, slot table, side table, stream clocks) and the host-mapped
//! report buffer. Each is zeroed when made and freed on drop.

use cudarc::driver::sys;

use crate::backend::cuda::driver::{memory, stream as streams};
use crate::error::Result;

/// `bytes` of zeroed device memory of the current context.
#[derive(Debug)]
pub(crate) struct DeviceBlock {
    pub addr: u64,
    pub bytes: usize,
}

impl DeviceBlock {
    /// Allocates and zeroes `bytes` (the caller bound the context). The
    /// zeroes have landed when this returns: the memset runs on the legacy
    /// stream, which Vigil's non-blocking streams do not wait for.
    pub fn zeroed(bytes: usize) -> Result<DeviceBlock> {
        let addr = memory::mem_alloc(bytes.max(1))?;
        let block = DeviceBlock { addr, bytes };
        // SAFETY: the range was just allocated.
        unsafe { memory::memset_d8(addr, 0, bytes) }?;
        settle()?;
        Ok(block)
    }

    /// Copies `bytes` to offset 0; landed when this returns.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        self.write_at(0, bytes)
    }

    /// Copies `bytes` to byte `offset` of the block; landed when this
    /// returns. Bytes past the block's end are left out.
    pub fn write_at(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        let n = bytes.len().min(self.bytes.saturating_sub(offset));
        // SAFETY: the block holds `offset + n` bytes.
        unsafe { memory::memcpy_htod(self.addr + offset as u64, &bytes[..n]) }?;
        settle()
    }

    /// Copies `bytes` to device address `dst` in `stream`'s order. The
    /// driver stages pageable memory before returning, so `bytes` may go.
    pub fn write_async(dst: u64, bytes: &[u8], stream: sys::CUstream) -> Result<()> {
        // SAFETY: `bytes` is readable for its length; `dst` is device
        // memory of the current context owned by the caller.
        Ok(unsafe { memory::memcpy_htod_async(dst, bytes.as_ptr().cast(), bytes.len(), stream) }?)
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed`, freed once; cuMemFree waits for
        // work still using it.
        if let Err(e) = unsafe { memory::mem_free(self.addr) } {
            eprintln!("vigil: freeing GPU sanitizer memory: {e}");
        }
    }
}

/// Waits for the legacy stream, where the "synchronous" memset and
/// pageable copy may still be in flight when they return.
fn settle() -> Result<()> {
    // SAFETY: the null stream of the current context.
    Ok(unsafe { streams::stream_synchronize(std::ptr::null_mut()) }?)
}

/// Copies `bytes` to device memory at `addr`; landed when this returns.
pub(crate) fn write_device(addr: u64, bytes: &[u8]) -> Result<()> {
    // SAFETY: `bytes` is readable for its length; `addr` is device memory
    // of the current context that the caller owns.
    unsafe { memory::memcpy_htod(addr, bytes) }?;
    settle()
}

/// Zeroes `bytes` of device memory at `addr`; landed when this returns.
pub(crate) fn zero_device(addr: u64, bytes: usize) -> Result<()> {
    // SAFETY: `addr` is device memory of the current context that the
    // caller owns, `bytes` long.
    unsafe { memory::memset_d8(addr, 0, bytes) }?;
    settle()
}

/// Reads `len` bytes of device memory at `addr` (synchronous).
pub(crate) fn read_device(addr: u64, len: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is writable for `len` bytes; `addr` is device memory
    // of the current context (the caller checked it came from a kernel).
    unsafe { memory::memcpy_dtoh(&mut out, addr) }?;
    Ok(out)
}
