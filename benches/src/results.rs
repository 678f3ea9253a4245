//! What a run found, as plain data: [`report`](crate::report) renders it.

use crate::alloc::AllocFigures;
use crate::cases::{Case, Class, Work};
use crate::error::Result;
use crate::overhead::LaunchOverhead;
use crate::timing::{Plan, Timing};
use std::time::Duration;

/// One column of one kernel: its repeats, or why there is no number.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// One [`Timing`] per repeat.
    Timed(Vec<Timing>),
    /// Not measured, and why (e.g. the sanitized GPU launch is not built).
    Unavailable(String),
    /// Measuring failed, and how.
    Failed(String),
    /// Its child process was killed at a time limit, with the lower bound
    /// that proves on one run (a kernel cannot be stopped, only its
    /// process ended).
    Killed {
        /// Host wall time of the launch that was still running when the
        /// child was killed (ms): one run takes longer. `None` when the
        /// child was killed before the case's first launch.
        at_least_ms: Option<f64>,
        /// The limit that ended it.
        by: Limit,
    },
    /// Not started: what was left of the run's budget could not fit it.
    Skipped(String),
    /// Not measured yet (a report written while the run goes on).
    Pending,
}

/// The time limit that killed a child.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// The per-case limit (from the case's first launch).
    Case(Duration),
    /// The end of the phase's share of the run's budget.
    Budget,
}

/// A derived figure: measured, or bounded by a killed cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Figure {
    /// Measured.
    Exactly(f64),
    /// Larger than this (a lower bound).
    MoreThan(f64),
    /// Smaller than this (an upper bound).
    LessThan(f64),
}

impl Figure {
    /// The number, whatever side of it the truth lies.
    pub fn value(self) -> f64 {
        match self {
            Figure::Exactly(v) | Figure::MoreThan(v) | Figure::LessThan(v) => v,
        }
    }

    /// `self / other`, bounded as the two are: `None` when the bounds do
    /// not combine (both lower bounds, say) or `other` is not positive.
    pub fn over(self, other: Figure) -> Option<Figure> {
        use Figure::{Exactly, LessThan, MoreThan};
        let (a, b) = (self.value(), other.value());
        if b <= 0.0 {
            return None;
        }
        match (self, other) {
            (Exactly(_), Exactly(_)) => Some(Exactly(a / b)),
            (MoreThan(_), Exactly(_) | LessThan(_)) | (Exactly(_), LessThan(_)) => {
                Some(MoreThan(a / b))
            }
            (LessThan(_), Exactly(_) | MoreThan(_)) | (Exactly(_), MoreThan(_)) => {
                Some(LessThan(a / b))
            }
            _ => None,
        }
    }

    /// Whether `self <= max` is proved (`Some(true)`), disproved
    /// (`Some(false)`) or open (`None`).
    pub fn at_most(self, max: f64) -> Option<bool> {
        match self {
            Figure::Exactly(v) => Some(v <= max),
            Figure::MoreThan(v) if v >= max => Some(false),
            Figure::LessThan(v) if v <= max => Some(true),
            _ => None,
        }
    }
}

impl Cell {
    /// A cell from the repeats' results: the first error fails it.
    pub fn from_repeats(repeats: Vec<Result<Timing>>) -> Cell {
        let mut timed = Vec::with_capacity(repeats.len());
        for r in repeats {
            match r {
                Ok(t) => timed.push(t),
                Err(e) => return Cell::Failed(e.to_string()),
            }
        }
        if timed.is_empty() {
            Cell::Unavailable("not run".to_owned())
        } else {
            Cell::Timed(timed)
        }
    }

    /// The mean over repeats of each repeat's median device time (ms).
    pub fn device_ms(&self) -> Option<f64> {
        self.mean(|t| t.median_ms)
    }

    /// The mean over repeats of the host wall time per launch (ms).
    pub fn wall_ms(&self) -> Option<f64> {
        self.mean(|t| t.wall_ms)
    }

    /// [`Cell::device_ms`], or the lower bound of a killed cell.
    pub fn device_figure(&self) -> Option<Figure> {
        self.device_ms()
            .map(Figure::Exactly)
            .or_else(|| self.bound())
    }

    /// [`Cell::wall_ms`], or the lower bound of a killed cell.
    pub fn wall_figure(&self) -> Option<Figure> {
        self.wall_ms().map(Figure::Exactly).or_else(|| self.bound())
    }

    fn bound(&self) -> Option<Figure> {
        match self {
            Cell::Killed {
                at_least_ms: Some(ms),
                ..
            } => Some(Figure::MoreThan(*ms)),
            _ => None,
        }
    }

    fn mean(&self, f: impl Fn(&Timing) -> f64) -> Option<f64> {
        match self {
            Cell::Timed(ts) if !ts.is_empty() => {
                Some(ts.iter().map(f).sum::<f64>() / ts.len() as f64)
            }
            _ => None,
        }
    }
}

/// How results compared with the reference and with each other.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checks {
    /// Vigil plain: largest scaled error, or the mismatch.
    pub vigil: Option<std::result::Result<f64, String>>,
    /// The nvcc twin.
    pub twin: Option<std::result::Result<f64, String>>,
    /// Vigil sanitized.
    pub sanitized: Option<std::result::Result<f64, String>>,
    /// Largest scaled difference between Vigil's and the twin's outputs.
    pub vigil_vs_twin: Option<f64>,
}

