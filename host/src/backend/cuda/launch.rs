//! Kernel launches on a GPU: the one function where the launch variant
//! (plain or sanitized, as `Context::launch_variant` decided) picks the
//! entry point and the hidden arguments.

use super::driver::call_raw;
use super::module::CudaFunction;
use super::stream::CudaStream;
use super::CudaBackend;
use crate::abi::params::ParamBuffer;
use crate::error::{Error, Result};
use crate::types::{LaunchConfig, LaunchVariant};
use cudarc::driver::sys;

/// One checked launch, as the front end hands it over: configuration and
/// arguments were validated against the device, the kernel's attributes
/// and its PTX parameter list.
pub(crate) struct CudaLaunch<'a> {
    /// The kernel's name (for errors).
    pub(crate) kernel: &'a str,
    pub(crate) func: &'a CudaFunction,
    pub(crate) stream: &'a CudaStream,
    pub(crate) config: LaunchConfig,
    pub(crate) params: &'a ParamBuffer,
}

impl CudaBackend {
    /// Enqueues `launch` as `variant`. The seam of the sanitized GPU launch:
    /// [`LaunchVariant::Sanitized`] will take the `name__vigil` entry,
    /// append the runtime's hidden arguments to the parameters and call
    /// `Vmm::note_sanitized_launch`; until it is written,
    /// `Context::launch_variant` never picks it on a GPU.
    pub(crate) fn launch(&self, launch: &CudaLaunch<'_>, variant: LaunchVariant) -> Result<()> {
        match variant {
            LaunchVariant::Plain => self.launch_entry(launch.func, launch),
            LaunchVariant::Sanitized => Err(Error::Unsupported {
                op: "a sanitized GPU launch",
                backend: self.device_id(),
                reason: "the sanitized GPU launch path is not written yet",
            }),
        }
    }

    /// `cuLaunchKernel` of `func` with `launch`'s configuration and packed
    /// parameters.
    fn launch_entry(&self, func: &CudaFunction, launch: &CudaLaunch<'_>) -> Result<()> {
        let config = launch.config;
        self.device().bind()?;
        let limits = &self.device().props().limits;
        func.ensure_dynamic_smem(config.shared_mem_bytes, limits.max_shared_mem_per_block)?;
        let mut params = launch.params.kernel_params();
        let (g, b) = (config.grid, config.block);
        let r = call_raw("cuLaunchKernel", || {
            // SAFETY: `func` is a live function of the current context;
            // `params` holds one pointer per PTX parameter (checked by the
            // front end), each into the parameter buffer, which outlives
            // the call (the driver copies the values before returning);
            // the configuration was validated.
            unsafe {
                sys::cuLaunchKernel(
                    func.raw(),
                    g.x,
                    g.y,
                    g.z,
                    b.x,
                    b.y,
                    b.z,
                    config.shared_mem_bytes,
                    launch.stream.raw(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
        })?;
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            r => Err(Error::Launch {
                kernel: launch.kernel.to_owned(),
                name: format!("{r:?}"),
                code: r as u32,
            }),
        }
    }
}
