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
//! vigil-bench --help                      the options, with what each does
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

use clap::{ArgAction, Parser};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use vigil_bench::results::SuiteResults;
use vigil_bench::suite::{self, Device, Options, DEFAULT_BUDGET_S, DEFAULT_CASE_LIMIT_S};
use vigil_bench::timing::Plan;
use vigil_bench::{report, sanitized, smoke, tools, BenchError, Result};

/// The command line (`vigil-bench --help`). Repeating an option keeps
/// the last value, so that `scripts/bench-run.sh` can put its defaults
/// before the caller's arguments.
#[derive(Debug, Parser)]
#[command(
    name = "vigil-bench",
    about = "Vigil's benchmark suite: Vigil against nvcc twins and compute-sanitizer",
    long_about = "Vigil's benchmark suite. Without a mode flag: the GPU run, timing Vigil, the \
                  nvcc twins, Vigil sanitized and the twins under compute-sanitizer; it writes \
                  DIR/bench-results.{md,json} after every case, the cases not reached yet marked \
                  \"not run yet\".",
    args_override_self = true
)]
struct Args {
    /// Run every Vigil kernel once on the CPU backend, checked, and exit.
    #[arg(long)]
    cpu_smoke: bool,
    /// The run on the CPU backend with small sizes (a try-out).
    #[arg(long)]
    cpu: bool,
    /// (internal) The twins under compute-sanitizer.
    #[arg(long, hide = true)]
    tool_child: bool,
    /// (internal) Vigil sanitized, time-boxed by the parent.
    #[arg(long, hide = true)]
    sanitized_child: bool,
    /// Leave out the compute-sanitizer columns.
    #[arg(long)]
    no_tools: bool,
    /// The nvcc twins' cubin (its PTX beside it checks their parameters).
    #[arg(long, value_name = "FILE")]
    twins: Option<PathBuf>,
    /// Where the results go.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Seed of the inputs (default: `VIGIL_EXAMPLE_SEED`, else the examples' seed).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Timed repeats per series.
    #[arg(long, value_name = "N", default_value_t = 2)]
    repeats: usize,
    /// Only these cases (comma-separated).
    #[arg(long, value_name = "A,B", value_delimiter = ',', action = ArgAction::Set)]
    only: Vec<String>,
    /// The compute-sanitizer to run.
    #[arg(long, value_name = "PATH", default_value = "compute-sanitizer")]
    compute_sanitizer: PathBuf,
    /// The whole run's wall time: the plain columns take what they need,
    /// the sanitized and compute-sanitizer columns share the rest.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BUDGET_S)]
    budget: u64,
    /// How long after its first launch a sanitized or tool case's child
    /// is ended (its cell then reads `> T s (killed)`).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CASE_LIMIT_S)]
    case_limit: u64,
}

/// The command line, its case names checked.
fn parse() -> Result<Args> {
    let mut args = Args::parse();
    args.only.retain(|o| !o.is_empty());
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

impl Args {
    fn seed(&self) -> u64 {
        self.seed.unwrap_or_else(vigil_tests::example_seed)
    }
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
    let json = report::to_json(results);
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
        seed: args.seed(),
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
            cpu_smoke(args.seed())
        } else if args.tool_child {
            let twins = args
                .twins
                .clone()
                .ok_or_else(|| BenchError::Usage("--tool-child needs --twins".to_owned()))?;
            tools::child_main(&twins, args.seed(), &args.only).map(|()| true)
        } else if args.sanitized_child {
            let device = if args.cpu { Device::Cpu } else { Device::Gpu };
            sanitized::child_main(device, args.seed(), args.repeats, &args.only).map(|()| true)
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
