//! [`Context`]: one device (a CUDA GPU or the CPU backend), how its memory
//! is allocated and how kernels run on it.
//!
//! See [`Context`] for the backends, modes and environment variables.

use crate::cpu::{CpuExecutor, LaunchStats};
use crate::driver::{self, drv};
use crate::error::{Error, Result};
use crate::launch::DeviceLimits;
use crate::report::RaceReports;
use crate::sanitize::{
    default_cpu_sanitizer, CpuSanitizer, CpuSanitizerParams, HostBufferAllocator, HostSync,
    SystemAllocator,
};
use crate::vmm::config::{parse_bool, parse_int};
use crate::vmm::{CachingPool, ConfigError, Vmm, VmmConfig};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Which device an object belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceId {
    /// CUDA device with this ordinal.
    Cuda(usize),
    /// The CPU backend (host memory; every CPU context is this device).
    Cpu,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cuda(n) => write!(f, "device {n}"),
            DeviceId::Cpu => f.write_str("the CPU backend"),
        }
    }
}

/// Which compiled variant of a kernel a context's launches run.
///
/// The one place this is decided is [`Context::launch_variant`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchVariant {
    /// The plain entry (`name` in the PTX, `K::run_host::<Plain>` on the CPU).
    Plain,
    /// The sanitized entry (`K::run_host::<Checked>` on the CPU; on a GPU
    /// the `name__vigil` PTX entry with the sanitizer's hidden arguments,
    /// which a later change adds).
    Sanitized,
}

/// A handle to one device: a CUDA GPU (its primary context) or the CPU
/// backend.
///
/// # Backends and modes
///
/// | constructor                                  | device | memory                        | launches |
/// |----------------------------------------------|--------|-------------------------------|----------|
/// | [`Context::new`], [`Context::default_device`] | GPU    | `cuMemAlloc`                  | plain PTX entry |
/// | builder, GPU, sanitizer on                   | GPU    | the shadow allocator ([`CachingPool`] over [`Vmm`](crate::vmm::Vmm)) | plain PTX entry for now (see [`LaunchVariant`]) |
/// | [`Context::cpu`], builder, CPU               | CPU    | aligned, zeroed host memory   | `K::run_host` on the [`CpuExecutor`] |
/// | builder, CPU, sanitizer on                   | CPU    | host memory, reported to the [`CpuSanitizer`] | the checked host entry with the sanitizer's runtime |
///
/// [`Context::from_env`] picks with `VIGIL_DEVICE` (`auto`, the default:
/// the GPU when there is one, else the CPU backend, said once on stderr)
/// and `VIGIL_SANITIZE`; [`ContextBuilder`] offers the same options in code.
/// Kernel and host code are the same on every backend.
///
/// | variable         | accepted                                             | default |
/// |------------------|------------------------------------------------------|---------|
/// | `VIGIL_DEVICE`   | `auto`, `cpu`, `gpu` (device 0), `gpu:<ordinal>`     | `auto`  |
/// | `VIGIL_SANITIZE` | `1`/`0`, `on`/`off`, `true`/`false`, `yes`/`no`      | off     |
///
/// The sanitizer's own variables (`VIGIL_SEED`, `VIGIL_CLOCK_BUFFER_SIZE`,
/// ...) are [`VmmConfig`]'s. A malformed value is [`Error::Config`], naming
/// the variable, the value and what is accepted.
///
/// Cheap to clone (reference counted); every stream, buffer and module keeps
/// its context alive. GPU methods make the context current on the calling
/// thread before each driver call, so a `Context` may be used from any
/// thread.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    props: DeviceProps,
}

/// How a context reaches its device.
pub(crate) enum Backend {
    Cuda(CudaDevice),
    Cpu(CpuDevice),
}

/// A retained primary context of one CUDA device.
pub(crate) struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) device: sys::CUdevice,
    pub(crate) raw: sys::CUcontext,
    /// Sanitized mode: every buffer comes from this pool (shadow memory).
    pub(crate) pool: Option<Arc<CachingPool>>,
}

