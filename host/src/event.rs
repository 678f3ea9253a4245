//! [`Event`]: a marker in a stream, for ordering streams and timing work.

use crate::context::Context;
use crate::driver::{call_raw, driver_error, drv};
use crate::error::Result;
use crate::stream::Stream;
use cudarc::driver::sys;
use std::fmt;

/// A CUDA event. Record it on a stream, then wait for it (host:
/// [`Event::synchronize`]; another stream: [`Stream::wait_event`]) or time
/// the work between two events ([`Event::elapsed_ms`]).
pub struct Event {
    ctx: Context,
    raw: sys::CUevent,
}

// SAFETY: a CUevent may be used from any thread (the driver API is
// thread-safe); the event's context is made current before each use.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event that records timestamps.
    pub fn new(ctx: &Context) -> Result<Event> {
        Event::with_flags(ctx, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
    }

    /// Creates an event without timing (cheaper; for ordering only).
    pub fn new_untimed(ctx: &Context) -> Result<Event> {
        Event::with_flags(ctx, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
    }

    fn with_flags(ctx: &Context, flags: u32) -> Result<Event> {
        ctx.bind()?;
        let mut raw: sys::CUevent = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; flags are a valid combination.
        drv!(cuEventCreate(&mut raw, flags))?;
        Ok(Event {
            ctx: ctx.clone(),
            raw,
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx
            .expect_device("Event::record", stream.context().ordinal())?;
        self.ctx.bind()?;
        // SAFETY: both handles are live and of the same context.
        drv!(cuEventRecord(self.raw, stream.raw()))
    }

    /// Blocks until the work before the last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live event.
        drv!(cuEventSynchronize(self.raw))
    }

    /// True when the work before the last record has finished (does not
    /// block).
    pub fn is_complete(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live event.
        match call_raw("cuEventQuery", || unsafe { sys::cuEventQuery(self.raw) })? {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(driver_error("cuEventQuery", r)),
        }
    }

    /// Milliseconds between this event and `end` (both recorded, both
    /// complete, both created with timing). Resolution is about 0.5 µs.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.ctx
            .expect_device("Event::elapsed_ms", end.ctx.ordinal())?;
        self.ctx.bind()?;
        let mut ms = 0f32;
        // SAFETY: `ms` is a valid out-pointer; both events are live.
        drv!(cuEventElapsedTime(&mut ms, self.raw, end.raw))?;
        Ok(ms)
    }

    /// The event's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw `CUevent`.
    pub fn raw(&self) -> sys::CUevent {
        self.raw
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.ctx.ordinal())
            .field("raw", &self.raw)
            .finish()
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let r = self.ctx.bind().and_then(|()| {
            // SAFETY: `raw` is live and owned by `self`.
            drv!(cuEventDestroy_v2(self.raw))
        });
        if let Err(e) = r {
            eprintln!("vigil: destroying an event: {e}");
        }
    }
}
