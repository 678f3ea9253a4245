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
    /// A context builder for this device, unsanitized, with the
    /// sanitizer's `VIGIL_*` settings of the environment (a run can try
    /// `VIGIL_SANITIZED_REGISTERS` or `VIGIL_SHADOW_POOL_RECORDS`); the
    /// device and the sanitizer switch stay the bench's.
    pub fn builder(self) -> vigil::ContextBuilder {
        let b = Context::builder().env_vars().sanitize(false);
        match self {
            Device::Gpu => b.gpu(0),
            Device::Cpu => b.cpu(),
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
