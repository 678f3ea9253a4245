//! `vigil-bench`: the benchmark suite's command line.
//!
//! ```text
//! vigil-bench --cpu-smoke                 every Vigil kernel once on the CPU backend, checked
//! vigil-bench [--twins twins.cubin] [--out DIR] [--seed N] [--repeats N] [--only a,b]
//!             [--no-tools] [--compute-sanitizer PATH] [--budget SECONDS]
//!             [--case-limit SECONDS]
//!                                         the GPU run: writes DIR/bench-results.{md,json}
//!                                         after every case, the rest marked "not run yet"
//! vigil-bench --cpu [--out DIR] ...        the same run on the CPU backend, small sizes (a try-out)
//! vigil-bench --tool-child --twins F ...  (internal) the twins under compute-sanitizer
//! vigil-bench --sanitized-child [--cpu] ... (internal) Vigil sanitized, time-boxed by the parent
//! ```
//!
//! `--budget` (default 390 s) is the whole run's wall time: the plain
//! columns take what they need, and the sanitized column and the two
//! compute-sanitizer columns share the rest; cases that no longer fit read
//! "skipped: budget". `--case-limit` (default 20 s) ends one case's child
//! that long after its first launch began; the cell then reads
//! `> T s (killed)`, T being how long that launch had run.
//!
//! `scripts/prepare-bench.sh` builds it and gathers the CUDA sources;
//! `bash bench-run/run.sh` on the GPU machine compiles the twins with nvcc
//! and runs it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use vigil_bench::results::SuiteResults;
use vigil_bench::suite::{self, Device, Options, DEFAULT_BUDGET_S, DEFAULT_CASE_LIMIT_S};
use vigil_bench::timing::Plan;
use vigil_bench::{report, sanitized, smoke, tools, BenchError, Result};

/// The parsed command line.
struct Args {
    cpu_smoke: bool,
    cpu: bool,
    tool_child: bool,
    sanitized_child: bool,
    no_tools: bool,
    twins: Option<PathBuf>,
    out: PathBuf,
    seed: u64,
    repeats: usize,
    only: Vec<String>,
    compute_sanitizer: PathBuf,
    budget: u64,
    case_limit: u64,
}

fn parse() -> Result<Args> {
    let mut args = Args {
        cpu_smoke: false,
        cpu: false,
        tool_child: false,
        sanitized_child: false,
        no_tools: false,
        twins: None,
        out: PathBuf::from("."),
        seed: vigil_tests::example_seed(),
        repeats: 2,
        only: Vec::new(),
        compute_sanitizer: PathBuf::from("compute-sanitizer"),
        budget: DEFAULT_BUDGET_S,
        case_limit: DEFAULT_CASE_LIMIT_S,
    };
    let mut it = std::env::args().skip(1);
    let value = |it: &mut dyn Iterator<Item = String>, flag: &str| {
        it.next()
            .ok_or_else(|| BenchError::Usage(format!("{flag} needs a value")))
    };
    let number = |v: String, flag: &str| {
        v.parse::<u64>()
            .map_err(|_| BenchError::Usage(format!("{flag} takes a number, got {v:?}")))
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--cpu-smoke" => args.cpu_smoke = true,
            "--cpu" => args.cpu = true,
            "--tool-child" => args.tool_child = true,
            "--sanitized-child" => args.sanitized_child = true,
            "--no-tools" => args.no_tools = true,
            "--twins" => args.twins = Some(value(&mut it, &flag)?.into()),
            "--out" => args.out = value(&mut it, &flag)?.into(),
            "--seed" => args.seed = number(value(&mut it, &flag)?, &flag)?,
            "--repeats" => args.repeats = number(value(&mut it, &flag)?, &flag)? as usize,
            "--only" => {
                args.only = value(&mut it, &flag)?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            "--compute-sanitizer" => args.compute_sanitizer = value(&mut it, &flag)?.into(),
            "--budget" => args.budget = number(value(&mut it, &flag)?, &flag)?,
            "--case-limit" => args.case_limit = number(value(&mut it, &flag)?, &flag)?,
            "-h" | "--help" => {
                return Err(BenchError::Usage(
                    "usage: vigil-bench [--cpu-smoke | --cpu] [--twins FILE] [--out DIR] [--seed N] [--repeats N] [--only a,b] [--no-tools] [--compute-sanitizer PATH] [--budget S] [--case-limit S]".to_owned(),
                ))
            }
            other => return Err(BenchError::Usage(format!("unknown argument {other:?} (try --help)"))),
        }
    }
    if let Some(unknown) = args
        .only
        .iter()
        .find(|o| !suite::selected(&[]).contains(&o.as_str()))
    {
        return Err(BenchError::Usage(format!(
            "--only: no case named {unknown:?}; the cases are {}",
            suite::selected(&[]).join(", ")
        )));
    }
    Ok(args)
}

