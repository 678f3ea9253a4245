//! `bench-results.json`: a small JSON value type (the suite needs no
//! serde) and the results in it.

use super::{rate_unit, targets, Ratios};
use crate::cases::{Class, Work};
use crate::results::{Cell, Figure, Limit, SuiteResults};
use crate::timing::Plan;
use crate::tools::TOOL_REPEATS;
use std::fmt::{self, Write};

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null` (also what a NaN or infinite number becomes).
    Null,
    /// A number.
    Num(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in insertion order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// A number, or `null` for `None`.
    pub fn num(v: Option<f64>) -> Json {
        v.map_or(Json::Null, Json::Num)
    }
}

fn escape(s: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Num(v) if v.is_finite() => write!(f, "{v}"),
            Json::Num(_) => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Str(s) => escape(s, f),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_char(']')
            }
            Json::Obj(pairs) => {
                f.write_char('{')?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    escape(k, f)?;
                    write!(f, ":{v}")?;
                }
                f.write_char('}')
            }
        }
    }
}

fn cell(c: &Cell) -> Json {
    match c {
        Cell::Timed(ts) => Json::obj([(
            "repeats",
            Json::Arr(
                ts.iter()
                    .map(|t| {
                        Json::obj([
                            ("median_ms", Json::Num(t.median_ms)),
                            ("min_ms", Json::Num(t.min_ms)),
                            ("max_ms", Json::Num(t.max_ms)),
                            ("wall_ms_per_launch", Json::Num(t.wall_ms)),
                            ("launches", Json::Num(t.launches as f64)),
                        ])
                    })
                    .collect(),
            ),
        )]),
        Cell::Unavailable(why) => Json::obj([("unavailable", Json::str(why.as_str()))]),
        Cell::Failed(why) => Json::obj([("failed", Json::str(why.as_str()))]),
        Cell::Killed { at_least_ms, by } => Json::obj([(
            "killed",
            Json::obj([
                ("at_least_ms", Json::num(*at_least_ms)),
                (
                    "limit",
                    match by {
                        Limit::Case(d) => Json::obj([("case_limit_s", Json::Num(d.as_secs_f64()))]),
                        Limit::Budget => Json::str("budget"),
                    },
                ),
            ]),
        )]),
        Cell::Skipped(why) => Json::obj([("skipped", Json::str(why.as_str()))]),
        Cell::Pending => Json::obj([("not_run_yet", Json::Bool(true))]),
    }
}

/// A figure: a number when measured, `{"more_than": x}` or
/// `{"less_than": x}` when a killed cell bounds it, `null` when missing.
fn figure(f: Option<Figure>) -> Json {
    match f {
        None => Json::Null,
        Some(Figure::Exactly(v)) => Json::Num(v),
        Some(Figure::MoreThan(v)) => Json::obj([("more_than", Json::Num(v))]),
        Some(Figure::LessThan(v)) => Json::obj([("less_than", Json::Num(v))]),
    }
}

fn check(c: &Option<Result<f64, String>>) -> Json {
    match c {
        None => Json::Null,
        Some(Ok(err)) => Json::obj([("max_scaled_error", Json::Num(*err))]),
        Some(Err(e)) => Json::obj([("mismatch", Json::str(e.as_str()))]),
    }
}

fn work(w: Work) -> Json {
    match w {
        Work::Bytes(b) => Json::obj([("bytes", Json::Num(b as f64))]),
        Work::Flops(f) => Json::obj([("flops", Json::Num(f as f64))]),
        Work::Atomics(a) => Json::obj([("atomics", Json::Num(a as f64))]),
    }
}

fn plan(p: Plan) -> Json {
    Json::obj([
        ("warmup_launches", Json::Num(p.warmup as f64)),
        ("batches", Json::Num(p.batches as f64)),
        ("max_launches_per_batch", Json::Num(p.per_batch as f64)),
        ("budget_s", Json::Num(p.budget.as_secs_f64())),
    ])
}

fn class(c: Class) -> Json {
    Json::str(c.label())
}

/// The whole run as JSON.
pub fn to_json(results: &SuiteResults) -> Json {
    let bw = results.device.copy_gbps;
    let cases = results
        .cases
        .iter()
        .map(|r| {
            let x = Ratios::of(r, bw);
            Json::obj([
                ("name", Json::str(r.name)),
                ("class", class(r.class)),
                ("size", Json::str(r.size.as_str())),
                ("work", work(r.work)),
                ("vigil", cell(&r.vigil)),
                ("nvcc", cell(&r.twin)),
                ("vigil_sanitized", cell(&r.sanitized)),
                ("nvcc_memcheck", cell(&r.memcheck)),
                ("nvcc_racecheck", cell(&r.racecheck)),
                (
                    "ratios",
                    Json::obj([
                        ("vigil_over_nvcc", figure(x.vigil_over_nvcc)),
                        ("sanitized_over_plain", figure(x.sanitized_over_plain)),
                        ("sanitized_over_memcheck", figure(x.sanitized_over_memcheck)),
                    ]),
                ),
                (
                    "rates",
                    Json::obj([
                        ("unit", Json::str(rate_unit(r.work))),
                        ("vigil", Json::num(x.vigil_rate)),
                        ("nvcc", Json::num(x.twin_rate)),
                        (
                            "vigil_fraction_of_copy_bandwidth",
                            Json::num(x.vigil_of_copy),
                        ),
                    ]),
                ),
                (
                    "checks",
                    Json::obj([
                        ("vigil", check(&r.checks.vigil)),
                        ("nvcc", check(&r.checks.twin)),
                        ("vigil_sanitized", check(&r.checks.sanitized)),
                        (
                            "vigil_vs_nvcc_max_scaled_difference",
                            Json::num(r.checks.vigil_vs_twin),
                        ),
                    ]),
                ),
            ])
        })
        .collect();
    let text = |r: &Option<Result<f64, String>>| match r {
        None => Json::Null,
        Some(Ok(v)) => Json::Num(*v),
        Some(Err(e)) => Json::obj([("not_measured", Json::str(e.as_str()))]),
    };
    let host = &results.host;
    let launch = match &host.launch {
        None => Json::Null,
        Some(Ok(l)) => Json::obj([
            ("typed_us", Json::Num(l.typed_us)),
            ("raw_cuLaunchKernel_us", Json::Num(l.raw_us)),
        ]),
        Some(Err(e)) => Json::obj([("not_measured", Json::str(e.as_str()))]),
    };
    let alloc = match &host.alloc {
        None => Json::Null,
        Some(Ok(a)) => Json::obj([
            ("bytes", Json::Num(a.size as f64)),
            ("cuMemAlloc_free_us", Json::Num(a.plain_us)),
            ("cuMemAllocAsync_free_us", Json::Num(a.stream_ordered_us)),
            ("vmm_uncached_us", Json::Num(a.vmm_us)),
            ("vmm_cached_us", Json::Num(a.cached_us)),
        ]),
        Some(Err(e)) => Json::obj([("not_measured", Json::str(e.as_str()))]),
    };
    Json::obj([
        (
            "device",
            Json::obj([
                ("name", Json::str(results.device.name.as_str())),
                ("sm_count", Json::Num(f64::from(results.device.sm_count))),
                ("driver_version", Json::str(results.device.driver.as_str())),
                ("copy_bandwidth_gbps", Json::Num(bw)),
            ]),
        ),
        ("date_utc", Json::str(results.date.as_str())),
        // A string: a u64 seed does not fit a JSON number exactly.
        ("seed", Json::str(results.seed.to_string())),
        (
            "method",
            Json::obj([
                ("device_time", plan(results.plan)),
                ("sanitized_device_time", plan(results.sanitized_plan)),
                ("repeats", Json::Num(results.repeats as f64)),
                ("compute_sanitizer_wall_time", plan(Plan::TOOL)),
                ("compute_sanitizer_repeats", Json::Num(TOOL_REPEATS as f64)),
            ]),
        ),
        ("cases", Json::Arr(cases)),
        (
            "cases_not_run_yet",
            Json::Arr(results.not_run_yet.iter().map(|n| Json::str(*n)).collect()),
        ),
        (
            "phases",
            Json::Arr(
                results
                    .phases
                    .iter()
                    .map(|p| {
                        Json::obj([
                            ("phase", Json::str(p.name)),
                            ("seconds", Json::Num(p.seconds)),
                            ("budget_share_s", Json::num(p.share_s)),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "host",
            Json::obj([
                ("launch", launch),
                ("sanitized_launch_us", text(&host.sanitized_launch_us)),
                ("alloc", alloc),
            ]),
        ),
        (
            "targets",
            Json::Arr(
                targets(results)
                    .into_iter()
                    .map(|t| {
                        Json::obj([
                            ("target", Json::str(t.name)),
                            ("status", Json::str(t.status.label())),
                            ("figures", Json::str(t.detail)),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "notes",
            Json::Arr(
                results
                    .notes
                    .iter()
                    .map(|n| Json::str(n.as_str()))
                    .collect(),
            ),
        ),
    ])
}
