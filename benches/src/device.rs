//! Where a run measures: a GPU at full sizes, or the CPU backend at small
//! sizes (to try the runner, and its children, without a GPU).

use crate::cases::Scale;
use crate::timing::Plan;
use vigil::Context;

/// Where the suite runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// GPU 0, full sizes.
    Gpu,
    /// The CPU backend, small sizes (to try the runner without a GPU).
    Cpu,
}

impl Device {
    /// A context builder for this device.
    pub fn builder(self) -> vigil::ContextBuilder {
        match self {
            Device::Gpu => Context::builder().gpu(0),
            Device::Cpu => Context::builder().cpu(),
        }
    }

    /// The cases' sizes here.
    pub fn scale(self) -> Scale {
        match self {
            Device::Gpu => Scale::Full,
            Device::Cpu => Scale::Smoke,
        }
    }

    /// How the sanitized child times a case here.
    pub fn sanitized_plan(self) -> Plan {
        match self {
            Device::Gpu => Plan::SANITIZED,
            Device::Cpu => Plan::QUICK,
        }
    }
}
