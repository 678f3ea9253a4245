//! Launch configurations and kernel launches.
//!
//! Every launch is checked before any driver call: the configuration
//! against the device's limits and the kernel's own (threads per block,
//! shared memory), and the packed arguments against the PTX parameter list
//! (count, each scalar's type, each buffer's device). The checks are the
//! same on every backend; only the final step differs: `cuLaunchKernel` on
//! a GPU, the [`CpuExecutor`](crate::cpu::CpuExecutor) running the kernel's
//! host entry (plain or checked, as
//! [`Context::launch_variant`](crate::Context::launch_variant) says) on the
//! CPU backend, synchronously, in issue order.

use crate::args::{pack_args, pack_values, KernelArgValue, KernelArgs};
use crate::context::{Context, CpuDevice, DeviceId, LaunchVariant};
use crate::error::{ArgProblem, Error, LaunchConfigError, Result};
use crate::module::{Function, KernelFn};
use crate::params::{ParamBuffer, SlotOrigin};
use crate::ptx::PtxParam;
use crate::sanitize::{next_id, LaunchInfo};
use crate::stream::Stream;
use cudarc::driver::sys;
use vigil_device::Kernel;
use vigil_shared::params::ParamDesc;

/// A grid or block extent: the device crate's coordinate type, so a
/// kernel's `block_dim()` and a launch's `block` are one type.
pub use vigil_device::Dim3;

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A configuration with no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
        }
    }

    /// The same configuration with `bytes` of dynamic shared memory.
    pub fn with_shared_mem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// One thread per element: `block` threads per block and enough blocks
    /// in x to cover `n` (at least one block, so `n = 0` still launches).
    /// A grid too large for the device is reported at launch.
    pub fn for_num_elems(n: usize, block: u32) -> LaunchConfig {
        let blocks = (n as u64).div_ceil(u64::from(block.max(1))).max(1);
        LaunchConfig::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }

    /// A grid-stride loop over `n` elements: like
    /// [`LaunchConfig::for_num_elems`] but with at most `max_blocks` blocks
    /// (e.g. a few per SM, see [`Context::sm_count`](crate::Context::sm_count)).
    pub fn for_grid_stride(n: usize, block: u32, max_blocks: u32) -> LaunchConfig {
        let mut c = LaunchConfig::for_num_elems(n, block);
        c.grid.x = c.grid.x.min(max_blocks.max(1));
        c
    }

    /// Threads in one block.
    pub fn block_threads(&self) -> u64 {
        self.block.volume()
    }

    /// Threads in the whole grid.
    pub fn total_threads(&self) -> u64 {
        self.grid.volume().saturating_mul(self.block.volume())
    }

    /// Checks the configuration against device limits. Pure: no GPU needed.
    pub fn validate(&self, limits: &DeviceLimits) -> Result<(), LaunchConfigError> {
        let dims = [
            ("grid.x", self.grid.x, limits.max_grid_dim[0]),
            ("grid.y", self.grid.y, limits.max_grid_dim[1]),
            ("grid.z", self.grid.z, limits.max_grid_dim[2]),
            ("block.x", self.block.x, limits.max_block_dim[0]),
            ("block.y", self.block.y, limits.max_block_dim[1]),
            ("block.z", self.block.z, limits.max_block_dim[2]),
        ];
        if let Some(&(which, ..)) = dims.iter().find(|d| d.1 == 0) {
            return Err(LaunchConfigError::ZeroDim { which });
        }
        let threads = self.block_threads();
        if threads > u64::from(limits.max_threads_per_block) {
            return Err(LaunchConfigError::BlockTooLarge {
                threads,
                limit: limits.max_threads_per_block,
                per_kernel: false,
            });
        }
        if let Some(&(which, value, limit)) = dims.iter().find(|d| d.1 > d.2) {
            return Err(LaunchConfigError::DimTooLarge {
                which,
                value,
                limit,
            });
        }
        self.check_shared(0, limits)
    }

    fn check_shared(
        &self,
        static_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<(), LaunchConfigError> {
        let limit = limits
            .max_shared_mem_per_block_optin
            .max(limits.max_shared_mem_per_block);
        if u64::from(self.shared_mem_bytes) + u64::from(static_bytes) > u64::from(limit) {
            return Err(LaunchConfigError::SharedMemTooLarge {
                requested: self.shared_mem_bytes,
                static_bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Checks the configuration against the device and one kernel's own
    /// limits (register-bound threads per block, static shared memory).
    pub fn validate_for(
        &self,
        limits: &DeviceLimits,
        max_threads_per_block: u32,
        static_shared_bytes: u32,
    ) -> Result<(), LaunchConfigError> {
        self.validate(limits)?;
        let threads = self.block_threads();
        if threads > u64::from(max_threads_per_block) {
            return Err(LaunchConfigError::BlockTooLarge {
                threads,
                limit: max_threads_per_block,
                per_kernel: true,
            });
        }
        self.check_shared(static_shared_bytes, limits)
    }
}

/// A device's launch limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceLimits {
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum block extent per dimension.
    pub max_block_dim: [u32; 3],
    /// Maximum grid extent per dimension.
    pub max_grid_dim: [u32; 3],
    /// Shared memory per block without opt-in, in bytes.
    pub max_shared_mem_per_block: u32,
    /// Shared memory per block with opt-in, in bytes.
    pub max_shared_mem_per_block_optin: u32,
}

impl DeviceLimits {
    /// The limits every CUDA device of compute capability 7.0 or later has
    /// (threads 1024; block 1024 x 1024 x 64; grid 2^31-1 x 65535 x 65535;
    /// 48 KiB shared memory, no opt-in assumed).
    pub const CUDA_BASELINE: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [i32::MAX as u32, 65535, 65535],
        max_shared_mem_per_block: 48 * 1024,
        max_shared_mem_per_block_optin: 48 * 1024,
    };
}

impl Default for DeviceLimits {
    fn default() -> DeviceLimits {
        DeviceLimits::CUDA_BASELINE
    }
}

/// Checks a launch configuration against the device and the function.
fn validate_config(ctx: &Context, func: &Function, config: &LaunchConfig) -> Result<()> {
    let attrs = func.attrs();
    config
        .validate_for(
            ctx.limits(),
            attrs.max_threads_per_block,
            attrs.static_shared_bytes,
        )
        .map_err(|problem| Error::LaunchConfig {
            kernel: func.name().to_owned(),
            problem,
        })
}

/// Checks packed arguments against a PTX parameter list. `names` (the
/// kernel's Rust parameters, when known) improves the messages; `device`
/// is the launch's CUDA ordinal, when known. Pure.
pub fn check_params(
    kernel: &str,
    buf: &ParamBuffer,
    ptx: &[PtxParam],
    names: &[ParamDesc],
    device: Option<usize>,
) -> Result<()> {
    check_params_on(kernel, buf, ptx, names, device.map(DeviceId::Cuda))
}

/// [`check_params`] for a launch on any device (e.g. [`DeviceId::Cpu`]).
pub fn check_params_on(
    kernel: &str,
    buf: &ParamBuffer,
    ptx: &[PtxParam],
    names: &[ParamDesc],
    device: Option<DeviceId>,
) -> Result<()> {
    let slots = buf.slots();
    if slots.len() != ptx.len() {
        return Err(Error::ArgumentCount {
            kernel: kernel.to_owned(),
            what: "PTX scalar",
            given: slots.len(),
            expected: ptx.len(),
        });
    }
    for (ptx_index, (slot, decl)) in slots.iter().zip(ptx).enumerate() {
        let problem = if !decl.accepts(slot.ty) {
            ArgProblem::PtxType {
                given: slot.ty,
                ptx_index,
                ptx_name: decl.name.clone(),
                ptx_decl: decl.decl.clone(),
            }
        } else {
            match (slot.device, device) {
                (Some(found), Some(expected)) if found != expected => {
                    ArgProblem::WrongDevice { expected, found }
                }
                _ => continue,
            }
        };
        let (index, name, rust_type) = match slot.origin {
            SlotOrigin::Arg(i) => match names.get(i) {
                Some(d) => (i, d.name.to_owned(), d.rust_type.to_owned()),
                None => (i, "?".to_owned(), slot.ty.name().to_owned()),
            },
            SlotOrigin::Hidden(i) => (i, format!("hidden #{i}"), slot.ty.name().to_owned()),
        };
        return Err(Error::Argument {
            kernel: kernel.to_owned(),
            index,
            name,
            rust_type,
            problem: Box::new(problem),
        });
    }
    Ok(())
}

impl Stream {
    /// Launches kernel `K` with typed arguments (a tuple, checked against
    /// `K::Params` at compile time). On a GPU the launch is asynchronous and
    /// errors of the kernel itself surface at the next synchronisation; on
    /// the CPU backend the kernel has run when this returns, and a
    /// panicking thread or a deadlock is [`Error::Cpu`].
    ///
    /// ```ignore
    /// stream.launch(&axpy, LaunchConfig::for_num_elems(n, 256), (2.0f32, &x, &mut y))?;
    /// ```
    pub fn launch<K: Kernel, A: KernelArgs<K::Params>>(
        &self,
        kernel: &KernelFn<K>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        let buf = pack_args::<K, A>(args)?;
        self.launch_checked(kernel.function(), config, &buf, K::PARAMS)
    }

    /// Launches a function with arguments already packed (e.g. by
    /// [`pack_args`] followed by [`ParamBuffer::append_hidden`]). The buffer
    /// is checked against the PTX parameter list first.
    ///
    /// # Safety
    /// Every pointer in `buf` must be valid for the accesses the kernel
    /// makes through it while the kernel runs (buffers packed by
    /// [`pack_args`] are; raw pointers pushed by hand must be too).
    pub unsafe fn launch_packed(
        &self,
        func: &Function,
        config: LaunchConfig,
        buf: &ParamBuffer,
    ) -> Result<()> {
        self.launch_checked(func, config, buf, &[])
    }

    /// Launches a function with untyped arguments, checked at run time
    /// against the PTX parameter list (count and each scalar's type).
    ///
    /// On the CPU backend only functions of a typed kernel
    /// ([`KernelFn::function`]) have host code to run; others are
    /// [`Error::Unsupported`].
    ///
    /// # Safety
    /// Nothing ties the PTX code to a Rust declaration: the caller
    /// guarantees that the kernel accesses only memory the arguments grant
    /// (within each slice's length; writes only through `slice_mut` /
    /// `ptr_mut` arguments).
    pub unsafe fn launch_dynamic(
        &self,
        func: &Function,
        config: LaunchConfig,
        args: &[KernelArgValue<'_>],
    ) -> Result<()> {
        let buf = pack_values(func.name(), args)?;
        self.launch_checked(func, config, &buf, &[])
    }

    fn launch_checked(
        &self,
        func: &Function,
        config: LaunchConfig,
        buf: &ParamBuffer,
        names: &[ParamDesc],
    ) -> Result<()> {
        let ctx = self.context();
        let kernel = func.name();
        ctx.expect_device("launch", func.module().context().device())?;
        validate_config(ctx, func, &config)?;
        check_params_on(kernel, buf, func.params(), names, Some(ctx.device()))?;
        if let Some(cpu) = ctx.cpu_device() {
            return self.launch_cpu(cpu, func, config, buf);
        }
        if ctx.launch_variant() == LaunchVariant::Sanitized {
            // The `name__vigil` entry with the sanitizer's hidden arguments.
            let san = crate::gpu_sanitizer::for_context(ctx)?;
            let (func, buf) = san.prepare_launch(self, func, &config, buf)?;
            // The sanitized entry uses more registers: it may allow fewer threads.
            validate_config(ctx, &func, &config)?;
            let hidden: Vec<ParamDesc> = names
                .iter()
                .chain(vigil_shared::gpu::HIDDEN_PARAMS)
                .copied()
                .collect();
            check_params_on(kernel, &buf, func.params(), &hidden, Some(ctx.device()))?;
            if let Some(pool) = ctx.sanitizer_pool() {
                pool.vmm().note_sanitized_launch();
            }
            return self.launch_gpu(&func, config, &buf);
        }
        self.launch_gpu(func, config, buf)
    }

    /// `cuLaunchKernel` of a checked launch on a GPU stream.
    fn launch_gpu(&self, func: &Function, config: LaunchConfig, buf: &ParamBuffer) -> Result<()> {
        let ctx = self.context();
        let kernel = func.name();
        let limits = ctx.limits();
        ctx.bind()?;
        func.ensure_dynamic_smem(config.shared_mem_bytes, limits.max_shared_mem_per_block)?;
        let mut params = buf.kernel_params();
        let (g, b) = (config.grid, config.block);
        let r = crate::driver::call_raw("cuLaunchKernel", || {
            // SAFETY: `func` is a live function of the current context;
            // `params` holds one pointer per PTX parameter (checked above),
            // each into `buf`, which outlives the call (the driver copies
            // the values before returning); the configuration was validated.
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
                    self.raw(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
        })?;
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            r => Err(Error::Launch {
                kernel: kernel.to_owned(),
                name: format!("{r:?}"),
                code: r as u32,
            }),
        }
    }

    /// The CPU backend's launch: the kernel's host entry on the executor,
    /// now, under the context's queue, with the sanitizer's hooks when it
    /// runs checked.
    fn launch_cpu(
        &self,
        cpu: &CpuDevice,
        func: &Function,
        config: LaunchConfig,
        buf: &ParamBuffer,
    ) -> Result<()> {
        let host = func.host_entry().ok_or(Error::Unsupported {
            op: "an untyped launch",
            backend: DeviceId::Cpu,
            reason: "the CPU backend runs a kernel's Rust body, and this function was \
                     looked up by name; use Module::kernel::<K>() and Stream::launch",
        })?;
        let _q = cpu.queue();
        let params = buf.as_bytes();
        let sanitizer = match self.context().launch_variant() {
            LaunchVariant::Sanitized => cpu.sanitizer.as_deref(),
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
                unsafe { cpu.executor.launch(&config, host.plain, params, None) }
            }
            Some(s) => {
                let info = LaunchInfo {
                    kernel: func.name(),
                    launch_id: next_id(),
                    stream: self.id(),
                    config,
                    num_virtual_sms: cpu.executor.num_virtual_sms(),
                };
                s.on_launch_begin(&info);
                let runtime = s.runtime_for_launch(&info);
                // SAFETY: as above, with the checked entry of the same kernel.
                let r = unsafe {
                    cpu.executor
                        .launch(&config, host.checked, params, Some(runtime))
                };
                s.on_launch_end(&info, r.as_ref());
                r
            }
        }?;
        cpu.set_last_launch(stats);
        Ok(())
    }
}
