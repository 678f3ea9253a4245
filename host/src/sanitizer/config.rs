//! [`SanitizerConfig`]: the sanitizer's settings (both backends), from a builder and from
//! `VIGIL_*` environment variables (docs/src/sanitizer/configuration.md). Malformed values are a
//! [`ConfigError`] naming the variable (or builder option), the value and
//! what is accepted. The configuration freezes at the first allocation
//! ([`Vmm::set_config`](crate::unstable::vmm::Vmm::set_config) then fails with
//! [`VmmError::ConfigFrozen`](crate::unstable::vmm::VmmError::ConfigFrozen)).
//!
//! | variable                     | accepted                                   | default |
//! |------------------------------|--------------------------------------------|---------|
//! | `VIGIL_CLOCK_BUFFER_SIZE`    | integer in 1..=4096 (snapshots per thread) | 32      |
//! | `VIGIL_SEED`                 | u32, decimal or `0x` hex                   | 0x5eed  |
//! | `VIGIL_DEVICE_RANKS`         | comma-separated distinct device ordinals (0..32), rank order, or `all` | `all` |
//! | `VIGIL_SHADOW_POOL_RECORDS`  | integer in 0..=4194304 (inflated records per device) | 65536 |
//! | `VIGIL_SANITIZED_REGISTERS`  | integer in 24..=255 (registers per thread of sanitized GPU entries) | 128 (blocks over 512 threads: a second build at 64) |
//! | `VIGIL_LEAN_ENTRIES`         | `1`/`0`, `on`/`off`, `true`/`false` (sanitized entries start on the build at 64 registers) | on |
//! | `VIGIL_ALLOC_CACHE`          | `1`/`0`, `on`/`off`, `true`/`false`        | on      |
//! | `VIGIL_SHAREABLE_HANDLES`    | `1`/`0`, `on`/`off`, `true`/`false`        | on      |
//! | `VIGIL_HALT_ON_ERROR`        | `1`/`0`, `on`/`off`, `true`/`false`        | off     |
//! | `VIGIL_TRUST_TYPES`          | `1`/`0`, `on`/`off`, `true`/`false` (skip what a launch's proven views rule out) | on |
//! | `VIGIL_REPORT`               | a file path (not empty)                    | none    |
//! | `VIGIL_REPORT_FORMAT`        | `json` or `sarif`                          | by the report path: `.sarif` SARIF, else JSON |
//! | `VIGIL_SUPPRESSIONS`         | a suppressions file ([`Suppressions`])     | none    |
//! | `VIGIL_SANITIZE_KERNELS`     | comma-separated kernel names or `/regex/`  | every kernel |
//! | `VIGIL_SANITIZE_KERNELS_EXCLUDE` | comma-separated kernel names or `/regex/` | none |
//! | `VIGIL_LAUNCH_SKIP`          | integer (selected launches run plain first) | 0      |
//! | `VIGIL_LAUNCH_COUNT`         | integer (selected launches sanitized at most; `0` or `all`: no limit) | no limit |
//! | `VIGIL_EXITCODE`             | integer in 1..=255, or `off`               | off     |
//!
//! `VIGIL_HALT_ON_ERROR` stops a sanitized launch at its first race (see
//! [`SanitizerConfigBuilder::halt_on_error`] for what that means on each
//! backend). `VIGIL_REPORT=path` appends the races of every collection
//! (each [`Context::synchronize`](crate::Context::synchronize),
//! [`Stream::synchronize`](crate::Stream::synchronize) or
//! [`Context::take_reports`](crate::Context::take_reports) that found
//! some) to `path` as one line of JSON ([`RaceReports::to_json`](crate::RaceReports::to_json));
//! the file is never truncated, so earlier runs' lines stay (JSON Lines).
//! A path ending in `.sarif` (or `VIGIL_REPORT_FORMAT=sarif`) gets one
//! SARIF 2.1.0 log instead, rewritten with every race of the process so
//! far ([`ReportFormat`]).
//!
//! `VIGIL_SUPPRESSIONS` leaves matching races out of the reports
//! (counted); the kernel lists and the launch skip and count choose which
//! launches run sanitized ([`LaunchFilter`]); `VIGIL_EXITCODE` makes the
//! process exit with that status when any race was reported. The guide's
//! chapter *Sanitizer controls* shows each with an example.
//!
//! Every `VIGIL_*` name the project reads is listed once, in
//! [`unstable::env`](crate::unstable::env); an unknown one is warned about
//! on stderr.

use super::launch_filter::{parse_items, parse_list, LaunchFilter};
use super::sink::ReportFormat;
use super::suppressions::{suppression_error, Suppressions};
use std::path::{Path, PathBuf};
use vigil_shared::address::MAX_DEVICES;

