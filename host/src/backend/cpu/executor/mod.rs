//! The CPU executor: runs a kernel's grid on the host, without a GPU or a
//! driver.
//!
//! # Model
//!
//! - **Workers and virtual SMs.** [`CpuExecutor::new`] starts a fixed pool
//!   of worker threads (by default one per available core, at most 16).
//!   Worker `i` is virtual SM `i`: every block it runs sees `smid == i` in its
//!   [`ThreadContext`](vigil_device::host_runtime::ThreadContext). A worker
//!   runs one block at a time, start to finish, so two blocks that run at
//!   the same time never share a virtual SM, which is what the
//!   sanitizer's per-SM thread state needs (GSan's one-CTA-per-SM rule).
//!   Blocks are claimed in linear order (x fastest) from a shared counter.
//! - **Threads as coroutines.** A block's threads run as stackful
//!   coroutines (`corosensei`) on their worker's OS thread, each on its own
//!   small stack (256 KiB by default, with a guard page, reused from block
//!   to block, its top cache-coloured by lane). A thread runs until it returns or blocks at `sync_threads` or
//!   a warp collective; a kernel that never blocks runs each thread to
//!   completion in turn. Barriers release when every thread that has not
//!   exited waits; warp collectives complete when every non-exited lane of
//!   the mask has contributed. 1,024 threads per block cost 1,024
//!   coroutines, not 1,024 OS threads.
//! - **Shared memory.** Each worker owns its block's shared memory: static
//!   `shared_array!`s (keyed by expansion, zeroed on each block's first
//!   use) and the launch's dynamic shared memory (zeroed per block), so
//!   blocks that run at the same time never see each other's.
//! - **Asynchronous copies.** `cp.async` groups, bulk and tensor copies
//!   and mbarriers run as `vigil_device`'s host model says: a copy moves
//!   its data when the kernel waits for it (its group, its mbarrier's
//!   phase) or its thread returns; each worker keeps its block's copies
//!   in flight.
//! - **Failures.** A panicking thread (an out-of-bounds index, a failed
//!   assertion) fails the launch with [`CpuError::KernelPanic`], carrying
//!   its block, thread, message and `file:line:column`; the rest of its
//!   block is unwound (threads waiting at a barrier are abandoned, not
//!   left hanging) and no further block starts. Threads that can never
//!   proceed fail it with [`CpuError::Deadlock`].
//! - **Sanitizer.** Launch `K::run_host::<Checked>` ([`checked_entry`])
//!   with a [`SanitizerRuntime`]: the executor installs it in every
//!   thread's context and calls its `block_start` / `block_end` hooks on
//!   the block's worker.
//! - **Spin-waits.** A thread that reads one address over and over (a
//!   plain, volatile or atomic load, or any other atomic but a store: an
//!   exchange, an add of 0, a compare-exchange; 32 times in a row) steps
//!   aside until the block's other runnable threads have run, so a thread
//!   spinning on a flag set by another thread of its block finishes as it
//!   does under the GPU's independent thread scheduling. While stepping
//!   aside runs no other thread, the thread does it less often (every
//!   1,024 reads at most), so a thread polling alone stays cheap. Plain
//!   and sanitized launches step aside at the same reads, so on one
//!   worker they interleave a block's threads identically.
//! - **No hangs.** When every running thread of the launch spins on memory
//!   that keeps its value (the others waiting at a barrier or in a warp
//!   collective), the launch fails with [`CpuError::Livelock`], naming
//!   each spinning thread, the address it polls and the kernel line of the
//!   read. [`CpuExecutor::launch_with_timeout`] bounds a launch's wall time
//!   ([`CpuError::Timeout`]); threads stop at their next memory read.
//!
//! Launches on one executor run one at a time. A kernel whose blocks wait
//! for each other (a persistent kernel spinning on a flag set by another
//! block) needs at least as many workers as blocks that wait at once, as
//! on a GPU it needs them co-resident.

mod args;
mod block;
mod fiber;
mod job;
mod panic;
mod pool;
mod spin;
mod stack;

pub use crate::error::{CpuError, SpinningThread, StalledBlock};
pub use args::HostArgs;

use crate::types::{DeviceLimits, LaunchConfig};
use job::{Job, JobCode};
use pool::Pool;
use std::time::{Duration, Instant};
use vigil_device::host_runtime::{Checked, SanitizerRuntime};
use vigil_device::{Dim3, Kernel, Plain};

