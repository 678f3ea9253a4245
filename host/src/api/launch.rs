//! Kernel launches: [`Stream::launch`] and its untyped forms, one path
//! for all three ([`Stream::checked_entry`], then [`Stream::launch_entry`]).
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

use crate::api::args::{pack_values, KernelArgValue, KernelArgs};
use crate::api::context::Context;
use crate::api::module::{Function, KernelFn};
use crate::api::proofs::pack_proven_args;
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
        let func = kernel.function();
        // The geometry first: a launch the device cannot run is that
        // error, whatever its layouts; the layouts are proven for the
        // configuration that runs.
        let (entry, config) = self.checked_entry(func, config, K::DYNAMIC_SHARED_BYTES)?;
        let mut buf = pack_proven_args::<K, A>(&config, args)?;
        buf.trust_partitions(self.context().trusts_types());
        self.launch_entry(func, &entry, config, &buf, K::PARAMS)
    }

    /// Launches a function with arguments already packed (e.g. by
    /// [`pack_args`](crate::pack_args) followed by [`ParamBuffer::append_hidden`]). The buffer
    /// is checked against the PTX parameter list first.
    ///
    /// # Safety
    /// Every pointer in `buf` must be valid for the accesses the kernel
    /// makes through it while the kernel runs (buffers packed by
    /// [`pack_args`](crate::pack_args) are; raw pointers pushed by hand must be too), and
    /// the launch must satisfy the block shape and the layouts the kernel
    /// declares (`Kernel::BLOCK_SHAPE`, `Kernel::LAYOUTS`), which
    /// [`Stream::launch`] proves and this does not.
    pub unsafe fn launch_packed(
        &self,
        func: &Function,
        config: LaunchConfig,
        buf: &ParamBuffer,
    ) -> Result<()> {
        let (entry, config) = self.checked_entry(func, config, 0)?;
        self.launch_entry(func, &entry, config, buf, &[])
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
    /// `ptr_mut` arguments), and, for a `#[kernel]` that declares a block
    /// shape or view layouts, that the launch satisfies them (the kernel
    /// indexes those views unchecked; [`Stream::launch`] proves them).
    pub unsafe fn launch_dynamic(
        &self,
        func: &Function,
        config: LaunchConfig,
        args: &[KernelArgValue<'_>],
    ) -> Result<()> {
        let buf = pack_values(func.name(), args)?;
        let (entry, config) = self.checked_entry(func, config, 0)?;
        self.launch_entry(func, &entry, config, &buf, &[])
    }

    /// The one launch path, first half: picks the entry that runs, gives a
    /// kernel's shared stack (`shared_stack` bytes, 0: none) its dynamic
    /// shared memory and checks the configuration against the device and
    /// that entry. Every launch goes through it, then through
    /// [`Self::launch_entry`].
    fn checked_entry<'f>(
        &self,
        func: &'f Function,
        config: LaunchConfig,
        shared_stack: usize,
    ) -> Result<(LaunchEntry<'f>, LaunchConfig)> {
        let ctx = self.context();
        let kernel = func.name();
        ctx.expect_device("launch", func.module().context().device())?;
        // The launch filter counts this launch here, once.
        let variant = ctx.decide_launch_variant(kernel);
        let entry = ctx.backend().entry(func.handle(), variant, &config)?;
        let config = checked_config(ctx, kernel, &entry, config, shared_stack)?;
        Ok((entry, config))
    }

    /// The one launch path, second half: checks the packed arguments
    /// against the PTX (`names` names them in errors) and hands the launch
    /// of `entry` ([`Self::checked_entry`]) to the backend.
    fn launch_entry(
        &self,
        func: &Function,
        entry: &LaunchEntry<'_>,
        config: LaunchConfig,
        buf: &ParamBuffer,
        names: &[ParamDesc],
    ) -> Result<()> {
        let ctx = self.context();
        let kernel = func.name();
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
        ctx.backend().launch(entry, stream, &launch)
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