/// Largest accepted clock-buffer size.
pub const MAX_CLOCK_BUFFER_SIZE: u32 = 4096;
/// Largest accepted number of inflated shadow records per device.
pub const MAX_SHADOW_POOL_RECORDS: u32 = 1 << 22;
/// Fewest registers per thread a sanitized GPU entry may be capped at.
pub const MIN_SANITIZED_REGISTERS: u32 = 24;
/// Most registers per thread of an sm_90 thread.
pub const MAX_SANITIZED_REGISTERS: u32 = 255;
/// Default register cap of sanitized GPU entries
/// (`CU_JIT_MAX_REGISTERS`): the race detector's calls otherwise take 167
/// to 255 on sm_90, one 256-thread CTA per SM. At 128 a block holds at
/// most 512 threads; a launch of larger blocks runs a second build of the
/// module at [`LEAN_SANITIZED_REGISTERS`]. 128 keeps two 256-thread
/// CTAs per SM, as 96 does, with fewer spills. Measured on an H100 (the
/// bench's sanitized kernels, 256-thread blocks, at 64 / 80 / 96 / 128):
/// copy 61.5 / 53.8 / 43.4 / 37.8 ms, transpose 82.5 / 70.9 / 58.3 / 52.1,
/// softmax 155 / 136 / 101 / 88.6, sgemm 5.17 / 4.42 / 4.00 / 3.87 s.
pub const DEFAULT_SANITIZED_REGISTERS: u32 = 128;
/// Register cap of a sanitized module's lean build: the build launches
/// of blocks too large for [`SanitizerConfig::sanitized_registers`] use
/// (64 registers fit 1,024 threads in an SM's 65,536), and the one
/// sanitized entries start on ([`SanitizerConfigBuilder::lean_entries`]).
pub const LEAN_SANITIZED_REGISTERS: u32 = 64;

/// Environment variable: snapshots in each sanitizer thread's clock buffer.
pub const ENV_CLOCK_BUFFER_SIZE: &str = "VIGIL_CLOCK_BUFFER_SIZE";
/// Environment variable: seed of the random eviction of access clocks.
pub const ENV_SEED: &str = "VIGIL_SEED";
/// Environment variable: device ordinals in rank order.
pub const ENV_DEVICE_RANKS: &str = "VIGIL_DEVICE_RANKS";
/// Environment variable: inflated shadow records per device.
pub const ENV_SHADOW_POOL_RECORDS: &str = "VIGIL_SHADOW_POOL_RECORDS";
/// Environment variable: register cap of sanitized GPU entries.
pub const ENV_SANITIZED_REGISTERS: &str = "VIGIL_SANITIZED_REGISTERS";
/// Environment variable: caching pool on or off.
pub const ENV_ALLOC_CACHE: &str = "VIGIL_ALLOC_CACHE";
/// Environment variable: request POSIX-fd shareable handles.
pub const ENV_SHAREABLE_HANDLES: &str = "VIGIL_SHAREABLE_HANDLES";
/// Environment variable: stop a sanitized launch at its first race.
pub const ENV_HALT_ON_ERROR: &str = "VIGIL_HALT_ON_ERROR";
/// Whether the sanitizer skips the checks a launch's proven views rule out.
pub const ENV_TRUST_TYPES: &str = "VIGIL_TRUST_TYPES";
/// Environment variable: `1`/`0` (`on`/`off`, `true`/`false`), whether
/// sanitized GPU entries start on the lean build
/// ([`SanitizerConfigBuilder::lean_entries`]).
pub const ENV_LEAN_ENTRIES: &str = "VIGIL_LEAN_ENTRIES";
/// Environment variable: file the race reports are appended to as JSON.
pub const ENV_REPORT: &str = "VIGIL_REPORT";
/// Environment variable: the report file's format (`json` or `sarif`).
pub const ENV_REPORT_FORMAT: &str = "VIGIL_REPORT_FORMAT";
/// Environment variable: a suppressions file ([`Suppressions`]).
pub const ENV_SUPPRESSIONS: &str = "VIGIL_SUPPRESSIONS";
/// Environment variable: the kernels whose launches run sanitized.
pub const ENV_SANITIZE_KERNELS: &str = "VIGIL_SANITIZE_KERNELS";
/// Environment variable: kernels whose launches run plain.
pub const ENV_SANITIZE_KERNELS_EXCLUDE: &str = "VIGIL_SANITIZE_KERNELS_EXCLUDE";
/// Environment variable: selected launches that run plain before the
/// first sanitized one.
pub const ENV_LAUNCH_SKIP: &str = "VIGIL_LAUNCH_SKIP";
/// Environment variable: the most selected launches that run sanitized.
pub const ENV_LAUNCH_COUNT: &str = "VIGIL_LAUNCH_COUNT";
/// Environment variable: the process's exit status when races were
/// reported.
pub const ENV_EXITCODE: &str = "VIGIL_EXITCODE";
/// Environment variable: which device [`Context::from_env`](crate::Context::from_env) opens.
pub const ENV_DEVICE: &str = "VIGIL_DEVICE";
/// Environment variable: sanitizer on or off.
pub const ENV_SANITIZE: &str = "VIGIL_SANITIZE";
/// Environment variable: the longest a launch may run (see
/// [`ContextBuilder::launch_timeout`](crate::ContextBuilder::launch_timeout)),
/// e.g. `30s`, `500ms`; `off` for none.
pub const ENV_LAUNCH_TIMEOUT: &str = "VIGIL_LAUNCH_TIMEOUT";

/// A malformed configuration value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}={value:?} is invalid: expected {accepted}")]
pub struct ConfigError {
    /// The variable (`VIGIL_SEED`) or builder option (`seed`).
    pub source_name: String,
    /// The value given.
    pub value: String,
    /// What is accepted.
    pub accepted: String,
}

/// The sanitizer's settings (the shadow allocator's, the engine's, and
/// what happens to reports). Build one with [`SanitizerConfig::builder`] or
/// [`SanitizerConfig::from_env`]; [`SanitizerConfig::default`] is the table's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanitizerConfig {
    clock_buffer_size: u32,
    seed: u32,
    device_ranks: Option<Vec<usize>>,
    process_rank: Option<ProcessRank>,
    shadow_pool_records: u32,
    sanitized_registers: u32,
    caching: bool,
    shareable_handles: bool,
    halt_on_error: bool,
    trust_types: bool,
    lean_entries: bool,
    report_path: Option<PathBuf>,
    report_format: Option<ReportFormat>,
    suppressions: Option<Suppressions>,
    launch_filter: LaunchFilter,
    exit_code: Option<i32>,
}

