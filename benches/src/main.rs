//! `vigil-bench`: the benchmark suite's command line.
//!
//! ```text
//! vigil-bench --cpu-smoke                 every Vigil kernel once on the CPU backend, checked
//! vigil-bench [--twins twins.cubin] [--out DIR] [--seed N] [--repeats N] [--only a,b]
//!             [--no-tools] [--compute-sanitizer PATH] [--tool-timeout SECONDS]
//!             [--tool-case-limit SECONDS]
//!                                         the GPU run: writes DIR/bench-results.{md,json}
//! vigil-bench --cpu [--out DIR]            the same run on the CPU backend, small sizes (a try-out)
//! vigil-bench --tool-child --twins F ...  (internal) the twins under compute-sanitizer
//! ```
//!
//! `scripts/prepare-bench.sh` builds it and gathers the CUDA sources;
//! `bash bench-run/run.sh` on the GPU machine compiles the twins with nvcc
//! and runs it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use vigil_bench::suite::{self, Device, Options};
use vigil_bench::timing::Plan;
use vigil_bench::tools::{self, ToolOptions};
use vigil_bench::{report, smoke, BenchError, Result};

/// The parsed command line.
struct Args {
    cpu_smoke: bool,
    cpu: bool,
    tool_child: bool,
    no_tools: bool,
    twins: Option<PathBuf>,
    out: PathBuf,
    seed: u64,
    repeats: usize,
    only: Vec<String>,
    compute_sanitizer: PathBuf,
    tool_timeout: u64,
    tool_case_limit: u64,
}

fn parse() -> Result<Args> {
    let mut args = Args {
        cpu_smoke: false,
        cpu: false,
        tool_child: false,
        no_tools: false,
        twins: None,
        out: PathBuf::from("."),
        seed: vigil_tests::example_seed(),
        repeats: 2,
        only: Vec::new(),
        compute_sanitizer: PathBuf::from("compute-sanitizer"),
        tool_timeout: 90,
        tool_case_limit: 25,
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
            "--tool-timeout" => args.tool_timeout = number(value(&mut it, &flag)?, &flag)?,
            "--tool-case-limit" => args.tool_case_limit = number(value(&mut it, &flag)?, &flag)?,
            "-h" | "--help" => {
                return Err(BenchError::Usage(
                    "usage: vigil-bench [--cpu-smoke | --cpu] [--twins FILE] [--out DIR] [--seed N] [--repeats N] [--only a,b] [--no-tools] [--compute-sanitizer PATH] [--tool-timeout S] [--tool-case-limit S]".to_owned(),
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

fn gpu_run(args: &Args) -> Result<()> {
    let tools = match (&args.twins, args.no_tools) {
        (Some(twins), false) => Some(ToolOptions {
            compute_sanitizer: args.compute_sanitizer.clone(),
            exe: std::env::current_exe().map_err(|source| BenchError::Io {
                what: "finding this program".to_owned(),
                source,
            })?,
            twins: twins.clone(),
            seed: args.seed,
            timeout: Duration::from_secs(args.tool_timeout),
            case_limit: Duration::from_secs(args.tool_case_limit),
        }),
        _ => None,
    };
    let results = suite::run(&Options {
        device: if args.cpu { Device::Cpu } else { Device::Gpu },
        plan: if args.cpu { Plan::QUICK } else { Plan::GPU },
        twins: args.twins.clone(),
        seed: args.seed,
        repeats: args.repeats,
        only: args.only.clone(),
        tools,
    })?;
    let md = report::to_markdown(&results);
    let json = report::to_json(&results).to_string();
    std::fs::create_dir_all(&args.out).map_err(|source| BenchError::Io {
        what: format!("creating {}", args.out.display()),
        source,
    })?;
    for (name, text) in [("bench-results.md", &md), ("bench-results.json", &json)] {
        let path = args.out.join(name);
        std::fs::write(&path, text).map_err(|source| BenchError::Io {
            what: format!("writing {}", path.display()),
            source,
        })?;
    }
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
