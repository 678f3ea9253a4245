//! [`Event`]: a marker in a stream, for ordering streams and timing work.
//!
//! On the CPU backend an event records the host time at which the work
//! before it finished (which is when it is recorded: CPU work runs when
//! issued), and the sanitizer learns the stream position it marks.

use crate::api::context::Context;
use crate::api::stream::Stream;
use crate::backend::EventHandle;
use crate::error::Result;
use crate::types::{next_id, EventId};
use cudarc::driver::sys;
use std::fmt;

/// An event. Record it on a stream, then wait for it (host:
/// [`Event::synchronize`]; another stream: [`Stream::wait_event`]) or time
/// the work between two events ([`Event::elapsed_ms`]).
///
/// On the CPU backend an event records the host time at which the work
/// issued before it finished (CPU work runs when issued), so timing works
/// the same way; the sanitizer learns the stream position it marks.
pub struct Event {
    ctx: Context,
    id: EventId,
    handle: EventHandle,
}

impl Event {
    /// Creates an event that records timestamps.
    pub fn new(ctx: &Context) -> Result<Event> {
        Event::create(ctx, true)
    }

    /// Creates an event without timing (cheaper; for ordering only).
    pub fn new_untimed(ctx: &Context) -> Result<Event> {
        Event::create(ctx, false)
    }

    fn create(ctx: &Context, timed: bool) -> Result<Event> {
        Ok(Event {
            ctx: ctx.clone(),
            id: EventId(next_id()),
            handle: ctx.backend().new_event(timed)?,
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx
            .expect_device("Event::record", stream.context().device())?;
        self.ctx
            .backend()
            .event_record((&self.handle, self.id), stream.handle())
    }

    /// Blocks until the work before the last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx
            .backend()
            .event_synchronize(&self.handle, self.id, self.ctx.launch_timeout())
    }

    /// True when the work before the last record has finished (does not
    /// block; always true on the CPU backend).
    pub fn is_complete(&self) -> Result<bool> {
        self.ctx.backend().event_is_complete(&self.handle)
    }

    /// Milliseconds between this event and `end` (both recorded, both
    /// complete, both created with timing). Resolution is about 0.5 µs on
    /// a GPU; on the CPU backend it is the host clock's.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.ctx
            .expect_device("Event::elapsed_ms", end.ctx.device())?;
        self.ctx
            .backend()
            .event_elapsed_ms(&self.handle, &end.handle)
    }

    /// The event's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The event's identity (unique in the process; what the sanitizer
    /// hooks name it by).
    pub fn id(&self) -> EventId {
        self.id
    }

    /// The raw `CUevent`; null on the CPU backend.
    pub fn raw(&self) -> sys::CUevent {
        self.ctx.backend().event_raw(&self.handle)
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.ctx.device())
            .field("id", &self.id)
            .field("raw", &self.raw())
            .finish()
    }
}

impl Event {
    /// The backend half, with the event's id (for the backend's calls).
    pub(crate) fn handle(&self) -> (&EventHandle, EventId) {
        (&self.handle, self.id)
    }
}
