//! Device memory of a GPU context: `cuMemAlloc`/`cuMemFree` on a plain
//! context, the shadow allocator's caching pool on a sanitized one, and the
//! asynchronous copies and fills (checked first in a sanitized context,
//! see `transfer_check`).

use super::driver::memory as driver;
use super::sanitizer::GpuSanitizer;
use super::stream::CudaStream;
use super::vmm::Allocation;
use super::CudaBackend;
use crate::backend::transfer::Transfer;
use crate::error::Result;
use crate::types::StreamId;
use std::panic::Location;
use vigil_shared::gpu::SHADOW_RECLAIM_ENTRY;
use vigil_shared::line::LINE_BYTES;

impl CudaBackend {
    /// Allocates `bytes > 0` bytes for work on `stream`.
    pub(crate) fn allocate(&self, stream: &CudaStream, bytes: usize) -> Result<u64> {
        match self.pool() {
            Some(pool) => Ok(pool.alloc(stream, bytes as u64)?.ptr),
            None => {
                self.device().bind()?;
                Ok(driver::mem_alloc(bytes)?)
            }
        }
    }

    /// Frees what [`CudaBackend::allocate`] returned.
    ///
    /// # Safety
    /// `ptr` came from `allocate` on this backend and is freed once.
    pub(crate) unsafe fn release(&self, ptr: u64) -> Result<()> {
        match self.pool() {
            // The last stream that used the buffer is not known: the pool
            // waits for the whole device before the block may be reused.
            Some(pool) => {
                // Transfer checks still waiting for the range-access entry
                // must not touch the block once it is reused.
                let mut reclaimed = Ok(());
                if let (Some(san), Some(a)) = (self.sanitizer_if_any(), pool.vmm().lookup(ptr)) {
                    san.forget_waiting(a.ptr, a.size);
                    reclaimed = self.reclaim_shadow(&san, &a);
                }
                // Freed even when the records could not be given back.
                pool.free_idle(ptr)?;
                reclaimed
            }
            None => {
                self.device().bind()?;
                // SAFETY: `ptr` came from cuMemAlloc and is freed exactly once.
                Ok(unsafe { driver::mem_free(ptr) }?)
            }
        }
    }

    /// Gives the pool records of freed block `a` back (the
    /// shadow-reclaim entry over its used lines), once the device is done
    /// with it, and waits for that. Without it a long-lived sanitizer
    /// would fill its record pool with the records of dead buffers. Does
    /// nothing before a module brought the entry (no sanitized work ran).
    fn reclaim_shadow(&self, san: &GpuSanitizer, a: &Allocation) -> Result<()> {
        let Some(entries) = san.entries() else {
            return Ok(());
        };
        let Some(func) = &entries.reclaim else {
            return Ok(());
        };
        let Some(pool) = self.pool() else {
            return Ok(());
        };
        // The buffer's last stream is not known: every use must be over.
        pool.vmm().sync_device(a.device)?;
        let bytes = a.size.div_ceil(LINE_BYTES) * LINE_BYTES;
        let (config, args) = san.reclaim_launch(a.ptr, bytes.min(a.mapped_bytes));
        san.with_own_stream(|stream| {
            self.enqueue(func, stream, SHADOW_RECLAIM_ENTRY, config, &args)?;
            stream.synchronize()
        })
    }

    /// Enqueues a copy or fill on `stream` (the front end waits for the
    /// stream afterwards when host memory is involved). A sanitized
    /// context checks it first, as accesses of the stream made at `caller`.
    pub(crate) fn transfer(
        &self,
        (stream, id): (&CudaStream, StreamId),
        op: Transfer<'_>,
        caller: &'static Location<'static>,
    ) -> Result<()> {
        if self.pool().is_some() {
            self.check_transfer((stream, id), &op, caller)?;
        }
        self.device().bind()?;
        let s = stream.raw();
        let enqueued = match op {
            // SAFETY: `src` is readable for its length until the stream
            // has run the copy (the front end waits for it); the device
            // range is live and writable (caller).
            Transfer::FromHost { dst, src } => unsafe {
                driver::memcpy_htod_async(dst, src.as_ptr().cast(), src.len(), s)
            },
            // SAFETY: `dst` is writable for its length until the stream
            // has run the copy (the front end waits for it); the device
            // range is live (caller).
            Transfer::ToHost { dst, src } => unsafe {
                driver::memcpy_dtoh_async(dst.as_mut_ptr().cast(), src, dst.len(), s)
            },
            // SAFETY: both ranges are live device memory (caller).
            Transfer::DeviceToDevice { dst, src, bytes } => unsafe {
                driver::memcpy_dtod_async(dst, src, bytes, s)
            },
            // SAFETY: the range is live device memory (caller).
            Transfer::Zero { dst, bytes } => unsafe { driver::memset_d8_async(dst, 0, bytes, s) },
        };
        Ok(enqueued?)
    }
}
