//! Turns [`SuiteResults`] into `bench-results.md` and `bench-results.json`:
//! the derived figures (ratios, rates, the performance targets) are computed once
//! here and written by both.

mod json;
mod markdown;

pub use json::{bench_report, to_json, BenchReport, BENCH_FORMAT_VERSION};
pub use markdown::to_markdown;

use crate::cases::{Class, Work};
use crate::results::{CaseResult, Figure, SuiteResults};

/// The figures derived from one kernel's cells: a ratio involving a
/// killed cell is the bound that cell proves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ratios {
    /// Vigil plain over the nvcc twin (device time).
    pub vigil_over_nvcc: Option<Figure>,
    /// Vigil sanitized over Vigil plain (device time).
    pub sanitized_over_plain: Option<Figure>,
    /// Vigil sanitized with every access checked over Vigil plain.
    pub all_checked_over_plain: Option<Figure>,
    /// Vigil sanitized over the twin under memcheck (host wall time per launch).
    pub sanitized_over_memcheck: Option<Figure>,
    /// Vigil plain's rate: GB/s, GFLOP/s or G atomics/s, as the work says.
    pub vigil_rate: Option<f64>,
    /// The twin's rate, in the same unit.
    pub twin_rate: Option<f64>,
    /// Vigil plain's GB/s as a fraction of the measured copy bandwidth.
    pub vigil_of_copy: Option<f64>,
}

fn ratio(a: Option<Figure>, b: Option<Figure>) -> Option<Figure> {
    a?.over(b?)
}

/// The rate of `work` done in `ms` milliseconds, in 10^9 units per second.
fn rate(work: Work, ms: Option<f64>) -> Option<f64> {
    let units = match work {
        Work::Bytes(b) => b,
        Work::Flops(f) => f,
        Work::Atomics(a) => a,
    };
    ms.filter(|&ms| ms > 0.0)
        .map(|ms| units as f64 / (ms * 1e-3) / 1e9)
}

/// The unit of [`Ratios::vigil_rate`] for `work`.
pub fn rate_unit(work: Work) -> &'static str {
    match work {
        Work::Bytes(_) => "GB/s",
        Work::Flops(_) => "GFLOP/s",
        Work::Atomics(_) => "G atomics/s",
    }
}

impl Ratios {
    /// The figures of `r`, with `copy_gbps` the device's copy bandwidth.
    pub fn of(r: &CaseResult, copy_gbps: f64) -> Ratios {
        let vigil_rate = rate(r.work, r.vigil.device_ms());
        Ratios {
            vigil_over_nvcc: ratio(r.vigil.device_figure(), r.twin.device_figure()),
            sanitized_over_plain: ratio(r.sanitized.device_figure(), r.vigil.device_figure()),
            all_checked_over_plain: ratio(
                r.sanitized_all_checked.device_figure(),
                r.vigil.device_figure(),
            ),
            sanitized_over_memcheck: ratio(r.sanitized.wall_figure(), r.memcheck.wall_figure()),
            vigil_rate,
            twin_rate: rate(r.work, r.twin.device_ms()),
            vigil_of_copy: match r.work {
                Work::Bytes(_) if copy_gbps > 0.0 => vigil_rate.map(|g| g / copy_gbps),
                _ => None,
            },
        }
    }
}

/// Whether a target was met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every figure it needs was measured and is within bounds.
    Met,
    /// Some measured figure is out of bounds.
    NotMet,
    /// A figure it needs is missing.
    Unmeasured,
}

impl Status {
    /// `met`, `NOT met`, `not measured`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::NotMet => "NOT met",
            Status::Unmeasured => "not measured",
        }
    }
}

/// One of the performance targets (docs/src/performance.md), judged on a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The target, as the benchmark states it.
    pub name: &'static str,
    /// The verdict.
    pub status: Status,
    /// The figures behind it.
    pub detail: String,
}

/// Judges every figure of `figures` (kernel name, value) against `max`:
/// met when every one is proved at most `max`, not met when any is proved
/// above it (a killed cell's lower bound can prove that), unmeasured
/// otherwise.
fn judge(name: &'static str, figures: Vec<(&str, Option<Figure>)>, max: f64) -> Target {
    let mut status = if figures.is_empty() {
        Status::Unmeasured
    } else {
        Status::Met
    };
    let mut parts = Vec::with_capacity(figures.len());
    for (kernel, value) in figures {
        match value.and_then(|v| v.at_most(max)) {
            Some(true) => {}
            Some(false) => status = Status::NotMet,
            None if status == Status::Met => status = Status::Unmeasured,
            None => {}
        }
        parts.push(format!("{kernel} {}", fmt_figure(value, 3, "")));
    }
    Target {
        name,
        status,
        detail: parts.join(", "),
    }
}

