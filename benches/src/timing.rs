//! Timing: device events around batches of back-to-back launches (so the
//! queue stays full and host launch cost hides behind the kernels, as in
//! real use), the median batch, and the host wall time of the same
//! launches.

use crate::error::Result;
use std::time::{Duration, Instant};
use vigil::{Event, Stream};

/// How many launches to time.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Untimed launches first (module load, JIT, first-touch).
    pub warmup: usize,
    /// Timed batches; the median batch is reported.
    pub batches: usize,
    /// Launches per batch, at most (fewer when a launch is slow, see `budget`).
    pub per_batch: usize,
    /// Rough wall-time budget for the timed batches: slow kernels (a
    /// sanitizer's) get fewer launches per batch, never fewer than one.
    pub budget: Duration,
}

impl Plan {
    /// The GPU plan: 3 warm-ups, 15 batches of up to 10 launches, about 2 s.
    pub const GPU: Plan = Plan {
        warmup: 3,
        batches: 15,
        per_batch: 10,
        budget: Duration::from_secs(2),
    };
    /// A quick look (the CPU backend, tests): 1 warm-up, 3 batches of 1.
    pub const QUICK: Plan = Plan {
        warmup: 1,
        batches: 3,
        per_batch: 1,
        budget: Duration::from_secs(1),
    };
    /// Vigil sanitized (in its child process): 2 warm-ups, 7 batches of up
    /// to 10 launches, about 1 s; a sanitizer's slowdown needs no finer
    /// figure, and the per-case limit and the run's budget stay affordable.
    pub const SANITIZED: Plan = Plan {
        warmup: 2,
        batches: 7,
        per_batch: 10,
        budget: Duration::from_secs(1),
    };
    /// Under compute-sanitizer (one repeat): 1 warm-up, one batch of up
    /// to 3 launches, about 3 s.
    pub const TOOL: Plan = Plan {
        warmup: 1,
        batches: 1,
        per_batch: 3,
        budget: Duration::from_secs(3),
    };
}

impl Default for Plan {
    fn default() -> Plan {
        Plan::GPU
    }
}

/// One timed series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Median over batches of the device time per launch (ms).
    pub median_ms: f64,
    /// Fastest batch (ms per launch).
    pub min_ms: f64,
    /// Slowest batch (ms per launch).
    pub max_ms: f64,
    /// Host wall time per launch over all batches, synchronisation included (ms).
    pub wall_ms: f64,
    /// Launches timed (1: a single launch slower than the plan's budget,
    /// timed by the host clock alone).
    pub launches: usize,
}

impl Timing {
    /// One launch of `ms`, timed by the host clock alone.
    pub fn single(ms: f64) -> Timing {
        Timing {
            median_ms: ms,
            min_ms: ms,
            max_ms: ms,
            wall_ms: ms,
            launches: 1,
        }
    }
}

/// Runs `run` as `plan` says on `stream` and times it with events.
///
/// The first warm-up launch is timed by the host clock; when it alone
/// exceeds the budget, so does a second (a first launch may pay a one-time
/// cost: a sanitized kernel's 1,024-thread blocks JIT-compile their
/// entry's second build), that second one is the result (one launch),
/// since a kernel cannot be interrupted and more of them would stall the
/// run.
pub fn measure(stream: &Stream, plan: Plan, run: impl FnMut() -> Result<()>) -> Result<Timing> {
    measure_with(stream, plan, true, run)
}

