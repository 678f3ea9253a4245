//! The whole runner (checks, timing, the sanitized child, report) on the
//! CPU backend, where the GPU-only columns must say so rather than show a
//! number, and a sanitized child past its limit is killed with the bound
//! it proves.

use std::time::{Duration, Instant};
use vigil_bench::cases::NAMES;
use vigil_bench::report::{to_json, to_markdown, Ratios};
use vigil_bench::results::{Cell, Figure, Limit, SuiteResults};
use vigil_bench::suite::{run, Device, Options, GPU_ONLY};
use vigil_bench::timing::Plan;

fn options(only: &[&str], case_limit: Duration) -> Options {
    Options {
        device: Device::Cpu,
        plan: Plan::QUICK,
        twins: None,
        seed: vigil_tests::example_seed(),
        repeats: 2,
        only: only.iter().map(|s| s.to_string()).collect(),
        exe: env!("CARGO_BIN_EXE_vigil-bench").into(),
        compute_sanitizer: None,
        budget: Duration::from_secs(300),
        case_limit,
    }
}

#[test]
fn the_suite_runs_checks_times_and_reports_every_kernel_on_the_cpu_backend() {
    let mut reports: Vec<SuiteResults> = Vec::new();
    let results = run(&options(&[], Duration::from_secs(120)), &mut |so_far| {
        reports.push(so_far.clone())
    })
    .expect("a run on the CPU backend");
    assert_eq!(results.cases.len(), NAMES.len());
    for r in &results.cases {
        for (column, cell) in [("plain", &r.vigil), ("sanitized", &r.sanitized)] {
            match cell {
                Cell::Timed(repeats) => assert_eq!(repeats.len(), 2, "{} {column}", r.name),
                other => panic!("{} {column}: {other:?}", r.name),
            }
        }
        assert!(
            matches!(&r.checks.vigil, Some(Ok(_))),
            "{}: {:?}",
            r.name,
            r.checks.vigil
        );
        assert!(
            matches!(&r.checks.sanitized, Some(Ok(_))),
            "{}: {:?}",
            r.name,
            r.checks.sanitized
        );
        for cell in [&r.twin, &r.memcheck, &r.racecheck] {
            assert_eq!(cell, &Cell::Unavailable(GPU_ONLY.to_owned()), "{}", r.name);
        }
    }
    // Reports went out as the run went: first every case not run yet,
    // then each plain case, then each sanitized cell.
    let first = reports.first().expect("a report before the cases");
    assert_eq!(first.not_run_yet, NAMES.to_vec());
    let halfway = reports
        .iter()
        .find(|r| r.not_run_yet.is_empty())
        .expect("a report after the plain phase");
    assert!(halfway.cases.iter().all(|r| r.sanitized == Cell::Pending));
    assert!(reports.len() > 2 * NAMES.len(), "{} reports", reports.len());
    let phases: Vec<&str> = results.phases.iter().map(|p| p.name).collect();
    assert_eq!(
        phases,
        ["start-up", "plain", "host overheads", "sanitized", "total"]
    );
    let md = to_markdown(&results);
    for name in NAMES {
        assert!(md.contains(&format!("| {name} |")), "{name} missing:\n{md}");
    }
    let mid = to_markdown(first);
    assert!(mid.contains("| copy | not run yet |"), "{mid}");
    let json = to_json(&results);
    assert!(json.starts_with('{') && json.ends_with('}'));
    assert_eq!(
        json.matches(r#""name":"#).count(),
        NAMES.len() + 1,
        "cases and device"
    );
}

#[test]
fn a_sanitized_child_past_its_limit_is_killed_and_its_cell_gives_the_bound() {
    // A zero limit ends the child as soon as the parent reads that the
    // first launch began; sgemm's sanitized launch on the CPU backend takes
    // milliseconds, far longer than the parent takes to react.
    let limit = Duration::ZERO;
    let t = Instant::now();
    let results = run(&options(&["sgemm"], limit), &mut |_| {}).expect("a run");
    assert!(t.elapsed() < Duration::from_secs(60));
    let r = &results.cases[0];
    let bound = match &r.sanitized {
        Cell::Killed {
            at_least_ms: Some(ms),
            by: Limit::Case(by),
        } => {
            assert_eq!(*by, limit);
            *ms
        }
        other => panic!("sanitized sgemm: {other:?}"),
    };
    assert!(
        bound > 0.0 && bound < 1000.0,
        "the bound is how long the launch had run: {bound} ms"
    );
    assert!(matches!(r.vigil, Cell::Timed(_)), "plain: {:?}", r.vigil);
    let plain = r.vigil.device_ms().expect("plain timed");
    match Ratios::of(r, results.device.copy_gbps).sanitized_over_plain {
        Some(Figure::MoreThan(x)) => assert!((x - bound / plain).abs() < 1e-9 * x.max(1.0)),
        other => panic!("sanitized/plain: {other:?}"),
    }
    let md = to_markdown(&results);
    assert!(md.contains("(killed)") && md.contains("| > "), "{md}");
    let json = to_json(&results);
    assert!(
        json.contains(r#""vigil_sanitized":{"killed":{"at_least_ms":"#)
            && json.contains(r#""sanitized_over_plain":{"more_than":"#),
        "{json}"
    );
}

#[test]
fn cases_the_budget_cannot_fit_are_marked_skipped_not_dropped() {
    let mut opts = options(&["copy", "scan"], Duration::from_secs(60));
    opts.budget = Duration::ZERO;
    let results = run(&opts, &mut |_| {}).expect("a run");
    assert_eq!(results.cases.len(), 2);
    for r in &results.cases {
        assert!(matches!(r.vigil, Cell::Timed(_)), "plain is not budgeted");
        assert_eq!(
            r.sanitized,
            Cell::Skipped("budget".to_owned()),
            "{}",
            r.name
        );
    }
    let md = to_markdown(&results);
    assert_eq!(md.matches("| skipped: budget |").count(), 2, "{md}");
}
