//! Kernel launches: [`Stream::launch`] and its untyped forms.
//!
//! Every launch is checked before any driver call: the configuration
//! against the device's limits and the kernel's own (threads per block,
//! shared memory), and the packed arguments against the PTX parameter list
//! (count, each scalar's type, each buffer's device). The checks are the
//! same on every backend; only the final step differs: `cuLaunchKernel` on
//! a GPU, the CPU executor running the kernel's host entry (plain or
//! checked, as [`Context::launch_variant`](crate::Context::launch_variant)
//! says) on the CPU backend, synchronously, in issue order.

use crate::abi::check::check_params_on;
use crate::abi::params::ParamBuffer;
use crate::api::args::{pack_args, pack_values, KernelArgValue, KernelArgs};
use crate::api::module::{Function, KernelFn};
use crate::api::stream::Stream;
use crate::backend::Launch;
use crate::error::{Error, Result};
use crate::types::LaunchConfig;
use vigil_device::Kernel;
use vigil_shared::params::ParamDesc;

impl Stream {
    /// Launches kernel `K` with typed arguments (a tuple, checked against
    /// `K::Params` at compile time). On a GPU the launch is asynchronous and
    /// errors of the kernel itself surface at the next synchronisation; on
    /// the CPU backend the kernel has run when this returns, and a
    /// panicking thread or a deadlock is [`Error::Cpu`].
    ///
    /// A kernel with a shared stack (`K::DYNAMIC_SHARED_BYTES`, its
    /// `shared_stack!` capacity) gets that much dynamic shared memory, or
    /// more when `config` asks for more; a device that cannot hold it
    /// beside the kernel's static shared memory is
    /// [`LaunchConfigError::SharedStackTooLarge`](crate::LaunchConfigError::SharedStackTooLarge).
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
        let func = kernel.function();
        let config = match K::DYNAMIC_SHARED_BYTES {
            0 => config,
            stack => config
                .with_shared_stack(
                    stack,
                    func.attrs().static_shared_bytes,
                    self.context().limits(),
                )
                .map_err(|problem| Error::LaunchConfig {
                    kernel: func.name().to_owned(),
                    problem,
                })?,
        };
        let buf = pack_args::<K, A>(args)?;
        self.launch_checked(func, config, &buf, K::PARAMS)
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
        let attrs = func.attrs();
        let limits = ctx.limits();
        config
            .validate_for(
                limits,
                attrs.max_threads_per_block,
                attrs.static_shared_bytes,
            )
            .map_err(|problem| Error::LaunchConfig {
                kernel: kernel.to_owned(),
                problem,
            })?;
        check_params_on(kernel, buf, func.params(), names, Some(ctx.device()))?;
        let (stream, stream_id) = self.handle();
        let launch = Launch {
            kernel,
            func: func.handle(),
            stream,
            stream_id,
            config,
            params: buf,
            timeout: ctx.launch_timeout(),
        };
        ctx.backend().launch(&launch, ctx.launch_variant())
    }
}
