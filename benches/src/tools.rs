//! The nvcc twins under NVIDIA's `compute-sanitizer`: the parent runs this
//! same program as a child (`--tool-child`) under each tool, with a time
//! limit, and reads one line per case and repeat from its output. The child
//! times the twin's launches by host wall time, since that is what a tool
//! costs its user.
//!
//! What each checker sees (and what the columns compare):
//! - `memcheck`: out-of-bounds and misaligned accesses to global, shared
//!   and local memory, and leaks; no races.
//! - `racecheck`: hazards between threads of one block on shared memory
//!   only; not global memory, not between blocks or kernels.
//! - Vigil's sanitizer: races on global memory between threads, blocks,
//!   kernels, streams and the host; shared memory is not checked.

use crate::cases::{case_rng, Scale, CASES};
use crate::error::{BenchError, Result};
use crate::kernels::{Impl, Twins};
use crate::results::Cell;
use crate::timing::{measure_with, Plan, Timing};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use vigil::{Context, Stream};

/// Marks a child's result line: `TAG case repeat wall_ms launches`.
const RESULT_TAG: &str = "vigil-bench-tool-result";
/// Marks a child's line before it starts a case: `TAG case`.
const START_TAG: &str = "vigil-bench-tool-start\t";
/// Marks a child's error line: `TAG case message`.
const ERROR_TAG: &str = "vigil-bench-tool-error";
/// Timed repeats in a child.
pub const TOOL_REPEATS: usize = 2;

/// A compute-sanitizer tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `--tool memcheck`.
    Memcheck,
    /// `--tool racecheck`.
    Racecheck,
}

impl Tool {
    /// Both tools, in table order.
    pub const ALL: [Tool; 2] = [Tool::Memcheck, Tool::Racecheck];

    /// The tool's name on compute-sanitizer's command line.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
        }
    }
}

/// How to run the tools.
#[derive(Clone, Debug)]
pub struct ToolOptions {
    /// The `compute-sanitizer` executable.
    pub compute_sanitizer: PathBuf,
    /// This program (run as the child).
    pub exe: PathBuf,
    /// The twins' cubin the child loads.
    pub twins: PathBuf,
    /// Seed of the inputs.
    pub seed: u64,
    /// Wall-time limit of one tool's runs (all cases).
    pub timeout: Duration,
    /// Wall-time limit of one case under the tool.
    pub case_limit: Duration,
}

/// Runs `cases` under `tool`: one child for all of them, restarted on the
/// cases left when one case runs past [`ToolOptions::case_limit`] (that
/// case's cell then says so; a kernel cannot be interrupted, only its
/// process ended). Returns a cell per case and appends what the tool
/// reported to `notes`.
pub fn run_tool(
    opts: &ToolOptions,
    tool: Tool,
    cases: &[&str],
    notes: &mut Vec<String>,
) -> HashMap<&'static str, Cell> {
    eprintln!("vigil-bench: compute-sanitizer --tool {}", tool.name());
    let deadline = Instant::now() + opts.timeout;
    let mut remaining: Vec<&str> = cases.to_vec();
    let mut cells: HashMap<&'static str, Cell> = HashMap::new();
    while !remaining.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut cmd = Command::new(&opts.compute_sanitizer);
        cmd.args(["--tool", tool.name(), "--print-limit", "10"])
            .arg(&opts.exe)
            .args(["--tool-child", "--seed", &opts.seed.to_string(), "--twins"])
            .arg(&opts.twins)
            .args(["--only", &remaining.join(",")])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so that a timeout ends the tool and
            // the program it runs together.
            .process_group(0);
        let run = match run_child(cmd, left, opts.case_limit) {
            Ok(run) => run,
            Err(e) => {
                notes.push(format!("compute-sanitizer --tool {}: {e}", tool.name()));
                break;
            }
        };
        let (got, summary) = parse_child_output(&run.lines);
        cells.extend(got);
        let status = match (run.exit_code, &run.stopped_in) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(case)) => format!("stopped in `{case}` at the time limit"),
            (None, None) => "ended by a signal".to_owned(),
        };
        notes.push(format!(
            "compute-sanitizer --tool {} ({}): {status}; {}",
            tool.name(),
            remaining.join(", "),
            summary.unwrap_or_else(|| "no summary line".to_owned())
        ));
        remaining.retain(|c| !cells.contains_key(c));
        match run
            .stopped_in
            .and_then(|c| remaining.iter().position(|r| *r == c))
        {
            // The case that ran over is done for; go on with the others.
            Some(at) => {
                if let Some(case) = CASES.iter().map(|&(n, _)| n).find(|n| *n == remaining[at]) {
                    let limit = if Instant::now() >= deadline {
                        opts.timeout
                    } else {
                        opts.case_limit
                    };
                    cells.insert(
                        case,
                        Cell::Failed(format!("over the {} s limit", limit.as_secs_f64())),
                    );
                }
                remaining.remove(at);
            }
            None => break,
        }
    }
    CASES
        .iter()
        .map(|&(name, _)| name)
        .filter(|name| cases.contains(name))
        .map(|name| {
            let cell = cells
                .get(name)
                .cloned()
                .unwrap_or_else(|| Cell::Failed("no result before the tool run ended".to_owned()));
            (name, cell)
        })
        .collect()
}