/// The CPU backend of one context.
pub(crate) struct CpuDevice {
    pub(crate) executor: Arc<CpuExecutor>,
    pub(crate) sanitizer: Option<Arc<dyn CpuSanitizer>>,
    /// Serialises the context's operations (see [`crate::sanitize`]).
    queue: Mutex<()>,
    last_launch: Mutex<Option<LaunchStats>>,
}

impl CpuDevice {
    /// Takes the context's queue: operations run one at a time, in order.
    pub(crate) fn queue(&self) -> MutexGuard<'_, ()> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the context's buffers live: the sanitizer's allocator if it
    /// has one, else the process heap.
    pub(crate) fn allocator(&self) -> &dyn HostBufferAllocator {
        self.sanitizer
            .as_deref()
            .and_then(|s| s.allocator())
            .unwrap_or(&SystemAllocator)
    }

    pub(crate) fn set_last_launch(&self, stats: LaunchStats) {
        *self.last_launch.lock().unwrap_or_else(|p| p.into_inner()) = Some(stats);
    }

    /// Tells the sanitizer (if any) that the host waited for `sync`.
    pub(crate) fn host_sync(&self, sync: HostSync) {
        if let Some(s) = &self.sanitizer {
            let _q = self.queue();
            s.on_host_sync(sync);
        }
    }

    /// Takes the sanitizer's pending reports (empty without a sanitizer).
    pub(crate) fn take_reports(&self) -> RaceReports {
        match &self.sanitizer {
            Some(s) => {
                let _q = self.queue();
                s.take_reports()
            }
            None => RaceReports::new(),
        }
    }
}

/// What [`Context`] reports about its device (queried once at creation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    /// The device's name, e.g. `NVIDIA H200`, or the CPU backend's.
    pub name: String,
    /// Compute capability `(major, minor)`, e.g. `(9, 0)`; `(0, 0)` on the
    /// CPU backend.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors (virtual SMs, i.e. executor
    /// workers, on the CPU backend).
    pub sm_count: u32,
    /// Total global memory in bytes (the host's memory on the CPU backend,
    /// 0 when unknown).
    pub total_memory: usize,
    /// Launch limits (threads, dimensions, shared memory).
    pub limits: DeviceLimits,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver API
// is thread-safe); `Context` makes it current before each use and owns one
// reference to the primary context, released on drop.
unsafe impl Send for CudaDevice {}
// SAFETY: as above; `CudaDevice` is immutable after creation.
unsafe impl Sync for CudaDevice {}

/// Which device a [`ContextBuilder`] opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceChoice {
    /// GPU 0 when a GPU is usable, else the CPU backend (said once on stderr).
    Auto,
    /// The CPU backend.
    Cpu,
    /// CUDA device with this ordinal (an error without a GPU).
    Gpu(usize),
}

/// Environment variable: which device [`Context::from_env`] opens.
pub const ENV_DEVICE: &str = "VIGIL_DEVICE";
/// Environment variable: sanitizer on or off.
pub const ENV_SANITIZE: &str = "VIGIL_SANITIZE";

fn parse_device(text: &str) -> Result<DeviceChoice, ConfigError> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || ConfigError {
        source_name: ENV_DEVICE.to_owned(),
        value: text.to_owned(),
        accepted: "one of `auto`, `cpu`, `gpu` (device 0) or `gpu:<ordinal>`".to_owned(),
    };
    match t.as_str() {
        "auto" => Ok(DeviceChoice::Auto),
        "cpu" => Ok(DeviceChoice::Cpu),
        "gpu" | "cuda" => Ok(DeviceChoice::Gpu(0)),
        _ => {
            let n = t
                .strip_prefix("gpu:")
                .or_else(|| t.strip_prefix("cuda:"))
                .ok_or_else(bad)?;
            let n = parse_int(ENV_DEVICE, n, 0, i32::MAX as u64).map_err(|_| bad())?;
            Ok(DeviceChoice::Gpu(n as usize))
        }
    }
}