impl Default for SanitizerConfig {
    fn default() -> Self {
        SanitizerConfig {
            clock_buffer_size: 32,
            seed: 0x5eed,
            device_ranks: None,
            process_rank: None,
            shadow_pool_records: 1 << 16,
            sanitized_registers: DEFAULT_SANITIZED_REGISTERS,
            caching: true,
            shareable_handles: true,
            halt_on_error: false,
            trust_types: true,
            lean_entries: true,
            report_path: None,
            report_format: None,
            suppressions: None,
            launch_filter: LaunchFilter::default(),
            exit_code: None,
        }
    }
}

impl SanitizerConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> SanitizerConfigBuilder {
        SanitizerConfigBuilder {
            config: SanitizerConfig::default(),
            error: None,
        }
    }

    /// A builder starting from this configuration.
    pub fn into_builder(self) -> SanitizerConfigBuilder {
        SanitizerConfigBuilder {
            config: self,
            error: None,
        }
    }

    /// The defaults overridden by the `VIGIL_*` variables of this process.
    /// Warns once per process about unknown `VIGIL_*` variables
    /// ([`warn_unknown_variables`](crate::unstable::env::warn_unknown_variables)).
    pub fn from_env() -> Result<SanitizerConfig, ConfigError> {
        super::env::warn_unknown_variables();
        SanitizerConfig::builder()
            .env(|name| std::env::var(name).ok())
            .build()
    }

    /// Snapshots in each sanitizer thread's clock buffer.
    pub fn clock_buffer_size(&self) -> u32 {
        self.clock_buffer_size
    }

    /// Seed of the random eviction of access clocks.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// Device ordinals in rank order; `None` means every device, rank =
    /// ordinal.
    pub fn device_ranks(&self) -> Option<&[usize]> {
        self.device_ranks.as_deref()
    }

    /// This process's place in a group of processes, if it is one
    /// ([`SanitizerConfigBuilder::process_rank`]).
    pub fn process_rank(&self) -> Option<ProcessRank> {
        self.process_rank
    }

    /// Inflated shadow records per device.
    pub fn shadow_pool_records(&self) -> u32 {
        self.shadow_pool_records
    }

    /// Registers per thread sanitized GPU entries are compiled with
    /// (fewer: more resident CTAs, more spills). Launches of blocks too
    /// large for it use a second build at
    /// [`LEAN_SANITIZED_REGISTERS`] when this cap is above that.
    pub fn sanitized_registers(&self) -> u32 {
        self.sanitized_registers
    }

    /// Whether the caching pool keeps freed blocks.
    pub fn caching(&self) -> bool {
        self.caching
    }

    /// Whether physical handles are created POSIX-fd shareable.
    pub fn shareable_handles(&self) -> bool {
        self.shareable_handles
    }

    /// Whether a sanitized launch stops at its first race.
    pub fn halt_on_error(&self) -> bool {
        self.halt_on_error
    }

    /// Whether the sanitizer skips the checks a launch's proven views rule
    /// out ([`SanitizerConfigBuilder::trust_types`]).
    pub fn trust_types(&self) -> bool {
        self.trust_types
    }

    /// Whether sanitized GPU entries start on their module's build at 64
    /// registers ([`SanitizerConfigBuilder::lean_entries`]).
    pub fn lean_entries(&self) -> bool {
        self.lean_entries
    }

    /// Whether `other` asks for the same device-wide state as `self`: the
    /// settings of the process's one shadow allocator and of each device's
    /// sanitizer, which the first sanitized context makes. The rest may
    /// differ from context to context: where reports go and in what
    /// format, suppressions, the launch filter and the exit code are each
    /// context's own, and the race engine reads neither the seed nor the
    /// clock buffer size.
    pub(crate) fn same_device_state(&self, other: &SanitizerConfig) -> bool {
        self.device_ranks == other.device_ranks
            && self.process_rank == other.process_rank
            && self.shadow_pool_records == other.shadow_pool_records
            && self.sanitized_registers == other.sanitized_registers
            && self.lean_entries == other.lean_entries
            && self.caching == other.caching
            && self.shareable_handles == other.shareable_handles
            && self.halt_on_error == other.halt_on_error
    }

    /// The file race reports are appended to as JSON, if any.
    pub fn report_path(&self) -> Option<&Path> {
        self.report_path.as_deref()
    }

    /// The report file's format: the one set, else by the path's
    /// extension ([`ReportFormat::for_path`]).
    pub fn report_format(&self) -> ReportFormat {
        match (self.report_format, &self.report_path) {
            (Some(f), _) => f,
            (None, Some(p)) => ReportFormat::for_path(p),
            (None, None) => ReportFormat::Json,
        }
    }

    /// The races left out of reports, if any.
    pub fn suppressions(&self) -> Option<&Suppressions> {
        self.suppressions.as_ref()
    }

    /// Which launches run sanitized.
    pub fn launch_filter(&self) -> &LaunchFilter {
        &self.launch_filter
    }

    /// The process's exit status when races were reported, if set.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// The settings the backends use: this configuration without what the
    /// front end applies per context (report file and format,
    /// suppressions, launch filter, exit code), so that contexts that
    /// differ only in those share the process's shadow allocator.
    pub fn backend_settings(&self) -> SanitizerConfig {
        SanitizerConfig {
            report_path: None,
            report_format: None,
            suppressions: None,
            launch_filter: LaunchFilter::default(),
            exit_code: None,
            ..self.clone()
        }
    }

    /// The rank of device `ordinal`, and the number of ranks, given
    /// `device_count` devices when no explicit topology is configured. In
    /// a group of processes ([`SanitizerConfig::process_rank`]) only the
    /// process's device has a rank, the process's.
    pub fn rank_of(&self, ordinal: usize, device_count: usize) -> Option<(u32, u32)> {
        if let Some(p) = self.process_rank {
            return (p.ordinal == ordinal).then_some((p.rank, p.world));
        }
        match &self.device_ranks {
            Some(ranks) => ranks
                .iter()
                .position(|&o| o == ordinal)
                .map(|r| (r as u32, ranks.len() as u32)),
            None => (ordinal < device_count).then_some((ordinal as u32, device_count as u32)),
        }
    }
}

