//! [`Event`]: a marker in a stream, for ordering streams and timing work.
//!
//! On the CPU backend an event records the host time at which the work
//! before it finished (which is when it is recorded: CPU work runs when
//! issued), and the sanitizer learns the stream position it marks.

use crate::context::Context;
use crate::driver::{call_raw, driver_error, drv};
use crate::error::{Error, Result};
use crate::sanitize::{next_id, EventId, HostSync};
use crate::stream::Stream;
use cudarc::driver::sys;
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

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
    handle: Handle,
}

enum Handle {
    Cuda(sys::CUevent),
    Cpu {
        timed: bool,
        /// When it was last recorded.
        recorded: Mutex<Option<Instant>>,
    },
}

// SAFETY: a CUevent may be used from any thread (the driver API is
// thread-safe); the event's context is made current before each use.
unsafe impl Send for Event {}
// SAFETY: as above; the CPU state is behind a mutex.
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
        let handle = if ctx.is_cpu() {
            Handle::Cpu {
                timed: flags & sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32 == 0,
                recorded: Mutex::new(None),
            }
        } else {
            ctx.bind()?;
            let mut raw: sys::CUevent = std::ptr::null_mut();
            // SAFETY: `raw` is a valid out-pointer; flags are a valid combination.
            drv!(cuEventCreate(&mut raw, flags))?;
            Handle::Cuda(raw)
        };
        Ok(Event {
            ctx: ctx.clone(),
            id: EventId(next_id()),
            handle,
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx
            .expect_device("Event::record", stream.context().device())?;
        match &self.handle {
            Handle::Cuda(raw) => {
                self.ctx.bind()?;
                // SAFETY: both handles are live and of the same context.
                drv!(cuEventRecord(*raw, stream.raw()))?;
                crate::gpu_sanitizer::on_event_record(&self.ctx, self.id, stream.id());
                Ok(())
            }
            Handle::Cpu { recorded, .. } => {
                let cpu = self.ctx.cpu_device();
                let _q = cpu.map(|c| c.queue());
                *recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                if let Some(s) = cpu.and_then(|c| c.sanitizer.as_ref()) {
                    s.on_event_record(self.id, stream.id());
                }
                Ok(())
            }
        }
    }

    /// Blocks until the work before the last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        match &self.handle {
            Handle::Cuda(raw) => {
                self.ctx.bind()?;
                // SAFETY: `raw` is a live event.
                drv!(cuEventSynchronize(*raw))?;
                let wait = crate::gpu_sanitizer::HostWait::Event(self.id);
                crate::gpu_sanitizer::on_host_wait(&self.ctx, wait);
                Ok(())
            }
            Handle::Cpu { .. } => {
                if let Some(c) = self.ctx.cpu_device() {
                    c.host_sync(HostSync::Event(self.id));
                }
                Ok(())
            }
        }
    }

    /// True when the work before the last record has finished (does not
    /// block; always true on the CPU backend).
    pub fn is_complete(&self) -> Result<bool> {
        let Handle::Cuda(raw) = &self.handle else {
            return Ok(true);
        };
        self.ctx.bind()?;
        // SAFETY: `raw` is a live event.
        match call_raw("cuEventQuery", || unsafe { sys::cuEventQuery(*raw) })? {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(driver_error("cuEventQuery", r)),
        }
    }

    /// Milliseconds between this event and `end` (both recorded, both
    /// complete, both created with timing). Resolution is about 0.5 µs on
    /// a GPU; on the CPU backend it is the host clock's.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.ctx
            .expect_device("Event::elapsed_ms", end.ctx.device())?;
        match (&self.handle, &end.handle) {
            (Handle::Cuda(start), Handle::Cuda(stop)) => {
                self.ctx.bind()?;
                let mut ms = 0f32;
                // SAFETY: `ms` is a valid out-pointer; both events are live.
                drv!(cuEventElapsedTime(&mut ms, *start, *stop))?;
                Ok(ms)
            }
            (
                Handle::Cpu {
                    timed: t0,
                    recorded: r0,
                },
                Handle::Cpu {
                    timed: t1,
                    recorded: r1,
                },
            ) => {
                if !(*t0 && *t1) {
                    return Err(Error::EventTiming {
                        reason: "an event was created without timing (Event::new_untimed)",
                    });
                }
                let get = |r: &Mutex<Option<Instant>>| *r.lock().unwrap_or_else(|p| p.into_inner());
                match (get(r0), get(r1)) {
                    (Some(a), Some(b)) => Ok(match b.checked_duration_since(a) {
                        Some(d) => d.as_secs_f32() * 1e3,
                        None => -(a.duration_since(b).as_secs_f32() * 1e3),
                    }),
                    _ => Err(Error::EventTiming {
                        reason: "an event has not been recorded",
                    }),
                }
            }
            // Same device (checked above) means same backend.
            _ => Err(Error::EventTiming {
                reason: "the events belong to different backends",
            }),
        }
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
        match &self.handle {
            Handle::Cuda(raw) => *raw,
            Handle::Cpu { .. } => std::ptr::null_mut(),
        }
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

impl Drop for Event {
    fn drop(&mut self) {
        let Handle::Cuda(raw) = &self.handle else {
            return;
        };
        let r = self.ctx.bind().and_then(|()| {
            // SAFETY: `raw` is live and owned by `self`.
            drv!(cuEventDestroy_v2(*raw))
        });
        if let Err(e) = r {
            eprintln!("vigil: destroying an event: {e}");
        }
    }
}