/// Every measurement of one kernel.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The kernel.
    pub name: &'static str,
    /// What limits it.
    pub class: Class,
    /// Its problem size.
    pub size: String,
    /// The work of one run.
    pub work: Work,
    /// Vigil, plain context.
    pub vigil: Cell,
    /// The nvcc twin.
    pub twin: Cell,
    /// Vigil, sanitized context.
    pub sanitized: Cell,
    /// Vigil, sanitized context that trusts no type (`VIGIL_TRUST_TYPES=0`):
    /// every access checked within its block too.
    pub sanitized_all_checked: Cell,
    /// The twin under `compute-sanitizer --tool memcheck` (host wall time).
    pub memcheck: Cell,
    /// The twin under `compute-sanitizer --tool racecheck` (host wall time).
    pub racecheck: Cell,
    /// Result checks.
    pub checks: Checks,
}

impl CaseResult {
    /// An empty result for `case` (every cell [`Cell::Pending`]).
    pub fn new(case: &Case) -> CaseResult {
        let not_run = Cell::Pending;
        CaseResult {
            name: case.name,
            class: case.class,
            size: case.size.clone(),
            work: case.work,
            vigil: not_run.clone(),
            twin: not_run.clone(),
            sanitized: not_run.clone(),
            sanitized_all_checked: not_run.clone(),
            memcheck: not_run.clone(),
            racecheck: not_run,
            checks: Checks::default(),
        }
    }
}

/// The host-side measurements.
#[derive(Clone, Debug, Default)]
pub struct HostOverheads {
    /// Typed against raw launches, or why not measured.
    pub launch: Option<std::result::Result<LaunchOverhead, String>>,
    /// A sanitized typed launch (µs), or why not measured.
    pub sanitized_launch_us: Option<std::result::Result<f64, String>>,
    /// Allocation at 1 MiB, or why not measured.
    pub alloc: Option<std::result::Result<AllocFigures, String>>,
}

/// The device a run measured.
#[derive(Clone, Debug, Default)]
pub struct DeviceInfo {
    /// Its name.
    pub name: String,
    /// Multiprocessors.
    pub sm_count: u32,
    /// Device-to-device copy bandwidth measured in the run (GB/s, bytes
    /// read plus bytes written).
    pub copy_gbps: f64,
    /// The CUDA driver's version (`major.minor`).
    pub driver: String,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default)]
pub struct SuiteResults {
    /// The device.
    pub device: DeviceInfo,
    /// When the run started (UTC, `YYYY-MM-DD HH:MM`).
    pub date: String,
    /// The seed of the inputs.
    pub seed: u64,
    /// How each plain series was timed.
    pub plan: Plan,
    /// How each sanitized series was timed (in its child).
    pub sanitized_plan: Plan,
    /// Timed repeats per series.
    pub repeats: usize,
    /// One per kernel, in table order.
    pub cases: Vec<CaseResult>,
    /// Host overheads.
    pub host: HostOverheads,
    /// Remarks to print under the table (tool versions, findings, skips).
    pub notes: Vec<String>,
    /// The selected cases not reached yet (a report written mid-run).
    pub not_run_yet: Vec<&'static str>,
    /// How long each phase of the run took, in order.
    pub phases: Vec<PhaseTime>,
}

/// The wall time of one phase of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseTime {
    /// The phase (`plain`, `sanitized`, `memcheck`, ...).
    pub name: &'static str,
    /// How long it took (s).
    pub seconds: f64,
    /// Its share of the run's budget (s), for the phases that have one.
    pub share_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use Figure::{Exactly, LessThan, MoreThan};

    #[test]
    fn a_ratio_of_bounds_is_bounded_on_the_side_the_bounds_prove() {
        assert_eq!(Exactly(6.0).over(Exactly(2.0)), Some(Exactly(3.0)));
        // A slower-than numerator, or a faster-than denominator: larger.
        assert_eq!(MoreThan(6.0).over(Exactly(2.0)), Some(MoreThan(3.0)));
        assert_eq!(Exactly(6.0).over(LessThan(2.0)), Some(MoreThan(3.0)));
        // The other way round: smaller.
        assert_eq!(Exactly(6.0).over(MoreThan(2.0)), Some(LessThan(3.0)));
        assert_eq!(LessThan(6.0).over(Exactly(2.0)), Some(LessThan(3.0)));
        // Two lower bounds prove nothing about their ratio.
        assert_eq!(MoreThan(6.0).over(MoreThan(2.0)), None);
        assert_eq!(Exactly(6.0).over(Exactly(0.0)), None);
    }

    #[test]
    fn a_bound_decides_a_limit_only_when_it_proves_it() {
        assert_eq!(Exactly(4.0).at_most(5.0), Some(true));
        assert_eq!(Exactly(6.0).at_most(5.0), Some(false));
        assert_eq!(MoreThan(60.0).at_most(50.0), Some(false));
        assert_eq!(MoreThan(40.0).at_most(50.0), None);
        assert_eq!(LessThan(0.05).at_most(0.1), Some(true));
        assert_eq!(LessThan(0.5).at_most(0.1), None);
    }

    #[test]
    fn a_killed_cell_gives_its_lower_bound_and_no_measurement() {
        let killed = Cell::Killed {
            at_least_ms: Some(20_000.0),
            by: Limit::Case(Duration::from_secs(20)),
        };
        assert_eq!(killed.device_ms(), None);
        assert_eq!(killed.device_figure(), Some(MoreThan(20_000.0)));
        assert_eq!(killed.wall_figure(), Some(MoreThan(20_000.0)));
        let before_launch = Cell::Killed {
            at_least_ms: None,
            by: Limit::Budget,
        };
        assert_eq!(before_launch.device_figure(), None);
    }
}
