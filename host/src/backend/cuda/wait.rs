//! Bounded waits: `synchronize` of a stream, an event or the whole device
//! that gives up after the context's launch timeout with
//! [`Error::Timeout`] instead of blocking forever on a kernel that never
//! ends. Streams and events are polled (`cuStreamQuery`, `cuEventQuery`);
//! the device has no query, so its `cuCtxSynchronize` runs on a helper
//! thread that is left behind, still waiting, when the limit passes.

use super::{CudaBackend, CudaDevice, CudaEvent, CudaStream};
use crate::error::{Error, Result};
use crate::types::DeviceId;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest pause between two polls: short next to a launch timeout,
/// long enough not to busy-wait.
const MAX_POLL_PAUSE: Duration = Duration::from_millis(1);

fn timeout(op: &'static str, device: &CudaDevice, limit: Duration) -> Error {
    Error::Timeout {
        op,
        backend: DeviceId::Cuda(device.ordinal()),
        limit,
    }
}

/// Polls `done` until it says true, fails, or `limit` has passed.
fn poll_until(
    op: &'static str,
    device: &CudaDevice,
    limit: Duration,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(10);
    loop {
        if done()? {
            return Ok(());
        }
        if start.elapsed() >= limit {
            return Err(timeout(op, device, limit));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL_PAUSE);
    }
}

impl CudaStream {
    /// [`CudaStream::synchronize`], giving up after `limit` (`None`: never).
    pub(crate) fn synchronize_within(&self, limit: Option<Duration>) -> Result<()> {
        match limit {
            None => self.synchronize(),
            Some(limit) => poll_until("Stream::synchronize", self.device(), limit, || {
                self.is_idle()
            }),
        }
    }
}

impl CudaEvent {
    /// [`CudaEvent::synchronize`], giving up after `limit` (`None`: never).
    pub(crate) fn synchronize_within(&self, limit: Option<Duration>) -> Result<()> {
        match limit {
            None => self.synchronize(),
            Some(limit) => poll_until("Event::synchronize", self.device(), limit, || {
                self.is_complete()
            }),
        }
    }
}

impl CudaBackend {
    /// Waits for all work of the device, giving up after `limit` (`None`:
    /// never).
    pub(crate) fn synchronize_within(&self, limit: Option<Duration>) -> Result<()> {
        let Some(limit) = limit else {
            return self.device().synchronize();
        };
        let device: Arc<CudaDevice> = Arc::clone(self.device());
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("vigil-cuda-sync".to_owned())
            .spawn(move || {
                // The receiver is gone after a timeout; nothing to tell then.
                let _ = tx.send(device.synchronize());
            })
            .map_err(|_| Error::Unsupported {
                op: "a bounded Context::synchronize",
                backend: DeviceId::Cuda(self.device().ordinal()),
                reason: "the thread that waits for the device could not be started",
            })?;
        match rx.recv_timeout(limit) {
            Ok(r) => r,
            Err(_) => Err(timeout("Context::synchronize", self.device(), limit)),
        }
    }
}
