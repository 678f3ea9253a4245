//! [`CpuError`]: why a launch on the CPU backend failed.

use super::DivergentBarrier;
use crate::types::LaunchConfigError;
use std::fmt;
use std::time::Duration;
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

    /// Threads of a block diverged at a barrier (waiting at different
    /// `sync_threads` calls, or returned since the previous barrier without
    /// reaching it). A launch through a [`Context`](crate::Context) returns
    /// it as [`Error::DivergentBarrier`](crate::Error::DivergentBarrier),
    /// as a sanitized GPU context does.
    #[error("{0}")]
    DivergentBarrier(DivergentBarrier),

    /// Every running thread of the launch spins on memory that no thread
    /// changes (and the rest wait at a barrier or in a warp collective), so
    /// none can ever finish (on a GPU this hangs). The blocks that were
    /// running are abandoned and no further block starts.
    #[error(
        "livelock: every running thread spins on memory that no thread changes{}: {}",
        Unstarted(*unstarted),
        Blocks(blocks)
    )]
    Livelock {
        /// The blocks that were running, with their spinning threads.
        blocks: Vec<StalledBlock>,
        /// Blocks of the grid that had not started (they wait for a
        /// worker: on a GPU they would need to be co-resident).
        unstarted: u64,
    },

    /// The launch ran longer than the configured limit
    /// (`VIGIL_LAUNCH_TIMEOUT` or
    /// [`ContextBuilder::launch_timeout`](crate::ContextBuilder::launch_timeout)).
    /// Threads still running were abandoned at their next memory read.
    #[error(
        "launch timed out after {limit:?} (VIGIL_LAUNCH_TIMEOUT); {finished} of {total} block(s) \
         had finished"
    )]
    Timeout {
        /// The limit.
        limit: Duration,
        /// Blocks that had run to completion.
        finished: u64,
        /// Blocks of the grid.
        total: u64,
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

/// One running block of a launch that ended in a livelock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StalledBlock {
    /// `blockIdx`.
    pub block: Dim3,
    /// Its threads that spin, each on one location.
    pub spinning: Vec<SpinningThread>,
    /// Where its other live threads wait (barrier, warp collective), when
    /// some do.
    pub waiting: Option<String>,
}

/// A thread that keeps reading one location whose value does not change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpinningThread {
    /// `threadIdx`.
    pub thread: Dim3,
    /// The address it polls.
    pub address: u64,
    /// The size of each read, in bytes.
    pub bytes: usize,
    /// The kernel source location of the read (`file:line:column`), known
    /// in every build (it needs no debug information).
    pub location: String,
}

/// Formats ` (N block(s) not started)` when some are.
struct Unstarted(u64);

impl fmt::Display for Unstarted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(
                f,
                " ({n} block(s) not started: every worker is busy with a spinning block)"
            ),
        }
    }
}

/// Formats the stalled blocks, grouping a block's spinning threads by
/// location and address.
struct Blocks<'a>(&'a [StalledBlock]);

impl fmt::Display for Blocks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "block {}:", Coord(b.block))?;
            let mut groups: Vec<(&SpinningThread, usize)> = Vec::new();
            for t in &b.spinning {
                let same = |g: &&mut (&SpinningThread, usize)| {
                    g.0.address == t.address && g.0.location == t.location
                };
                match groups.iter_mut().find(same) {
                    Some(g) => g.1 += 1,
                    None => groups.push((t, 1)),
                }
            }
            for (g, (first, n)) in groups.into_iter().enumerate() {
                let location = &first.location;
                let who = if n == 1 {
                    format!("thread {}", Coord(first.thread))
                } else {
                    format!("{n} threads (first {})", Coord(first.thread))
                };
                write!(
                    f,
                    "{} {who} poll{} {} byte(s) at {:#x} at {location}",
                    if g == 0 { "" } else { "," },
                    if n == 1 { "s" } else { "" },
                    first.bytes,
                    first.address
                )?;
            }
            if let Some(w) = &b.waiting {
                write!(f, " ({w})")?;
            }
        }
        Ok(())
    }
}