fn cpu_smoke(seed: u64) -> Result<bool> {
    println!("vigil-bench --cpu-smoke: seed {seed}");
    let outcomes = smoke::run(seed)?;
    let mut ok = true;
    for o in &outcomes {
        let mode = if o.sanitized { "sanitized" } else { "plain" };
        match &o.result {
            Ok(err) => println!(
                "  ok    {:<13} {mode:<9} max scaled error {err:.2e}",
                o.case
            ),
            Err(e) => {
                ok = false;
                println!("  FAIL  {:<13} {mode:<9} {e}", o.case);
            }
        }
    }
    Ok(ok)
}

/// Writes the Markdown and the JSON of `results` to `out`.
fn write_report(out: &std::path::Path, results: &SuiteResults) -> Result<String> {
    let md = report::to_markdown(results);
    let json = report::to_json(results).to_string();
    std::fs::create_dir_all(out).map_err(|source| BenchError::Io {
        what: format!("creating {}", out.display()),
        source,
    })?;
    for (name, text) in [("bench-results.md", &md), ("bench-results.json", &json)] {
        // Written aside and renamed: a run killed mid-write keeps the
        // previous complete file.
        let path = out.join(name);
        let partial = out.join(format!(".{name}.partial"));
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, &path))
            .map_err(|source| BenchError::Io {
                what: format!("writing {}", path.display()),
                source,
            })?;
    }
    Ok(md)
}

fn gpu_run(args: &Args) -> Result<()> {
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        what: "finding this program".to_owned(),
        source,
    })?;
    let opts = Options {
        device: if args.cpu { Device::Cpu } else { Device::Gpu },
        plan: if args.cpu { Plan::QUICK } else { Plan::GPU },
        twins: args.twins.clone(),
        seed: args.seed,
        repeats: args.repeats,
        only: args.only.clone(),
        exe,
        compute_sanitizer: (!args.no_tools).then(|| args.compute_sanitizer.clone()),
        budget: Duration::from_secs(args.budget),
        case_limit: Duration::from_secs(args.case_limit),
    };
    // Rewritten after every case: a run ended from outside leaves a table.
    let mut write_error = None;
    let results = suite::run(&opts, &mut |so_far| {
        if let Err(e) = write_report(&args.out, so_far) {
            write_error.get_or_insert(e);
        }
    })?;
    if let Some(e) = write_error {
        return Err(e);
    }
    let md = write_report(&args.out, &results)?;
    println!("{md}");
    println!(
        "wrote {} and {}",
        args.out.join("bench-results.md").display(),
        args.out.join("bench-results.json").display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let outcome = parse().and_then(|args| {
        if args.cpu_smoke {
            cpu_smoke(args.seed)
        } else if args.tool_child {
            let twins = args
                .twins
                .clone()
                .ok_or_else(|| BenchError::Usage("--tool-child needs --twins".to_owned()))?;
            tools::child_main(&twins, args.seed, &args.only).map(|()| true)
        } else if args.sanitized_child {
            let device = if args.cpu { Device::Cpu } else { Device::Gpu };
            sanitized::child_main(device, args.seed, args.repeats, &args.only).map(|()| true)
        } else {
            gpu_run(&args).map(|()| true)
        }
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("vigil-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
