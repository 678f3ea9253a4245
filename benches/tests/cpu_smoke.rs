//! `vigil-bench --cpu-smoke` as a test: every suite kernel on the CPU
//! backend, plain and sanitized, agrees with its host reference, and the
//! sanitizer reports no race on these race-free kernels.

use vigil::{Context, LaunchVariant};
use vigil_bench::cases::NAMES;
use vigil_bench::smoke;

#[test]
fn the_sanitized_smoke_context_runs_the_checked_kernels() {
    // Otherwise "no races reported" below would prove nothing.
    let ctx = Context::builder()
        .cpu()
        .sanitize(true)
        .build()
        .expect("CPU context");
    assert_eq!(ctx.launch_variant(), LaunchVariant::Sanitized);
}

#[test]
fn every_suite_kernel_matches_its_reference_on_the_cpu_backend() {
    let seed = vigil_tests::example_seed();
    let outcomes = smoke::run(seed).expect("CPU contexts and kernels");
    assert_eq!(
        outcomes.len(),
        2 * NAMES.len(),
        "plain and sanitized, every case"
    );
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.result
                .as_ref()
                .err()
                .map(|e| format!("{} (sanitized: {}): {e}", o.case, o.sanitized))
        })
        .collect();
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}
