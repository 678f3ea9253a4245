//! Vigil's test harness (`#[vigil::test]`) judged by what it prints and
//! returns: a missing GPU is a skip (a failure under `VIGIL_REQUIRE_GPU=1`),
//! a test may skip itself with a reason, a race the sanitizer finds fails the test with its report, a failing or
//! panicking body fails it, and libtest's filters and `--list` work.

use vigil::testing::__private::run_cases;
use vigil::testing::TestCase;
use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use vigil_kernels::races::race_waw;
use vigil_tests::KERNELS_PTX;

/// Two blocks write one word: a race whenever the sanitizer is on.
fn racy(ctx: &Context) -> Result<(), String> {
    let run = || -> vigil::Result<()> {
        let stream = Stream::new(ctx)?;
        let k = Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<race_waw>()?;
        let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        stream.launch(&k, LaunchConfig::new(2, 1), (&mut data,))
    };
    run().map_err(|e| e.to_string())
}

macro_rules! case {
    ($static:ident = $name:literal, $body:expr, cpu: $cpu:expr, gpu: $gpu:expr, sanitize: $sanitize:expr) => {
        static $static: TestCase = TestCase {
            name: $name,
            module: module_path!(),
            file: file!(),
            line: line!(),
            cpu: $cpu,
            gpu: $gpu,
            sanitize: $sanitize,
            body: $body,
        };
    };
}

case!(PASSES = "passes", |_| Ok(()), cpu: true, gpu: true, sanitize: true);
case!(RACES = "races", racy, cpu: true, gpu: false, sanitize: true);
case!(RACES_UNSANITIZED = "races_unsanitized", racy, cpu: true, gpu: false, sanitize: false);
case!(FAILS = "fails", |_| Err("the answer was 41".to_owned()), cpu: true, gpu: false, sanitize: true);
case!(PANICS = "panics", |_| panic!("index out of range"), cpu: true, gpu: false, sanitize: true);

case!(
    SKIPS = "skips",
    |_| vigil::testing::skip("its input was not built"),
    cpu: true,
    gpu: false,
    sanitize: true
);

/// Runs `cases` with `args` on a machine without a GPU; the exit code and
/// the output.
fn run(args: &[&str], cases: &[&'static TestCase], require_gpu: bool) -> (i32, String) {
    let mut out = Vec::new();
    let gpus = Err("no driver on this test machine".to_owned());
    let code = run_cases(args, cases, gpus, require_gpu, &mut out);
    (code, String::from_utf8(out).expect("UTF-8 output"))
}

#[test]
fn a_missing_gpu_is_a_skip_with_its_reason_once_and_a_count() {
    let (code, out) = run(&[], &[&PASSES], false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("test cpu::passes ... ok"), "{out}");
    assert!(out.contains("test gpu::passes ... skipped"), "{out}");
    assert_eq!(
        out.matches("no driver on this test machine").count(),
        1,
        "{out}"
    );
    assert!(
        out.contains("1 passed; 0 failed; 1 skipped (no CUDA GPU)"),
        "{out}"
    );
}

#[test]
fn a_test_can_skip_itself_with_a_reason() {
    let (code, out) = run(&[], &[&SKIPS], false);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("test cpu::skips ... skipped (its input was not built)"),
        "{out}"
    );
    assert!(out.contains("0 passed; 0 failed; 1 skipped;"), "{out}");
}

#[test]
fn vigil_require_gpu_turns_the_skip_into_a_failure() {
    let (code, out) = run(&[], &[&PASSES], true);
    assert_eq!(code, 101, "{out}");
    assert!(out.contains("test gpu::passes ... FAILED"), "{out}");
    assert!(
        out.contains("VIGIL_REQUIRE_GPU=1 but no CUDA GPU is usable"),
        "{out}"
    );
    assert!(out.contains("1 passed; 1 failed; 0 skipped"), "{out}");
}

