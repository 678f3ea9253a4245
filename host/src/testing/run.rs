//! The runner: expands each registered test into one trial per backend,
//! runs them (in parallel, like libtest), and prints libtest's format with
//! one more outcome, `skipped`, for a backend this machine does not have.

use super::args::Args;
use super::case::{Outcome, TestCase};
use super::gpu::{available_gpus, gpu_required, REQUIRE_GPU_ENV};
use crate::api::context::Context;
use crate::error::Error;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Where a trial runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Cpu,
    /// A GPU by ordinal; `None` when the machine has none (the trial is
    /// skipped, or fails under `VIGIL_REQUIRE_GPU=1`).
    Gpu(Option<usize>),
}

/// One test on one backend.
struct Trial {
    name: String,
    case: &'static TestCase,
    target: Target,
}

/// How a trial ended.
enum Verdict {
    Passed,
    Failed(String),
    /// With the test's own reason ([`skip`]); `None`: no GPU.
    Skipped(Option<String>),
}

/// The payload with which [`skip`] unwinds.
struct SkipTest(String);

/// Ends the running `#[vigil::test]` as skipped, with `reason` (e.g. an
/// input file that was not built). The harness prints it on the test's
/// line and counts the test as skipped, not passed.
pub fn skip(reason: impl Into<String>) -> ! {
    // `resume_unwind` does not run the panic hook: no panic message.
    std::panic::resume_unwind(Box::new(SkipTest(reason.into())))
}

/// The backend's part of a trial's name: `cpu`, `gpu` (device 0), `gpu1`, ...
fn prefix(target: Target) -> String {
    match target {
        Target::Cpu => "cpu".to_owned(),
        Target::Gpu(None | Some(0)) => "gpu".to_owned(),
        Target::Gpu(Some(n)) => format!("gpu{n}"),
    }
}

