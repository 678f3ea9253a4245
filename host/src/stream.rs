//! [`Stream`]: an ordered queue of device work.
//!
//! Copies and launches are enqueued on a stream and run in order on it;
//! different streams run concurrently unless ordered through [`Event`]s.
//!
//! On the CPU backend every operation runs synchronously on the calling
//! thread, in issue order (one at a time per context): a valid schedule of
//! the same queues. Ordering between streams still matters to the
//! sanitizer, which follows stream order, events and host synchronisation,
//! not the order the CPU happened to run things in.

use crate::context::{races_to_result, Context};
use crate::driver::drv;
use crate::error::Result;
use crate::event::Event;
use crate::sanitize::{next_id, HostSync, StreamId};
use cudarc::driver::sys;
use std::fmt;

/// A stream: a CUDA stream (created non-blocking: it does not synchronise
/// with the legacy default stream), or a CPU context's queue.
///
/// On the CPU backend every operation runs synchronously on the calling
/// thread, in issue order, one at a time per context: a valid schedule of
/// the same queues, so code written for the GPU's ordering rules works
/// unchanged. The sanitizer still follows stream order, events and host
/// synchronisation (see [`crate::sanitize`]), not the order the CPU
/// happened to run things in.
pub struct Stream {
    ctx: Context,
    id: StreamId,
    /// The CUDA stream; null on the CPU backend.
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
        let mut raw: sys::CUstream = std::ptr::null_mut();
        if ctx.cuda_device().is_some() {
            ctx.bind()?;
            // SAFETY: `raw` is a valid out-pointer; the context is current.
            drv!(cuStreamCreate(
                &mut raw,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
            ))?;
        }
        Ok(Stream {
            ctx: ctx.clone(),
            id: StreamId(next_id()),
            raw,
        })
    }

    /// The stream's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The stream's identity (unique in the process; what the sanitizer
    /// hooks name it by).
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Blocks until all work enqueued so far has finished.
    ///
    /// On a sanitized CPU context, then returns the races found since the
    /// last collection as [`Error::Races`](crate::Error::Races).
    pub fn synchronize(&self) -> Result<()> {
        self.wait_idle()?;
        match self.ctx.cpu_device() {
            Some(c) => races_to_result(c.take_reports()),
            None => races_to_result(crate::gpu_sanitizer::take_reports(&self.ctx)),
        }
    }

    /// Blocks until all work enqueued so far has finished, without
    /// collecting race reports (copies to and from host memory use it).
    pub(crate) fn wait_idle(&self) -> Result<()> {
        match self.ctx.cpu_device() {
            Some(c) => {
                c.host_sync(HostSync::Stream(self.id));
                Ok(())
            }
            None => {
                self.ctx.bind()?;
                // SAFETY: `raw` is a live stream of the current context.
                drv!(cuStreamSynchronize(self.raw))?;
                let wait = crate::gpu_sanitizer::HostWait::Stream(self.id);
                crate::gpu_sanitizer::on_host_wait(&self.ctx, wait);
                Ok(())
            }
        }
    }

    /// True when all work enqueued so far has finished (does not block;
    /// always true on the CPU backend, whose work runs when issued).
    pub fn is_idle(&self) -> Result<bool> {
        if self.ctx.is_cpu() {
            return Ok(true);
        }
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
            .expect_device("Stream::wait_event", event.context().device())?;
        if let Some(c) = self.ctx.cpu_device() {
            if let Some(s) = &c.sanitizer {
                let _q = c.queue();
                s.on_stream_wait(self.id, event.id());
            }
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both handles are live; flags must be 0.
        drv!(cuStreamWaitEvent(self.raw, event.raw(), 0))?;
        crate::gpu_sanitizer::on_stream_wait(&self.ctx, self.id, event.id());
        Ok(())
    }

    /// Creates a timing event and records it on this stream.
    pub fn record_event(&self) -> Result<Event> {
        let e = Event::new(&self.ctx)?;
        e.record(self)?;
        Ok(e)
    }

    /// The raw `CUstream` (for driver calls Vigil does not wrap); null on
    /// the CPU backend.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.ctx.device())
            .field("id", &self.id)
            .field("raw", &self.raw)
            .finish()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
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
