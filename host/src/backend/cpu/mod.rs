//! The CPU backend: the same kernels and host code without a GPU.
//!
//! - [`executor`]: a pool of workers (virtual SMs) running a block's
//!   threads as coroutines;
//! - [`hooks`]: what a CPU context tells its [`CpuSanitizer`] (launches,
//!   memory, events, waits) and the allocator it may supply;
//! - [`sanitizer`]: the CPU race sanitizer (the shared engine over a host
//!   shadow arena);
//! - [`event`], [`memory`], [`launch`]: the context's operations, run
//!   synchronously under one queue lock per context.
//!
//! It depends on the shared pieces below it, never on the front end or on
//! the CUDA backend.

pub(crate) mod block_races;
pub(crate) mod event;
pub mod executor;
pub(crate) mod globals;
pub mod hooks;
pub(crate) mod launch;
pub(crate) mod memory;
pub mod sanitizer;

pub(crate) use event::CpuEvent;

use crate::error::{Error, Result};
use crate::sanitizer::config::SanitizerConfig;
use crate::sanitizer::report::RaceReports;
use crate::types::{DeviceId, DeviceProps};
use executor::{CpuExecutor, LaunchStats};
use hooks::{
    default_cpu_sanitizer, CpuSanitizer, CpuSanitizerParams, HostBufferAllocator, HostSync,
    SystemAllocator,
};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The CPU backend of one context.
pub(crate) struct CpuBackend {
    executor: Arc<CpuExecutor>,
    sanitizer: Option<Arc<dyn CpuSanitizer>>,
    props: DeviceProps,
    /// Serialises the context's operations (see [`hooks`]).
    queue: Mutex<()>,
    last_launch: Mutex<Option<LaunchStats>>,
}

/// How to open a CPU context (from the front end's builder).
pub(crate) struct CpuOptions {
    /// Workers of the context's own executor; 0 shares the process-wide one.
    pub(crate) workers: usize,
    pub(crate) sanitize: bool,
    /// The sanitizer to use; the default CPU race sanitizer when `None`.
    pub(crate) sanitizer: Option<Arc<dyn CpuSanitizer>>,
    pub(crate) config: SanitizerConfig,
    /// A device of a symmetric group: its own executor, whose kernels may
    /// spin on memory other devices write ([`CpuExecutor::with_peer_writers`]).
    pub(crate) peer_group: bool,
}

impl CpuBackend {
    /// Opens a CPU context.
    pub(crate) fn open(options: CpuOptions) -> Result<CpuBackend> {
        let executor = match (options.workers, options.peer_group) {
            (0, false) => shared_executor()?,
            (n, false) => Arc::new(CpuExecutor::new(n)?),
            (n, true) => Arc::new(CpuExecutor::new(n)?.with_peer_writers()),
        };
        let sanitizer = match (options.sanitize, options.sanitizer) {
            (false, _) => None,
            (true, Some(s)) => Some(s),
            (true, None) => {
                let params = CpuSanitizerParams {
                    num_virtual_sms: executor.num_virtual_sms(),
                    config: options.config,
                };
                Some(default_cpu_sanitizer(&params).ok_or(Error::Unsupported {
                    op: "the sanitizer",
                    backend: DeviceId::Cpu,
                    reason: "the CPU sanitizer could not reserve its memory (see \
                             stderr); supply one with ContextBuilder::cpu_sanitizer",
                })?)
            }
        };
        let sms = executor.num_virtual_sms();
        let props = DeviceProps {
            name: format!("Vigil CPU backend ({sms} virtual SMs)"),
            compute_capability: (0, 0),
            sm_count: sms,
            total_memory: host_memory(),
            limits: executor.limits(),
        };
        Ok(CpuBackend {
            executor,
            sanitizer,
            props,
            queue: Mutex::new(()),
            last_launch: Mutex::new(None),
        })
    }

    /// What the context reports about its device.
    pub(crate) fn props(&self) -> &DeviceProps {
        &self.props
    }

    /// The executor.
    pub(crate) fn executor(&self) -> &CpuExecutor {
        &self.executor
    }

    /// The sanitizer, in sanitized mode.
    pub(crate) fn sanitizer(&self) -> Option<&dyn CpuSanitizer> {
        self.sanitizer.as_deref()
    }

    /// Takes the context's queue: operations run one at a time, in order.
    pub(crate) fn queue(&self) -> MutexGuard<'_, ()> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with the sanitizer under the queue (nothing without one).
    pub(crate) fn notify(&self, f: impl FnOnce(&dyn CpuSanitizer)) {
        if let Some(s) = self.sanitizer() {
            let _q = self.queue();
            f(s);
        }
    }

    /// Where the context's buffers live: the sanitizer's allocator if it
    /// has one, else the process heap.
    pub(crate) fn allocator(&self) -> &dyn HostBufferAllocator {
        self.sanitizer()
            .and_then(|s| s.allocator())
            .unwrap_or(&SystemAllocator)
    }

    /// What the last launch did.
    pub(crate) fn last_launch(&self) -> Option<LaunchStats> {
        *self.last_launch.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_last_launch(&self, stats: LaunchStats) {
        *self.last_launch.lock().unwrap_or_else(|p| p.into_inner()) = Some(stats);
    }

    /// Tells the sanitizer (if any) that the host waited for `sync`.
    pub(crate) fn host_sync(&self, sync: HostSync) {
        self.notify(|s| s.on_host_sync(sync));
    }

    /// Takes the sanitizer's pending reports (empty without a sanitizer).
    pub(crate) fn take_reports(&self) -> RaceReports {
        match self.sanitizer() {
            Some(s) => {
                let _q = self.queue();
                s.take_reports()
            }
            None => RaceReports::new(),
        }
    }
}

/// The process-wide CPU executor that CPU contexts share by default.
fn shared_executor() -> Result<Arc<CpuExecutor>> {
    static EXECUTOR: OnceLock<Result<Arc<CpuExecutor>>> = OnceLock::new();
    EXECUTOR
        .get_or_init(|| Ok(Arc::new(CpuExecutor::new(0)?)))
        .clone()
}

/// The host's total memory from `/proc/meminfo` (0 when unknown).
fn host_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}
