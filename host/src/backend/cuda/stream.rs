//! [`CudaStream`]: a CUDA stream (non-blocking) of one device.

use super::device::CudaDevice;
use super::driver::stream as driver;
use super::event::CudaEvent;
use crate::error::Result;
use cudarc::driver::sys;
use std::sync::Arc;

/// An owned CUDA stream, created non-blocking (it does not synchronise
/// with the legacy default stream); destroyed on drop.
pub struct CudaStream {
    device: Arc<CudaDevice>,
    raw: sys::CUstream,
}

// SAFETY: a CUstream may be used from any thread (the driver API is
// thread-safe); the stream's context is made current before each use.
unsafe impl Send for CudaStream {}
// SAFETY: as above; `CudaStream` has no interior state besides the handle.
unsafe impl Sync for CudaStream {}

impl CudaStream {
    /// Creates a stream on `device`.
    pub(crate) fn new(device: &Arc<CudaDevice>) -> Result<CudaStream> {
        device.bind()?;
        let raw = driver::stream_create(sys::CUstream_flags::CU_STREAM_NON_BLOCKING)?;
        Ok(CudaStream {
            device: device.clone(),
            raw,
        })
    }

    /// The stream's device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// The raw `CUstream`.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// Blocks until all work enqueued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: `raw` is a live stream of the current context.
        Ok(unsafe { driver::stream_synchronize(self.raw) }?)
    }

    /// True when all work enqueued so far has finished (does not block).
    pub fn is_idle(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: `raw` is live; the context is current.
        Ok(unsafe { driver::stream_query(self.raw) }?)
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait_event(&self, event: &CudaEvent) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both handles are live handles of the current context.
        Ok(unsafe { driver::stream_wait_event(self.raw, event.raw()) }?)
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        self.device.destroy("a stream", || {
            // SAFETY: `raw` is live and owned by `self`; pending work still
            // completes after cuStreamDestroy returns.
            unsafe { driver::stream_destroy(self.raw) }
        });
    }
}
