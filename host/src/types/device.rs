//! [`DeviceId`] and [`LaunchVariant`]: which device an object belongs to
//! and which compiled variant of a kernel runs.

use super::launch_config::DeviceLimits;
use std::fmt;

/// Which device an object belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceId {
    /// CUDA device with this ordinal.
    Cuda(usize),
    /// The CPU backend (host memory; every CPU context is this device).
    Cpu,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cuda(n) => write!(f, "device {n}"),
            DeviceId::Cpu => f.write_str("the CPU backend"),
        }
    }
}

/// Which compiled variant of a kernel a context's launches run.
///
/// The one place this is decided is
/// [`Context::launch_variant`](crate::Context::launch_variant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchVariant {
    /// The plain entry (`name` in the PTX, `K::run_host::<Plain>` on the CPU).
    Plain,
    /// The sanitized entry (`K::run_host::<Checked>` on the CPU; on a GPU
    /// the `name__vigil` PTX entry with the sanitizer's hidden arguments,
    /// which a later change adds).
    Sanitized,
}

/// What a [`Context`](crate::Context) reports about its device (queried
/// once at creation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    /// The device's name, e.g. `NVIDIA H200`, or the CPU backend's.
    pub name: String,
    /// Compute capability `(major, minor)`, e.g. `(9, 0)`; `(0, 0)` on the
    /// CPU backend.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors (virtual SMs, i.e. executor
    /// workers, on the CPU backend).
    pub sm_count: u32,
    /// Total global memory in bytes (the host's memory on the CPU backend,
    /// 0 when unknown).
    pub total_memory: usize,
    /// Launch limits (threads, dimensions, shared memory).
    pub limits: DeviceLimits,
}