/// Builds a [`Context`]: device, sanitizer, CPU executor size. Setters
/// record the first error, which [`ContextBuilder::build`] returns.
///
/// ```no_run
/// # fn main() -> vigil::Result<()> {
/// let ctx = vigil::Context::builder().env_vars().sanitize(true).build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ContextBuilder {
    device: DeviceChoice,
    sanitize: bool,
    vmm_config: VmmConfig,
    cpu_workers: usize,
    cpu_sanitizer: Option<Arc<dyn CpuSanitizer>>,
    error: Option<Error>,
}

impl fmt::Debug for ContextBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextBuilder")
            .field("device", &self.device)
            .field("sanitize", &self.sanitize)
            .field("vmm_config", &self.vmm_config)
            .field("cpu_workers", &self.cpu_workers)
            .field("cpu_sanitizer", &self.cpu_sanitizer.is_some())
            .field("error", &self.error)
            .finish()
    }
}

impl Default for ContextBuilder {
    fn default() -> Self {
        ContextBuilder {
            device: DeviceChoice::Auto,
            sanitize: false,
            vmm_config: VmmConfig::default(),
            cpu_workers: 0,
            cpu_sanitizer: None,
            error: None,
        }
    }
}

impl ContextBuilder {
    fn record(mut self, r: Result<()>) -> Self {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
        self
    }

    /// Which device to open (default [`DeviceChoice::Auto`]).
    pub fn device(mut self, device: DeviceChoice) -> Self {
        self.device = device;
        self
    }

    /// The CPU backend.
    pub fn cpu(self) -> Self {
        self.device(DeviceChoice::Cpu)
    }

    /// CUDA device `ordinal`.
    pub fn gpu(self, ordinal: usize) -> Self {
        self.device(DeviceChoice::Gpu(ordinal))
    }

    /// Turns the sanitizer on or off (default off). On a GPU, buffers then
    /// come from the shadow allocator; on the CPU, launches run checked.
    pub fn sanitize(mut self, on: bool) -> Self {
        self.sanitize = on;
        self
    }

    /// The sanitizer's settings (default [`VmmConfig::default`], or the
    /// `VIGIL_*` variables after [`ContextBuilder::env_vars`]).
    pub fn vmm_config(mut self, config: VmmConfig) -> Self {
        self.vmm_config = config;
        self
    }

    /// Worker threads (virtual SMs) of a CPU context's own executor; `0`
    /// (the default) shares one process-wide executor of
    /// [`CpuExecutor::default_workers`] workers.
    pub fn cpu_workers(mut self, workers: usize) -> Self {
        self.cpu_workers = workers;
        self
    }

    /// The sanitizer a CPU context uses; implies [`ContextBuilder::sanitize`]`(true)`.
    pub fn cpu_sanitizer(mut self, sanitizer: Arc<dyn CpuSanitizer>) -> Self {
        self.cpu_sanitizer = Some(sanitizer);
        self.sanitize = true;
        self
    }

    /// Applies the `VIGIL_*` variables that `lookup` returns: `VIGIL_DEVICE`,
    /// `VIGIL_SANITIZE` and the sanitizer's ([`VmmConfig`]). Absent variables
    /// leave the current value; setters called later override. Tests pass a
    /// map; [`ContextBuilder::env_vars`] reads the process environment.
    pub fn env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Self {
        if let Some(v) = lookup(ENV_DEVICE) {
            let r = parse_device(&v).map(|d| self.device = d);
            self = self.record(r.map_err(Error::from));
        }
        if let Some(v) = lookup(ENV_SANITIZE) {
            let r = parse_bool(ENV_SANITIZE, &v).map(|on| self.sanitize = on);
            self = self.record(r.map_err(Error::from));
        }
        let r = VmmConfig::builder().env(&lookup).build();
        match r {
            Ok(c) => self.vmm_config = c,
            Err(e) => self = self.record(Err(e.into())),
        }
        self
    }

