//! `bench-results.md`: the table, the performance targets, the host overheads
//! and how it was measured.

use super::{fmt_figure, rate_unit, targets, Ratios};
use crate::results::{Cell, Limit, SuiteResults};
use crate::timing::Plan;
use crate::tools::TOOL_REPEATS;
use std::fmt::Write;

/// Long cell texts become numbered footnotes under the table.
#[derive(Default)]
struct Footnotes(Vec<String>);

impl Footnotes {
    fn cite(&mut self, text: &str) -> String {
        let n = match self.0.iter().position(|t| t == text) {
            Some(i) => i + 1,
            None => {
                self.0.push(text.to_owned());
                self.0.len()
            }
        };
        format!("[{n}]")
    }

    /// A cell: each repeat's median (ms), or a short word and a footnote.
    fn cell(&mut self, c: &Cell, wall: bool) -> String {
        match c {
            Cell::Timed(ts) => ts
                .iter()
                .map(|t| fmt_ms(if wall { t.wall_ms } else { t.median_ms }))
                .collect::<Vec<_>>()
                .join(" / "),
            Cell::Unavailable(why) => format!("n/a {}", self.cite(why)),
            Cell::Failed(why) => format!("failed {}", self.cite(why)),
            Cell::Killed { at_least_ms, by } => {
                let limit = match by {
                    Limit::Case(d) => format!(
                        "the child was killed at the {} s per-case limit (counted from the case's first launch); a kernel cannot be stopped otherwise",
                        d.as_secs_f64()
                    ),
                    Limit::Budget => "the child was killed when its phase's share of --budget ran out".to_owned(),
                };
                match at_least_ms {
                    Some(ms) => format!("> {} (killed) {}", fmt_bound(*ms), self.cite(&limit)),
                    None => format!("killed before its first launch {}", self.cite(&limit)),
                }
            }
            Cell::Skipped(why) => format!("skipped: {why}"),
            Cell::Pending => "not run yet".to_owned(),
        }
    }
}

/// A killed cell's bound: seconds when long, like the brief's `> 20 s`.
fn fmt_bound(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1e3)
    } else {
        format!("{} ms", fmt_ms(ms))
    }
}

fn fmt_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.4}")
    }
}

fn fmt_opt(v: Option<f64>, suffix: &str) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}{suffix}"))
}

/// Columns of the table.
const COLUMNS: usize = 16;

