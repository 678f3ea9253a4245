//! Kernel launches on the CPU backend: the kernel's Rust body (its plain or
//! checked host entry, as the launch's variant picked it) on the executor,
//! synchronously, in issue order.

use super::executor::{checked_entry, plain_entry, KernelEntry};
use super::hooks::LaunchInfo;
use super::CpuBackend;
use crate::backend::launch::Launch;
use crate::error::Result;
use crate::types::{next_id, LaunchVariant};
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

impl CpuBackend {
    /// Runs `launch` with `entry` (the kernel's host entry of the launch's
    /// variant), its module's device globals at `globals`, and records its
    /// statistics.
    pub(crate) fn launch(
        &self,
        entry: KernelEntry,
        globals: &[(usize, usize)],
        launch: &Launch<'_>,
    ) -> Result<()> {
        let _q = self.queue();
        let config = launch.config;
        let params = launch.params.as_bytes();
        let sanitizer = match launch.variant {
            LaunchVariant::Sanitized => self.sanitizer(),
            LaunchVariant::Plain => None,
        };
        let stats = match sanitizer {
            None => {
                // SAFETY: `entry` is the kernel's plain host entry and
                // `params` its arguments, checked against its declaration;
                // every pointer in it is a live host buffer of this backend
                // borrowed by the caller for the call (launch_packed and
                // launch_dynamic put this on their callers), and the launch
                // is over when `launch` returns; the module (whose copies
                // `globals` names) outlives it.
                unsafe {
                    self.executor.launch_in_module(
                        &config,
                        entry,
                        params,
                        None,
                        launch.timeout,
                        globals,
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
                s.on_launch_begin(&info)?;
                let runtime = s.runtime_for_launch(&info);
                // SAFETY: as above, with the checked entry of the same kernel.
                let r = unsafe {
                    self.executor.launch_in_module(
                        &config,
                        entry,
                        params,
                        Some(runtime),
                        launch.timeout,
                        globals,
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
