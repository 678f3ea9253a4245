//! The GPU sanitizer's own memory: plain device allocations (runtime
//! descriptor, slot table, side table, stream clocks) and the host-mapped
//! report buffer. Each is zeroed when made and freed on drop.

use cudarc::driver::sys;
use std::ffi::c_void;

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

/// Reads `len` bytes of device memory at `addr` (synchronous).
pub(crate) fn read_device(addr: u64, len: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is writable for `len` bytes; `addr` is device memory
    // of the current context (the caller checked it came from a kernel).
    unsafe { memory::memcpy_dtoh(&mut out, addr) }?;
    Ok(out)
}

/// Zeroed page-locked host memory mapped into the device's address
/// space: the device writes reports there without a copy back.
#[derive(Debug)]
pub(crate) struct MappedBlock {
    host: *mut c_void,
    pub device: u64,
    pub bytes: usize,
}

// SAFETY: the block is plain memory; access is synchronised by the
// sanitizer's lock and by stream synchronisation with the device.
unsafe impl Send for MappedBlock {}
// SAFETY: as above.
unsafe impl Sync for MappedBlock {}

impl MappedBlock {
    /// Allocates `bytes` of mapped host memory (the caller bound the context).
    pub fn zeroed(bytes: usize) -> Result<MappedBlock> {
        let host = memory::mem_host_alloc_mapped(bytes)?;
        // SAFETY: just allocated, `bytes` long.
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
        let mut block = MappedBlock {
            host,
            device: 0,
            bytes,
        };
        // SAFETY: `host` is a mapped allocation.
        block.device = unsafe { memory::mem_host_get_device_pointer(host) }?;
        Ok(block)
    }

    /// The block as `u32` words (the device updates them: read them only
    /// after synchronising with the kernels that write).
    pub fn words(&self) -> &[std::sync::atomic::AtomicU32] {
        // SAFETY: the allocation is `bytes` long, page-aligned, and lives
        // as long as `self`; atomics tolerate the device's concurrent writes.
        unsafe { std::slice::from_raw_parts(self.host.cast(), self.bytes / 4) }
    }
}

impl Drop for MappedBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed`, freed once.
        if let Err(e) = unsafe { memory::mem_free_host(self.host) } {
            eprintln!("vigil: freeing the GPU report buffer: {e}");
        }
    }
}
