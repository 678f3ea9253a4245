//! One launch as the workers see it: the grid, the kernel, and the shared
//! counters through which workers claim blocks and report failures.

use super::fiber::Worker;
use super::spin::SpinWatch;
use super::KernelEntry;
use crate::error::CpuError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use vigil_device::host_runtime::SanitizerRuntime;
use vigil_device::Dim3;

/// A launch in progress.
pub(crate) struct Job<'a> {
    grid: Dim3,
    block: Dim3,
    threads: u32,
    dynamic_shared_bytes: usize,
    entry: KernelEntry,
    params: &'a [u8],
    sanitizer: Option<&'a dyn SanitizerRuntime>,
    /// Where the kernel's module put its device globals.
    globals: &'a [(usize, usize)],
    /// The next linear block index to claim.
    next: AtomicU64,
    total: u64,
    /// Set when a block failed: no further block starts.
    stop: AtomicBool,
    /// Set when the launch is abandoned (a livelock, a timeout): running
    /// blocks stop at their next scheduler pass or memory read.
    abort: AtomicBool,
    /// Blocks that ran to completion.
    finished: AtomicU64,
    spin: SpinWatch,
    /// The failure of the lowest-numbered failed block.
    failure: Mutex<Option<(u64, CpuError)>>,
    resumes: AtomicU64,
}

/// What a job runs: a kernel's host entry, its packed parameters, and
/// where its module put its device globals (the address of each value in
/// its host static, the module's copy).
pub(crate) struct JobCode<'a> {
    pub(crate) entry: KernelEntry,
    pub(crate) params: &'a [u8],
    pub(crate) globals: &'a [(usize, usize)],
}

impl<'a> Job<'a> {
    /// A job for a validated configuration, running `code`.
    pub(crate) fn new(
        grid: Dim3,
        block: Dim3,
        dynamic_shared_bytes: usize,
        code: JobCode<'a>,
        sanitizer: Option<&'a dyn SanitizerRuntime>,
        peer_writers: bool,
    ) -> Self {
        let JobCode {
            entry,
            params,
            globals,
        } = code;
        Job {
            grid,
            block,
            threads: u32::try_from(block.volume()).expect("validated block size"),
            dynamic_shared_bytes,
            entry,
            params,
            sanitizer,
            globals,
            next: AtomicU64::new(0),
            total: grid.volume(),
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            finished: AtomicU64::new(0),
            spin: SpinWatch::new(peer_writers),
            failure: Mutex::new(None),
            resumes: AtomicU64::new(0),
        }
    }

    /// Claims and runs blocks on `worker` until none is left or one failed.
    pub(crate) fn run_on(&self, worker: &mut Worker) {
        let mut resumes = 0;
        while !self.stop.load(Ordering::Relaxed) {
            let linear = self.next.fetch_add(1, Ordering::Relaxed);
            if linear >= self.total {
                break;
            }
            match worker.run_block(self, linear) {
                Ok(n) if !self.aborted() => {
                    resumes += n;
                    self.finished.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(e) => self.fail(linear, e),
            }
        }
        self.spin.leave();
        self.resumes.fetch_add(resumes, Ordering::Relaxed);
    }

    /// Abandons the launch with `error` (which wins over block failures):
    /// no block starts, running ones stop. Returns `error`'s copy for the
    /// caller's own result.
    pub(crate) fn abort(&self, error: CpuError) -> CpuError {
        self.abort.store(true, Ordering::Relaxed);
        self.fail(0, error.clone());
        error
    }

    /// Whether the launch was abandoned.
    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// The flag [`Job::abort`] sets, for the block runtime to poll.
    pub(crate) fn abort_flag(&self) -> &AtomicBool {
        &self.abort
    }

    /// The launch-wide livelock detector.
    pub(crate) fn spin_watch(&self) -> &SpinWatch {
        &self.spin
    }

    /// Blocks that have not been claimed by a worker.
    pub(crate) fn unstarted(&self) -> u64 {
        self.total.saturating_sub(self.next.load(Ordering::Relaxed))
    }

    /// Blocks that ran to completion, and the grid's block count.
    pub(crate) fn progress(&self) -> (u64, u64) {
        (self.finished.load(Ordering::Relaxed), self.total)
    }

    /// Records the failure of block `linear` and stops the launch.
    pub(crate) fn fail(&self, linear: u64, error: CpuError) {
        self.stop.store(true, Ordering::Relaxed);
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.as_ref().is_none_or(|(l, _)| linear < *l) {
            *failure = Some((linear, error));
        }
    }

    /// The launch's outcome: the first failure, or how many coroutine
    /// resumptions it took.
    pub(crate) fn outcome(self) -> Result<u64, CpuError> {
        let failure = self
            .failure
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        match failure {
            Some((_, e)) => Err(e),
            None => Ok(self.resumes.into_inner()),
        }
    }

    /// `blockIdx` of linear block `linear` (x fastest, as CUDA numbers blocks).
    pub(crate) fn block_index(&self, linear: u64) -> Dim3 {
        unlinear(linear, self.grid)
    }

    /// `threadIdx` of linear thread `t` of a block.
    pub(crate) fn thread_index(&self, t: u32) -> Dim3 {
        unlinear(u64::from(t), self.block)
    }

    /// Threads per block.
    pub(crate) fn threads_per_block(&self) -> u32 {
        self.threads
    }

    /// `blockDim`.
    pub(crate) fn block_dim(&self) -> Dim3 {
        self.block
    }

    /// `gridDim`.
    pub(crate) fn grid_dim(&self) -> Dim3 {
        self.grid
    }

    /// Dynamic shared memory per block, in bytes.
    pub(crate) fn dynamic_shared_bytes(&self) -> usize {
        self.dynamic_shared_bytes
    }

    /// The per-thread entry point.
    pub(crate) fn entry(&self) -> KernelEntry {
        self.entry
    }

    /// The packed parameters.
    pub(crate) fn params(&self) -> &'a [u8] {
        self.params
    }

    /// The sanitizer runtime, if any.
    pub(crate) fn sanitizer(&self) -> Option<&'a dyn SanitizerRuntime> {
        self.sanitizer
    }

    /// Where the kernel's module put its device globals.
    pub(crate) fn globals(&self) -> &'a [(usize, usize)] {
        self.globals
    }
}

/// The coordinate of linear index `i` in `extent`, x fastest.
fn unlinear(i: u64, extent: Dim3) -> Dim3 {
    let (x, y) = (u64::from(extent.x), u64::from(extent.y));
    // Each component is below its extent, a u32.
    Dim3::new((i % x) as u32, (i / x % y) as u32, (i / (x * y)) as u32)
}