/// A kernel's per-thread host entry point: `K::run_host::<Plain>` or
/// `K::run_host::<Checked>` (see [`plain_entry`] and [`checked_entry`]).
pub type KernelEntry = unsafe fn(&[u8]);

/// The plain (unsanitized) host entry point of kernel `K`.
pub fn plain_entry<K: Kernel>() -> KernelEntry {
    K::run_host::<Plain>
}

/// The sanitized host entry point of kernel `K`: its hooks call the
/// [`SanitizerRuntime`] passed to [`CpuExecutor::launch`].
pub fn checked_entry<K: Kernel>() -> KernelEntry {
    K::run_host::<Checked>
}

/// What a launch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchStats {
    /// Blocks run.
    pub blocks: u64,
    /// Threads per block.
    pub threads_per_block: u32,
    /// Workers (virtual SMs) the blocks were spread over.
    pub workers: usize,
    /// Coroutine resumptions: one per thread plus one per wait at a
    /// barrier or warp collective.
    pub resumes: u64,
    /// Wall time of the launch.
    pub elapsed: Duration,
}

/// Runs kernel grids on the host: blocks in parallel on a pool of worker
/// threads (one virtual SM each), a block's threads as coroutines on its
/// worker. See the [module documentation](crate::unstable::cpu::executor) for the model.
pub struct CpuExecutor {
    pool: Pool,
    stack_size: usize,
    /// Another device may write the memory its kernels poll
    /// ([`CpuExecutor::with_peer_writers`]).
    peer_writers: bool,
}

impl std::fmt::Debug for CpuExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuExecutor")
            .field("workers", &self.pool.workers())
            .field("stack_size", &self.stack_size)
            .finish()
    }
}

impl CpuExecutor {
    /// The default size of a GPU thread's coroutine stack: 256 KiB, enough
    /// for kernels built without optimisation and for panic formatting.
    /// Only the pages a thread touches are committed.
    pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

    /// The launch limits of the CPU device: those of a CUDA device
    /// (1,024 threads per block; block 1024 x 1024 x 64; grid
    /// 2^31-1 x 65535 x 65535) with 227 KiB of dynamic shared memory per
    /// block, the opt-in maximum of an H100, so that a launch valid here
    /// is valid on a GPU.
    pub const LIMITS: DeviceLimits = DeviceLimits {
        max_shared_mem_per_block_optin: 227 * 1024,
        ..DeviceLimits::CUDA_BASELINE
    };

    /// An executor with `workers` worker threads (virtual SMs); `0` means
    /// [`CpuExecutor::default_workers`].
    pub fn new(workers: usize) -> Result<Self, CpuError> {
        Self::with_stack_size(workers, Self::DEFAULT_STACK_SIZE)
    }

    /// An executor whose GPU threads get `stack_size`-byte stacks (at least
    /// 16 KiB; a thread that overflows its stack hits a guard page and
    /// crashes the process, as a stack overflow does).
    pub fn with_stack_size(workers: usize, stack_size: usize) -> Result<Self, CpuError> {
        let workers = if workers == 0 {
            Self::default_workers()
        } else {
            workers
        };
        let stack_size = stack_size.max(16 * 1024);
        panic::install_hook();
        Ok(CpuExecutor {
            pool: Pool::new(workers, stack_size)?,
            stack_size,
            peer_writers: false,
        })
    }

    /// The executor of a device in a symmetric group: its kernels may spin
    /// on memory that another device's kernel writes, so a launch whose
    /// every thread spins is not a livelock it can prove (the other device
    /// may not have started yet). Such a launch ends only at its launch
    /// timeout ([`CpuError::Timeout`]).
    pub fn with_peer_writers(mut self) -> Self {
        self.peer_writers = true;
        self
    }

    /// The most workers [`CpuExecutor::default_workers`] picks. A worker
    /// keeps a stack (two memory mappings: guard page and stack) per thread
    /// of the largest block it has run, up to 1,024; sixteen workers stay
    /// well inside Linux's default limit of 65,530 mappings per process.
    pub const MAX_DEFAULT_WORKERS: usize = 16;