/// What one child run left.
struct ChildRun {
    /// Its stdout lines.
    lines: Vec<String>,
    /// Its exit code; `None` when it was killed or ended by a signal.
    exit_code: Option<i32>,
    /// The case it was in when a limit killed it.
    stopped_in: Option<String>,
}

/// Runs `cmd`, collecting its stdout lines as they come, and kills its
/// process group when the whole run passes `timeout` or one case (from its
/// start line to the next) passes `case_limit`.
fn run_child(mut cmd: Command, timeout: Duration, case_limit: Duration) -> Result<ChildRun> {
    let mut child = cmd.spawn().map_err(|source| BenchError::Io {
        what: format!("starting {:?}", cmd.get_program()),
        source,
    })?;
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                // Echo the tool's own report; keep everything for parsing.
                println!("{line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        }
    });
    let start = Instant::now();
    let mut lines = Vec::new();
    let mut current: Option<(String, Instant)> = None;
    let mut stopped_in = None;
    let exit_code = loop {
        while let Ok(line) = rx.try_recv() {
            if let Some(case) = line.strip_prefix(START_TAG).map(|c| c.trim()) {
                current = Some((case.to_owned(), Instant::now()));
            }
            lines.push(line);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) => {
                let case_over = current
                    .as_ref()
                    .is_some_and(|(_, since)| since.elapsed() > case_limit);
                if !case_over && start.elapsed() < timeout {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                stopped_in = current.as_ref().map(|(c, _)| c.clone());
                // SAFETY: `kill` with a negative pid signals the process
                // group this function started (`process_group(0)` made the
                // child its leader); no memory is involved.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
            Err(_) => break None,
        }
    };
    // The pipe closes when the process group is gone; should a grandchild
    // have left the group and kept it open, give up on the reader after a
    // grace period rather than hang.
    let grace = Instant::now() + Duration::from_secs(2);
    while !reader.is_finished() && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(20));
    }
    if reader.is_finished() {
        let _ = reader.join();
    }
    lines.extend(rx.try_iter());
    Ok(ChildRun {
        lines,
        exit_code,
        stopped_in,
    })
}

/// Reads the child's result and error lines, and the tool's summary line.
pub fn parse_child_output(lines: &[String]) -> (HashMap<&'static str, Cell>, Option<String>) {
    let mut timed: HashMap<&'static str, Vec<Timing>> = HashMap::new();
    let mut failed: HashMap<&'static str, String> = HashMap::new();
    let mut summary = None;
    let known = |name: &str| CASES.iter().map(|&(n, _)| n).find(|&n| n == name);
    for line in lines {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields.as_slice() {
            [RESULT_TAG, case, _repeat, wall, launches] => {
                let (Some(case), Ok(wall_ms), Ok(launches)) =
                    (known(case), wall.parse::<f64>(), launches.parse::<usize>())
                else {
                    continue;
                };
                timed.entry(case).or_default().push(Timing {
                    median_ms: wall_ms,
                    min_ms: wall_ms,
                    max_ms: wall_ms,
                    wall_ms,
                    launches,
                });
            }
            [ERROR_TAG, case, message] => {
                if let Some(case) = known(case) {
                    failed.insert(case, (*message).to_owned());
                }
            }
            _ => {
                if line.contains("ERROR SUMMARY") || line.contains("RACECHECK SUMMARY") {
                    summary = Some(line.trim_start_matches('=').trim().to_owned());
                }
            }
        }
    }
    let mut cells: HashMap<&'static str, Cell> = timed
        .into_iter()
        .map(|(case, ts)| (case, Cell::Timed(ts)))
        .collect();
    for (case, message) in failed {
        cells.insert(case, Cell::Failed(message));
    }
    (cells, summary)
}

