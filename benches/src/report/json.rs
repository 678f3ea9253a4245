//! `bench-results.json`: the results as serde data ([`BenchReport`],
//! written with `serde_json`, read back the same way), format version
//! [`BENCH_FORMAT_VERSION`].
//!
//! A cell is `{"repeats": [...]}`, `{"unavailable": why}`,
//! `{"failed": why}`, `{"killed": {"at_least_ms": ms|null, "limit":
//! {"case_limit_s": s}|"budget"}}`, `{"skipped": why}` or
//! `{"not_run_yet": true}`; a derived figure a number, `{"more_than": x}`,
//! `{"less_than": x}` or `null`; a number that is not finite is `null`.

use super::{rate_unit, targets, Ratios};
use crate::cases::Work;
use crate::results::{Cell, Figure, Limit, SuiteResults};
use crate::timing::Plan;
use crate::tools::TOOL_REPEATS;
use serde::{Deserialize, Serialize};

/// The `version` of `bench-results.json` this crate writes.
pub const BENCH_FORMAT_VERSION: u32 = 1;

/// The whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// [`BENCH_FORMAT_VERSION`].
    pub version: u32,
    /// The device.
    pub device: DeviceJson,
    /// When the run started (UTC).
    pub date_utc: String,
    /// The seed of the inputs (a string: a `u64` does not fit a JSON
    /// number exactly).
    pub seed: String,
    /// How the series were timed.
    pub method: MethodJson,
    /// One per kernel.
    pub cases: Vec<CaseJson>,
    /// Cases the run has not reached yet.
    pub cases_not_run_yet: Vec<String>,
    /// How long each phase took.
    pub phases: Vec<PhaseJson>,
    /// Host-side overheads.
    pub host: HostJson,
    /// The targets, judged.
    pub targets: Vec<TargetJson>,
    /// Notes of the run.
    pub notes: Vec<String>,
}

/// The device of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceJson {
    /// Its name.
    pub name: String,
    /// Its SMs.
    pub sm_count: u32,
    /// The driver's version.
    pub driver_version: String,
    /// Measured copy bandwidth (GB/s).
    pub copy_bandwidth_gbps: Option<f64>,
}

/// How a series is timed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanJson {
    /// Launches before timing.
    pub warmup_launches: u64,
    /// Timed batches.
    pub batches: u64,
    /// Most launches per batch.
    pub max_launches_per_batch: u64,
    /// Time budget of a series (s).
    pub budget_s: f64,
}

impl From<Plan> for PlanJson {
    fn from(p: Plan) -> PlanJson {
        PlanJson {
            warmup_launches: p.warmup as u64,
            batches: p.batches as u64,
            max_launches_per_batch: p.per_batch as u64,
            budget_s: p.budget.as_secs_f64(),
        }
    }
}

/// The run's method.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodJson {
    /// Plain series.
    pub device_time: PlanJson,
    /// Sanitized series.
    pub sanitized_device_time: PlanJson,
    /// Timed repeats per series.
    pub repeats: u64,
    /// The compute-sanitizer series (host wall time).
    pub compute_sanitizer_wall_time: PlanJson,
    /// Their repeats.
    pub compute_sanitizer_repeats: u64,
}

/// One timed repeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatJson {
    /// Median device time per launch (ms).
    pub median_ms: Option<f64>,
    /// Fastest batch (ms per launch).
    pub min_ms: Option<f64>,
    /// Slowest batch (ms per launch).
    pub max_ms: Option<f64>,
    /// Host wall time per launch (ms).
    pub wall_ms_per_launch: Option<f64>,
    /// Launches timed.
    pub launches: u64,
}

/// The limit that killed a child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LimitJson {
    /// The per-case limit.
    Case {
        /// Its length (s).
        case_limit_s: f64,
    },
    /// `"budget"`: the phase's share of the run's budget.
    Budget(String),
}

