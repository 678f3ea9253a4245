//! The nvcc twins under NVIDIA's `compute-sanitizer`: the parent runs this
//! same program as a child (`--tool-child`) under each tool, time-boxed by
//! [`crate::child`], and reads its reports from the tool's output. The
//! child times the twin's launches by host wall time, since that is what a
//! tool costs its user.
//!
//! What each checker sees (and what the columns compare):
//! - `memcheck`: out-of-bounds and misaligned accesses to global, shared
//!   and local memory, and leaks; no races.
//! - `racecheck`: hazards between threads of one block on shared memory
//!   only; not global memory, not between blocks or kernels.
//! - Vigil's sanitizer: races on global memory between threads, blocks,
//!   kernels, streams and the host; shared memory is not checked.

use crate::cases::Scale;
use crate::child::measure::{each_case, first_launch, timed_repeats, ChildPlan};
use crate::child::{run_cases, CaseOutcome, ChildLimits};
use crate::error::Result;
use crate::kernels::{Impl, Twins};
use crate::timing::Plan;
use std::path::{Path, PathBuf};
use std::process::Command;
use vigil::{Context, Stream};

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
}

/// Runs `cases` under `tool` within `limits`: one child for all of them,
/// restarted on the cases left when one is killed (its cell then says so,
/// with the bound it proves). Calls `on_case` as each case ends and
/// appends what the tool reported to `notes`.
pub fn run_tool(
    opts: &ToolOptions,
    tool: Tool,
    cases: &[&'static str],
    limits: ChildLimits,
    notes: &mut Vec<String>,
    on_case: &mut dyn FnMut(&'static str, CaseOutcome),
) {
    let command = |left: &[&'static str]| {
        let mut cmd = Command::new(&opts.compute_sanitizer);
        cmd.args(["--tool", tool.name(), "--print-limit", "10"])
            .arg(&opts.exe)
            .args(["--tool-child", "--seed", &opts.seed.to_string(), "--twins"])
            .arg(&opts.twins)
            .args(["--only", &left.join(",")]);
        cmd
    };
    run_cases(
        &format!("compute-sanitizer --tool {}", tool.name()),
        &command,
        cases,
        limits,
        notes,
        on_case,
    );
}

/// The child: loads the twins, then for every selected case times
/// [`TOOL_REPEATS`] repeats of its launches by wall time, reporting each
/// step ([`crate::child::protocol::Line`]) as it goes.
pub fn child_main(twins: &Path, seed: u64, only: &[String]) -> Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let twins = Twins::from_files(&ctx, twins)?;
    let plan = ChildPlan {
        plan: Plan::TOOL,
        repeats: TOOL_REPEATS,
        events: false,
    };
    each_case(only, Scale::Full, ctx.sm_count(), seed, |name, case| {
        let mut inst = case.instantiate(&stream)?;
        let imp = Impl::Twin(&twins);
        let first = first_launch(
            name,
            || case.run(imp, &stream, &mut inst),
            || Ok(stream.synchronize()?),
        )?;
        timed_repeats(name, &stream, plan, first, || {
            case.run(imp, &stream, &mut inst)
        })
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Cell, Limit};
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    /// A stand-in for compute-sanitizer that speaks the child protocol:
    /// each case of `--only` is timed at once, except `axpy`, whose first
    /// launch hangs like a kernel that never ends.
    const FAKE_TOOL: &str = r#"#!/bin/sh
only=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--only" ]; then only="$2"; fi
  shift
done
for case in $(echo "$only" | tr ',' ' '); do
  printf 'vigil-bench-child\tcase\t%s\n' "$case"
  printf 'vigil-bench-child\tlaunch\t%s\n' "$case"
  if [ "$case" = axpy ]; then exec sleep 30; fi
  printf 'vigil-bench-child\tlaunched\t%s\t1.5\n' "$case"
  printf 'vigil-bench-child\trepeat\t%s\t1.5\t1.5\t1.5\t1.5\t3\n' "$case"
done
echo "========= ERROR SUMMARY: 0 errors"
"#;

    #[test]
    fn a_case_past_its_limit_is_killed_with_its_bound_and_the_others_still_run() {
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
        };
        let limit = Duration::from_millis(500);
        let limits = ChildLimits {
            case: limit,
            deadline: Instant::now() + Duration::from_secs(20),
        };
        let mut notes = Vec::new();
        let mut cells = HashMap::new();
        let t = Instant::now();
        run_tool(
            &opts,
            Tool::Memcheck,
            &["copy", "axpy", "scan"],
            limits,
            &mut notes,
            &mut |case, outcome| {
                cells.insert(case, outcome.cell);
            },
        );
        let _ = std::fs::remove_file(&script);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the hung case was not killed"
        );
        assert_eq!(cells["copy"].wall_ms(), Some(1.5));
        match &cells["axpy"] {
            Cell::Killed {
                at_least_ms: Some(ms),
                by: Limit::Case(by),
            } => {
                assert_eq!(*by, limit);
                assert!(*ms >= 500.0, "the bound is the time it ran: {ms}");
            }
            other => panic!("axpy: {other:?}"),
        }
        assert_eq!(
            cells["scan"].wall_ms(),
            Some(1.5),
            "restarted after axpy: {notes:?}"
        );
        assert_eq!(notes.len(), 2, "one note per child: {notes:?}");
        assert!(notes[1].ends_with("ERROR SUMMARY: 0 errors"), "{notes:?}");
    }
}
