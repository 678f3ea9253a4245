//! [`CpuError`]: why a launch on the CPU backend failed.

use crate::types::LaunchConfigError;
use std::fmt;
use vigil_device::Dim3;

/// Everything that can make a CPU launch fail.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuError {
    /// The launch configuration is outside the CPU device's limits (the
    /// same limits a CUDA device has; see [`CpuExecutor::LIMITS`](crate::unstable::cpu::CpuExecutor::LIMITS)).
    #[error("invalid launch configuration: {0}")]
    Config(#[from] LaunchConfigError),

    /// A GPU thread panicked: an out-of-bounds index, a failed assertion,
    /// an explicit `panic!` (on a GPU this traps). The other threads of its
    /// block are abandoned and no further block starts.
    #[error(
        "kernel panicked in block {} thread {}{}: {message}",
        Coord(*block),
        Coord(*thread),
        At(location.as_deref())
    )]
    KernelPanic {
        /// `blockIdx` of the panicking thread.
        block: Dim3,
        /// `threadIdx` of the panicking thread.
        thread: Dim3,
        /// The panic message.
        message: String,
        /// Where it panicked (`file:line:column`, the kernel author's for
        /// `#[track_caller]` accessors), when the panic hook could see it.
        location: Option<String>,
    },

    /// Every remaining thread of a block waits and none can proceed: some
    /// wait at `sync_threads` while others wait in a warp collective for
    /// lanes that will never join (on a GPU this hangs).
    #[error("deadlock in block {}: {detail}", Coord(*block))]
    Deadlock {
        /// `blockIdx` of the stuck block.
        block: Dim3,
        /// Which threads wait where.
        detail: String,
    },

    /// The operating system refused a resource (a worker thread, a coroutine stack).
    #[error("CPU executor could not {what}: {reason}")]
    Resource {
        /// What was being created.
        what: &'static str,
        /// The operating system's message.
        reason: String,
    },

    /// A bug in the executor itself (it panicked outside a kernel).
    #[error("internal error in the CPU executor: {0}")]
    Internal(String),
}

/// Formats a coordinate as `(x, y, z)`.
struct Coord(Dim3);

impl fmt::Display for Coord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.0.x, self.0.y, self.0.z)
    }
}

/// Formats an optional location as ` at file:line:col`.
struct At<'a>(Option<&'a str>);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(loc) => write!(f, " at {loc}"),
            None => Ok(()),
        }
    }
}