    /// The default worker count: the machine's available parallelism, at
    /// most [`CpuExecutor::MAX_DEFAULT_WORKERS`].
    pub fn default_workers() -> usize {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(Self::MAX_DEFAULT_WORKERS)
    }

    /// The number of virtual SMs, which is the number of workers. Blocks
    /// see `smid` in `0..num_virtual_sms()`.
    pub fn num_virtual_sms(&self) -> u32 {
        u32::try_from(self.pool.workers()).expect("worker count fits u32")
    }

    /// The size of each GPU thread's stack.
    pub fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// The launch limits of the CPU device ([`CpuExecutor::LIMITS`]).
    pub fn limits(&self) -> DeviceLimits {
        Self::LIMITS
    }

    /// Runs `entry` for every thread of the grid `config` describes and
    /// returns when all have finished.
    ///
    /// `params` is the kernel's packed parameter buffer (the layout of
    /// `vigil_shared::params::ParamCursor`, pointers being host
    /// addresses). With `sanitizer`, every thread's context carries it and
    /// the executor calls its block hooks; `entry` should then be the
    /// kernel's [`checked_entry`].
    ///
    /// # Errors
    /// [`CpuError::Config`] for a configuration outside
    /// [`CpuExecutor::LIMITS`] (nothing runs); [`CpuError::KernelPanic`] or
    /// [`CpuError::Deadlock`] when a block fails (blocks that already ran
    /// keep their effects); [`CpuError::Livelock`] when every running
    /// thread spins on memory that no thread changes; [`CpuError::Resource`] when a stack cannot be
    /// allocated.
    ///
    /// # Safety
    /// `entry` must be a kernel's host entry point and `params` must hold
    /// that kernel's parameters, packed in order; every pointer in it must
    /// be valid for every access the kernel makes, for the whole launch.
    pub unsafe fn launch(
        &self,
        config: &LaunchConfig,
        entry: KernelEntry,
        params: &[u8],
        sanitizer: Option<&dyn SanitizerRuntime>,
    ) -> Result<LaunchStats, CpuError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_with_timeout(config, entry, params, sanitizer, None) }
    }

    /// [`CpuExecutor::launch`], failing with [`CpuError::Timeout`] when it
    /// runs longer than `timeout` (`None`: no limit). The kernel's threads
    /// stop at their next memory read; one that never reads memory cannot
    /// be stopped, and the call then waits for it.
    ///
    /// # Errors
    /// As [`CpuExecutor::launch`], and [`CpuError::Timeout`].
    ///
    /// # Safety
    /// As [`CpuExecutor::launch`].
    pub unsafe fn launch_with_timeout(
        &self,
        config: &LaunchConfig,
        entry: KernelEntry,
        params: &[u8],
        sanitizer: Option<&dyn SanitizerRuntime>,
        timeout: Option<Duration>,
    ) -> Result<LaunchStats, CpuError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_in_module(config, entry, params, sanitizer, timeout, &[]) }
    }

    /// [`CpuExecutor::launch_with_timeout`] of a kernel whose module put
    /// its device globals at `globals` (the address of each value in its
    /// host static, the address of the module's copy).
    ///
    /// # Errors
    /// As [`CpuExecutor::launch_with_timeout`].
    ///
    /// # Safety
    /// As [`CpuExecutor::launch`], and every copy in `globals` is live,
    /// as large as its static's value, for the whole launch.
    pub(crate) unsafe fn launch_in_module(
        &self,
        config: &LaunchConfig,
        entry: KernelEntry,
        params: &[u8],
        sanitizer: Option<&dyn SanitizerRuntime>,
        timeout: Option<Duration>,
        globals: &[(usize, usize)],
    ) -> Result<LaunchStats, CpuError> {
        config.validate(&Self::LIMITS)?;
        let start = Instant::now();
        let (g, b) = (config.grid, config.block);
        let job = Job::new(
            Dim3::new(g.x, g.y, g.z),
            Dim3::new(b.x, b.y, b.z),
            config.shared_mem_bytes as usize,
            JobCode {
                entry,
                params,
                globals,
            },
            sanitizer,
            self.peer_writers,
        );
        self.pool.run(&job, timeout);
        let resumes = job.outcome()?;
        Ok(LaunchStats {
            blocks: g.volume(),
            threads_per_block: b.volume() as u32,
            workers: self.pool.workers(),
            resumes,
            elapsed: start.elapsed(),
        })
    }
}
