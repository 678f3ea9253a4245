//! [`Context`]: one device (a CUDA GPU or the CPU backend), how its memory
//! is allocated and how kernels run on it.
//!
//! See [`Context`] for the backends, modes and environment variables.
//! Every operation is handed to the context's [`Backend`] (the one
//! dispatch point); nothing here calls the driver or the executor.

use crate::api::builder::ContextBuilder;
use crate::backend::{AsCudaDevice, Backend, CachingPool, CpuExecutor, CudaDevice, LaunchStats};
use crate::error::{Error, Result};
use crate::sanitizer::launch_filter::LaunchSelection;
use crate::sanitizer::report::{DetectionBounds, RaceReports, SourceLocation};
use crate::sanitizer::sink::ReportSink;
use crate::types::{DeviceId, DeviceLimits, DeviceProps, LaunchVariant};
use cudarc::driver::sys;
use std::collections::HashMap;
use std::fmt;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A handle to one device: a CUDA GPU (its primary context) or the CPU
/// backend.
///
/// # Backends and modes
///
/// | constructor                                  | device | memory                        | launches |
/// |----------------------------------------------|--------|-------------------------------|----------|
/// | [`Context::new`], [`Context::default_device`] | GPU    | `cuMemAlloc`                  | plain PTX entry |
/// | builder, GPU, sanitizer on                   | GPU    | the shadow allocator ([`CachingPool`] over [`Vmm`](crate::unstable::vmm::Vmm)) | the sanitized PTX entry `name__vigil` (see [`LaunchVariant`]) |
/// | [`Context::cpu`], builder, CPU               | CPU    | aligned, zeroed host memory   | `K::run_host` on the [`CpuExecutor`] |
/// | builder, CPU, sanitizer on                   | CPU    | host memory, reported to the [`CpuSanitizer`](crate::CpuSanitizer) | the checked host entry with the sanitizer's runtime |
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
/// | `VIGIL_LAUNCH_TIMEOUT` | a duration (`30`, `2.5s`, `500ms`, `10m`) or `off` | off |
///
/// The sanitizer's own variables (`VIGIL_SEED`, `VIGIL_CLOCK_BUFFER_SIZE`,
/// `VIGIL_HALT_ON_ERROR`, `VIGIL_REPORT`, `VIGIL_SUPPRESSIONS`,
/// `VIGIL_SANITIZE_KERNELS`, `VIGIL_EXITCODE`, ...) are [`SanitizerConfig`](crate::SanitizerConfig)'s. A malformed value is [`Error::Config`], naming
/// the variable, the value and what is accepted; an unknown `VIGIL_*`
/// variable is warned about once on stderr, with the closest known name.
///
/// Cheap to clone (reference counted); every stream, buffer and module keeps
/// its context alive. GPU methods make the context current on the calling
/// thread before each driver call, so a `Context` may be used from any
/// thread.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

/// What the clones of a context share.
struct ContextInner {
    backend: Backend,
    /// Where collected race reports go (suppressions, the `VIGIL_REPORT`
    /// file).
    reports: ReportSink,
    /// The longest a launch or a GPU wait may take.
    launch_timeout: Option<Duration>,
    /// Which launches of a sanitized context run sanitized.
    selection: LaunchSelection,
    /// Whether its sanitizer skips what a launch's proven views rule out
    /// (`SanitizerConfigBuilder::trust_types`).
    trust_types: bool,
    /// Where each live buffer of a sanitized context was allocated, by
    /// address (the reports' allocation sites).
    alloc_sites: Mutex<AllocationSites>,
}

/// Where each live buffer was allocated, by address.
type AllocationSites = HashMap<u64, &'static Location<'static>>;

/// The longest a dropped sanitized context without a launch timeout waits
/// for its kernels before it collects what they reported.
const DROP_WAIT_LIMIT: Duration = Duration::from_secs(10);

