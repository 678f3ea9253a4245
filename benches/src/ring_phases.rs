//! Where a ring all-reduce launch's time goes, step by step: one launch
//! of `vigil_kernels::symmetric::ring_all_reduce_timed` on every rank at
//! once, whose blocks stamp the device's global timer at each step's
//! start, after its data loop and after its group barrier. A slow step's
//! data loop says the accesses cost; a slow barrier says a block waited
//! for the others (or for its own flags' checks).

use crate::all_reduce::{AllReducePlan, Ring};
use crate::error::{BenchError, Result};
use vigil::{Module, SymmetricGroup};
use vigil_kernels::symmetric::{ring_all_reduce_timed, RING_STAMPS_PER_STEP};
use vigil_tests::KERNELS_PTX;

/// One step of the ring over every block of every rank: the data loop's
/// and the barrier's milliseconds, median and slowest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepTimes {
    /// Median data-loop time (ms).
    pub loop_median_ms: f64,
    /// Slowest data loop (ms).
    pub loop_max_ms: f64,
    /// Median time at the group barrier (ms).
    pub barrier_median_ms: f64,
    /// Longest time at the group barrier (ms).
    pub barrier_max_ms: f64,
}

/// Times every step of one ring all-reduce launch on `group` (buffers and
/// launch as [`crate::all_reduce::measure`]'s, after one untimed launch).
pub fn measure_phases(group: &SymmetricGroup, plan: &AllReducePlan) -> Result<Vec<StepTimes>> {
    let kernels = group
        .run(|_, ctx| Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<ring_all_reduce_timed>())?;
    let ring = Ring::new(group, plan, &kernels)?;
    let steps = ring.steps();
    let per_rank = plan.blocks as usize * steps as usize * RING_STAMPS_PER_STEP;
    let stamps = group.alloc::<u64>(per_rank)?;
    for launch in 0..2u32 {
        group.run(|rank, _| {
            let stream = group.stream(rank)?;
            let args = (
                ring.data.peers(rank)?,
                ring.flags.peers(rank)?,
                launch * steps,
                stamps.peer(rank, rank)?,
            );
            stream.launch(&kernels[rank as usize], ring.config, args)
        })?;
        group.synchronize()?;
    }
    let mut per_step = vec![(Vec::new(), Vec::new()); steps as usize];
    for rank in 0..ring.world {
        let got = stamps.buffer(rank)?.to_vec(group.stream(rank)?)?;
        for (i, s) in got.as_chunks::<RING_STAMPS_PER_STEP>().0.iter().enumerate() {
            let (loops, barriers) = &mut per_step[i % steps as usize];
            loops.push(elapsed_ms(s[0], s[1], rank, i)?);
            barriers.push(elapsed_ms(s[1], s[2], rank, i)?);
        }
    }
    Ok(per_step
        .into_iter()
        .map(|(mut loops, mut barriers)| {
            let (loop_median_ms, loop_max_ms) = median_and_max(&mut loops);
            let (barrier_median_ms, barrier_max_ms) = median_and_max(&mut barriers);
            StepTimes {
                loop_median_ms,
                loop_max_ms,
                barrier_median_ms,
                barrier_max_ms,
            }
        })
        .collect())
}

/// Milliseconds from stamp `a` to stamp `b` of rank `rank`'s stamp group
/// `i`; an error when the timer went backwards (a stamp not written).
fn elapsed_ms(a: u64, b: u64, rank: u32, i: usize) -> Result<f64> {
    b.checked_sub(a)
        .map(|ns| ns as f64 * 1e-6)
        .ok_or_else(|| BenchError::Mismatch {
            case: "ring all-reduce phases".to_owned(),
            what: format!("rank {rank}'s stamps {i} run backwards ({a} then {b})"),
        })
}

/// The median and the largest of `v` (0 for none).
fn median_and_max(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    match v.last() {
        Some(&max) => (v[v.len() / 2], max),
        None => (0.0, 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_reports_its_median_and_slowest() {
        assert_eq!(median_and_max(&mut [3.0, 1.0, 2.0]), (2.0, 3.0));
        assert_eq!(median_and_max(&mut []), (0.0, 0.0));
        assert!((elapsed_ms(1_000, 3_000_000, 0, 0).unwrap() - 2.999).abs() < 1e-9);
        assert!(elapsed_ms(5, 4, 1, 2).is_err());
    }
}
