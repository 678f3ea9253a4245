//! The ring all-reduce's bus bandwidth, plain and sanitized in one run:
//! Vigil's multi-block ring all-reduce over every GPU of the
//! machine (or `--gpus N`), one process, a `SymmetricGroup` of plain
//! contexts and one of sanitized contexts on the same GPUs, each checked
//! against the sums computed on the host, then timed with device events
//! (see `vigil_bench::all_reduce`). Prints the two bus bandwidths (NCCL's
//! definition) side by side, and writes a Markdown table line and the
//! JSON to `<out>.md` and `<out>.json`.
//!
//! ```text
//! cargo run --release -p vigil-bench --example all_reduce_bench -- [--gpus N] [--mib M] [--out PREFIX]
//! cargo run --release -p vigil-bench --example all_reduce_bench -- --cpu   # simulated devices, smoke only
//! cargo run --release -p vigil-bench --example all_reduce_bench -- --phases   # where one launch's time goes
//! ```
//!
//! With fewer than two GPUs it says that it needs two and measures
//! nothing (exit 0; with `VIGIL_REQUIRE_GPU=1`, exit 1): one device moves
//! no bytes over a link, so there is no bus bandwidth to report.
//! `--cpu` runs two simulated devices of the CPU backend with a tiny
//! buffer: it checks the sums, and its times say nothing about GPUs.
//!
//! One process drives every GPU. Ranks in separate processes
//! (`ProcessGroup`) run the same kernel through `ProcessSymmetric::peers`,
//! but this program would then need a launcher that starts one process
//! per GPU and gathers their timings; it does not have one.

use clap::Parser;
use std::time::Duration;
use vigil::{Context, SymmetricGroup};
use vigil_bench::all_reduce::{
    markdown_line, measure, AllReducePlan, AllReduceResult, MARKDOWN_HEADER,
};
use vigil_bench::ring_phases::{measure_phases, StepTimes};

/// The command line (`--help`).
#[derive(Debug, Parser)]
#[command(
    name = "all_reduce_bench",
    about = "The ring all-reduce's bus bandwidth, plain and sanitized in one run",
    args_override_self = true
)]
struct Options {
    /// GPUs to use (default: every GPU of the machine).
    #[arg(long, value_name = "N")]
    gpus: Option<usize>,
    /// MiB per rank (default: the plan's).
    #[arg(long, value_name = "M")]
    mib: Option<usize>,
    /// Writes `<PREFIX>.md` and `<PREFIX>.json`.
    #[arg(long, value_name = "PREFIX", default_value = "all-reduce-results")]
    out: String,
    /// Two simulated devices of the CPU backend, a tiny buffer (a smoke run).
    #[arg(long)]
    cpu: bool,
    /// Instead of the bandwidths: one launch plain and one sanitized, the
    /// time of each step's data loop and group barrier.
    #[arg(long)]
    phases: bool,
}

fn main() -> Result<(), vigil::ErrorReport> {
    let o = Options::parse();
    let Some((plan, label, group)) = setup(&o)? else {
        return Ok(());
    };
    if o.phases {
        let plain = measure_phases(&group(false)?, &plan)?;
        println!("{}", phases_table("plain", &plain));
        let sanitized = measure_phases(&group(true)?, &plan)?;
        println!("{}", phases_table("sanitized", &sanitized));
        return Ok(());
    }
    let plain = measure(&group(false)?, &plan)?;
    // Said before the sanitized run, which can take far longer.
    println!("{}", describe(&plain));
    let sanitized = measure(&group(true)?, &plan)?;
    report(&o.out, &label, &plain, &sanitized)?;
    Ok(())
}

/// Makes a group, plain or sanitized.
type GroupOf = Box<dyn Fn(bool) -> vigil::Result<SymmetricGroup>>;