impl Drop for ContextInner {
    /// Races nobody collected go through the sink (report file,
    /// suppressions) and to the process's exit summary.
    fn drop(&mut self) {
        if !self.backend.is_sanitized() {
            return;
        }
        // Kernels still running may have more to report; a kernel that
        // never ends must not keep the drop waiting.
        let limit = self.launch_timeout.unwrap_or(DROP_WAIT_LIMIT);
        let _ = self.backend.synchronize(Some(limit));
        let mut reports = self.backend.take_reports();
        fill_allocation_sites(&self.alloc_sites, &mut reports);
        self.reports.deliver(reports, false);
    }
}

/// Names each report's allocation site from `sites`.
fn fill_allocation_sites(sites: &Mutex<AllocationSites>, reports: &mut RaceReports) {
    let sites = sites.lock().unwrap_or_else(|p| p.into_inner());
    if sites.is_empty() {
        return;
    }
    for r in reports.entries_mut() {
        if let Some(a) = r.allocation.as_mut().filter(|a| a.site.is_none()) {
            a.site = sites.get(&a.base).map(|l| SourceLocation::from_std(l));
        }
    }
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
        Context::builder().gpu(ordinal).build()
    }

    /// Wraps an opened backend (the builder's last step).
    pub(crate) fn from_backend(
        backend: Backend,
        reports: ReportSink,
        launch_timeout: Option<Duration>,
        selection: LaunchSelection,
        trust_types: bool,
    ) -> Context {
        Context {
            inner: Arc::new(ContextInner {
                backend,
                reports,
                launch_timeout,
                selection,
                trust_types,
                alloc_sites: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Whether the sanitizer skips the checks a launch's proven views rule
    /// out ([`SanitizerConfigBuilder::trust_types`](crate::SanitizerConfigBuilder::trust_types),
    /// `VIGIL_TRUST_TYPES`).
    pub fn trusts_types(&self) -> bool {
        self.inner.trust_types
    }

    /// The longest a launch may run, or a GPU wait may block
    /// ([`ContextBuilder::launch_timeout`], `VIGIL_LAUNCH_TIMEOUT`).
    pub fn launch_timeout(&self) -> Option<Duration> {
        self.inner.launch_timeout
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

    /// The backend every operation of the front end is handed to.
    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// The device: [`DeviceId::Cuda`] with the ordinal, or [`DeviceId::Cpu`].
    pub fn device(&self) -> DeviceId {
        self.inner.backend.device_id()
    }

    /// True on the CPU backend.
    pub fn is_cpu(&self) -> bool {
        self.device() == DeviceId::Cpu
    }

    /// True when the sanitizer is on: launches run checked (the CPU
    /// backend's checked host entry; on a GPU the `name__vigil` entry, with
    /// every buffer from the shadow allocator, [`Context::sanitizer_pool`])
    /// and [`Context::synchronize`] returns races.
    pub fn is_sanitized(&self) -> bool {
        self.inner.backend.is_sanitized()
    }

    /// Which kernel variant this context's launches run: the single place
    /// that decides it. [`LaunchVariant::Sanitized`] on a sanitized context
    /// (CPU: the checked host entry; GPU: the `name__vigil` entry with the
    /// sanitizer's hidden arguments); [`LaunchVariant::Plain`] otherwise.
    ///
    /// On a sanitized context with a launch filter
    /// ([`SanitizerConfigBuilder::sanitize_kernels`](crate::SanitizerConfigBuilder::sanitize_kernels),
    /// `VIGIL_SANITIZE_KERNELS`, `VIGIL_LAUNCH_SKIP`, ...; see
    /// [`LaunchFilter`](crate::LaunchFilter)), this is the variant of the
    /// launches the filter selects; each launch is decided as it is
    /// issued, and the others run plain. A plain launch there still sits
    /// in its stream's order: the sanitizers order work by streams, events
    /// and host waits, which a launch they do not see does not change, so
    /// sanitized launches before and after it keep their order (or lack of
    /// it); only its own accesses go unchecked.
    pub fn launch_variant(&self) -> LaunchVariant {
        if self.is_sanitized() && self.inner.backend.runs_sanitized_launches() {
            LaunchVariant::Sanitized
        } else {
            LaunchVariant::Plain
        }
    }

    /// The variant one launch of `kernel` runs ([`Context::launch_variant`]
    /// through the launch filter, which counts the launch).
    pub(crate) fn decide_launch_variant(&self, kernel: &str) -> LaunchVariant {
        match self.launch_variant() {
            LaunchVariant::Sanitized if !self.inner.selection.sanitizes(kernel) => {
                LaunchVariant::Plain
            }
            v => v,
        }
    }

    /// Whether launches of a sanitized context may run plain (a launch
    /// filter is set): its modules keep the plain entries beside the
    /// sanitized ones.
    pub(crate) fn launches_may_run_plain(&self) -> bool {
        self.launch_variant() == LaunchVariant::Sanitized && !self.inner.selection.is_everything()
    }

    /// Notes where the buffer at `ptr` was allocated (a sanitized
    /// context's reports name it).
    pub(crate) fn note_allocation(&self, ptr: u64, site: &'static Location<'static>) {
        if let Some(mut sites) = self.allocation_sites() {
            sites.insert(ptr, site);
        }
    }

    /// The buffer at `ptr` is freed.
    pub(crate) fn forget_allocation(&self, ptr: u64) {
        if let Some(mut sites) = self.allocation_sites() {
            sites.remove(&ptr);
        }
    }

    /// The allocation sites, kept by sanitized contexts only.
    fn allocation_sites(&self) -> Option<MutexGuard<'_, AllocationSites>> {
        self.is_sanitized().then(|| {
            self.inner
                .alloc_sites
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        })
    }

    /// The shadow allocator's caching pool of a sanitized GPU context.
    pub fn sanitizer_pool(&self) -> Option<&CachingPool> {
        self.inner.backend.sanitizer_pool()
    }

    /// The CPU executor of a CPU context.
    pub fn cpu_executor(&self) -> Option<&CpuExecutor> {
        self.inner.backend.cpu_executor()
    }

    /// What the last launch on a CPU context did (blocks, workers, time).
    pub fn last_cpu_launch(&self) -> Option<LaunchStats> {
        self.inner.backend.last_cpu_launch()
    }

    /// The CUDA device ordinal (0 on the CPU backend; see [`Context::device`]).
    pub fn ordinal(&self) -> usize {
        match self.device() {
            DeviceId::Cuda(n) => n,
            DeviceId::Cpu => 0,
        }
    }

    /// Everything queried about the device.
    pub fn props(&self) -> &DeviceProps {
        self.inner.backend.props()
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.props().name
    }

    /// Compute capability `(major, minor)` (`(0, 0)` on the CPU backend).
    pub fn compute_capability(&self) -> (u32, u32) {
        self.props().compute_capability
    }

    /// Number of streaming multiprocessors (virtual SMs on the CPU backend).
    pub fn sm_count(&self) -> u32 {
        self.props().sm_count
    }

    /// Total global memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.props().total_memory
    }

    /// Maximum threads per block.
    pub fn max_threads_per_block(&self) -> u32 {
        self.props().limits.max_threads_per_block
    }

    /// Maximum shared memory per block in bytes without opting in (48 KiB).
    pub fn max_shared_mem_per_block(&self) -> u32 {
        self.props().limits.max_shared_mem_per_block
    }

    /// Maximum shared memory per block in bytes with opt-in (Vigil opts in
    /// automatically when a launch asks for more than the default).
    pub fn max_shared_mem_per_block_optin(&self) -> u32 {
        self.props().limits.max_shared_mem_per_block_optin
    }

    /// Launch limits of the device.
    pub fn limits(&self) -> &DeviceLimits {
        &self.props().limits
    }

    /// Queries any device attribute (raw driver enum); GPU only.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        self.inner.backend.attribute(attr)
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`); GPU only.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.inner.backend.memory_info()
    }

    /// Waits until all work on the device (every stream) has finished.
    ///
    /// On a sanitized context, then returns the races found since the
    /// last collection as [`Error::Races`] (the context stays usable); a
    /// divergent barrier a GPU block reached takes precedence, as
    /// [`Error::DivergentBarrier`] (the collection's races still go to the
    /// report file, `VIGIL_REPORT`).
    pub fn synchronize(&self) -> Result<()> {
        self.inner.backend.synchronize(self.inner.launch_timeout)?;
        races_to_result(self.take_reports())
    }

    /// Takes the races found since the last collection without
    /// synchronising: de-duplicated, with the count of those the runtime
    /// could not record. Empty when the sanitizer is off (on a GPU, records
    /// of kernels still running may come at a later call). Races the
    /// suppressions match are left out (counted); a report file
    /// (`VIGIL_REPORT`) receives them, as at a synchronisation. A
    /// collection dropped without being read is printed when the process
    /// exits.
    ///
    /// ```no_run
    /// # fn main() -> vigil::Result<()> {
    /// let ctx = vigil::Context::builder().cpu().sanitize(true).build()?;
    /// // ... launches ...
    /// for race in ctx.take_reports().iter() {
    ///     eprintln!("{race}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn take_reports(&self) -> RaceReports {
        let mut reports = self.inner.backend.take_reports();
        fill_allocation_sites(&self.inner.alloc_sites, &mut reports);
        let mut reports = self.inner.reports.deliver(reports, true);
        reports.hand_out();
        reports
    }

    /// How far this context's race detection was bounded, summed over
    /// every collection so far (synchronisations and
    /// [`Context::take_reports`]): what [`RaceReports::bounds`] says of
    /// each. A test that must check everything can assert it is zero.
    ///
    /// ```no_run
    /// # fn main() -> vigil::Result<()> {
    /// let ctx = vigil::Context::builder().sanitize(true).build()?;
    /// // ... launches ...
    /// ctx.synchronize()?;
    /// let bounds = ctx.detection_bounds();
    /// assert!(!bounds.any(), "detection was bounded: {bounds:?}");
    /// # Ok(()) }
    /// ```
    pub fn detection_bounds(&self) -> DetectionBounds {
        self.inner.reports.bounds()
    }

    /// The old name of [`Context::take_reports`].
    #[doc(hidden)]
    pub fn take_race_reports(&self) -> RaceReports {
        self.take_reports()
    }

    /// Makes this context current on the calling thread (a no-op when it
    /// already is). Every GPU method calls it; code that calls the driver
    /// directly through [`Context::raw`] should too. On the CPU backend,
    /// [`Error::Unsupported`].
    pub fn bind(&self) -> Result<()> {
        self.inner.backend.bind()
    }

    /// The raw `CUcontext` (for driver calls Vigil does not wrap); null on
    /// the CPU backend.
    pub fn raw(&self) -> sys::CUcontext {
        self.inner
            .backend
            .cuda_device()
            .map_or(std::ptr::null_mut(), |d| d.raw())
    }

    /// The raw `CUdevice` (-1 on the CPU backend).
    pub fn raw_device(&self) -> sys::CUdevice {
        self.inner
            .backend
            .cuda_device()
            .map_or(-1, |d| d.raw_device())
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

/// `Ok` without reports; a collection's first divergent barrier as
/// [`Error::DivergentBarrier`] (as a CPU launch fails); else [`Error::Races`].
pub(crate) fn races_to_result(reports: RaceReports) -> Result<()> {
    if let Some(d) = reports.divergent_entries().first() {
        Err(Error::DivergentBarrier(d.clone()))
    } else if !reports.has_findings() {
        Ok(())
    } else {
        Err(Error::Races(reports))
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device())
            .field("name", &self.props().name)
            .field("compute_capability", &self.props().compute_capability)
            .field("sanitized", &self.is_sanitized())
            .finish()
    }
}

impl AsCudaDevice for Context {
    fn cuda_device(&self) -> Result<&Arc<CudaDevice>> {
        self.inner
            .backend
            .cuda_device()
            .ok_or_else(|| self.inner.backend.gpu_only("a CUDA device"))
    }
}
