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

use crate::api::context::{races_to_result, Context};
use crate::api::event::Event;
use crate::backend::{AsCudaStream, CudaStream, StreamHandle};
use crate::error::Result;
use crate::types::{next_id, StreamId};
use cudarc::driver::sys;
use std::fmt;

/// A stream: a CUDA stream (created non-blocking: it does not synchronise
/// with the legacy default stream), or a CPU context's queue.
///
/// On the CPU backend every operation runs synchronously on the calling
/// thread, in issue order, one at a time per context: a valid schedule of
/// the same queues, so code written for the GPU's ordering rules works
/// unchanged. The sanitizer still follows stream order, events and host
/// synchronisation (see [`hooks`](crate::unstable::cpu::hooks)), not the order the CPU
/// happened to run things in.
pub struct Stream {
    ctx: Context,
    id: StreamId,
    handle: StreamHandle,
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Its serial lane can go to another stream once its work is
        // waited for.
        self.ctx.backend().drop_stream(self.id);
    }
}

impl Stream {
    /// Creates a stream on `ctx`'s device.
    pub fn new(ctx: &Context) -> Result<Stream> {
        Ok(Stream {
            ctx: ctx.clone(),
            id: StreamId(next_id()),
            handle: ctx.backend().new_stream()?,
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
    /// On a sanitized context, then returns the races found since the
    /// last collection as [`Error::Races`](crate::Error::Races) (or a GPU
    /// block's divergent barrier, as [`Context::synchronize`] does).
    pub fn synchronize(&self) -> Result<()> {
        self.wait_idle()?;
        races_to_result(self.ctx.take_reports())
    }

    /// Blocks until all work enqueued so far has finished, without
    /// collecting race reports (copies to and from host memory use it).
    pub(crate) fn wait_idle(&self) -> Result<()> {
        self.ctx
            .backend()
            .stream_wait_idle(&self.handle, self.id, self.ctx.launch_timeout())
    }

    /// True when all work enqueued so far has finished (does not block;
    /// always true on the CPU backend, whose work runs when issued).
    pub fn is_idle(&self) -> Result<bool> {
        self.ctx.backend().stream_is_idle(&self.handle)
    }

    /// Makes work enqueued on this stream after the call wait until `event`
    /// has completed (its last [`Event::record`]). Does not block the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.ctx
            .expect_device("Stream::wait_event", event.context().device())?;
        self.ctx
            .backend()
            .stream_wait_event((&self.handle, self.id), event.handle())
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
        self.ctx.backend().stream_raw(&self.handle)
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.ctx.device())
            .field("id", &self.id)
            .field("raw", &self.raw())
            .finish()
    }
}

impl Stream {
    /// The backend half, with the stream's id (for the backend's calls).
    pub(crate) fn handle(&self) -> (&StreamHandle, StreamId) {
        (&self.handle, self.id)
    }
}

impl AsCudaStream for Stream {
    fn cuda_stream(&self) -> Result<&CudaStream> {
        self.ctx.backend().cuda_stream(&self.handle)
    }
}
