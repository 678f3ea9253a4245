//! The whole runner (checks, timing, sanitized runs, report) on the CPU
//! backend, where the GPU-only columns must say so rather than show a
//! number.

use vigil_bench::cases::NAMES;
use vigil_bench::report::{to_json, to_markdown};
use vigil_bench::results::Cell;
use vigil_bench::suite::{run, Device, Options, GPU_ONLY};
use vigil_bench::timing::Plan;

#[test]
fn the_suite_runs_checks_times_and_reports_every_kernel_on_the_cpu_backend() {
    let results = run(&Options {
        device: Device::Cpu,
        plan: Plan::QUICK,
        twins: None,
        seed: vigil_tests::example_seed(),
        repeats: 2,
        only: Vec::new(),
        tools: None,
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
    let md = to_markdown(&results);
    for name in NAMES {
        assert!(md.contains(&format!("| {name} |")), "{name} missing:\n{md}");
    }
    let json = to_json(&results).to_string();
    assert!(json.starts_with('{') && json.ends_with('}'));
    assert_eq!(
        json.matches(r#""name":"#).count(),
        NAMES.len() + 1,
        "cases and device"
    );
}
