//! [`ContextBuilder`]: which device a [`Context`] opens and how (sanitizer,
//! CPU executor size, launch timeout), in code or from `VIGIL_*` variables.

use crate::api::context::Context;
use crate::backend::{self, CpuOptions, CpuSanitizer};
use crate::error::{Error, Result};
use crate::sanitizer::config::{
    parse_bool, parse_duration, parse_int, ConfigError, SanitizerConfig, SanitizerConfigBuilder,
};
use crate::sanitizer::env::warn_unknown_variables;
use crate::sanitizer::exit;
use crate::sanitizer::launch_filter::LaunchSelection;
use crate::sanitizer::sink::{ReportFormat, ReportSink};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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

pub use crate::sanitizer::config::{ENV_DEVICE, ENV_LAUNCH_TIMEOUT, ENV_SANITIZE};

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
    sanitizer_config: SanitizerConfig,
    cpu_workers: usize,
    cpu_sanitizer: Option<Arc<dyn CpuSanitizer>>,
    launch_timeout: Option<Duration>,
    /// A device of a symmetric group ([`ContextBuilder::peer_group`]).
    peer_group: bool,
    error: Option<Error>,
}

impl fmt::Debug for ContextBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextBuilder")
            .field("device", &self.device)
            .field("sanitize", &self.sanitize)
            .field("sanitizer_config", &self.sanitizer_config)
            .field("cpu_workers", &self.cpu_workers)
            .field("cpu_sanitizer", &self.cpu_sanitizer.is_some())
            .field("launch_timeout", &self.launch_timeout)
            .field("error", &self.error)
            .finish()
    }
}

impl Default for ContextBuilder {
    fn default() -> Self {
        ContextBuilder {
            device: DeviceChoice::Auto,
            sanitize: false,
            sanitizer_config: SanitizerConfig::default(),
            cpu_workers: 0,
            cpu_sanitizer: None,
            launch_timeout: None,
            peer_group: false,
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

    /// The sanitizer's settings (default [`SanitizerConfig::default`], or the
    /// `VIGIL_*` variables after [`ContextBuilder::env_vars`]).
    pub fn sanitizer_config(mut self, config: SanitizerConfig) -> Self {
        self.sanitizer_config = config;
        self
    }

    /// The old name of [`ContextBuilder::sanitizer_config`].
    #[deprecated(note = "renamed `ContextBuilder::sanitizer_config`")]
    pub fn vmm_config(self, config: SanitizerConfig) -> Self {
        self.sanitizer_config(config)
    }

    /// Worker threads (virtual SMs) of a CPU context's own executor; `0`
    /// (the default) shares one process-wide executor of
    /// [`CpuExecutor::default_workers`](crate::unstable::cpu::CpuExecutor::default_workers) workers.
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

    /// The longest a launch may run (default: no limit). On the CPU
    /// backend a longer launch fails with
    /// [`CpuError::Timeout`](crate::unstable::cpu::CpuError::Timeout) (its
    /// threads stop at their next memory read); on a GPU, a wait
    /// (`synchronize` of a context, stream or event) gives up after this
    /// long with [`Error::Timeout`] instead of blocking forever.
    pub fn launch_timeout(mut self, limit: Option<Duration>) -> Self {
        self.launch_timeout = limit.filter(|d| !d.is_zero());
        self
    }

    /// Makes the context a device of a symmetric group: on the CPU backend
    /// it gets its own executor, whose kernels may spin on memory another
    /// device writes (such a launch ends at its launch timeout, never as a
    /// livelock).
    pub(crate) fn peer_group(mut self) -> Self {
        self.peer_group = true;
        self
    }

    /// The sanitizer settings so far (what a group's shared CPU sanitizer
    /// is made with).
    pub(crate) fn config(&self) -> &SanitizerConfig {
        &self.sanitizer_config
    }

    /// Whether the sanitizer is on.
    pub(crate) fn is_sanitized(&self) -> bool {
        self.sanitize
    }

    /// The CPU worker count asked for (0: the default).
    pub(crate) fn workers(&self) -> usize {
        self.cpu_workers
    }

    /// The launch timeout asked for.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.launch_timeout
    }

    /// Applies the `VIGIL_*` variables that `lookup` returns: `VIGIL_DEVICE`,
    /// `VIGIL_SANITIZE`, `VIGIL_LAUNCH_TIMEOUT` and the sanitizer's ([`SanitizerConfig`]). Absent variables
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
        if let Some(v) = lookup(ENV_LAUNCH_TIMEOUT) {
            let r = parse_duration(ENV_LAUNCH_TIMEOUT, &v).map(|d| self.launch_timeout = d);
            self = self.record(r.map_err(Error::from));
        }
        self.with_config(|c| c.env(&lookup))
    }

    /// Applies `f` to the sanitizer's settings so far, recording its error.
    fn with_config(
        mut self,
        f: impl FnOnce(SanitizerConfigBuilder) -> SanitizerConfigBuilder,
    ) -> Self {
        match f(self.sanitizer_config.clone().into_builder()).build() {
            Ok(c) => self.sanitizer_config = c,
            Err(e) => self = self.record(Err(e.into())),
        }
        self
    }

    /// Seed of the sanitizer's random evictions (`VIGIL_SEED`).
    pub fn seed(self, seed: u32) -> Self {
        self.with_config(|c| c.seed(seed))
    }

