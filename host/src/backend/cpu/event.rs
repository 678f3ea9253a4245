//! [`CpuEvent`]: an event of the CPU backend, a host timestamp of the
//! moment the work before it finished (CPU work runs when issued).

use crate::error::{Error, Result};
use std::sync::Mutex;
use std::time::Instant;

/// The CPU side of an event.
pub(crate) struct CpuEvent {
    timed: bool,
    /// When it was last recorded.
    recorded: Mutex<Option<Instant>>,
}

impl CpuEvent {
    pub(crate) fn new(timed: bool) -> CpuEvent {
        CpuEvent {
            timed,
            recorded: Mutex::new(None),
        }
    }

    /// Notes the host time (the caller holds the context's queue).
    pub(crate) fn record(&self) {
        *self.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    fn recorded(&self) -> Option<Instant> {
        *self.recorded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Milliseconds from `self` to `end` (negative when `end` came first).
    pub(crate) fn elapsed_ms(&self, end: &CpuEvent) -> Result<f32> {
        if !(self.timed && end.timed) {
            return Err(Error::EventTiming {
                reason: "an event was created without timing (Event::new_untimed)",
            });
        }
        match (self.recorded(), end.recorded()) {
            (Some(a), Some(b)) => Ok(match b.checked_duration_since(a) {
                Some(d) => d.as_secs_f32() * 1e3,
                None => -(a.duration_since(b).as_secs_f32() * 1e3),
            }),
            _ => Err(Error::EventTiming {
                reason: "an event has not been recorded",
            }),
        }
    }
}
