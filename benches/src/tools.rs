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
    /// Wall-time limit of one tool's child (all cases).
    pub timeout: Duration,
}

/// Runs `cases` under `tool` in one child; returns a cell per case and
/// appends what the tool reported to `notes`.
pub fn run_tool(
    opts: &ToolOptions,
    tool: Tool,
    cases: &[&str],
    notes: &mut Vec<String>,
) -> HashMap<&'static str, Cell> {
    eprintln!("vigil-bench: compute-sanitizer --tool {}", tool.name());
    let mut cmd = Command::new(&opts.compute_sanitizer);
    cmd.args(["--tool", tool.name(), "--print-limit", "10"])
        .arg(&opts.exe)
        .args(["--tool-child", "--seed", &opts.seed.to_string(), "--twins"])
        .arg(&opts.twins)
        .args(["--only", &cases.join(",")])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Its own process group, so that a timeout ends the tool and the
        // program it runs together.
        .process_group(0);
    let (lines, status) = match run_with_timeout(cmd, opts.timeout) {
        Ok(x) => x,
        Err(e) => {
            notes.push(format!("compute-sanitizer --tool {}: {e}", tool.name()));
            return HashMap::new();
        }
    };
    let (cells, summary) = parse_child_output(&lines);
    let status = match status {
        Some(code) => format!("exit code {code}"),
        None => format!("stopped after the {} s limit", opts.timeout.as_secs()),
    };
    notes.push(format!(
        "compute-sanitizer --tool {}: {status}; {}",
        tool.name(),
        summary.unwrap_or_else(|| "no summary line".to_owned())
    ));
    let timed_out = cells.len() < cases.len();
    CASES
        .iter()
        .map(|&(name, _)| name)
        .filter(|name| cases.contains(name))
        .map(|name| {
            let cell = cells.get(name).cloned().unwrap_or_else(|| {
                Cell::Failed(if timed_out {
                    "no result before the tool run ended".to_owned()
                } else {
                    "no result".to_owned()
                })
            });
            (name, cell)
        })
        .collect()
}

/// Runs `cmd`, collecting its stdout lines, and kills its process group
/// after `timeout`. Returns the lines and the exit code (`None` when killed
/// or ended by a signal).
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<(Vec<String>, Option<i32>)> {
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
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                // SAFETY: `kill` with a negative pid signals the process
                // group this function started (`process_group(0)` made the
                // child its leader); no memory is involved.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
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
    Ok((rx.try_iter().collect(), status))
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
}
