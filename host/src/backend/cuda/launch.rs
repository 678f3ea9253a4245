//! Kernel launches on a GPU: the one function where the launch variant
//! (plain or sanitized, as `Context::launch_variant` decided) picks the
//! entry point and the hidden arguments.
//!
//! The sanitized entry's PTX signature (the user's parameters, then
//! [`HIDDEN_PARAMS`]) is checked against the Rust kernel by the codegen
//! test; a launch checks the user's part like a plain one.

use super::driver::call_raw;
use super::module::CudaFunction;
use super::stream::CudaStream;
use super::CudaBackend;
use crate::abi::params::{KernelParams, ParamBuffer};
use crate::error::{Error, Result};
use crate::types::{LaunchConfig, LaunchVariant, StreamId};
use cudarc::driver::sys;
use vigil_shared::gpu::{HIDDEN_PARAMS, SANITIZED_SUFFIX};

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
    /// Enqueues `launch` as `variant`. [`LaunchVariant::Sanitized`] takes
    /// the kernel's `name__vigil` entry, checks the configuration against
    /// it (it uses more registers), and appends the GPU sanitizer's hidden
    /// arguments ([`HIDDEN_PARAMS`]) to the parameters.
    pub(crate) fn launch(
        &self,
        launch: &CudaLaunch<'_>,
        stream_id: StreamId,
        variant: LaunchVariant,
    ) -> Result<()> {
        match variant {
            LaunchVariant::Plain => self.launch_entry(launch.func, launch, launch.params),
            LaunchVariant::Sanitized => {
                let name = format!("{}{SANITIZED_SUFFIX}", launch.kernel);
                let Some(func) = launch.func.sanitized() else {
                    // Hand-written PTX has no instrumented twin: it runs
                    // unchecked, said once per kernel.
                    warn_unchecked_once(launch.kernel);
                    return self.launch_entry(launch.func, launch, launch.params);
                };
                let func = func.for_block(launch.config.block_threads())?;
                let attrs = func.attrs();
                launch
                    .config
                    .validate_for(
                        &self.device().props().limits,
                        attrs.max_threads_per_block,
                        attrs.static_shared_bytes,
                    )
                    .map_err(|problem| Error::LaunchConfig {
                        kernel: name,
                        problem,
                    })?;
                // The sanitizer orders a stream's launches by their entry
                // and exit clocks: a sanitized launch waits for its
                // predecessor (a dependent's `griddepcontrol.wait` then
                // returns at once).
                let config = LaunchConfig {
                    programmatic_stream_serialization: false,
                    ..launch.config
                };
                let san = self.gpu_sanitizer()?;
                let params = san.prepare_launch(
                    self.owner(),
                    launch.stream,
                    stream_id,
                    launch.kernel,
                    &launch.config,
                    func.shared_window(launch.config.shared_mem_bytes),
                    launch.params,
                )?;
                debug_assert_eq!(
                    params.slots().len(),
                    launch.params.slots().len()
                        + HIDDEN_PARAMS.iter().map(|p| p.parts.len()).sum::<usize>()
                );
                self.launch_sanitized(func, launch.kernel, launch.stream, config, &params)
            }
        }
    }

    /// [`CudaBackend::launch_entry`] of a sanitized entry (a kernel's or
    /// the range-access entry), noted for the shadow allocator (a reused
    /// block's shadow must be reset after one).
    pub(super) fn launch_sanitized(
        &self,
        func: &CudaFunction,
        kernel: &str,
        stream: &CudaStream,
        config: LaunchConfig,
        params: &ParamBuffer,
    ) -> Result<()> {
        if let Some(pool) = self.pool() {
            pool.vmm().note_sanitized_launch();
        }
        self.launch_runtime_entry(func, kernel, stream, config, params)
    }

    /// [`CudaBackend::launch_entry`] of an entry of the sanitizer's own
    /// (called `name` in errors) that writes no shadow a reused block
    /// could still hold (the shadow-reclaim entry), so not noted.
    pub(super) fn launch_runtime_entry(
        &self,
        func: &CudaFunction,
        name: &str,
        stream: &CudaStream,
        config: LaunchConfig,
        params: &ParamBuffer,
    ) -> Result<()> {
        let launch = CudaLaunch {
            kernel: name,
            func,
            stream,
            config,
            params,
        };
        self.launch_entry(func, &launch, params)
    }

    /// `cuLaunchKernel` of `func` with `launch`'s configuration and the
    /// packed `params` (`cuLaunchKernelEx` with the programmatic stream
    /// serialisation attribute when the configuration asks for it).
    fn launch_entry(
        &self,
        func: &CudaFunction,
        launch: &CudaLaunch<'_>,
        params: &ParamBuffer,
    ) -> Result<()> {
        let config = launch.config;
        self.device().bind()?;
        let limits = &self.device().props().limits;
        func.ensure_dynamic_smem(config.shared_mem_bytes, limits.max_shared_mem_per_block)?;
        let mut params = params.kernel_params();
        if config.programmatic_stream_serialization {
            return self.launch_programmatic(func, launch, &mut params);
        }
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
        launch_result(launch.kernel, r)
    }

    /// `cuLaunchKernelEx` of `func` with `launch`'s configuration and
    /// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` set.
    fn launch_programmatic(
        &self,
        func: &CudaFunction,
        launch: &CudaLaunch<'_>,
        params: &mut KernelParams<'_>,
    ) -> Result<()> {
        let config = launch.config;
        let (g, b) = (config.grid, config.block);
        // SAFETY: an all-zero attribute is a valid plain-data value; the
        // id and the union member it names are set below.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let cfg = sys::CUlaunchConfig {
            gridDimX: g.x,
            gridDimY: g.y,
            gridDimZ: g.z,
            blockDimX: b.x,
            blockDimY: b.y,
            blockDimZ: b.z,
            sharedMemBytes: config.shared_mem_bytes,
            hStream: launch.stream.raw(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let r = call_raw("cuLaunchKernelEx", || {
            // SAFETY: as for `cuLaunchKernel` in `launch_entry`; `cfg` and
            // the attribute it points to outlive the call.
            unsafe {
                sys::cuLaunchKernelEx(&cfg, func.raw(), params.as_mut_ptr(), std::ptr::null_mut())
            }
        })?;
        launch_result(launch.kernel, r)
    }
}

/// A launch call's result as the front end reports it.
fn launch_result(kernel: &str, r: sys::CUresult) -> Result<()> {
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(Error::Launch {
            kernel: kernel.to_owned(),
            name: format!("{r:?}"),
            code: r as u32,
        }),
    }
}

/// Says once per kernel name that a sanitized context launched `kernel`
/// without checking it (it has no `name__vigil` entry).
fn warn_unchecked_once(kernel: &str) {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static WARNED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut warned = WARNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if warned.insert(kernel.to_owned()) {
        eprintln!(
            "vigil: kernel `{kernel}` has no sanitized entry (`{kernel}{SANITIZED_SUFFIX}`, emitted by \
             #[kernel]); it runs unchecked: the race sanitizer does not see its accesses"
        );
    }
}