/// This process's place in a group of processes (one device each, like
/// a multi-GPU job's processes, or several on one GPU): its device is
/// rank `rank` of `world`, so its sanitizer threads get ids of their own
/// across the group and its vector clocks have room for every rank's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessRank {
    /// The process's device.
    pub ordinal: usize,
    /// Its rank.
    pub rank: u32,
    /// Ranks in the group.
    pub world: u32,
}

/// The old name of [`SanitizerConfig`], which configures both backends'
/// sanitizers.
#[deprecated(note = "renamed `SanitizerConfig` (it configures both backends' sanitizers)")]
pub type VmmConfig = SanitizerConfig;

/// The old name of [`SanitizerConfigBuilder`].
#[deprecated(note = "renamed `SanitizerConfigBuilder`")]
pub type VmmConfigBuilder = SanitizerConfigBuilder;

/// Builds a [`SanitizerConfig`]; setters check their value and the first error
/// is returned by [`SanitizerConfigBuilder::build`].
#[derive(Clone, Debug)]
pub struct SanitizerConfigBuilder {
    config: SanitizerConfig,
    error: Option<ConfigError>,
}

pub(crate) fn err(source_name: &str, value: impl ToString, accepted: impl ToString) -> ConfigError {
    ConfigError {
        source_name: source_name.to_owned(),
        value: value.to_string(),
        accepted: accepted.to_string(),
    }
}

fn in_range(source_name: &str, value: u64, lo: u64, hi: u64) -> Result<u64, ConfigError> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(err(
            source_name,
            value,
            format!("an integer in {lo}..={hi}"),
        ))
    }
}

pub(crate) fn parse_int(
    source_name: &str,
    text: &str,
    lo: u64,
    hi: u64,
) -> Result<u64, ConfigError> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    let accepted = format!("an integer in {lo}..={hi} (decimal or 0x hex)");
    match parsed {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(err(source_name, text, accepted)),
    }
}

pub(crate) fn parse_bool(source_name: &str, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(err(
            source_name,
            text,
            "one of 1/0, on/off, true/false, yes/no",
        )),
    }
}

/// A duration: a non-negative decimal number of seconds with an optional
/// unit (`ms`, `s`, `m`), e.g. `30`, `2.5s`, `500ms`, `10m`; `0`, `off` or
/// `none` for no limit (`None`).
pub(crate) fn parse_duration(
    source_name: &str,
    text: &str,
) -> Result<Option<std::time::Duration>, ConfigError> {
    let t = text.trim().to_ascii_lowercase();
    if matches!(t.as_str(), "off" | "none") {
        return Ok(None);
    }
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t.as_str(), 1.0)
    };
    let bad = || {
        err(
            source_name,
            text,
            "a duration such as `30`, `2.5s`, `500ms` or `10m` (seconds without a unit), \
             or `0`/`off` for no limit",
        )
    };
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    let seconds = value * scale;
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(bad());
    }
    let d = std::time::Duration::try_from_secs_f64(seconds).map_err(|_| bad())?;
    Ok((!d.is_zero()).then_some(d))
}

fn check_path(source_name: &str, path: &Path) -> Result<(), ConfigError> {
    let text = path.to_string_lossy();
    if text.trim().is_empty() || path.is_dir() {
        Err(err(
            source_name,
            text,
            "a path to a file (created if missing, appended to)",
        ))
    } else {
        Ok(())
    }
}

fn check_ranks(source_name: &str, shown: &str, ranks: &[usize]) -> Result<(), ConfigError> {
    let accepted = format!(
        "1 to {MAX_DEVICES} distinct device ordinals below {MAX_DEVICES}, comma-separated in rank order \
         (e.g. `0,1`), or `all`"
    );
    let mut seen = [false; MAX_DEVICES as usize];
    if ranks.is_empty() || ranks.len() > MAX_DEVICES as usize {
        return Err(err(source_name, shown, accepted));
    }
    for &o in ranks {
        if o >= MAX_DEVICES as usize || std::mem::replace(&mut seen[o], true) {
            return Err(err(source_name, shown, accepted));
        }
    }
    Ok(())
}

fn parse_ranks(source_name: &str, text: &str) -> Result<Option<Vec<usize>>, ConfigError> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let ranks: Vec<usize> = text
        .split(',')
        .map(|p| parse_int(source_name, p, 0, MAX_DEVICES - 1).map(|v| v as usize))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            err(
                source_name,
                text,
                "comma-separated device ordinals (e.g. `0,1`) or `all`",
            )
        })?;
    check_ranks(source_name, text, &ranks)?;
    Ok(Some(ranks))
}