#[test]
fn a_race_fails_the_test_with_the_formatted_report() {
    let (code, out) = run(&[], &[&RACES, &RACES_UNSANITIZED], false);
    assert_eq!(code, 101, "{out}");
    assert!(out.contains("test cpu::races ... FAILED"), "{out}");
    assert!(out.contains("test cpu::races_unsanitized ... ok"), "{out}");
    assert!(out.contains("the sanitizer reported races"), "{out}");
    // The report names the kernel and both accesses' source lines.
    assert!(
        out.contains("race_waw") && out.contains("races.rs:"),
        "{out}"
    );
    assert!(out.contains("failures:\n    cpu::races\n"), "{out}");
}

#[test]
fn failing_and_panicking_bodies_fail_with_their_message_and_place() {
    let (code, out) = run(&[], &[&FAILS, &PANICS], false);
    assert_eq!(code, 101, "{out}");
    assert!(out.contains("the answer was 41"), "{out}");
    assert!(out.contains("panicked: index out of range"), "{out}");
    assert!(out.contains("harness.rs:"), "{out}");
    assert!(out.contains("0 passed; 2 failed"), "{out}");
}

#[test]
fn libtest_filters_and_list_select_trials_by_backend_and_name() {
    let all: [&'static TestCase; 3] = [&PASSES, &FAILS, &RACES_UNSANITIZED];
    let (code, out) = run(&["--list"], &all, false);
    assert_eq!(code, 0);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "cpu::fails: test",
            "cpu::passes: test",
            "cpu::races_unsanitized: test",
            "gpu::passes: test"
        ]
    );
    let (code, out) = run(&["passes", "--skip", "gpu::"], &all, false);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("1 passed; 0 failed; 0 skipped; 3 filtered out"),
        "{out}"
    );
    let (code, out) = run(&["--exact", "cpu::fails"], &all, false);
    assert_eq!(code, 101, "{out}");
    assert!(out.contains("running 1 test\n"), "{out}");
    let (code, out) = run(&["--bogus"], &all, false);
    assert_eq!(code, 101);
    assert!(out.contains("--bogus"), "{out}");
}

/// An error with a cause, as a `#[vigil::test]` body may return one.
#[derive(Debug)]
struct OpenFailed(std::io::Error);

impl std::fmt::Display for OpenFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("could not open the input")
    }
}

impl std::error::Error for OpenFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// A failure that is `Display` and nothing more.
struct OnlyDisplay;

impl std::fmt::Display for OnlyDisplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a display-only failure")
    }
}

// The `&&` is the expansion's: method lookup picks the impl by it.
#[allow(clippy::needless_borrow)]
#[test]
fn a_failing_tests_message_is_its_errors_text_with_its_causes() {
    // The expression `#[vigil::test]` expands to around the body's value.
    use vigil::testing::__private::{Returned, WithCauses as _, WithDisplay as _};
    let failed: Result<(), OpenFailed> = Err(OpenFailed(std::io::Error::other("no such file")));
    assert_eq!(
        (&&Returned::new(failed)).outcome(),
        Err("could not open the input\n  caused by: no such file".to_owned())
    );
    let text: Result<(), String> = Err("the answer was 41".to_owned());
    assert_eq!(
        (&&Returned::new(text)).outcome(),
        Err("the answer was 41".to_owned())
    );
    let display: Result<(), OnlyDisplay> = Err(OnlyDisplay);
    assert_eq!(
        (&&Returned::new(display)).outcome(),
        Err("a display-only failure".to_owned())
    );
    assert_eq!((&&Returned::new(())).outcome(), Ok(()));
    let vigil_error: vigil::Result<()> = Err(vigil::Error::from(
        vigil::SanitizerConfig::builder()
            .clock_buffer_size(0)
            .build()
            .unwrap_err(),
    ));
    let message = (&&Returned::new(vigil_error)).outcome().unwrap_err();
    assert!(message.starts_with("configuration: "), "{message}");
    assert!(!message.contains("caused by"), "{message}");
}