    /// [`ContextBuilder::env`] over the process environment.
    pub fn env_vars(self) -> Self {
        self.env(|name| std::env::var(name).ok())
    }

    /// Opens the device.
    pub fn build(self) -> Result<Context> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let device = match self.device {
            DeviceChoice::Auto => match driver::gpu_available() {
                Ok(()) => DeviceChoice::Gpu(0),
                Err(e) if e.is_no_gpu() => {
                    say_cpu_fallback(&e);
                    DeviceChoice::Cpu
                }
                Err(e) => return Err(e),
            },
            d => d,
        };
        match device {
            DeviceChoice::Gpu(ordinal) if self.sanitize => {
                let home = Context::new(ordinal)?;
                let pool = sanitizer_pool(&home, self.vmm_config)?;
                Context::open_cuda(ordinal, Some(pool))
            }
            DeviceChoice::Gpu(ordinal) => Context::new(ordinal),
            _ => {
                let executor = match self.cpu_workers {
                    0 => shared_executor()?,
                    n => Arc::new(CpuExecutor::new(n)?),
                };
                let sanitizer = match (self.sanitize, self.cpu_sanitizer) {
                    (false, _) => None,
                    (true, Some(s)) => Some(s),
                    (true, None) => {
                        let params = CpuSanitizerParams {
                            num_virtual_sms: executor.num_virtual_sms(),
                            config: self.vmm_config,
                        };
                        Some(default_cpu_sanitizer(&params).ok_or(Error::Unsupported {
                            op: "the sanitizer",
                            backend: DeviceId::Cpu,
                            reason: "the CPU sanitizer could not reserve its memory (see \
                                     stderr); supply one with ContextBuilder::cpu_sanitizer",
                        })?)
                    }
                };
                Ok(Context::open_cpu(executor, sanitizer))
            }
        }
    }
}

fn say_cpu_fallback(e: &Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!("vigil: no CUDA GPU ({e}); using the CPU backend");
    });
}

/// The process-wide CPU executor that CPU contexts share by default.
fn shared_executor() -> Result<Arc<CpuExecutor>> {
    static EXECUTOR: OnceLock<Result<Arc<CpuExecutor>>> = OnceLock::new();
    EXECUTOR
        .get_or_init(|| Ok(Arc::new(CpuExecutor::new(0)?)))
        .clone()
}