/// The whole run as Markdown.
pub fn to_markdown(results: &SuiteResults) -> String {
    let mut s = String::new();
    let d = &results.device;
    let bw = d.copy_gbps;
    let mut notes = Footnotes::default();
    let _ = writeln!(
        s,
        "### Vigil benchmark: {} ({} SMs), {} UTC\n",
        d.name, d.sm_count, results.date
    );
    let _ = writeln!(
        s,
        "CUDA driver {}; device-to-device copy {bw:.0} GB/s (read + write, measured in this run); input seed {}.\n",
        d.driver, results.seed
    );
    s.push_str("| kernel | class | size | Vigil ms | nvcc ms | Vigil/nvcc | Vigil rate (of copy bw) | nvcc rate | sanitized ms | sanitized/plain | all checked ms | all checked/plain | memcheck ms | racecheck ms | sanitized/memcheck | results |\n");
    s.push_str("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for r in &results.cases {
        let x = Ratios::of(r, bw);
        let unit = rate_unit(r.work);
        let of_copy = x
            .vigil_of_copy
            .map_or(String::new(), |f| format!(" ({:.0}%)", 100.0 * f));
        let checks = match (&r.checks.vigil, &r.checks.twin, r.checks.vigil_vs_twin) {
            (Some(Ok(_)), Some(Ok(_)), Some(d)) => format!("ok; Vigil vs nvcc {d:.1e}"),
            (Some(Ok(_)), None, _) => "Vigil ok".to_owned(),
            (Some(Err(e)), _, _) | (_, Some(Err(e)), _) => format!("MISMATCH {}", notes.cite(e)),
            _ => "-".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {}{of_copy} | {} | {} | {} | {} | {} | {} | {} | {} | {checks} |",
            r.name,
            r.class.label(),
            r.size,
            notes.cell(&r.vigil, false),
            notes.cell(&r.twin, false),
            fmt_figure(x.vigil_over_nvcc, 2, ""),
            fmt_opt(x.vigil_rate, &format!(" {unit}")),
            fmt_opt(x.twin_rate, &format!(" {unit}")),
            notes.cell(&r.sanitized, false),
            fmt_figure(x.sanitized_over_plain, 2, "x"),
            notes.cell(&r.sanitized_all_checked, false),
            fmt_figure(x.all_checked_over_plain, 2, "x"),
            notes.cell(&r.memcheck, true),
            notes.cell(&r.racecheck, true),
            fmt_figure(x.sanitized_over_memcheck, 2, ""),
        );
    }
    for name in &results.not_run_yet {
        let _ = writeln!(s, "| {name} |{}", " not run yet |".repeat(COLUMNS - 1));
    }
    s.push('\n');
    for (i, n) in notes.0.iter().enumerate() {
        let _ = writeln!(s, "[{}] {}  ", i + 1, n.replace('\n', " "));
    }
    s.push_str("\n**Targets**\n\n| target | status | figures |\n| --- | --- | --- |\n");
    for t in targets(results) {
        let _ = writeln!(s, "| {} | {} | {} |", t.name, t.status.label(), t.detail);
    }
    s.push_str("\n**Host overheads**\n\n");
    match &results.host.launch {
        Some(Ok(l)) => {
            let _ = writeln!(
                s,
                "- launch (host time per call): typed `Stream::launch` {:.2} us, raw `cuLaunchKernel` {:.2} us, difference {:.2} us",
                l.typed_us,
                l.raw_us,
                l.typed_us - l.raw_us
            );
        }
        Some(Err(e)) => {
            let _ = writeln!(s, "- launch: {e}");
        }
        None => {}
    }
    match &results.host.sanitized_launch_us {
        Some(Ok(us)) => {
            let _ = writeln!(s, "- sanitized typed launch: {us:.2} us");
        }
        Some(Err(e)) => {
            let _ = writeln!(s, "- sanitized typed launch: {e}");
        }
        None => {}
    }
    match &results.host.alloc {
        Some(Ok(a)) => {
            let _ = writeln!(
                s,
                "- allocate + free {} MiB: `cuMemAlloc` {:.2} us, `cuMemAllocAsync` {:.2} us, shadow allocator uncached {:.2} us, cached (sanitized contexts) {:.2} us ({:.2}x `cuMemAllocAsync`)",
                a.size >> 20,
                a.plain_us,
                a.stream_ordered_us,
                a.vmm_us,
                a.cached_us,
                a.cached_us / a.stream_ordered_us
            );
        }
        Some(Err(e)) => {
            let _ = writeln!(s, "- allocation: {e}");
        }
        None => {}
    }
    let g = results.plan;
    let z = results.sanitized_plan;
    let t = Plan::TOOL;
    let _ = write!(
        s,
        "\n**How it was measured.** Every kernel is checked against a host reference (and Vigil's output against the twin's) on fresh random inputs before it is timed. \
         Device columns: CUDA events around batches of up to {} back-to-back launches after {} warm-ups, the median of {} batches, per launch; each cell shows {} repeat(s) as `r1 / r2`; \
         the sanitized column the same in a child process per case (a fresh sanitizer each) with up to {} launches per batch after {} warm-ups, {} batches, about {} s per repeat, and a first launch slower than that launched once more and, if still slower, timed once by the host clock. \
         compute-sanitizer columns: the twin in a child process under the tool, host wall time per launch (synchronised), {} warm-up and up to {} launches per repeat, {TOOL_REPEATS} repeats, same sizes. \
         `memcheck` sees out-of-bounds and misaligned accesses (global, shared, local) and leaks, no races; `racecheck` sees shared-memory hazards within a block only; Vigil's sanitizer sees races on global memory between threads, blocks, kernels, streams and the host, and on shared memory within a block. \
         Rates count the fewest bytes a run must move (each input read once, each output written once), or 2mnk flops, or atomics.\n",
        g.per_batch,
        g.warmup,
        g.batches,
        results.repeats,
        z.per_batch,
        z.warmup,
        z.batches,
        z.budget.as_secs_f64(),
        t.warmup,
        t.per_batch,
    );
    let _ = write!(
        s,
        "\nVigil sanitized runs in a child process, as do the compute-sanitizer columns: each case within a limit counted from its first launch, each column within its share of the run's budget. \
         `> T (killed)`: the child was killed while a launch had run for T (host wall time), so one run takes longer than T, and the ratios built on it are bounds (`> N x`). \
         `skipped: budget`: no time was left in the budget to start it.\n"
    );
    if !results.phases.is_empty() {
        let phases: Vec<String> = results
            .phases
            .iter()
            .map(|p| {
                let share = p
                    .share_s
                    .map_or(String::new(), |b| format!(" (of a {b:.0} s share)"));
                format!("{} {:.1} s{share}", p.name, p.seconds)
            })
            .collect();
        let _ = writeln!(s, "\nPhases (wall time): {}.", phases.join(", "));
    }
    if !results.notes.is_empty() {
        s.push_str("\nNotes:\n");
        for n in &results.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}