impl SanitizerConfigBuilder {
    fn record(mut self, r: Result<(), ConfigError>) -> Self {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
        self
    }

    /// Snapshots in each sanitizer thread's clock buffer (1..=4096).
    pub fn clock_buffer_size(mut self, n: u32) -> Self {
        let r = in_range(
            "clock_buffer_size",
            n as u64,
            1,
            MAX_CLOCK_BUFFER_SIZE as u64,
        )
        .map(|_| self.config.clock_buffer_size = n);
        self.record(r)
    }

    /// Seed of the random eviction of access clocks.
    pub fn seed(mut self, seed: u32) -> Self {
        self.config.seed = seed;
        self
    }

    /// Device ordinals in rank order (distinct, below 32).
    pub fn device_ranks(mut self, ranks: Vec<usize>) -> Self {
        let r = check_ranks("device_ranks", &format!("{ranks:?}"), &ranks)
            .map(|()| self.config.device_ranks = Some(ranks));
        self.record(r)
    }

    /// This process's device `ordinal` is rank `rank` of `world`
    /// processes (`rank < world <= 32`; see [`ProcessRank`]); other
    /// devices have no rank. Overrides [`SanitizerConfigBuilder::device_ranks`].
    /// [`ProcessGroup::join`](crate::ProcessGroup::join) sets it.
    pub fn process_rank(mut self, ordinal: usize, rank: u32, world: u32) -> Self {
        let r = if rank < world && u64::from(world) <= MAX_DEVICES {
            self.config.process_rank = Some(ProcessRank {
                ordinal,
                rank,
                world,
            });
            Ok(())
        } else {
            Err(err(
                "process_rank",
                format!("rank {rank} of {world}"),
                format!("a rank below a group size of 1 to {MAX_DEVICES}"),
            ))
        };
        self.record(r)
    }

    /// Every device, rank = ordinal (the default).
    pub fn all_devices(mut self) -> Self {
        self.config.device_ranks = None;
        self
    }

    /// Inflated shadow records per device (0..=4194304).
    pub fn shadow_pool_records(mut self, n: u32) -> Self {
        let r = in_range(
            "shadow_pool_records",
            n as u64,
            0,
            MAX_SHADOW_POOL_RECORDS as u64,
        )
        .map(|_| self.config.shadow_pool_records = n);
        self.record(r)
    }

    /// Registers per thread of sanitized GPU entries (24..=255).
    pub fn sanitized_registers(mut self, n: u32) -> Self {
        let r = in_range(
            "sanitized_registers",
            n as u64,
            MIN_SANITIZED_REGISTERS as u64,
            MAX_SANITIZED_REGISTERS as u64,
        )
        .map(|_| self.config.sanitized_registers = n);
        self.record(r)
    }

    /// Whether the caching pool keeps freed blocks.
    pub fn caching(mut self, on: bool) -> Self {
        self.config.caching = on;
        self
    }

    /// Whether the sanitizer skips the checks a launch's proven views
    /// rule out (default on; `VIGIL_TRUST_TYPES`): a per-thread partition
    /// the launch proved, which no other argument of it reaches, is
    /// touched by each element's owner alone, so its accesses skip the
    /// check against the other threads of their block. Off, every access
    /// is checked, so that the engine can be measured and cross-checked
    /// alone. Checks against other blocks, launches, streams, copies and
    /// devices stay either way.
    pub fn trust_types(mut self, on: bool) -> Self {
        self.config.trust_types = on;
        self
    }

    /// Whether sanitized GPU entries start on a build of their module at
    /// 64 registers (default on; `VIGIL_LEAN_ENTRIES`).
    /// The race engine's general paths (a line split into word records,
    /// shared-memory, atomic and fence checks) spill below the
    /// [`sanitized_registers`](Self::sanitized_registers) cap, but a
    /// kernel whose accesses stay on its line paths (a streaming kernel)
    /// runs faster in 64 registers, where twice as many of its blocks
    /// share an SM. On, each entry runs lean until one of its launches
    /// has a block take a general path, and from its next launch on at
    /// the cap; the lean build is compiled with the module (a second JIT
    /// compile when a sanitized module loads). Off, every launch whose
    /// blocks the cap fits runs at the cap, and the second build is made
    /// only for a launch of blocks too large for the cap. The checks are
    /// the same either way.
    ///
    /// ```
    /// use vigil::SanitizerConfig;
    ///
    /// let config = SanitizerConfig::builder().lean_entries(false).build()?;
    /// assert!(!config.lean_entries());
    /// # Ok::<(), vigil::ConfigError>(())
    /// ```
    pub fn lean_entries(mut self, on: bool) -> Self {
        self.config.lean_entries = on;
        self
    }

    /// Whether physical handles are created POSIX-fd shareable (needed for
    /// export/import).
    pub fn shareable_handles(mut self, on: bool) -> Self {
        self.config.shareable_handles = on;
        self
    }

    /// Whether a sanitized launch stops at its first race (default off).
    ///
    /// - CPU backend: the racing thread's block is unwound at the racing
    ///   access (which is not performed), blocks already running on other
    ///   workers finish, and no further block starts. The launch returns
    ///   `Ok`; the next synchronisation returns the race(s) as
    ///   [`Error::Races`](crate::Error::Races) and the context stays usable.
    /// - GPU: the racing thread records the report and traps, so the kernel
    ///   stops within microseconds; the trap makes the CUDA context
    ///   unusable (a sticky error), the reports already in the host-mapped
    ///   buffer are still returned, and a new context can be created.
    pub fn halt_on_error(mut self, on: bool) -> Self {
        self.config.halt_on_error = on;
        self
    }