/// The child: loads the twins, then for every selected case times
/// [`TOOL_REPEATS`] repeats of its launches by wall time, printing one
/// line per repeat (or an error line) as it goes.
pub fn child_main(twins: &Path, seed: u64, only: &[String]) -> Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let twins = Twins::from_files(&ctx, twins)?;
    for &(name, make) in CASES.iter() {
        if !crate::suite::selected(only).contains(&name) {
            continue;
        }
        println!("{START_TAG}{name}");
        let case = make(Scale::Full, ctx.sm_count(), &mut case_rng(seed, name));
        let outcome = case.instantiate(&stream).and_then(|mut inst| {
            let mut times = Vec::with_capacity(TOOL_REPEATS);
            for _ in 0..TOOL_REPEATS {
                let t = measure_with(&stream, Plan::TOOL, false, || {
                    case.run(Impl::Twin(&twins), &stream, &mut inst)
                })?;
                times.push(t);
                // A launch slower than the budget is timed once, not repeated.
                if t.launches == 1 {
                    break;
                }
            }
            Ok(times)
        });
        match outcome {
            Ok(times) => {
                for (i, t) in times.iter().enumerate() {
                    println!(
                        "{RESULT_TAG}\t{name}\t{i}\t{:.6}\t{}",
                        t.wall_ms, t.launches
                    );
                }
            }
            Err(e) => println!(
                "{ERROR_TAG}\t{name}\t{}",
                e.to_string().replace(['\t', '\n'], " ")
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_lines_become_cells_and_the_tool_summary_is_kept() {
        let lines: Vec<String> = [
            "========= COMPUTE-SANITIZER",
            "vigil-bench-tool-result\tcopy\t0\t12.5\t3",
            "vigil-bench-tool-result\tcopy\t1\t13.5\t3",
            "vigil-bench-tool-error\tsgemm\tlaunch failed",
            "vigil-bench-tool-result\tnot_a_case\t0\t1.0\t3",
            "========= ERROR SUMMARY: 0 errors",
        ]
        .map(str::to_owned)
        .to_vec();
        let (cells, summary) = parse_child_output(&lines);
        assert_eq!(summary.as_deref(), Some("ERROR SUMMARY: 0 errors"));
        assert_eq!(cells.get("copy").and_then(Cell::wall_ms), Some(13.0));
        assert_eq!(
            cells.get("sgemm"),
            Some(&Cell::Failed("launch failed".to_owned()))
        );
        assert_eq!(cells.len(), 2, "unknown cases are ignored");
    }

    /// A stand-in for compute-sanitizer that runs the child protocol: each
    /// case of `--only` is started and timed at once, except `axpy`, which
    /// hangs like a kernel that never ends.
    const FAKE_TOOL: &str = r#"#!/bin/sh
only=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--only" ]; then only="$2"; fi
  shift
done
for case in $(echo "$only" | tr ',' ' '); do
  printf 'vigil-bench-tool-start\t%s\n' "$case"
  if [ "$case" = axpy ]; then exec sleep 30; fi
  printf 'vigil-bench-tool-result\t%s\t0\t1.5\t3\n' "$case"
done
echo "========= ERROR SUMMARY: 0 errors"
"#;

    #[test]
    fn a_case_past_its_limit_is_killed_and_the_others_still_run() {
        use std::os::unix::fs::PermissionsExt;
        let script =
            std::env::temp_dir().join(format!("vigil-bench-fake-tool-{}", std::process::id()));
        std::fs::write(&script, FAKE_TOOL).expect("write the stand-in");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        let opts = ToolOptions {
            compute_sanitizer: script.clone(),
            exe: PathBuf::from("vigil-bench"),
            twins: PathBuf::from("twins.cubin"),
            seed: 1,
            timeout: Duration::from_secs(20),
            case_limit: Duration::from_millis(500),
        };
        let mut notes = Vec::new();
        let t = Instant::now();
        let cells = run_tool(&opts, Tool::Memcheck, &["copy", "axpy", "scan"], &mut notes);
        let _ = std::fs::remove_file(&script);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the hung case was not killed"
        );
        assert_eq!(cells["copy"].wall_ms(), Some(1.5));
        assert_eq!(
            cells["axpy"],
            Cell::Failed("over the 0.5 s limit".to_owned())
        );
        assert_eq!(
            cells["scan"].wall_ms(),
            Some(1.5),
            "restarted after axpy: {notes:?}"
        );
        assert_eq!(notes.len(), 2, "one note per child: {notes:?}");
    }
}
