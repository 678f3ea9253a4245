//! [`CudaStream`]: a CUDA stream (non-blocking) of one device.

use super::device::CudaDevice;
use super::driver::{drv, query};
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
        let mut raw: sys::CUstream = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the context is current.
        drv!(cuStreamCreate(
            &mut raw,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
        ))?;
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
        drv!(cuStreamSynchronize(self.raw))
    }

    /// True when all work enqueued so far has finished (does not block).
    pub fn is_idle(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: `raw` is live; the context is current.
        query("cuStreamQuery", || unsafe { sys::cuStreamQuery(self.raw) })
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait_event(&self, event: &CudaEvent) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both handles are live; flags must be 0.
        drv!(cuStreamWaitEvent(self.raw, event.raw(), 0))
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        self.device.destroy("a stream", || {
            // SAFETY: `raw` is live and owned by `self`; pending work still
            // completes after cuStreamDestroy returns.
            drv!(cuStreamDestroy_v2(self.raw))
        });
    }
}