fn trials(cases: &[&'static TestCase], gpus: &Result<usize, String>) -> Vec<Trial> {
    let gpu_targets: Vec<Target> = match gpus {
        Ok(n) => (0..*n).map(|o| Target::Gpu(Some(o))).collect(),
        Err(_) => vec![Target::Gpu(None)],
    };
    let mut out = Vec::new();
    for &case in cases {
        let mut targets = Vec::new();
        if case.cpu {
            targets.push(Target::Cpu);
        }
        if case.gpu {
            targets.extend(&gpu_targets);
        }
        for target in targets {
            let name = format!("{}::{}", prefix(target), case.path());
            out.push(Trial { name, case, target });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Opens the trial's context: its backend, the sanitizer as the test asks
/// (`VIGIL_SANITIZE` overrides), the other `VIGIL_*` settings from the
/// environment (a launch timeout, the sanitizer's options).
fn context(case: &TestCase, target: Target) -> Result<Context, Error> {
    let builder = Context::builder().sanitize(case.sanitize).env_vars();
    match target {
        Target::Cpu => builder.cpu().build(),
        Target::Gpu(Some(ordinal)) => builder.gpu(ordinal).build(),
        Target::Gpu(None) => Err(Error::NoDevice {
            reason: "this machine has no usable CUDA GPU".to_owned(),
        }),
    }
}

/// Runs one trial: the body, then a synchronize that collects the races the
/// sanitizer found (each one fails the test, formatted).
fn run_trial(trial: &Trial, machine: &Machine) -> Verdict {
    if let (Target::Gpu(None), Err(reason)) = (trial.target, &machine.gpus) {
        return match machine.require_gpu {
            true => Verdict::Failed(format!(
                "{REQUIRE_GPU_ENV}=1 but no CUDA GPU is usable: {reason}"
            )),
            false => Verdict::Skipped(None),
        };
    }
    let ctx = match context(trial.case, trial.target) {
        Ok(ctx) => ctx,
        Err(e) => return Verdict::Failed(format!("could not open the context: {e}")),
    };
    let body = trial.case.body;
    let outcome: Outcome = match catch_unwind(AssertUnwindSafe(|| body(&ctx))) {
        Ok(outcome) => outcome,
        Err(payload) => match payload.downcast::<SkipTest>() {
            Ok(skip) => return Verdict::Skipped(Some(skip.0)),
            Err(payload) => Err(panic_message(payload.as_ref())),
        },
    };
    let outcome = outcome.and_then(|()| match ctx.synchronize() {
        Ok(()) => Ok(()),
        Err(Error::Races(reports)) => Err(format!("the sanitizer reported races:\n{reports}")),
        Err(e) => Err(format!("synchronize after the test failed: {e}")),
    });
    match outcome {
        Ok(()) => Verdict::Passed,
        Err(message) => Verdict::Failed(format!(
            "{message}\n(test `{}` at {}:{}, on {})",
            trial.case.name,
            trial.case.file,
            trial.case.line,
            ctx.device()
        )),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    format!("panicked: {text}")
}

/// Counts and the failures' messages, filled as trials finish.
struct Tally<'w> {
    passed: usize,
    failed: Vec<(String, String)>,
    skipped: usize,
    out: &'w mut (dyn Write + Send),
}

/// What the machine offers a run.
pub(crate) struct Machine {
    /// The number of GPUs, or why there are none.
    pub(crate) gpus: Result<usize, String>,
    /// `VIGIL_REQUIRE_GPU=1`: a missing GPU fails GPU trials.
    pub(crate) require_gpu: bool,
}

/// Runs every registered test on every backend with the process's command
/// line and returns the exit code (0: no failure; 101, as libtest: some).
pub fn run() -> i32 {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return 101;
        }
    };
    let machine = Machine {
        gpus: available_gpus(),
        require_gpu: gpu_required(),
    };
    run_with(&args, &TestCase::all(), &machine, &mut std::io::stdout())
}

/// Runs `cases` as [`run`] does, on `machine`, writing to `out`.
pub(crate) fn run_with(
    args: &Args,
    cases: &[&'static TestCase],
    machine: &Machine,
    out: &mut (dyn Write + Send),
) -> i32 {
    let gpus = &machine.gpus;
    let all = trials(cases, gpus);
    let total = all.len();
    let selected: Vec<Trial> = all
        .into_iter()
        .filter(|t| args.selects(&t.name) && !args.ignored_only)
        .collect();
    let filtered_out = total - selected.len();
    if args.list {
        for t in &selected {
            let _ = writeln!(out, "{}: test", t.name);
        }
        return 0;
    }
    let to_skip = selected
        .iter()
        .filter(|t| t.target == Target::Gpu(None))
        .count();
    let plural = if selected.len() == 1 { "" } else { "s" };
    let _ = writeln!(out, "\nrunning {} test{plural}", selected.len());
    if let (Err(reason), true) = (gpus, to_skip > 0) {
        let what = match machine.require_gpu {
            true => "fail",
            false => "are skipped",
        };
        let _ = writeln!(
            out,
            "vigil: no CUDA GPU ({reason}): {to_skip} GPU test(s) {what}; \
             {REQUIRE_GPU_ENV}=1 makes a missing GPU a failure"
        );
    }
    let start = Instant::now();
    let tally = Mutex::new(Tally {
        passed: 0,
        failed: Vec::new(),
        skipped: 0,
        out,
    });
    let next = AtomicUsize::new(0);
    // GPU trials of one device take turns (CPU trials run beside them):
    // the GPU sanitizer's shadow record pool and side table are one per
    // device, and sanitized tests running on one GPU at once exhausted
    // the pool and lost earlier accesses from reports
    // (docs/src/design/address-space.md, "What a device's contexts share").
    let turns: Vec<Mutex<()>> = (0..*gpus.as_ref().unwrap_or(&0))
        .map(|_| Mutex::new(()))
        .collect();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(selected.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(trial) = selected.get(i) else { break };
                let _turn = match trial.target {
                    Target::Gpu(Some(ordinal)) => turns
                        .get(ordinal)
                        .map(|t| t.lock().unwrap_or_else(|e| e.into_inner())),
                    _ => None,
                };
                let verdict = run_trial(trial, machine);
                let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                let t = &mut *t;
                let (word, dot) = match &verdict {
                    Verdict::Passed => ("ok".to_owned(), '.'),
                    Verdict::Failed(_) => ("FAILED".to_owned(), 'F'),
                    Verdict::Skipped(None) => ("skipped".to_owned(), 's'),
                    Verdict::Skipped(Some(why)) => (format!("skipped ({why})"), 's'),
                };
                let _ = match args.terse {
                    true => write!(t.out, "{dot}"),
                    false => writeln!(t.out, "test {} ... {word}", trial.name),
                };
                let _ = t.out.flush();
                match verdict {
                    Verdict::Passed => t.passed += 1,
                    Verdict::Failed(m) => t.failed.push((trial.name.clone(), m)),
                    Verdict::Skipped(_) => t.skipped += 1,
                }
            });
        }
    });
    let t = tally.into_inner().unwrap_or_else(|e| e.into_inner());
    let out = t.out;
    if args.terse {
        let _ = writeln!(out);
    }
    if !t.failed.is_empty() {
        let _ = writeln!(out, "\nfailures:\n");
        for (name, message) in &t.failed {
            let _ = writeln!(out, "---- {name} ----\n{message}\n");
        }
        let _ = writeln!(out, "failures:");
        for (name, _) in &t.failed {
            let _ = writeln!(out, "    {name}");
        }
    }
    let status = if t.failed.is_empty() { "ok" } else { "FAILED" };
    let skip_reason = match (gpus, to_skip) {
        (Err(_), 1..) => " (no CUDA GPU)",
        _ => "",
    };
    let _ = writeln!(
        out,
        "\ntest result: {status}. {} passed; {} failed; {} skipped{skip_reason}; {filtered_out} \
         filtered out; finished in {:.2}s\n",
        t.passed,
        t.failed.len(),
        t.skipped,
        start.elapsed().as_secs_f64()
    );
    if t.failed.is_empty() {
        0
    } else {
        101
    }
}