/// The process-wide shadow allocator of sanitized GPU contexts (design 3.1:
/// one reservation per process, shared by every device). Created by the
/// first sanitized context with its configuration; a later context with
/// another configuration replaces it only until the first allocation
/// ([`crate::vmm::VmmError::ConfigFrozen`] after).
fn sanitizer_pool(home: &Context, config: VmmConfig) -> Result<Arc<CachingPool>> {
    static POOL: Mutex<Option<Arc<CachingPool>>> = Mutex::new(None);
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = pool.as_ref() {
        if p.vmm().config() != config {
            p.vmm().set_config(config)?;
        }
        return Ok(p.clone());
    }
    let p = Arc::new(CachingPool::new(Vmm::new(home, config)?));
    *pool = Some(p.clone());
    Ok(p)
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

impl Context {
    /// Opens CUDA device `ordinal` (retains its primary context), plain mode.
    ///
    /// Fails with [`Error::DriverNotFound`] when there is no driver library,
    /// [`Error::NoDevice`] when there is no device and
    /// [`Error::InvalidDevice`] when `ordinal` is past the last device.
    /// Never panics. For the CPU backend or the sanitizer, see
    /// [`Context::from_env`] and [`Context::builder`].
    pub fn new(ordinal: usize) -> Result<Context> {
        Context::open_cuda(ordinal, None)
    }

    fn open_cuda(ordinal: usize, pool: Option<Arc<CachingPool>>) -> Result<Context> {
        let count = driver::device_count()?;
        if count == 0 {
            return Err(Error::NoDevice {
                reason: "the driver reports 0 devices".to_owned(),
            });
        }
        if ordinal >= count {
            return Err(Error::InvalidDevice { ordinal, count });
        }
        let mut device: sys::CUdevice = 0;
        // SAFETY: `device` is a valid out-pointer; the ordinal is in range.
        drv!(cuDeviceGet(&mut device, ordinal as i32))?;
        let props = query_props(device)?;
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; `device` came from cuDeviceGet.
        drv!(cuDevicePrimaryCtxRetain(&mut raw, device))?;
        let ctx = Context {
            inner: Arc::new(Inner {
                backend: Backend::Cuda(CudaDevice {
                    ordinal,
                    device,
                    raw,
                    pool,
                }),
                props,
            }),
        };
        ctx.bind()?;
        Ok(ctx)
    }

    fn open_cpu(executor: Arc<CpuExecutor>, sanitizer: Option<Arc<dyn CpuSanitizer>>) -> Context {
        let sms = executor.num_virtual_sms();
        let props = DeviceProps {
            name: format!("Vigil CPU backend ({sms} virtual SMs)"),
            compute_capability: (0, 0),
            sm_count: sms,
            total_memory: host_memory(),
            limits: executor.limits(),
        };
        Context {
            inner: Arc::new(Inner {
                backend: Backend::Cpu(CpuDevice {
                    executor,
                    sanitizer,
                    queue: Mutex::new(()),
                    last_launch: Mutex::new(None),
                }),
                props,
            }),
        }
    }

    /// Opens CUDA device 0 (plain mode).
    pub fn default_device() -> Result<Context> {
        Context::new(0)
    }

    /// The CPU backend, plain mode, on the process-wide executor. Buffers
    /// live in host memory; launches run `K::run_host` on the
    /// [`CpuExecutor`]. Works on any machine.
    pub fn cpu() -> Result<Context> {
        Context::builder().cpu().build()
    }

    /// The context the environment asks for: `VIGIL_DEVICE` (default
    /// `auto`: GPU 0 if usable, else the CPU backend, said once on
    /// stderr), `VIGIL_SANITIZE` and the sanitizer's variables. The
    /// constructor for programs that should run anywhere.
    pub fn from_env() -> Result<Context> {
        Context::builder().env_vars().build()
    }

    /// A builder: device, sanitizer, executor size, environment.
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    pub(crate) fn cuda_device(&self) -> Option<&CudaDevice> {
        match &self.inner.backend {
            Backend::Cuda(c) => Some(c),
            Backend::Cpu(_) => None,
        }
    }

    pub(crate) fn cpu_device(&self) -> Option<&CpuDevice> {
        match &self.inner.backend {
            Backend::Cuda(_) => None,
            Backend::Cpu(c) => Some(c),
        }
    }

    /// The error for a GPU-only operation on a CPU context.
    pub(crate) fn gpu_only(&self, op: &'static str) -> Error {
        Error::Unsupported {
            op,
            backend: self.device(),
            reason: "it is a CUDA driver operation",
        }
    }

    /// The device: [`DeviceId::Cuda`] with the ordinal, or [`DeviceId::Cpu`].
    pub fn device(&self) -> DeviceId {
        match &self.inner.backend {
            Backend::Cuda(c) => DeviceId::Cuda(c.ordinal),
            Backend::Cpu(_) => DeviceId::Cpu,
        }
    }

    /// True on the CPU backend.
    pub fn is_cpu(&self) -> bool {
        matches!(self.inner.backend, Backend::Cpu(_))
    }

    /// True when the sanitizer is on. On the CPU backend launches then run
    /// checked and [`Context::synchronize`] returns races. On a GPU every
    /// buffer comes from the shadow allocator ([`Context::sanitizer_pool`]),
    /// but launches still run the plain entry: the sanitized GPU launch
    /// path is not written yet ([`Context::launch_variant`] says which runs).
    pub fn is_sanitized(&self) -> bool {
        match &self.inner.backend {
            Backend::Cuda(c) => c.pool.is_some(),
            Backend::Cpu(c) => c.sanitizer.is_some(),
        }
    }

    /// Which kernel variant this context's launches run: the single place
    /// that decides it. [`LaunchVariant::Sanitized`] on a sanitized CPU
    /// context; [`LaunchVariant::Plain`] otherwise, including a sanitized
    /// GPU context until its launch path (the `name__vigil` entry with
    /// hidden arguments) lands.
    pub fn launch_variant(&self) -> LaunchVariant {
        match &self.inner.backend {
            Backend::Cpu(c) if c.sanitizer.is_some() => LaunchVariant::Sanitized,
            Backend::Cuda(c) if c.pool.is_some() => LaunchVariant::Sanitized,
            Backend::Cpu(_) | Backend::Cuda(_) => LaunchVariant::Plain,
        }
    }

    /// The shadow allocator's caching pool of a sanitized GPU context.
    pub fn sanitizer_pool(&self) -> Option<&CachingPool> {
        self.cuda_device().and_then(|c| c.pool.as_deref())
    }

    /// The CPU executor of a CPU context.
    pub fn cpu_executor(&self) -> Option<&CpuExecutor> {
        self.cpu_device().map(|c| &*c.executor)
    }

    /// What the last launch on a CPU context did (blocks, workers, time).
    pub fn last_cpu_launch(&self) -> Option<LaunchStats> {
        let c = self.cpu_device()?;
        *c.last_launch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The CUDA device ordinal (0 on the CPU backend; see [`Context::device`]).
    pub fn ordinal(&self) -> usize {
        match &self.inner.backend {
            Backend::Cuda(c) => c.ordinal,
            Backend::Cpu(_) => 0,
        }
    }

    /// Everything queried about the device.
    pub fn props(&self) -> &DeviceProps {
        &self.inner.props
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.inner.props.name
    }

    /// Compute capability `(major, minor)` (`(0, 0)` on the CPU backend).
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.props.compute_capability
    }

    /// Number of streaming multiprocessors (virtual SMs on the CPU backend).
    pub fn sm_count(&self) -> u32 {
        self.inner.props.sm_count
    }

    /// Total global memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.inner.props.total_memory
    }

    /// Maximum threads per block.
    pub fn max_threads_per_block(&self) -> u32 {
        self.inner.props.limits.max_threads_per_block
    }

    /// Maximum shared memory per block in bytes without opting in (48 KiB).
    pub fn max_shared_mem_per_block(&self) -> u32 {
        self.inner.props.limits.max_shared_mem_per_block
    }

    /// Maximum shared memory per block in bytes with opt-in (Vigil opts in
    /// automatically when a launch asks for more than the default).
    pub fn max_shared_mem_per_block_optin(&self) -> u32 {
        self.inner.props.limits.max_shared_mem_per_block_optin
    }

    /// Launch limits of the device.
    pub fn limits(&self) -> &DeviceLimits {
        &self.inner.props.limits
    }

    /// Queries any device attribute (raw driver enum); GPU only.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        match self.cuda_device() {
            Some(c) => get_attr(c.device, attr),
            None => Err(self.gpu_only("Context::attribute")),
        }
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`); GPU only.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid out-pointers; the context is current.
        drv!(cuMemGetInfo_v2(&mut free, &mut total))?;
        Ok((free, total))
    }

    /// Waits until all work on the device (every stream) has finished.
    ///
    /// On a sanitized CPU context, then returns the races found since the
    /// last collection as [`Error::Races`] (the context stays usable).
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner.backend {
            Backend::Cuda(_) => {
                self.bind()?;
                // SAFETY: the context is current on this thread.
                drv!(cuCtxSynchronize())?;
                crate::gpu_sanitizer::on_host_wait(self, crate::gpu_sanitizer::HostWait::All);
                races_to_result(crate::gpu_sanitizer::take_reports(self))
            }
            Backend::Cpu(c) => {
                c.host_sync(HostSync::Context);
                races_to_result(c.take_reports())
            }
        }
    }

    /// Takes the races found since the last collection without
    /// synchronising (empty when the sanitizer is off, and on a GPU until
    /// its sanitized launch path lands).
    pub fn take_race_reports(&self) -> RaceReports {
        match self.cpu_device() {
            Some(c) => c.take_reports(),
            None => crate::gpu_sanitizer::take_reports(self),
        }
    }

    /// Makes this context current on the calling thread (a no-op when it
    /// already is). Every GPU method calls it; code that calls the driver
    /// directly through [`Context::raw`] should too. On the CPU backend,
    /// [`Error::Unsupported`].
    pub fn bind(&self) -> Result<()> {
        let Some(c) = self.cuda_device() else {
            return Err(self.gpu_only("Context::bind"));
        };
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `cur` is a valid out-pointer.
        drv!(cuCtxGetCurrent(&mut cur))?;
        if cur != c.raw {
            // SAFETY: `raw` is a live primary context retained by `self`.
            drv!(cuCtxSetCurrent(c.raw))?;
        }
        Ok(())
    }

    /// The raw `CUcontext` (for driver calls Vigil does not wrap); null on
    /// the CPU backend.
    pub fn raw(&self) -> sys::CUcontext {
        self.cuda_device().map_or(std::ptr::null_mut(), |c| c.raw)
    }

    /// The raw `CUdevice` (-1 on the CPU backend).
    pub fn raw_device(&self) -> sys::CUdevice {
        self.cuda_device().map_or(-1, |c| c.device)
    }

    /// Checks that an object of device `found` may be used here.
    pub(crate) fn expect_device(&self, op: &'static str, found: DeviceId) -> Result<()> {
        let expected = self.device();
        if found == expected {
            Ok(())
        } else {
            Err(Error::WrongDevice {
                op,
                expected,
                found,
            })
        }
    }
}

/// `Ok` without reports, else [`Error::Races`].
pub(crate) fn races_to_result(reports: RaceReports) -> Result<()> {
    if reports.is_empty() {
        Ok(())
    } else {
        Err(Error::Races(reports))
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device())
            .field("name", &self.inner.props.name)
            .field("compute_capability", &self.inner.props.compute_capability)
            .field("sanitized", &self.is_sanitized())
            .finish()
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // SAFETY: releases the reference retained in `Context::open_cuda`.
        if let Err(e) = drv!(cuDevicePrimaryCtxRelease_v2(self.device)) {
            eprintln!(
                "vigil: releasing the primary context of device {}: {e}",
                self.ordinal
            );
        }
    }
}

fn get_attr(device: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut v = 0i32;
    // SAFETY: `v` is a valid out-pointer; `device` came from cuDeviceGet.
    drv!(cuDeviceGetAttribute(&mut v, attr, device))?;
    Ok(v)
}

fn query_props(device: sys::CUdevice) -> Result<DeviceProps> {
    use sys::CUdevice_attribute::*;
    let attr = |a| get_attr(device, a).map(|v| v.max(0) as u32);
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: `name` is a writable buffer of the length passed.
    drv!(cuDeviceGetName(
        name.as_mut_ptr(),
        name.len() as i32,
        device
    ))?;
    // SAFETY: the driver NUL-terminates within the buffer; the last byte is
    // still 0 from the initialiser in any case.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut total_memory = 0usize;
    // SAFETY: valid out-pointer and device.
    drv!(cuDeviceTotalMem_v2(&mut total_memory, device))?;
    let limits = DeviceLimits {
        max_threads_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dim: [
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dim: [
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_shared_mem_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_mem_per_block_optin: attr(
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
    };
    Ok(DeviceProps {
        name,
        compute_capability: (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_memory,
        limits,
    })
}