/// The plan, the device's name and how to make a group, plain or
/// sanitized; `None` (said why) when the machine has too few GPUs.
fn setup(o: &Options) -> vigil::Result<Option<(AllReducePlan, String, GroupOf)>> {
    if o.cpu {
        let plan = AllReducePlan::smoke(o.mib.unwrap_or(0).max(1) << 10);
        let group: GroupOf = Box::new(|sanitize: bool| {
            let builder = Context::builder()
                .sanitize(sanitize)
                .cpu_workers(1)
                .launch_timeout(Some(Duration::from_secs(120)));
            SymmetricGroup::cpu(2, builder)
        });
        let label = "simulated device (CPU backend)".to_owned();
        return Ok(Some((plan, label, group)));
    }
    let found = vigil::device_count().unwrap_or(0);
    let world = o.gpus.unwrap_or(found);
    if found < 2 || world < 2 || world > found {
        println!(
            "the ring all-reduce's bus bandwidth needs two GPUs or more in one process: \
             {found} found, {world} asked for; nothing measured"
        );
        if std::env::var("VIGIL_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            std::process::exit(1);
        }
        return Ok(None);
    }
    let first = Context::new(0)?;
    let mut plan = AllReducePlan::gpu(first.sm_count());
    if let Some(mib) = o.mib {
        plan.elements = (mib << 20) / 4;
    }
    println!(
        "{world} x {} ({} SMs): ring all-reduce of {} MiB per rank, {} blocks x {} threads",
        first.name(),
        first.sm_count(),
        (plan.elements * 4) >> 20,
        plan.blocks,
        plan.threads
    );
    let group: GroupOf = Box::new(move |sanitize: bool| {
        let contexts = (0..world)
            .map(|g| {
                // A rank whose peer never launched waits at the barrier
                // for ever: bound every wait instead.
                Context::builder()
                    .gpu(g)
                    .sanitize(sanitize)
                    .launch_timeout(Some(Duration::from_secs(300)))
                    .build()
            })
            .collect::<vigil::Result<Vec<_>>>()?;
        SymmetricGroup::new(contexts)
    });
    Ok(Some((plan, first.name().to_owned(), group)))
}

/// A Markdown table of one launch's steps (`--phases`).
fn phases_table(what: &str, steps: &[StepTimes]) -> String {
    let mut t = format!(
        "{what}: one launch, step by step (median / slowest over every block of every rank)\n\
         | step | data loop ms | group barrier ms |\n|---|---|---|"
    );
    for (i, s) in steps.iter().enumerate() {
        t += &format!(
            "\n| {i} | {:.3} / {:.3} | {:.3} / {:.3} |",
            s.loop_median_ms, s.loop_max_ms, s.barrier_median_ms, s.barrier_max_ms
        );
    }
    t
}

/// One measurement in a line.
fn describe(r: &AllReduceResult) -> String {
    format!(
        "{:>9}: {:.3} ms per all-reduce (fastest batch {:.3} ms, {} launches), \
         bus bandwidth {:.2} GB/s, algorithm bandwidth {:.2} GB/s",
        if r.sanitized { "sanitized" } else { "plain" },
        r.median_ms,
        r.min_ms,
        r.launches,
        r.bus_gbps(),
        r.algo_gbps()
    )
}

/// Prints the sanitized figure and the table line of both, and writes
/// `<out>.md` and `<out>.json`.
fn report(
    out: &str,
    label: &str,
    plain: &AllReduceResult,
    sanitized: &AllReduceResult,
) -> Result<(), Box<dyn std::error::Error>> {
    // The plain figure was said before the sanitized run.
    println!("{}", describe(sanitized));
    let line = markdown_line(label, plain, sanitized);
    println!("{MARKDOWN_HEADER}\n{line}");
    let json = serde_json::json!({
        "device": label,
        "plain": plain.to_json(),
        "sanitized": sanitized.to_json(),
        "slowdown": sanitized.median_ms / plain.median_ms,
    });
    println!("{json}");
    std::fs::write(format!("{out}.md"), format!("{MARKDOWN_HEADER}\n{line}\n"))?;
    std::fs::write(format!("{out}.json"), format!("{json}\n"))?;
    println!("wrote {out}.md and {out}.json");
    Ok(())
}