/// A figure for the table: `1.234`, `> 1.234`, `< 1.234`, or `-`.
pub fn fmt_figure(v: Option<Figure>, decimals: usize, suffix: &str) -> String {
    match v {
        None => "-".to_owned(),
        Some(Figure::Exactly(v)) => format!("{v:.decimals$}{suffix}"),
        Some(Figure::MoreThan(v)) => format!("> {v:.decimals$}{suffix}"),
        Some(Figure::LessThan(v)) => format!("< {v:.decimals$}{suffix}"),
    }
}

/// The geometric mean of `figures`: exact when all are, a lower bound
/// when some are lower bounds, `None` when any is missing or an upper bound.
fn geometric_mean(figures: &[Option<Figure>]) -> Option<Figure> {
    if figures.is_empty() {
        return None;
    }
    let mut bounded = false;
    let mut log_sum = 0.0;
    for f in figures {
        match f {
            Some(Figure::Exactly(v)) => log_sum += v.ln(),
            Some(Figure::MoreThan(v)) => {
                bounded = true;
                log_sum += v.ln();
            }
            _ => return None,
        }
    }
    let mean = (log_sum / figures.len() as f64).exp();
    Some(if bounded {
        Figure::MoreThan(mean)
    } else {
        Figure::Exactly(mean)
    })
}

/// The performance targets on `results`.
pub fn targets(results: &SuiteResults) -> Vec<Target> {
    let bw = results.device.copy_gbps;
    let with = |pick: fn(&Class) -> bool,
                f: fn(&Ratios) -> Option<Figure>|
     -> Vec<(&str, Option<Figure>)> {
        results
            .cases
            .iter()
            .filter(|r| pick(&r.class))
            .map(|r| (r.name, f(&Ratios::of(r, bw))))
            .collect()
    };
    let memory = |c: &Class| matches!(c, Class::Memory { .. });
    let bandwidth = |c: &Class| {
        matches!(
            c,
            Class::Memory {
                sanitizer_target: true
            }
        )
    };
    let contended = |c: &Class| matches!(c, Class::Atomics { contended: true });
    let all = |_: &Class| true;
    let slowdowns: Vec<Option<Figure>> = with(all, |r| r.sanitized_over_plain)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let geomean = if results.not_run_yet.is_empty() {
        geometric_mean(&slowdowns)
    } else {
        None
    };
    let launch = match &results.host.launch {
        Some(Ok(l)) => Some(Figure::Exactly(l.typed_us - l.raw_us)),
        _ => None,
    };
    vec![
        judge(
            "Vigil plain / nvcc <= 1.05 on every memory-bound kernel",
            with(memory, |r| r.vigil_over_nvcc),
            1.05,
        ),
        judge(
            "sanitized / plain <= 5x, geometric mean over the suite",
            vec![("geomean", geomean)],
            5.0,
        ),
        judge(
            "sanitized / plain <= 5x on every bandwidth-bound kernel",
            with(bandwidth, |r| r.sanitized_over_plain),
            5.0,
        ),
        judge(
            "sanitized >= 10x faster than memcheck on every bandwidth-bound kernel (ratio <= 0.1)",
            with(bandwidth, |r| r.sanitized_over_memcheck),
            0.1,
        ),
        judge(
            "contended atomics: sanitized / plain <= 50x",
            with(contended, |r| r.sanitized_over_plain),
            50.0,
        ),
        judge(
            "typed launch within 1 us of raw cuLaunchKernel (difference in us)",
            vec![("typed - raw", launch)],
            1.0,
        ),
    ]
}

