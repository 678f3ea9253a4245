//! Kernel launches on a GPU. The front end hands down a checked
//! [`Launch`] and the entry that runs (picked and checked before, see
//! [`CudaKernel::entry`](super::module::CudaKernel::entry)); a sanitized
//! launch only gets the GPU sanitizer's hidden arguments appended, asked
//! for through [`SanitizedLaunch`], the one seam between a launch and the
//! sanitizer.

use super::driver::module as driver;
use super::lean_build::PathRequest;
use super::module::CudaFunction;
use super::stream::CudaStream;
use super::CudaBackend;
use crate::backend::launch::Launch;
use crate::error::Result;
use crate::launch_abi::params::ParamBuffer;
use crate::types::{LaunchConfig, LaunchVariant};
use std::borrow::Cow;

/// What the device's GPU sanitizer is told of a sanitized kernel launch
/// when it is asked for the launch's hidden arguments
/// (`GpuSanitizer::hidden_args(&SanitizedLaunch, &CudaStream) ->
/// HiddenArgs`, called just before the launch is enqueued on that stream).
#[derive(Clone, Copy)]
pub(crate) struct SanitizedLaunch<'a> {
    /// The launching context (whose report buffer its races go to).
    pub(crate) owner: u64,
    /// The launch as the front end described it: kernel, stream,
    /// configuration, arguments (with their read-only ranges).
    pub(crate) launch: &'a Launch<'a>,
    /// The shared-memory window the window shadow must cover for it
    /// (static and dynamic bytes; 0: none).
    pub(crate) shared_window: u64,
    /// How many of its blocks one SM holds at once.
    pub(crate) resident: u32,
    /// Whether its threads keep their `cp.async` copies in flight.
    pub(crate) copies_in_flight: bool,
    /// What it asks of its entry's path word and whether its blocks
    /// claim their regions at entry ([`CudaFunction::path_request`]).
    pub(crate) path: PathRequest,
}

impl CudaBackend {
    /// Enqueues `launch` of `func` (the entry its variant runs) on
    /// `stream`; a sanitized launch with the GPU sanitizer's hidden
    /// arguments after the user's.
    pub(crate) fn launch(
        &self,
        func: &CudaFunction,
        stream: &CudaStream,
        launch: &Launch<'_>,
    ) -> Result<()> {
        let params = match launch.variant {
            LaunchVariant::Plain => Cow::Borrowed(launch.params),
            LaunchVariant::Sanitized => {
                self.device().bind()?;
                let sanitized = SanitizedLaunch {
                    owner: self.owner(),
                    launch,
                    shared_window: func.shared_window(launch.config.shared_mem_bytes),
                    resident: func.resident_blocks(
                        launch.config.block.x * launch.config.block.y * launch.config.block.z,
                        launch.config.shared_mem_bytes,
                    )?,
                    copies_in_flight: func.copies_in_flight(),
                    path: func.path_request(launch.config.shared_mem_bytes),
                };
                let hidden = self.gpu_sanitizer()?.hidden_args(&sanitized, stream)?;
                self.note_shadow_writes();
                Cow::Owned(launch.params.with_hidden(&hidden))
            }
        };
        // The sanitizer orders a stream's launches by their entry and exit
        // clocks: a sanitized launch waits for its predecessor (a
        // dependent's `griddepcontrol.wait` then returns at once).
        let config = LaunchConfig {
            programmatic_stream_serialization: launch.config.programmatic_stream_serialization
                && matches!(launch.variant, LaunchVariant::Plain),
            ..launch.config
        };
        self.enqueue(func, stream, launch.kernel, config, &params)
    }

    /// Tells the shadow allocator that a sanitized entry (a kernel's or
    /// the range-access entry) is about to run: a reused block's shadow
    /// must be reset after one.
    pub(super) fn note_shadow_writes(&self) {
        if let Some(pool) = self.pool() {
            pool.vmm().note_sanitized_launch();
        }
    }

    /// `cuLaunchKernel` of `func` on `stream` with `config` and `params`
    /// (`cuLaunchKernelEx` for a programmatic dependent launch; called
    /// `kernel` in errors): a checked launch, or one of the
    /// sanitizer's own entries with the arguments it built.
    pub(super) fn enqueue(
        &self,
        func: &CudaFunction,
        stream: &CudaStream,
        kernel: &str,
        config: LaunchConfig,
        params: &ParamBuffer,
    ) -> Result<()> {
        self.device().bind()?;
        let limits = &self.device().props().limits;
        func.ensure_dynamic_smem(config.shared_mem_bytes, limits.max_shared_mem_per_block)?;
        let mut params = params.kernel_params();
        let (g, b) = (config.grid, config.block);
        // SAFETY: `func` is a live function of the current context;
        // `params` holds one pointer per PTX parameter (checked by the
        // front end, or built by the sanitizer for its own entries), each
        // into the parameter buffer, which outlives the call; every device
        // pointer in it is valid for the kernel's accesses (the launch's
        // contract); the configuration was validated.
        unsafe {
            driver::launch_kernel(
                func.raw(),
                driver::LaunchShape {
                    grid: [g.x, g.y, g.z],
                    block: [b.x, b.y, b.z],
                    shared_bytes: config.shared_mem_bytes,
                    programmatic_stream_serialization: config.programmatic_stream_serialization,
                },
                stream.raw(),
                &mut params,
            )
        }
        .map_err(|e| e.for_launch(kernel))
    }
}