    /// Snapshots in each sanitizer thread's clock buffer, 1..=4096
    /// (`VIGIL_CLOCK_BUFFER_SIZE`).
    pub fn clock_buffer_size(self, n: u32) -> Self {
        self.with_config(|c| c.clock_buffer_size(n))
    }

    /// Stop a sanitized launch at its first race (`VIGIL_HALT_ON_ERROR`;
    /// what "stop" means on each backend:
    /// [`SanitizerConfigBuilder::halt_on_error`]).
    pub fn halt_on_error(self, on: bool) -> Self {
        self.with_config(|c| c.halt_on_error(on))
    }

    /// Append the race reports of every collection that found some to
    /// `path` as one line of JSON (`VIGIL_REPORT`).
    pub fn report_path(self, path: impl Into<std::path::PathBuf>) -> Self {
        self.with_config(|c| c.report_path(path))
    }

    /// The report file's format (`VIGIL_REPORT_FORMAT`; default: by the
    /// path's extension, `.sarif` SARIF 2.1.0, else JSON Lines).
    pub fn report_format(self, format: ReportFormat) -> Self {
        self.with_config(|c| c.report_format(format))
    }

    /// Leave the races the suppressions file at `path` matches out of the
    /// reports, counted (`VIGIL_SUPPRESSIONS`; the syntax:
    /// [`Suppressions`](crate::Suppressions)). The file is read here.
    ///
    /// ```no_run
    /// # fn main() -> vigil::Result<()> {
    /// let ctx = vigil::Context::builder()
    ///     .sanitize(true)
    ///     .suppressions("vigil.supp") // e.g. `race:kernel=legacy_*`
    ///     .sanitize_kernels(["histogram", "/^scan_/"])
    ///     .exit_code(Some(66))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn suppressions(self, path: impl AsRef<std::path::Path>) -> Self {
        self.with_config(|c| c.suppressions(path))
    }

    /// Only launches of these kernels run sanitized, each item a kernel
    /// name or a `/regex/` (`VIGIL_SANITIZE_KERNELS`; see
    /// [`LaunchFilter`](crate::LaunchFilter)); the others run plain.
    pub fn sanitize_kernels<S: AsRef<str>>(self, items: impl IntoIterator<Item = S>) -> Self {
        self.with_config(|c| c.sanitize_kernels(items))
    }

    /// Launches of these kernels run plain, each item a kernel name or a
    /// `/regex/` (`VIGIL_SANITIZE_KERNELS_EXCLUDE`).
    pub fn exclude_kernels<S: AsRef<str>>(self, items: impl IntoIterator<Item = S>) -> Self {
        self.with_config(|c| c.exclude_kernels(items))
    }

    /// The first `n` selected launches run plain (`VIGIL_LAUNCH_SKIP`).
    pub fn launch_skip(self, n: u64) -> Self {
        self.with_config(|c| c.launch_skip(n))
    }

    /// At most `n` selected launches run sanitized, after the skipped
    /// ones (`VIGIL_LAUNCH_COUNT`); `None` or `Some(0)`: no limit.
    pub fn launch_count(self, n: Option<u64>) -> Self {
        self.with_config(|c| c.launch_count(n))
    }

    /// The process exits with `code` (1..=255) when any race was reported
    /// in it (`VIGIL_EXITCODE`; default: its own status).
    pub fn exit_code(self, code: Option<i32>) -> Self {
        self.with_config(|c| c.exit_code(code))
    }

    /// [`ContextBuilder::env`] over the process environment. The first
    /// call in a process also warns on stderr about every `VIGIL_*`
    /// variable Vigil does not read, naming the closest known one
    /// (a misspelling gets "did you mean `VIGIL_SANITIZE`?").
    pub fn env_vars(self) -> Self {
        warn_unknown_variables();
        self.env(|name| std::env::var(name).ok())
    }

    /// Opens the device.
    pub fn build(self) -> Result<Context> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let device = match self.device {
            DeviceChoice::Auto => match backend::gpu_available() {
                Ok(()) => DeviceChoice::Gpu(0),
                Err(e) if e.is_no_gpu() => {
                    say_cpu_fallback(&e);
                    DeviceChoice::Cpu
                }
                Err(e) => return Err(e),
            },
            d => d,
        };
        // Report file, suppressions, launch filter and exit code are the
        // front end's, per context.
        let sink = ReportSink::new(&self.sanitizer_config);
        let selection = LaunchSelection::new(self.sanitizer_config.launch_filter().clone());
        let config = self.sanitizer_config.backend_settings();
        let backend = match device {
            DeviceChoice::Gpu(ordinal) => backend::open_cuda(ordinal, self.sanitize, config)?,
            DeviceChoice::Auto | DeviceChoice::Cpu => backend::open_cpu(CpuOptions {
                workers: self.cpu_workers,
                sanitize: self.sanitize,
                sanitizer: self.cpu_sanitizer,
                config,
                peer_group: self.peer_group,
            })?,
        };
        if let Some(code) = self.sanitizer_config.exit_code() {
            exit::set_exit_code(code);
        }
        if backend.is_sanitized() {
            exit::install_hook();
        }
        Ok(Context::from_backend(
            backend,
            sink,
            self.launch_timeout,
            selection,
            self.sanitizer_config.trust_types(),
        ))
    }
}

fn say_cpu_fallback(e: &Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!("vigil: no CUDA GPU ({e}); using the CPU backend");
    });
}