    /// Appends the race reports of every collection that found some to
    /// `path`, one line of JSON each (see the [module docs](self)).
    pub fn report_path(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let r = check_path("report_path", &path).map(|()| self.config.report_path = Some(path));
        self.record(r)
    }

    /// The report file's format (default: by the path's extension,
    /// `.sarif` SARIF 2.1.0, anything else JSON Lines).
    pub fn report_format(mut self, format: ReportFormat) -> Self {
        self.config.report_format = Some(format);
        self
    }

    /// Leaves the races the suppressions file at `path` matches out of
    /// every collection (counted; see [`Suppressions`]). The file is read
    /// now; one that cannot be read, or a malformed line, is the error.
    pub fn suppressions(mut self, path: impl AsRef<Path>) -> Self {
        let r = Suppressions::from_file(path.as_ref())
            .map(|s| self.config.suppressions = Some(s))
            .map_err(|e| suppression_error("suppressions", path.as_ref(), e));
        self.record(r)
    }

    /// [`SanitizerConfigBuilder::suppressions`] with suppressions already parsed.
    pub fn suppression_rules(mut self, suppressions: Suppressions) -> Self {
        self.config.suppressions = Some(suppressions);
        self
    }

    /// Only launches of these kernels run sanitized: each item an exact
    /// kernel name or a `/regex/` ([`KernelPattern`](super::launch_filter::KernelPattern)).
    pub fn sanitize_kernels<S: AsRef<str>>(mut self, items: impl IntoIterator<Item = S>) -> Self {
        let r = parse_items("sanitize_kernels", items).map(|list| {
            self.config.launch_filter =
                std::mem::take(&mut self.config.launch_filter).with_kernels(Some(list));
        });
        self.record(r)
    }

    /// Launches of these kernels run plain: each item an exact kernel
    /// name or a `/regex/`.
    pub fn exclude_kernels<S: AsRef<str>>(mut self, items: impl IntoIterator<Item = S>) -> Self {
        let r = parse_items("exclude_kernels", items).map(|list| {
            self.config.launch_filter =
                std::mem::take(&mut self.config.launch_filter).with_excluded(list);
        });
        self.record(r)
    }

    /// The first `n` selected launches run plain (compute-sanitizer's
    /// `--launch-skip`).
    pub fn launch_skip(mut self, n: u64) -> Self {
        self.config.launch_filter = std::mem::take(&mut self.config.launch_filter).with_skip(n);
        self
    }

    /// At most `n` selected launches run sanitized, after the skipped ones
    /// (compute-sanitizer's `--launch-count`); `None` or `Some(0)`, as
    /// there: no limit.
    pub fn launch_count(mut self, n: Option<u64>) -> Self {
        let n = n.filter(|&n| n > 0);
        self.config.launch_filter = std::mem::take(&mut self.config.launch_filter).with_count(n);
        self
    }

    /// The process exits with `code` (1..=255) when any race was reported
    /// in it, collected or not, instead of its own status (at exit, after
    /// the summary of races nobody collected is printed); `None` (the
    /// default) leaves the status alone.
    pub fn exit_code(mut self, code: Option<i32>) -> Self {
        let r = match code {
            Some(c) if !(1..=255).contains(&c) => {
                Err(err("exit_code", c, "an exit status in 1..=255, or none"))
            }
            _ => {
                self.config.exit_code = code;
                Ok(())
            }
        };
        self.record(r)
    }

