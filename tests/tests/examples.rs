//! Every example program runs on the CPU backend and checks its own result,
//! so `cargo test` exercises them on machines without a GPU too. (The
//! example binaries call the same functions.)

use vigil::{Context, ReportKind};
use vigil_tests::programs;

fn cpu() -> Context {
    Context::cpu().expect("CPU backend")
}

#[test]
fn axpy_example_checks_its_result() {
    programs::axpy::run(&cpu(), 100_003, 11, 1).unwrap();
}

#[test]
fn reduce_sum_example_checks_its_result() {
    programs::reduce_sum::run(&cpu(), 300_001, 12, 1).unwrap();
}

#[test]
fn histogram_example_checks_its_result() {
    programs::histogram::run(&cpu(), 200_003, 13, 1).unwrap();
}

#[test]
fn demo_reports_the_racy_kernel_and_not_the_fixed_one() {
    let ctx = Context::builder().cpu().sanitize(true).build().unwrap();
    let out = programs::demo::run(&ctx).unwrap();
    assert_eq!(out.fixed_count as usize, out.expected);
    let text = out.racy_reports.to_string();
    assert!(
        !out.racy_reports.is_empty(),
        "the racy kernel was not reported"
    );
    assert!(
        out.racy_reports.iter().any(|r| matches!(
            r.kind,
            ReportKind::ReadAfterWrite | ReportKind::WriteAfterWrite
        )),
        "{text}"
    );
    assert!(
        text.contains("races.rs:277") || text.contains("races.rs:278"),
        "report does not name the kernel's lines:\n{text}"
    );
}

#[test]
fn gemm_softmax_example_checks_its_result_and_reports_the_unsynced_reuse() {
    let sanitized = Context::builder().cpu().sanitize(true).build().unwrap();
    let out = programs::gemm_softmax::run(&cpu(), &sanitized, 1, 128, 14, 1).unwrap();
    let text = out.reuse_reports.to_string();
    assert!(!out.reuse_reports.is_empty(), "no report");
    assert!(
        text.contains("through the shared view allocated at tests/kernels/src/shared_stack.rs"),
        "{text}"
    );
}
