//! The parent's side: runs a measuring child on a list of cases, turns its
//! reports into cells as each case ends, kills its process group when a
//! case passes its limit or the budget's share ends, and restarts it on
//! the cases left.

use super::protocol::Line;
use crate::results::{Cell, Limit};
use crate::timing::Timing;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A child is not started with less than this left of the budget's share
/// (a GPU context and the module JIT alone take seconds).
const MIN_START: Duration = Duration::from_secs(2);
/// How long the parent waits for a line before it looks at the child again.
const POLL: Duration = Duration::from_millis(5);
/// How long the parent waits for a killed child's output to drain.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long a child may run.
#[derive(Clone, Copy, Debug)]
pub struct ChildLimits {
    /// A case's limit, counted from its first launch.
    pub case: Duration,
    /// The end of this phase's share of the budget.
    pub deadline: Instant,
}

/// What the children found on one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    /// The column's cell.
    pub cell: Cell,
    /// The result check, when the child ran one.
    pub check: Option<Result<f64, String>>,
}

/// How a case's reports ended.
#[derive(Clone, Copy, Debug)]
enum End {
    /// The child went on to the next case.
    Next,
    /// The child exited.
    Exited(ExitStatus),
    /// The child was killed at `Instant` by this limit.
    Killed(Limit, Instant),
}

/// What a child reported on the case it is in.
#[derive(Debug, Default)]
struct Progress {
    launched_at: Option<Instant>,
    first_ms: Option<f64>,
    check: Option<Result<f64, String>>,
    repeats: Vec<Timing>,
    error: Option<String>,
}

impl Progress {
    fn apply(&mut self, line: Line, now: Instant) {
        match line {
            Line::Case(_) => {}
            Line::Launch(_) => self.launched_at = Some(now),
            Line::Launched(_, ms) => self.first_ms = Some(ms),
            Line::Check(_, c) => self.check = Some(c),
            Line::Repeat(_, t) => self.repeats.push(t),
            Line::Error(_, e) => self.error = Some(e),
        }
    }

    fn outcome(self, end: End) -> CaseOutcome {
        let cell = match (self.error, &self.check, end) {
            (Some(e), _, _) => Cell::Failed(e),
            (None, Some(Err(e)), _) => Cell::Failed(format!("wrong result, not timed: {e}")),
            // Repeats reported before a kill are measurements all the same.
            _ if !self.repeats.is_empty() => Cell::Timed(self.repeats),
            (None, _, End::Killed(by, at)) => match self.first_ms {
                // Killed while timing: the first launch is the one timing.
                Some(ms) => Cell::Timed(vec![Timing::single(ms)]),
                None => Cell::Killed {
                    at_least_ms: self
                        .launched_at
                        .map(|t| at.saturating_duration_since(t).as_secs_f64() * 1e3),
                    by,
                },
            },
            (None, _, End::Exited(status)) => {
                Cell::Failed(format!("the child ended ({status}) in this case"))
            }
            (None, _, End::Next) => Cell::Failed("the child reported no timing".to_owned()),
        };
        CaseOutcome {
            cell,
            check: self.check,
        }
    }
}

