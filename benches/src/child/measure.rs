//! The child's side of a case: its first launch between the markers the
//! parent's limits count from, then the timed repeats, each reported as
//! soon as it is known (what was reported survives a kill).

use super::protocol::Line;
use crate::cases::{case_rng, selected, Case, Scale, CASES};
use crate::error::Result;
use crate::timing::{first_launch_fits, measure_with, FirstLaunch, Plan};
use std::time::Instant;
use vigil::Stream;

/// How a child times its cases.
#[derive(Clone, Copy, Debug)]
pub struct ChildPlan {
    /// Each repeat's plan.
    pub plan: Plan,
    /// Timed repeats.
    pub repeats: usize,
    /// Device events (`false`: host wall time alone, as under a tool).
    pub events: bool,
}

/// Runs `body` on every case `only` selects, in table order, at `scale`
/// with the run's inputs (`seed`), between its [`Line::Case`] and, should
/// it fail, its [`Line::Error`].
pub fn each_case(
    only: &[String],
    scale: Scale,
    sm_count: u32,
    seed: u64,
    mut body: impl FnMut(&'static str, &Case) -> Result<()>,
) {
    for &(name, make) in CASES.iter() {
        if !selected(only).contains(&name) {
            continue;
        }
        Line::Case(name).emit();
        let case = make(scale, sm_count, &mut case_rng(seed, name));
        if let Err(e) = body(name, &case) {
            Line::Error(name, e.to_string()).emit();
        }
    }
}

/// Runs `launch` once for `case` (synchronised by `finish`) between
/// [`Line::Launch`] and [`Line::Launched`]; returns its host wall time (ms).
pub fn first_launch(
    case: &'static str,
    launch: impl FnOnce() -> Result<()>,
    finish: impl FnOnce() -> Result<()>,
) -> Result<f64> {
    Line::Launch(case).emit();
    let t = Instant::now();
    launch()?;
    finish()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    Line::Launched(case, ms).emit();
    Ok(ms)
}

/// Times `run` for `case` as `cp` says and reports every repeat. A first
/// launch (`first_ms`) slower than the plan's budget is followed by one
/// more, as [`measure_with`] does ([`first_launch_fits`]), which is the
/// one timing if it is over the budget too.
pub fn timed_repeats(
    case: &'static str,
    stream: &Stream,
    cp: ChildPlan,
    first_ms: f64,
    mut run: impl FnMut() -> Result<()>,
) -> Result<()> {
    if let FirstLaunch::OverBudget(t) = first_launch_fits(stream, cp.plan, first_ms, &mut run)? {
        Line::Repeat(case, t).emit();
        return Ok(());
    }
    for _ in 0..cp.repeats.max(1) {
        let t = measure_with(stream, cp.plan, cp.events, &mut run)?;
        Line::Repeat(case, t).emit();
        // A launch slower than the budget is timed once, not repeated.
        if t.launches == 1 {
            break;
        }
    }
    Ok(())
}