/// One column of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellJson {
    /// One entry per repeat.
    Repeats(Vec<RepeatJson>),
    /// Not measured, and why.
    Unavailable(String),
    /// Measuring failed, and how.
    Failed(String),
    /// Its child was killed at a limit.
    Killed {
        /// Host wall time of the launch still running (ms).
        at_least_ms: Option<f64>,
        /// The limit.
        limit: LimitJson,
    },
    /// Not started (budget).
    Skipped(String),
    /// Not measured yet (always `true`).
    NotRunYet(bool),
}

/// A derived figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FigureJson {
    /// Measured.
    Exactly(f64),
    /// A lower bound.
    MoreThan {
        /// The bound.
        more_than: f64,
    },
    /// An upper bound.
    LessThan {
        /// The bound.
        less_than: f64,
    },
}

/// A result check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckJson {
    /// The largest scaled error.
    MaxScaledError(f64),
    /// What did not match.
    Mismatch(String),
}

/// The work of one run of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkJson {
    /// Bytes moved.
    Bytes(u64),
    /// Floating-point operations.
    Flops(u64),
    /// Atomic operations.
    Atomics(u64),
}

/// A kernel's ratios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatiosJson {
    /// Vigil plain over the nvcc twin.
    pub vigil_over_nvcc: Option<FigureJson>,
    /// Vigil sanitized over plain.
    pub sanitized_over_plain: Option<FigureJson>,
    /// Vigil sanitized with every access checked over plain.
    #[serde(default)]
    pub all_checked_over_plain: Option<FigureJson>,
    /// Vigil sanitized over the twin under memcheck.
    pub sanitized_over_memcheck: Option<FigureJson>,
}

/// A kernel's rates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatesJson {
    /// GB/s, GFLOP/s or G atomics/s.
    pub unit: String,
    /// Vigil plain.
    pub vigil: Option<f64>,
    /// The twin.
    pub nvcc: Option<f64>,
    /// Vigil plain's GB/s over the copy bandwidth.
    pub vigil_fraction_of_copy_bandwidth: Option<f64>,
}

/// A kernel's checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChecksJson {
    /// Vigil plain.
    pub vigil: Option<CheckJson>,
    /// The twin.
    pub nvcc: Option<CheckJson>,
    /// Vigil sanitized.
    pub vigil_sanitized: Option<CheckJson>,
    /// Vigil against the twin.
    pub vigil_vs_nvcc_max_scaled_difference: Option<f64>,
}

/// One kernel of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseJson {
    /// Its name.
    pub name: String,
    /// Its class (`memory`, `compute`, ...).
    pub class: String,
    /// Its size.
    pub size: String,
    /// The work of one run.
    pub work: WorkJson,
    /// Vigil plain.
    pub vigil: CellJson,
    /// The nvcc twin.
    pub nvcc: CellJson,
    /// Vigil sanitized.
    pub vigil_sanitized: CellJson,
    /// Vigil sanitized trusting no type (`VIGIL_TRUST_TYPES=0`).
    #[serde(default)]
    pub vigil_sanitized_all_checked: Option<CellJson>,
    /// The twin under memcheck.
    pub nvcc_memcheck: CellJson,
    /// The twin under racecheck.
    pub nvcc_racecheck: CellJson,
    /// Derived ratios.
    pub ratios: RatiosJson,
    /// Derived rates.
    pub rates: RatesJson,
    /// Result checks.
    pub checks: ChecksJson,
}

/// One phase's time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseJson {
    /// The phase.
    pub phase: String,
    /// How long it took (s).
    pub seconds: Option<f64>,
    /// Its share of the budget (s).
    pub budget_share_s: Option<f64>,
}

/// A figure measured, or why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MeasuredJson<T> {
    /// Measured.
    Value(T),
    /// Why not.
    NotMeasured {
        /// The reason.
        not_measured: String,
    },
}