/// The current UTC time as `YYYY-MM-DD HH:MM` (from the system clock,
/// civil-calendar arithmetic; no time-zone database needed for UTC).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{CaseResult, Cell, SuiteResults};
    use crate::timing::Timing;

    fn timed(ms: f64) -> Cell {
        let t = Timing {
            median_ms: ms,
            min_ms: ms,
            max_ms: ms,
            wall_ms: ms,
            launches: 10,
        };
        Cell::Timed(vec![t, t])
    }

    fn case(name: &'static str, class: Class, vigil: f64, twin: f64) -> CaseResult {
        CaseResult {
            name,
            class,
            size: "n".to_owned(),
            work: Work::Bytes(1_000_000_000),
            vigil: timed(vigil),
            twin: timed(twin),
            sanitized: Cell::Unavailable(crate::suite::SANITIZED_NOT_BUILT.to_owned()),
            sanitized_all_checked: Cell::Unavailable(crate::suite::SANITIZED_NOT_BUILT.to_owned()),
            memcheck: timed(40.0),
            racecheck: timed(2.0),
            checks: Default::default(),
        }
    }

    fn suite(cases: Vec<CaseResult>) -> SuiteResults {
        SuiteResults {
            cases,
            device: crate::results::DeviceInfo {
                copy_gbps: 2000.0,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn ratios_and_rates_come_from_the_repeats() {
        let r = case(
            "copy",
            Class::Memory {
                sanitizer_target: true,
            },
            1.0,
            0.8,
        );
        let x = Ratios::of(&r, 2000.0);
        assert_eq!(x.vigil_over_nvcc, Some(Figure::Exactly(1.25)));
        assert_eq!(x.vigil_rate, Some(1000.0)); // 1 GB in 1 ms
        assert_eq!(x.vigil_of_copy, Some(0.5));
        assert_eq!(
            x.sanitized_over_plain, None,
            "no sanitized number, no ratio"
        );
    }

    #[test]
    fn a_target_is_met_only_when_every_figure_is_measured_and_within() {
        let mem = Class::Memory {
            sanitizer_target: true,
        };
        let within = suite(vec![
            case("copy", mem, 1.0, 1.0),
            case("axpy", mem, 1.04, 1.0),
        ]);
        assert_eq!(targets(&within)[0].status, Status::Met);
        let slow = suite(vec![
            case("copy", mem, 1.0, 1.0),
            case("axpy", mem, 1.2, 1.0),
        ]);
        assert_eq!(targets(&slow)[0].status, Status::NotMet);
        let mut missing = suite(vec![case("copy", mem, 1.0, 1.0)]);
        missing.cases[0].twin = Cell::Failed("nvcc failed".to_owned());
        assert_eq!(targets(&missing)[0].status, Status::Unmeasured);
        // The sanitized targets are unmeasured, not met, without numbers.
        assert_eq!(targets(&within)[2].status, Status::Unmeasured);
    }

    #[test]
    fn outputs_say_why_a_cell_is_empty() {
        let results = suite(vec![case(
            "copy",
            Class::Memory {
                sanitizer_target: true,
            },
            1.0,
            1.0,
        )]);
        let md = to_markdown(&results);
        assert!(md.contains(crate::suite::SANITIZED_NOT_BUILT), "{md}");
        let json = to_json(&results);
        assert!(
            json.contains(
                r#""vigil_sanitized":{"unavailable":"n/a (sanitized GPU launch not built)"}"#
            ),
            "{json}"
        );
        assert!(json.contains(r#""vigil_over_nvcc":1.0"#), "{json}");
    }

    #[test]
    fn a_killed_sanitized_cell_bounds_its_ratios_and_can_fail_a_target() {
        use crate::results::{Figure, Limit};
        use std::time::Duration;
        let contended = Class::Atomics { contended: true };
        let killed_at = |ms: f64| {
            let mut r = case("counter", contended, 10.0, 10.0);
            r.sanitized = Cell::Killed {
                at_least_ms: Some(ms),
                by: Limit::Case(Duration::from_secs(20)),
            };
            suite(vec![r])
        };
        // > 20 s over 10 ms plain: more than 2000x, so not within 50x.
        let slow = killed_at(20_000.0);
        let x = Ratios::of(&slow.cases[0], 2000.0);
        assert_eq!(x.sanitized_over_plain, Some(Figure::MoreThan(2000.0)));
        assert_eq!(x.sanitized_over_memcheck, Some(Figure::MoreThan(500.0)));
        let t = targets(&slow);
        assert_eq!(t[4].status, Status::NotMet, "{:?}", t[4]);
        assert_eq!(t[1].status, Status::NotMet, "geomean > 2000x: {:?}", t[1]);
        // Killed after 100 ms: more than 10x proves nothing against 50x.
        assert_eq!(targets(&killed_at(100.0))[4].status, Status::Unmeasured);
        let md = to_markdown(&slow);
        assert!(
            md.contains("| > 20.0 s (killed) [1] | > 2000.00x |"),
            "{md}"
        );
        assert!(md.contains("20 s per-case limit"), "{md}");
        let json = to_json(&slow);
        assert!(
            json.contains(
                r#""vigil_sanitized":{"killed":{"at_least_ms":20000.0,"limit":{"case_limit_s":20.0}}}"#
            ) && json.contains(r#""sanitized_over_plain":{"more_than":2000.0}"#),
            "{json}"
        );
    }

    #[test]
    fn the_json_reads_back_and_has_no_non_finite_numbers() {
        let mut r = case(
            "copy",
            Class::Memory {
                sanitizer_target: true,
            },
            1.0,
            f64::NAN,
        );
        r.checks.vigil = Some(Err("a \"quoted\"\nmismatch".to_owned()));
        let results = suite(vec![r]);
        let text = to_json(&results);
        let back: BenchReport = serde_json::from_str(&text).expect("it reads back");
        assert_eq!(back, bench_report(&results));
        assert_eq!(back.version, BENCH_FORMAT_VERSION);
        // The twin's NaN times are `null`, not numbers JSON lacks.
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(value["cases"][0]["nvcc"]["repeats"][0]["median_ms"].is_null());
        assert!(
            text.contains(r#""mismatch":"a \"quoted\"\nmismatch""#),
            "{text}"
        );
    }

    #[test]
    fn utc_now_is_a_date_and_time() {
        let s = utc_now();
        assert_eq!(s.len(), "2026-01-01 00:00".len(), "{s}");
        assert!(s.starts_with("20"), "{s}");
    }
}
