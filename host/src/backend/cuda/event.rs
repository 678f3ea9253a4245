//! [`CudaEvent`]: a CUDA event of one device.

use super::device::CudaDevice;
use super::driver::stream as driver;
use super::stream::CudaStream;
use crate::error::Result;
use cudarc::driver::sys;
use std::sync::Arc;

/// An owned CUDA event; destroyed on drop.
pub struct CudaEvent {
    device: Arc<CudaDevice>,
    raw: sys::CUevent,
}

// SAFETY: a CUevent may be used from any thread (the driver API is
// thread-safe); the event's context is made current before each use.
unsafe impl Send for CudaEvent {}
// SAFETY: as above; no interior state besides the handle.
unsafe impl Sync for CudaEvent {}

impl CudaEvent {
    /// Creates an event on `device`; `timed` says whether it records
    /// timestamps (untimed events are cheaper, for ordering only).
    pub(crate) fn new(device: &Arc<CudaDevice>, timed: bool) -> Result<CudaEvent> {
        device.bind()?;
        let flags = if timed {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let raw = driver::event_create(flags)?;
        Ok(CudaEvent {
            device: device.clone(),
            raw,
        })
    }

    /// The device the event belongs to.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// The raw `CUevent`.
    pub fn raw(&self) -> sys::CUevent {
        self.raw
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &CudaStream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both handles are live and of the same context.
        Ok(unsafe { driver::event_record(self.raw, stream.raw()) }?)
    }

    /// Blocks until the work before the last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: `raw` is a live event.
        Ok(unsafe { driver::event_synchronize(self.raw) }?)
    }

    /// True when the work before the last record has finished.
    pub fn is_complete(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: `raw` is live; the context is current.
        Ok(unsafe { driver::event_query(self.raw) }?)
    }

    /// Milliseconds from `self` to `end`.
    pub fn elapsed_ms(&self, end: &CudaEvent) -> Result<f32> {
        self.device.bind()?;
        // SAFETY: both events are live.
        Ok(unsafe { driver::event_elapsed_time(self.raw, end.raw) }?)
    }
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        self.device.destroy("an event", || {
            // SAFETY: `raw` is live and owned by `self`.
            unsafe { driver::event_destroy(self.raw) }
        });
    }
}