/// Launch overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchJson {
    /// A typed Vigil launch (µs).
    pub typed_us: Option<f64>,
    /// A raw `cuLaunchKernel` (µs).
    #[serde(rename = "raw_cuLaunchKernel_us")]
    pub raw_cu_launch_kernel_us: Option<f64>,
}

/// Allocation costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocJson {
    /// The allocation's size.
    pub bytes: u64,
    /// `cuMemAlloc` and free (µs).
    #[serde(rename = "cuMemAlloc_free_us")]
    pub cu_mem_alloc_free_us: Option<f64>,
    /// `cuMemAllocAsync` and free (µs).
    #[serde(rename = "cuMemAllocAsync_free_us")]
    pub cu_mem_alloc_async_free_us: Option<f64>,
    /// The shadow allocator without its cache (µs).
    pub vmm_uncached_us: Option<f64>,
    /// With it (µs).
    pub vmm_cached_us: Option<f64>,
}

/// Host-side overheads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostJson {
    /// Launch overhead.
    pub launch: Option<MeasuredJson<LaunchJson>>,
    /// A sanitized launch's overhead (µs).
    pub sanitized_launch_us: Option<MeasuredJson<Option<f64>>>,
    /// Allocation costs.
    pub alloc: Option<MeasuredJson<AllocJson>>,
}

/// A target's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetJson {
    /// The target.
    pub target: String,
    /// `met`, `NOT met`, `not measured`.
    pub status: String,
    /// The figures behind it.
    pub figures: String,
}

/// `Some(v)` for a finite number (JSON has no NaN or infinity).
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn cell(c: &Cell) -> CellJson {
    match c {
        Cell::Timed(ts) => CellJson::Repeats(
            ts.iter()
                .map(|t| RepeatJson {
                    median_ms: finite(t.median_ms),
                    min_ms: finite(t.min_ms),
                    max_ms: finite(t.max_ms),
                    wall_ms_per_launch: finite(t.wall_ms),
                    launches: t.launches as u64,
                })
                .collect(),
        ),
        Cell::Unavailable(why) => CellJson::Unavailable(why.clone()),
        Cell::Failed(why) => CellJson::Failed(why.clone()),
        Cell::Killed { at_least_ms, by } => CellJson::Killed {
            at_least_ms: at_least_ms.and_then(finite),
            limit: match by {
                Limit::Case(d) => LimitJson::Case {
                    case_limit_s: d.as_secs_f64(),
                },
                Limit::Budget => LimitJson::Budget("budget".to_owned()),
            },
        },
        Cell::Skipped(why) => CellJson::Skipped(why.clone()),
        Cell::Pending => CellJson::NotRunYet(true),
    }
}

fn figure(f: Option<Figure>) -> Option<FigureJson> {
    match f? {
        Figure::Exactly(v) => finite(v).map(FigureJson::Exactly),
        Figure::MoreThan(v) => finite(v).map(|more_than| FigureJson::MoreThan { more_than }),
        Figure::LessThan(v) => finite(v).map(|less_than| FigureJson::LessThan { less_than }),
    }
}

fn check(c: &Option<Result<f64, String>>) -> Option<CheckJson> {
    match c.as_ref()? {
        Ok(err) => Some(CheckJson::MaxScaledError(*err)),
        Err(e) => Some(CheckJson::Mismatch(e.clone())),
    }
}

fn work(w: Work) -> WorkJson {
    match w {
        Work::Bytes(b) => WorkJson::Bytes(b),
        Work::Flops(f) => WorkJson::Flops(f),
        Work::Atomics(a) => WorkJson::Atomics(a),
    }
}

fn measured<T, U>(
    r: &Option<Result<T, String>>,
    f: impl FnOnce(&T) -> U,
) -> Option<MeasuredJson<U>> {
    Some(match r.as_ref()? {
        Ok(v) => MeasuredJson::Value(f(v)),
        Err(e) => MeasuredJson::NotMeasured {
            not_measured: e.clone(),
        },
    })
}

