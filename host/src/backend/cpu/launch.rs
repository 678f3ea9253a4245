//! Kernel launches on the CPU backend: the kernel's Rust body (its plain or
//! checked host entry, as the launch variant says) on the executor,
//! synchronously, in issue order.

use super::executor::{checked_entry, plain_entry, KernelEntry};
use super::hooks::LaunchInfo;
use super::CpuBackend;
use crate::error::Result;
use crate::launch_abi::params::ParamBuffer;
use crate::types::{next_id, LaunchConfig, LaunchVariant, StreamId};
use std::time::Duration;
use vigil_device::Kernel;

/// The host entry points of a kernel (what the CPU backend runs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostEntry {
    pub(crate) plain: KernelEntry,
    pub(crate) checked: KernelEntry,
}

impl HostEntry {
    /// Both entries of kernel `K`.
    pub(crate) fn of<K: Kernel>() -> HostEntry {
        HostEntry {
            plain: plain_entry::<K>(),
            checked: checked_entry::<K>(),
        }
    }
}

/// One checked launch, as the front end hands it over.
pub(crate) struct CpuLaunch<'a> {
    pub(crate) kernel: &'a str,
    pub(crate) host: HostEntry,
    pub(crate) stream: StreamId,
    pub(crate) config: LaunchConfig,
    pub(crate) params: &'a ParamBuffer,
    /// The longest the launch may run.
    pub(crate) timeout: Option<Duration>,
}

impl CpuBackend {
    /// Runs `launch` as `variant` and records its statistics.
    pub(crate) fn launch(&self, launch: &CpuLaunch<'_>, variant: LaunchVariant) -> Result<()> {
        let _q = self.queue();
        let config = launch.config;
        let params = launch.params.as_bytes();
        let sanitizer = match variant {
            LaunchVariant::Sanitized => self.sanitizer(),
            LaunchVariant::Plain => None,
        };
        let stats = match sanitizer {
            None => {
                // SAFETY: `host.plain` is the kernel's plain host entry and
                // `params` its arguments, checked against its declaration;
                // every pointer in it is a live host buffer of this backend
                // borrowed by the caller for the call (launch_packed and
                // launch_dynamic put this on their callers), and the launch
                // is over when `launch` returns.
                unsafe {
                    self.executor.launch_with_timeout(
                        &config,
                        launch.host.plain,
                        params,
                        None,
                        launch.timeout,
                    )
                }
            }
            Some(s) => {
                let info = LaunchInfo {
                    kernel: launch.kernel,
                    launch_id: next_id(),
                    stream: launch.stream,
                    config,
                    num_virtual_sms: self.executor.num_virtual_sms(),
                };
                s.on_launch_begin(&info);
                let runtime = s.runtime_for_launch(&info);
                // SAFETY: as above, with the checked entry of the same kernel.
                let r = unsafe {
                    self.executor.launch_with_timeout(
                        &config,
                        launch.host.checked,
                        params,
                        Some(runtime),
                        launch.timeout,
                    )
                };
                s.on_launch_end(&info, r.as_ref());
                if r.is_err() && s.take_halt() {
                    // Stopped at its first race (halt on error): not a
                    // failure; the next synchronisation returns the race.
                    return Ok(());
                }
                r
            }
        }?;
        self.set_last_launch(stats);
        Ok(())
    }
}
