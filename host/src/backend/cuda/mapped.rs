//! [`MappedBlock`]: page-locked host memory the device reads and writes
//! in place.

use std::ffi::c_void;

use super::driver::memory;
use crate::error::Result;

/// Zeroed page-locked host memory mapped into the device's address
/// space: the device writes there (reports, what a launch took) and the
/// host reads it without a copy back.
#[derive(Debug)]
pub(crate) struct MappedBlock {
    host: *mut c_void,
    pub device: u64,
    pub bytes: usize,
}

// SAFETY: the block is plain memory; access is synchronised by the
// atomics of its words and by stream synchronisation with the device.
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
            eprintln!("vigil: freeing mapped host memory: {e}");
        }
    }
}
