//! [`Stream`]: an ordered queue of device work.
//!
//! Copies and launches are enqueued on a stream and run in order on it;
//! different streams run concurrently unless ordered through [`Event`]s.

use crate::context::Context;
use crate::driver::drv;
use crate::error::Result;
use crate::event::Event;
use cudarc::driver::sys;
use std::fmt;

/// A CUDA stream (created non-blocking: it does not synchronise with the
/// legacy default stream).
pub struct Stream {
    ctx: Context,
    raw: sys::CUstream,
}

// SAFETY: a CUstream may be used from any thread (the driver API is
// thread-safe); the stream's context is made current before each use.
unsafe impl Send for Stream {}
// SAFETY: as above; `Stream` has no interior state besides the handle.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a stream on `ctx`'s device.
    pub fn new(ctx: &Context) -> Result<Stream> {
        ctx.bind()?;
        let mut raw: sys::CUstream = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the context is current.
        drv!(cuStreamCreate(
            &mut raw,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
        ))?;
        Ok(Stream {
            ctx: ctx.clone(),
            raw,
        })
    }

    /// The stream's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Blocks until all work enqueued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live stream of the current context.
        drv!(cuStreamSynchronize(self.raw))
    }

    /// True when all work enqueued so far has finished (does not block).
    pub fn is_idle(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live stream of the current context.
        match crate::driver::call_raw("cuStreamQuery", || unsafe { sys::cuStreamQuery(self.raw) })?
        {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(crate::driver::driver_error("cuStreamQuery", r)),
        }
    }

    /// Makes work enqueued on this stream after the call wait until `event`
    /// has completed (its last [`Event::record`]). Does not block the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.ctx
            .expect_device("Stream::wait_event", event.context().ordinal())?;
        self.ctx.bind()?;
        // SAFETY: both handles are live; flags must be 0.
        drv!(cuStreamWaitEvent(self.raw, event.raw(), 0))
    }

    /// Creates a timing event and records it on this stream.
    pub fn record_event(&self) -> Result<Event> {
        let e = Event::new(&self.ctx)?;
        e.record(self)?;
        Ok(e)
    }

    /// The raw `CUstream` (for driver calls Vigil does not wrap).
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.ctx.ordinal())
            .field("raw", &self.raw)
            .finish()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let r = self.ctx.bind().and_then(|()| {
            // SAFETY: `raw` is live and owned by `self`; pending work still
            // completes after cuStreamDestroy returns.
            drv!(cuStreamDestroy_v2(self.raw))
        });
        if let Err(e) = r {
            eprintln!("vigil: destroying a stream: {e}");
        }
    }
}