    /// Applies the `VIGIL_*` variables that `lookup` returns (pass
    /// `|n| std::env::var(n).ok()` for the process environment; tests pass
    /// a map). Variables that are absent leave the current value.
    pub fn env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut apply =
            |name: &str,
             f: &mut dyn FnMut(&str, &mut SanitizerConfig) -> Result<(), ConfigError>| {
                if let Some(v) = lookup(name) {
                    let r = f(&v, &mut self.config);
                    if let (Err(e), None) = (r, &self.error) {
                        self.error = Some(e);
                    }
                }
            };
        apply(ENV_CLOCK_BUFFER_SIZE, &mut |v, c| {
            c.clock_buffer_size =
                parse_int(ENV_CLOCK_BUFFER_SIZE, v, 1, MAX_CLOCK_BUFFER_SIZE as u64)? as u32;
            Ok(())
        });
        apply(ENV_SEED, &mut |v, c| {
            c.seed = parse_int(ENV_SEED, v, 0, u32::MAX as u64)? as u32;
            Ok(())
        });
        apply(ENV_DEVICE_RANKS, &mut |v, c| {
            c.device_ranks = parse_ranks(ENV_DEVICE_RANKS, v)?;
            Ok(())
        });
        apply(ENV_SHADOW_POOL_RECORDS, &mut |v, c| {
            c.shadow_pool_records = parse_int(
                ENV_SHADOW_POOL_RECORDS,
                v,
                0,
                MAX_SHADOW_POOL_RECORDS as u64,
            )? as u32;
            Ok(())
        });
        apply(ENV_SANITIZED_REGISTERS, &mut |v, c| {
            c.sanitized_registers = parse_int(
                ENV_SANITIZED_REGISTERS,
                v,
                MIN_SANITIZED_REGISTERS as u64,
                MAX_SANITIZED_REGISTERS as u64,
            )? as u32;
            Ok(())
        });
        apply(ENV_ALLOC_CACHE, &mut |v, c| {
            c.caching = parse_bool(ENV_ALLOC_CACHE, v)?;
            Ok(())
        });
        apply(ENV_SHAREABLE_HANDLES, &mut |v, c| {
            c.shareable_handles = parse_bool(ENV_SHAREABLE_HANDLES, v)?;
            Ok(())
        });
        apply(ENV_HALT_ON_ERROR, &mut |v, c| {
            c.halt_on_error = parse_bool(ENV_HALT_ON_ERROR, v)?;
            Ok(())
        });
        apply(ENV_TRUST_TYPES, &mut |v, c| {
            c.trust_types = parse_bool(ENV_TRUST_TYPES, v)?;
            Ok(())
        });
        apply(ENV_LEAN_ENTRIES, &mut |v, c| {
            c.lean_entries = parse_bool(ENV_LEAN_ENTRIES, v)?;
            Ok(())
        });
        apply(ENV_REPORT, &mut |v, c| {
            let path = PathBuf::from(v);
            check_path(ENV_REPORT, &path)?;
            c.report_path = Some(path);
            Ok(())
        });
        apply(ENV_REPORT_FORMAT, &mut |v, c| {
            c.report_format = Some(ReportFormat::parse(ENV_REPORT_FORMAT, v)?);
            Ok(())
        });
        apply(ENV_SUPPRESSIONS, &mut |v, c| {
            let path = Path::new(v);
            let s = Suppressions::from_file(path)
                .map_err(|e| suppression_error(ENV_SUPPRESSIONS, path, e))?;
            c.suppressions = Some(s);
            Ok(())
        });
        apply(ENV_SANITIZE_KERNELS, &mut |v, c| {
            let list = parse_list(ENV_SANITIZE_KERNELS, v)?;
            c.launch_filter = std::mem::take(&mut c.launch_filter).with_kernels(Some(list));
            Ok(())
        });
        apply(ENV_SANITIZE_KERNELS_EXCLUDE, &mut |v, c| {
            let list = parse_list(ENV_SANITIZE_KERNELS_EXCLUDE, v)?;
            c.launch_filter = std::mem::take(&mut c.launch_filter).with_excluded(list);
            Ok(())
        });
        apply(ENV_LAUNCH_SKIP, &mut |v, c| {
            let n = parse_int(ENV_LAUNCH_SKIP, v, 0, u64::MAX >> 1)?;
            c.launch_filter = std::mem::take(&mut c.launch_filter).with_skip(n);
            Ok(())
        });
        apply(ENV_LAUNCH_COUNT, &mut |v, c| {
            let n = match v.trim().to_ascii_lowercase().as_str() {
                "all" | "0" => None,
                _ => Some(
                    parse_int(ENV_LAUNCH_COUNT, v, 1, u64::MAX >> 1).map_err(|_| {
                        err(
                            ENV_LAUNCH_COUNT,
                            v,
                            "a number of launches (decimal or 0x hex), or `0`/`all` for no limit",
                        )
                    })?,
                ),
            };
            c.launch_filter = std::mem::take(&mut c.launch_filter).with_count(n);
            Ok(())
        });
        apply(ENV_EXITCODE, &mut |v, c| {
            c.exit_code = match v.trim().to_ascii_lowercase().as_str() {
                "off" | "none" => None,
                _ => Some(
                    parse_int(ENV_EXITCODE, v, 1, 255)
                        .map_err(|_| err(ENV_EXITCODE, v, "an exit status in 1..=255, or `off`"))?
                        as i32,
                ),
            };
            Ok(())
        });
        self
    }

    /// The configuration, or the first malformed value.
    pub fn build(self) -> Result<SanitizerConfig, ConfigError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.config),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Result<SanitizerConfig, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SanitizerConfig::builder()
            .env(|n| map.get(n).cloned())
            .build()
    }

    #[test]
    fn contexts_may_differ_in_their_own_settings_but_not_the_devices() {
        let first = from(&[]).unwrap();
        let own = from(&[
            ("VIGIL_SEED", "0"),
            ("VIGIL_CLOCK_BUFFER_SIZE", "64"),
            ("VIGIL_REPORT", "races.json"),
            ("VIGIL_EXITCODE", "3"),
        ])
        .unwrap();
        assert!(first.same_device_state(&own));
        let halts = from(&[("VIGIL_HALT_ON_ERROR", "1")]).unwrap();
        assert!(!first.same_device_state(&halts));
        let pool = from(&[("VIGIL_SHADOW_POOL_RECORDS", "4096")]).unwrap();
        assert!(!first.same_device_state(&pool));
        let capped = from(&[("VIGIL_LEAN_ENTRIES", "0")]).unwrap();
        assert!(!first.same_device_state(&capped));
    }

    #[test]
    fn defaults_without_variables() {
        assert_eq!(from(&[]).unwrap(), SanitizerConfig::default());
    }

    #[test]
    fn parses_every_variable() {
        let c = from(&[
            ("VIGIL_CLOCK_BUFFER_SIZE", "64"),
            ("VIGIL_SEED", "0xdeadbeef"),
            ("VIGIL_DEVICE_RANKS", "2, 0,1"),
            ("VIGIL_SHADOW_POOL_RECORDS", "0"),
            ("VIGIL_SANITIZED_REGISTERS", "40"),
            ("VIGIL_ALLOC_CACHE", "off"),
            ("VIGIL_SHAREABLE_HANDLES", "FALSE"),
            ("VIGIL_HALT_ON_ERROR", "yes"),
            ("VIGIL_TRUST_TYPES", "0"),
            ("VIGIL_LEAN_ENTRIES", "off"),
            ("VIGIL_REPORT", "races.jsonl"),
            ("VIGIL_UNRELATED", "whatever"),
        ])
        .unwrap();
        assert_eq!(c.clock_buffer_size(), 64);
        assert_eq!(c.seed(), 0xdead_beef);
        assert_eq!(c.device_ranks(), Some(&[2usize, 0, 1][..]));
        assert_eq!(c.rank_of(0, 8), Some((1, 3)));
        assert_eq!(c.rank_of(5, 8), None);
        assert_eq!(c.shadow_pool_records(), 0);
        assert_eq!(c.sanitized_registers(), 40);
        assert!(!c.caching());
        assert!(!c.shareable_handles());
        assert!(c.halt_on_error());
        assert!(!c.trust_types() && SanitizerConfig::default().trust_types());
        assert!(!c.lean_entries() && SanitizerConfig::default().lean_entries());
        assert_eq!(c.report_path(), Some(Path::new("races.jsonl")));
        let all = from(&[("VIGIL_DEVICE_RANKS", "all")]).unwrap();
        assert_eq!(all.device_ranks(), None);
        assert_eq!(all.rank_of(3, 4), Some((3, 4)));
        assert_eq!(all.rank_of(4, 4), None);
    }

    #[test]
    fn malformed_values_name_variable_and_range() {
        let cases: &[(&str, &str, &str)] = &[
            ("VIGIL_CLOCK_BUFFER_SIZE", "0", "1..=4096"),
            ("VIGIL_SANITIZED_REGISTERS", "16", "24..=255"),
            ("VIGIL_SANITIZED_REGISTERS", "256", "24..=255"),
            ("VIGIL_CLOCK_BUFFER_SIZE", "4097", "1..=4096"),
            ("VIGIL_CLOCK_BUFFER_SIZE", "sixteen", "1..=4096"),
            ("VIGIL_CLOCK_BUFFER_SIZE", "-1", "1..=4096"),
            ("VIGIL_SEED", "0x1_0000_0000", "0..=4294967295"),
            ("VIGIL_SEED", "4294967296", "0..=4294967295"),
            ("VIGIL_DEVICE_RANKS", "0,0", "distinct"),
            ("VIGIL_DEVICE_RANKS", "32", "ordinals"),
            ("VIGIL_DEVICE_RANKS", "", "ordinals"),
            ("VIGIL_DEVICE_RANKS", "0;1", "ordinals"),
            ("VIGIL_SHADOW_POOL_RECORDS", "99999999", "0..=4194304"),
            ("VIGIL_ALLOC_CACHE", "maybe", "on/off"),
            ("VIGIL_SHAREABLE_HANDLES", "2", "on/off"),
            ("VIGIL_HALT_ON_ERROR", "sometimes", "on/off"),
            ("VIGIL_TRUST_TYPES", "partly", "on/off"),
            ("VIGIL_REPORT", "", "a path to a file"),
            ("VIGIL_REPORT", "/", "a path to a file"),
        ];
        for &(var, val, accepted) in cases {
            let e = from(&[(var, val)]).unwrap_err();
            assert_eq!(e.source_name, var);
            assert_eq!(e.value, val);
            let msg = e.to_string();
            assert!(msg.starts_with(var), "{msg}");
            assert!(msg.contains(accepted), "{var}={val}: {msg}");
        }
    }

    #[test]
    fn builder_checks_values() {
        let c = SanitizerConfig::builder()
            .clock_buffer_size(8)
            .seed(3)
            .device_ranks(vec![1, 0])
            .caching(false)
            .halt_on_error(true)
            .report_path("out/races.jsonl")
            .build()
            .unwrap();
        assert_eq!(
            (c.clock_buffer_size(), c.seed(), c.caching()),
            (8, 3, false)
        );
        assert!(c.halt_on_error());
        assert_eq!(c.report_path(), Some(Path::new("out/races.jsonl")));
        let e = SanitizerConfig::builder()
            .report_path("")
            .build()
            .unwrap_err();
        assert_eq!(e.source_name, "report_path");
        assert_eq!(c.rank_of(1, 2), Some((0, 2)));
        let e = SanitizerConfig::builder()
            .clock_buffer_size(0)
            .build()
            .unwrap_err();
        assert_eq!(e.source_name, "clock_buffer_size");
        assert!(e.to_string().contains("1..=4096"));
        let e = SanitizerConfig::builder()
            .device_ranks(vec![])
            .build()
            .unwrap_err();
        assert_eq!(e.source_name, "device_ranks");
        // The first error wins; later valid setters do not clear it.
        let e = SanitizerConfig::builder()
            .shadow_pool_records(u32::MAX)
            .clock_buffer_size(4)
            .build()
            .unwrap_err();
        assert_eq!(e.source_name, "shadow_pool_records");
    }

    /// A process of a group: its device alone has a rank, the process's,
    /// whatever the device topology says; bad ranks are refused.
    #[test]
    fn a_process_rank_names_the_process_device_only() {
        let c = SanitizerConfig::builder()
            .device_ranks(vec![0, 1])
            .process_rank(0, 1, 2)
            .build()
            .unwrap();
        assert_eq!(c.rank_of(0, 1), Some((1, 2)));
        assert_eq!(c.rank_of(1, 2), None);
        assert_eq!(
            c.process_rank(),
            Some(ProcessRank {
                ordinal: 0,
                rank: 1,
                world: 2
            })
        );
        for (rank, world) in [(2, 2), (0, 0), (0, 33)] {
            let e = SanitizerConfig::builder()
                .process_rank(0, rank, world)
                .build()
                .unwrap_err();
            assert_eq!(e.source_name, "process_rank");
        }
    }
}
