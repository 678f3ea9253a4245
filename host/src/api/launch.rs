//! Kernel launches: [`Stream::launch`] and its untyped forms, one path
//! for all three ([`Stream::launch_checked`]).
//!
//! A launch first picks the entry it runs among those the kernel's lookup
//! found: the plain or the sanitized one, as
//! [`Context::launch_variant`](crate::Context::launch_variant) and the
//! launch filter decide for each launch (on a GPU, for a block its
//! sanitized entry cannot launch, that entry's large-block twin). Then,
//! once and before any driver call or executor step, it checks the
//! configuration against the device's limits and that entry's own
//! (threads per block, shared memory), and the packed arguments against
//! the PTX parameter list (count, each scalar's type, each buffer's
//! device). The checks are the same on every backend, which gets one
//! [`Launch`] description: `cuLaunchKernel` on a GPU (a sanitized entry
//! with the sanitizer's hidden arguments appended), the CPU executor
//! running the plain or checked host entry on the CPU backend,
//! synchronously, in issue order.

use crate::api::args::{pack_args, pack_values, KernelArgValue, KernelArgs};
use crate::api::context::Context;
use crate::api::module::{Function, KernelFn};
use crate::api::stream::Stream;
use crate::backend::{Launch, LaunchEntry};
use crate::error::{Error, Result};
use crate::launch_abi::check::check_params_on;
use crate::launch_abi::params::ParamBuffer;
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
        let buf = pack_args::<K, A>(args)?;
        let shared_stack = K::DYNAMIC_SHARED_BYTES;
        self.launch_checked(kernel.function(), config, shared_stack, &buf, K::PARAMS)
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
        self.launch_checked(func, config, 0, buf, &[])
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
        self.launch_checked(func, config, 0, &buf, &[])
    }

    /// The one launch path: picks the entry that runs, gives a kernel's
    /// shared stack (`shared_stack` bytes, 0: none) its dynamic shared
    /// memory, checks the configuration against the entry and the packed
    /// arguments against the PTX (`names` names them in errors), and hands
    /// the launch to the backend.
    fn launch_checked(
        &self,
        func: &Function,
        config: LaunchConfig,
        shared_stack: usize,
        buf: &ParamBuffer,
        names: &[ParamDesc],
    ) -> Result<()> {
        let ctx = self.context();
        let kernel = func.name();
        ctx.expect_device("launch", func.module().context().device())?;
        // The launch filter counts this launch here, once.
        let variant = ctx.decide_launch_variant(kernel);
        let entry = ctx.backend().entry(func.handle(), variant, &config)?;
        let config = checked_config(ctx, kernel, &entry, config, shared_stack)?;
        check_params_on(kernel, buf, func.params(), names, Some(ctx.device()))?;
        let (stream, stream_id) = self.handle();
        let launch = Launch {
            kernel,
            variant: entry.variant,
            stream: stream_id,
            config,
            params: buf,
            timeout: ctx.launch_timeout(),
        };
        ctx.backend().launch(&entry, stream, &launch)
    }
}

/// `config` checked against the device's limits and those of `entry`, the
/// entry a launch of `kernel` runs, after a shared stack of `shared_stack`
/// bytes (0: none) was given its dynamic shared memory.
fn checked_config(
    ctx: &Context,
    kernel: &str,
    entry: &LaunchEntry<'_>,
    config: LaunchConfig,
    shared_stack: usize,
) -> Result<LaunchConfig> {
    let limits = ctx.limits();
    let attrs = entry.attrs;
    let with_stack = match shared_stack {
        0 => Ok(config),
        stack => config.with_shared_stack(stack, attrs.static_shared_bytes, limits),
    };
    with_stack
        .and_then(|config| {
            config.validate_for(
                limits,
                attrs.max_threads_per_block,
                attrs.static_shared_bytes,
            )?;
            Ok(config)
        })
        .map_err(|problem| Error::LaunchConfig {
            kernel: kernel.to_owned(),
            problem,
        })
}