/// Runs `cases` in children made by `command` (given the cases left; the
/// runner adds the pipes and a process group of its own), under `limits`.
/// Calls `on_case` as each case ends, with [`Cell::Skipped`] for the cases
/// the budget's share could not fit, and adds a note per child to `notes`
/// (`what` names the children there).
pub fn run_cases(
    what: &str,
    command: &dyn Fn(&[&'static str]) -> Command,
    cases: &[&'static str],
    limits: ChildLimits,
    notes: &mut Vec<String>,
    on_case: &mut dyn FnMut(&'static str, CaseOutcome),
) {
    let mut remaining = cases.to_vec();
    while !remaining.is_empty()
        && limits.deadline.saturating_duration_since(Instant::now()) >= MIN_START
    {
        let mut cmd = command(&remaining);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so that a kill ends a tool and the
            // program it runs together.
            .process_group(0);
        // SAFETY: the closure runs in the forked child before exec and
        // makes one async-signal-safe system call, touching no memory.
        unsafe {
            cmd.pre_exec(|| {
                die_with_parent();
                Ok(())
            })
        };
        let run = match cmd.spawn() {
            Ok(child) => watch(child, limits, on_case),
            Err(e) => {
                let why = format!("{what}: starting {:?}: {e}", cmd.get_program());
                notes.push(why.clone());
                for &case in &remaining {
                    on_case(case, failed(&why));
                }
                return;
            }
        };
        // The cases this child reached, not those it was given: a killed
        // child's successor lists the rest.
        notes.push(format!(
            "{what} ({}): {}{}",
            run.finished.join(", "),
            run.status,
            run.summary.map_or(String::new(), |s| format!("; {s}"))
        ));
        remaining.retain(|c| !run.finished.contains(c));
        if run.finished.is_empty() && !run.out_of_time {
            // It ended before any case: a restart would do the same.
            for &case in &remaining {
                on_case(case, failed(&format!("{what}: {}", run.status)));
            }
            return;
        }
    }
    for &case in &remaining {
        on_case(
            case,
            CaseOutcome {
                cell: Cell::Skipped("budget".to_owned()),
                check: None,
            },
        );
    }
}

fn failed(why: &str) -> CaseOutcome {
    CaseOutcome {
        cell: Cell::Failed(why.to_owned()),
        check: None,
    }
}

/// What one child did.
struct ChildRun {
    /// The cases it reported on (the last one possibly killed).
    finished: Vec<&'static str>,
    /// How it ended, in words.
    status: String,
    /// A tool's summary line, if it printed one.
    summary: Option<String>,
    /// Killed at the deadline.
    out_of_time: bool,
}

/// Reads `child`'s reports as they come and kills its process group at
/// the limits; calls `on_case` as each case ends.
fn watch(
    mut child: Child,
    limits: ChildLimits,
    on_case: &mut dyn FnMut(&'static str, CaseOutcome),
) -> ChildRun {
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if Line::parse(&line).is_none() {
                    // A tool's own report: show it.
                    println!("{line}");
                }
                if tx.send((line, Instant::now())).is_err() {
                    break;
                }
            }
        }
    });
    let mut current: Option<(&'static str, Progress)> = None;
    let mut run = ChildRun {
        finished: Vec::new(),
        status: String::new(),
        summary: None,
        out_of_time: false,
    };
    let mut handle = |text: String,
                      at: Instant,
                      current: &mut Option<(&'static str, Progress)>,
                      run: &mut ChildRun| match Line::parse(&text) {
        Some(Line::Case(case)) => {
            if let Some((c, p)) = current.take() {
                on_case(c, p.outcome(End::Next));
                run.finished.push(c);
            }
            eprintln!("vigil-bench:   {case}");
            *current = Some((case, Progress::default()));
        }
        Some(line) => {
            if let Some((_, p)) = current.as_mut().filter(|(c, _)| *c == line.case()) {
                p.apply(line, at);
            }
        }
        None if text.contains("SUMMARY") => {
            run.summary = Some(text.trim_start_matches('=').trim().to_owned());
        }
        None => {}
    };
    // One line at a time, the limits checked after each, and no wait past
    // the next limit: a case is killed as soon as it is over.
    let end = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                run.status = status.to_string();
                break End::Exited(status);
            }
            Ok(None) => {}
            Err(e) => {
                run.status = format!("waiting for it failed: {e}");
                break End::Killed(Limit::Budget, kill(&mut child));
            }
        }
        let now = Instant::now();
        let case_ends = current
            .as_ref()
            .and_then(|(_, p)| p.launched_at)
            .map(|t| t + limits.case);
        if now >= limits.deadline {
            run.out_of_time = true;
            run.status = "killed at the end of its budget".to_owned();
            break End::Killed(Limit::Budget, kill(&mut child));
        }
        if case_ends.is_some_and(|end| now >= end) {
            let case = current.as_ref().map_or("?", |(c, _)| c);
            run.status = format!(
                "killed in {case} at the {} s case limit",
                limits.case.as_secs_f64()
            );
            break End::Killed(Limit::Case(limits.case), kill(&mut child));
        }
        let wait = case_ends
            .map_or(POLL, |end| end.saturating_duration_since(now))
            .min(POLL)
            .min(limits.deadline.saturating_duration_since(now));
        match rx.recv_timeout(wait) {
            Ok((text, at)) => handle(text, at, &mut current, &mut run),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Its output closed: it is ending; `try_wait` will say so.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(POLL),
        }
    };
    // The pipe closes when the process group is gone; should a grandchild
    // have left the group and kept it open, give up on the reader after a
    // grace period rather than hang.
    let grace = Instant::now() + DRAIN_GRACE;
    while !reader.is_finished() && Instant::now() < grace {
        std::thread::sleep(POLL);
    }
    for (text, at) in rx.try_iter() {
        handle(text, at, &mut current, &mut run);
    }
    if let Some((c, p)) = current.take() {
        on_case(c, p.outcome(end));
        run.finished.push(c);
    }
    run
}

/// Asks the kernel to kill this process when its parent dies, so that a
/// measuring child (which has a process group of its own, out of reach of
/// a signal to the parent's) never outlives a parent ended from outside.
/// Called in the forked child before exec (async-signal-safe). Not called
/// again in the program a tool runs: the tool may start it from a thread
/// that ends early, which would kill it at once.
fn die_with_parent() {
    // SAFETY: `prctl(PR_SET_PDEATHSIG, SIGKILL)` takes plain integers and
    // changes only this process's death signal.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

/// Kills `child`'s process group and reaps it; returns when it was killed.
fn kill(child: &mut Child) -> Instant {
    let at = Instant::now();
    // SAFETY: `kill` with a negative pid signals the process group that
    // `run_cases` started (`process_group(0)` made the child its leader);
    // no memory is involved.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    at
}