/// The whole run as data.
pub fn bench_report(results: &SuiteResults) -> BenchReport {
    let bw = results.device.copy_gbps;
    let cases = results
        .cases
        .iter()
        .map(|r| {
            let x = Ratios::of(r, bw);
            CaseJson {
                name: r.name.to_owned(),
                class: r.class.label().to_owned(),
                size: r.size.clone(),
                work: work(r.work),
                vigil: cell(&r.vigil),
                nvcc: cell(&r.twin),
                vigil_sanitized: cell(&r.sanitized),
                vigil_sanitized_all_checked: Some(cell(&r.sanitized_all_checked)),
                nvcc_memcheck: cell(&r.memcheck),
                nvcc_racecheck: cell(&r.racecheck),
                ratios: RatiosJson {
                    vigil_over_nvcc: figure(x.vigil_over_nvcc),
                    sanitized_over_plain: figure(x.sanitized_over_plain),
                    all_checked_over_plain: figure(x.all_checked_over_plain),
                    sanitized_over_memcheck: figure(x.sanitized_over_memcheck),
                },
                rates: RatesJson {
                    unit: rate_unit(r.work).to_owned(),
                    vigil: x.vigil_rate.and_then(finite),
                    nvcc: x.twin_rate.and_then(finite),
                    vigil_fraction_of_copy_bandwidth: x.vigil_of_copy.and_then(finite),
                },
                checks: ChecksJson {
                    vigil: check(&r.checks.vigil),
                    nvcc: check(&r.checks.twin),
                    vigil_sanitized: check(&r.checks.sanitized),
                    vigil_vs_nvcc_max_scaled_difference: r.checks.vigil_vs_twin.and_then(finite),
                },
            }
        })
        .collect();
    let host = &results.host;
    BenchReport {
        version: BENCH_FORMAT_VERSION,
        device: DeviceJson {
            name: results.device.name.clone(),
            sm_count: results.device.sm_count,
            driver_version: results.device.driver.clone(),
            copy_bandwidth_gbps: finite(bw),
        },
        date_utc: results.date.clone(),
        seed: results.seed.to_string(),
        method: MethodJson {
            device_time: results.plan.into(),
            sanitized_device_time: results.sanitized_plan.into(),
            repeats: results.repeats as u64,
            compute_sanitizer_wall_time: Plan::TOOL.into(),
            compute_sanitizer_repeats: TOOL_REPEATS as u64,
        },
        cases,
        cases_not_run_yet: results
            .not_run_yet
            .iter()
            .map(|n| (*n).to_owned())
            .collect(),
        phases: results
            .phases
            .iter()
            .map(|p| PhaseJson {
                phase: p.name.to_owned(),
                seconds: finite(p.seconds),
                budget_share_s: p.share_s.and_then(finite),
            })
            .collect(),
        host: HostJson {
            launch: measured(&host.launch, |l| LaunchJson {
                typed_us: finite(l.typed_us),
                raw_cu_launch_kernel_us: finite(l.raw_us),
            }),
            sanitized_launch_us: measured(&host.sanitized_launch_us, |v| finite(*v)),
            alloc: measured(&host.alloc, |a| AllocJson {
                bytes: a.size,
                cu_mem_alloc_free_us: finite(a.plain_us),
                cu_mem_alloc_async_free_us: finite(a.stream_ordered_us),
                vmm_uncached_us: finite(a.vmm_us),
                vmm_cached_us: finite(a.cached_us),
            }),
        },
        targets: targets(results)
            .into_iter()
            .map(|t| TargetJson {
                target: t.name.to_owned(),
                status: t.status.label().to_owned(),
                figures: t.detail,
            })
            .collect(),
        notes: results.notes.clone(),
    }
}

/// The whole run as JSON text (one line).
pub fn to_json(results: &SuiteResults) -> String {
    // Plain data with string keys and finite numbers: it always serialises.
    serde_json::to_string(&bench_report(results)).unwrap_or_default()
}