/// One launch of `run`, synchronised, timed by the host clock (ms).
pub fn timed_launch(stream: &Stream, run: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    let t = Instant::now();
    run()?;
    stream.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// What [`first_launch_fits`] found.
#[derive(Clone, Copy, Debug)]
pub enum FirstLaunch {
    /// A launch fit the budget; it took this long (ms).
    Fits(f64),
    /// Two launches did not: the second is the case's one timing.
    OverBudget(Timing),
}

/// Settles a first launch that took `first_ms`: it fits the budget, or a
/// second launch is made (the first may have paid a one-time cost: a
/// sanitized kernel's 1,024-thread blocks JIT-compile their entry's
/// second build), which is the result if it is over the budget too (one
/// launch: a kernel cannot be interrupted, and more of them would stall
/// the run).
pub fn first_launch_fits(
    stream: &Stream,
    plan: Plan,
    first_ms: f64,
    run: &mut dyn FnMut() -> Result<()>,
) -> Result<FirstLaunch> {
    let budget_ms = plan.budget.as_secs_f64() * 1e3;
    if first_ms <= budget_ms {
        return Ok(FirstLaunch::Fits(first_ms));
    }
    let again = timed_launch(stream, run)?;
    Ok(if again > budget_ms {
        FirstLaunch::OverBudget(Timing::single(again))
    } else {
        FirstLaunch::Fits(again)
    })
}

/// Like [`measure`], with device events only when `events` (host wall time
/// alone, e.g. under compute-sanitizer, where the wall time is the point).
pub fn measure_with(
    stream: &Stream,
    plan: Plan,
    events: bool,
    mut run: impl FnMut() -> Result<()>,
) -> Result<Timing> {
    let ctx = stream.context();
    // The first warm-up alone: a launch slower than the whole budget (a
    // sanitizer's on contended atomics, say) is timed once and no more.
    let first_ms = timed_launch(stream, &mut run)?;
    let first = match first_launch_fits(stream, plan, first_ms, &mut run)? {
        FirstLaunch::Fits(ms) => ms / 1e3,
        FirstLaunch::OverBudget(t) => return Ok(t),
    };
    let t = Instant::now();
    for _ in 1..plan.warmup.max(1) {
        run()?;
    }
    stream.synchronize()?;
    let per_launch = if plan.warmup > 1 {
        t.elapsed().as_secs_f64() / (plan.warmup - 1) as f64
    } else {
        first
    };
    let affordable = plan.budget.as_secs_f64() / (plan.batches.max(1) as f64 * per_launch);
    let per_batch = (affordable as usize).clamp(1, plan.per_batch.max(1));
    // Launches too slow for one per batch: fewer batches, so that the
    // series stays near its budget (never fewer than one).
    let batches = if affordable < 1.0 {
        ((plan.budget.as_secs_f64() / per_launch) as usize).clamp(1, plan.batches.max(1))
    } else {
        plan.batches.max(1)
    };
    let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
    let mut times = Vec::with_capacity(batches);
    let wall = Instant::now();
    for _ in 0..batches {
        let t = Instant::now();
        if events {
            start.record(stream)?;
        }
        for _ in 0..per_batch {
            run()?;
        }
        let ms = if events {
            end.record(stream)?;
            end.synchronize()?;
            f64::from(start.elapsed_ms(&end)?)
        } else {
            stream.synchronize()?;
            t.elapsed().as_secs_f64() * 1e3
        };
        times.push(ms / per_batch as f64);
    }
    let launches = times.len() * per_batch;
    let wall_ms = wall.elapsed().as_secs_f64() * 1e3 / launches as f64;
    times.sort_by(f64::total_cmp);
    Ok(Timing {
        median_ms: times[times.len() / 2],
        min_ms: times[0],
        max_ms: times[times.len() - 1],
        wall_ms,
        launches,
    })
}

/// Median host time per call of `op` in microseconds, over `batches` runs
/// of `per_batch` calls; `between` (not timed) runs after each batch, e.g.
/// to drain the queue so that enqueueing never waits on the GPU.
pub fn host_us(
    batches: usize,
    per_batch: usize,
    mut op: impl FnMut() -> Result<()>,
    mut between: impl FnMut() -> Result<()>,
) -> Result<f64> {
    let mut times = Vec::with_capacity(batches);
    for _ in 0..batches.max(1) {
        let t = Instant::now();
        for _ in 0..per_batch.max(1) {
            op()?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / per_batch.max(1) as f64);
        between()?;
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
