//! The ring all-reduce's bus bandwidth: Vigil's multi-block
//! ring all-reduce (`vigil_kernels::symmetric::ring_all_reduce`, sums of
//! `u32`, in place) on a [`SymmetricGroup`] of N devices in one process,
//! plain and sanitized in one run.
//!
//! A run ([`measure`]) loads the kernel on every rank, fills each rank's
//! buffer with its own inputs, launches once and checks every rank's
//! buffer against the sums computed on the host (and, sanitized, that the
//! group reported no race), then warms up and times batches of
//! back-to-back launches on every rank at once with device events (each
//! rank's batch from its own host thread; a batch's time is the slowest
//! rank's). Bus bandwidth is NCCL's: `2 (N - 1) / N * bytes / time`, the
//! bytes each rank's link carries per byte of buffer in a ring, so that
//! figures compare across group sizes and with `nccl-tests`. A group of
//! one device moves no bytes: [`measure`] refuses it
//! ([`BenchError::Usage`]) rather than print a figure.
//!
//! The harness runs on the CPU backend too ([`SymmetricGroup::cpu`],
//! simulated devices), which `cargo test` uses to check it builds and sums
//! right; its times there mean nothing about a GPU.

use crate::error::{BenchError, Result};
use std::time::{Duration, Instant};
use vigil::{Event, LaunchConfig, Module, SymmetricGroup};
use vigil_kernels::symmetric::ring_all_reduce;
use vigil_tests::KERNELS_PTX;

/// Sizes and repetitions of one measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllReducePlan {
    /// `u32` elements per rank (rounded down to a multiple of the group
    /// size, at least one per rank).
    pub elements: usize,
    /// Blocks per rank (at most one per SM on a GPU: every block of a rank
    /// waits for the same block of the others, so all must be resident).
    pub blocks: u32,
    /// Threads per block (fewer where a kernel's registers allow fewer).
    pub threads: u32,
    /// Untimed launches after the checked one.
    pub warmup: u32,
    /// Timed batches (the median batch is reported).
    pub batches: u32,
    /// Launches per batch, at most: fewer when a launch is slow (the
    /// sanitized variant), so a batch stays near `budget / batches`.
    pub per_batch: u32,
    /// Rough wall time for the timed batches.
    pub budget: Duration,
}

impl AllReducePlan {
    /// Two GPUs: 64 Mi elements (256 MiB) per rank, one block of 512
    /// threads per SM (`sms`), 10 batches of up to 20 launches, about 3 s.
    pub fn gpu(sms: u32) -> AllReducePlan {
        AllReducePlan {
            elements: 64 << 20,
            blocks: sms.clamp(1, 132),
            threads: 512,
            warmup: 3,
            batches: 10,
            per_batch: 20,
            budget: Duration::from_secs(3),
        }
    }

    /// A smoke run on the CPU backend: `elements` per rank, 2 blocks of 32
    /// threads, 1 warm-up, 2 batches of 1.
    pub fn smoke(elements: usize) -> AllReducePlan {
        AllReducePlan {
            elements,
            blocks: 2,
            threads: 32,
            warmup: 1,
            batches: 2,
            per_batch: 1,
            budget: Duration::from_millis(200),
        }
    }
}

/// What one measurement found.
#[derive(Clone, Debug, PartialEq)]
pub struct AllReduceResult {
    /// Ranks (devices) in the group.
    pub world: u32,
    /// Whether the group was sanitized.
    pub sanitized: bool,
    /// Bytes of each rank's buffer.
    pub bytes: u64,
    /// Blocks per rank and threads per block.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Median time of one all-reduce (ms), the slowest rank's.
    pub median_ms: f64,
    /// Fastest batch (ms per all-reduce).
    pub min_ms: f64,
    /// Launches timed per rank.
    pub launches: u32,
}

impl AllReduceResult {
    /// NCCL's bus bandwidth of the median all-reduce, GB/s (1e9 bytes).
    pub fn bus_gbps(&self) -> f64 {
        bus_bandwidth_gbps(self.world, self.bytes, self.median_ms)
    }

    /// Algorithm bandwidth (`bytes / time`), GB/s.
    pub fn algo_gbps(&self) -> f64 {
        self.bytes as f64 / (self.median_ms * 1e-3) / 1e9
    }

    /// The result as JSON, with its bandwidths.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "world": self.world,
            "sanitized": self.sanitized,
            "bytes_per_rank": self.bytes,
            "blocks": self.blocks,
            "threads": self.threads,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "launches": self.launches,
            "algo_gbps": self.algo_gbps(),
            "bus_gbps": self.bus_gbps(),
        })
    }
}

/// NCCL's all-reduce bus bandwidth in GB/s: `2 (world - 1) / world *
/// bytes / time`. 0 for one rank (nothing crosses a link).
pub fn bus_bandwidth_gbps(world: u32, bytes: u64, ms: f64) -> f64 {
    let w = f64::from(world.max(1));
    2.0 * (w - 1.0) / w * bytes as f64 / (ms * 1e-3) / 1e9
}

/// Rank `rank`'s input element `i`: distinct per rank and element, so a
/// chunk summed twice, skipped or taken from the wrong rank shows.
pub fn input(rank: u32, i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9e37_79b9) ^ rank.wrapping_mul(0x85eb_ca6b)
}

/// What every measurement of the ring needs on a group: each rank's
/// buffer filled with its inputs, the barrier flags, and the launch shape.
pub(crate) struct Ring {
    /// The group's size.
    pub world: u32,
    /// Elements per rank (a multiple of `world`).
    pub n: usize,
    /// Each rank's buffer.
    pub data: vigil::Symmetric<u32>,
    /// The group barriers' flags (`blocks * world`).
    pub flags: vigil::Symmetric<u32>,
    /// Blocks and threads (fewer threads where a rank's kernel allows
    /// fewer).
    pub config: LaunchConfig,
}

impl Ring {
    /// Allocates and fills the buffers of `plan` on `group` for `kernels`
    /// (one per rank); refuses a group of one device.
    pub fn new<K: vigil::Kernel>(
        group: &SymmetricGroup,
        plan: &AllReducePlan,
        kernels: &[vigil::KernelFn<K>],
    ) -> Result<Ring> {
        let world = group.world();
        if world < 2 {
            return Err(BenchError::Usage(format!(
                "the ring all-reduce needs a group of at least two devices, not {world}"
            )));
        }
        let n = (plan.elements / world as usize).max(1) * world as usize;
        let mut data = group.alloc::<u32>(n)?;
        let flags = group.alloc::<u32>((plan.blocks * world) as usize)?;
        for rank in 0..world {
            let host: Vec<u32> = (0..n).map(|i| input(rank, i)).collect();
            data.buffer_mut(rank)?
                .copy_from_host(group.stream(rank)?, &host)?;
        }
        group.synchronize()?;
        // The sanitized entry may use registers enough to lower the limit.
        let threads = kernels
            .iter()
            .map(|k| k.function().attrs().max_threads_per_block)
            .filter(|&m| m > 0)
            .fold(plan.threads, u32::min);
        Ok(Ring {
            world,
            n,
            data,
            flags,
            config: LaunchConfig::new(plan.blocks, threads),
        })
    }

    /// The ring's steps per launch: `world - 1` to scatter, as many to
    /// gather.
    pub fn steps(&self) -> u32 {
        2 * (self.world - 1)
    }
}

/// Checks, warms up and times the ring all-reduce on `group` as `plan`
/// says (see the module documentation).
pub fn measure(group: &SymmetricGroup, plan: &AllReducePlan) -> Result<AllReduceResult> {
    let kernels =
        group.run(|_, ctx| Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<ring_all_reduce>())?;
    let ring = Ring::new(group, plan, &kernels)?;
    let steps = ring.steps();
    let Ring {
        world,
        n,
        data,
        flags,
        config,
    } = ring;
    let threads = config.block.x;
    let mut launched = 0u32;
    // `count` launches on every rank at once, each rank's between two
    // events on its group stream; the slowest rank's milliseconds.
    let mut batch = |count: u32| -> Result<f64> {
        let first = launched;
        launched += count;
        let times = group.run(|rank, ctx| {
            let stream = group.stream(rank)?;
            let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
            start.record(stream)?;
            for k in first..first + count {
                let args = (data.peers(rank)?, flags.peers(rank)?, k * steps);
                stream.launch(&kernels[rank as usize], config, args)?;
            }
            end.record(stream)?;
            end.synchronize()?;
            Ok(f64::from(start.elapsed_ms(&end)?))
        })?;
        group.synchronize()?;
        Ok(times.into_iter().fold(0.0, f64::max))
    };
    let wall = Instant::now();
    batch(1)?;
    let first_ms = wall.elapsed().as_secs_f64() * 1e3;
    check_sums(group, &data, n)?;
    let (warmup, batches, per_batch) = repetitions(plan, first_ms);
    let sanitized = group.context(0)?.is_sanitized();
    // Said before the timing: a sanitized run cut short still tells how
    // long one launch takes.
    eprintln!(
        "all_reduce: the first {} all-reduce and its check took {first_ms:.1} ms; \
         timing {batches} batch(es) of {per_batch} after {warmup} warm-up launch(es)",
        if sanitized { "sanitized" } else { "plain" },
    );
    if warmup > 0 {
        batch(warmup)?;
    }
    let mut times = Vec::with_capacity(batches as usize);
    for _ in 0..batches {
        times.push(batch(per_batch)? / f64::from(per_batch));
    }
    times.sort_by(f64::total_cmp);
    Ok(AllReduceResult {
        world,
        sanitized,
        bytes: (n * size_of::<u32>()) as u64,
        blocks: plan.blocks,
        threads,
        median_ms: times[times.len() / 2],
        min_ms: times[0],
        launches: per_batch * times.len() as u32,
    })
}

/// How many launches to warm up with and to time, in how many batches,
/// after a first launch of `first_ms` (wall time, checks included): the
/// plan's, with batches shortened so that each stays near `budget /
/// batches`, and, when one launch alone outlasts that, no warm-up and as
/// many batches of one launch as the budget holds (at least one), so a
/// slow sanitized launch still gives a figure in about the budget.
fn repetitions(plan: &AllReducePlan, first_ms: f64) -> (u32, u32, u32) {
    let budget_ms = plan.budget.as_secs_f64() * 1e3;
    let batches = plan.batches.max(1);
    let per_batch_budget = budget_ms / f64::from(batches);
    let first_ms = first_ms.max(1e-3);
    if first_ms <= per_batch_budget {
        let per_batch = ((per_batch_budget / first_ms) as u32).clamp(1, plan.per_batch.max(1));
        return (plan.warmup, batches, per_batch);
    }
    let fit = ((budget_ms / first_ms) as u32).clamp(1, batches);
    (0, fit, 1)
}

/// Every rank's buffer after the first all-reduce holds the sums of the
/// inputs, computed on the host.
fn check_sums(group: &SymmetricGroup, data: &vigil::Symmetric<u32>, n: usize) -> Result<()> {
    let world = group.world();
    for rank in 0..world {
        let got = data.buffer(rank)?.to_vec(group.stream(rank)?)?;
        let wrong = (0..n).find(|&i| {
            let want = (0..world).fold(0u32, |a, r| a.wrapping_add(input(r, i)));
            got[i] != want
        });
        if let Some(i) = wrong {
            return Err(BenchError::Mismatch {
                case: "ring all-reduce".to_owned(),
                what: format!(
                    "rank {rank}'s element {i} is {:#x}, not the sum of the inputs",
                    got[i]
                ),
            });
        }
    }
    Ok(())
}

/// The Markdown line of a plain and a sanitized measurement of the same
/// group, under [`MARKDOWN_HEADER`].
pub fn markdown_line(device: &str, plain: &AllReduceResult, sanitized: &AllReduceResult) -> String {
    let shape = |r: &AllReduceResult| format!("{} x {}", r.blocks, r.threads);
    format!(
        "| ring all-reduce, {} x {device} | {} MiB/rank | {} / {} | {:.3} ms | {:.1} GB/s | {:.3} ms | {:.2} GB/s | {:.1}x |",
        plain.world,
        plain.bytes >> 20,
        shape(plain),
        shape(sanitized),
        plain.median_ms,
        plain.bus_gbps(),
        sanitized.median_ms,
        sanitized.bus_gbps(),
        sanitized.median_ms / plain.median_ms
    )
}

/// The header of [`markdown_line`]'s table.
pub const MARKDOWN_HEADER: &str = "| kernel | buffer | blocks x threads (plain / sanitized) | plain time | plain bus bw | sanitized time | sanitized bus bw | slowdown |\n|---|---|---|---|---|---|---|---|";

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL's factor: 1x the algorithm bandwidth for 2 ranks, 1.5x for 4,
    /// nothing for one.
    #[test]
    fn bus_bandwidth_is_nccls() {
        assert_eq!(bus_bandwidth_gbps(2, 1_000_000_000, 1000.0), 1.0);
        assert_eq!(bus_bandwidth_gbps(4, 1_000_000_000, 1000.0), 1.5);
        assert_eq!(bus_bandwidth_gbps(1, 1_000_000_000, 1000.0), 0.0);
    }

    /// A fast launch keeps the plan's warm-up and batches, with batches as
    /// long as the budget allows; a launch that alone outlasts a batch's
    /// share drops the warm-up and times single launches, as many as the
    /// budget holds and at least one.
    #[test]
    fn slow_launches_shrink_the_run_to_its_budget() {
        let plan = AllReducePlan::gpu(132); // 3 warm-ups, 10 batches of 20, 3 s
        assert_eq!(repetitions(&plan, 1.0), (3, 10, 20));
        assert_eq!(repetitions(&plan, 30.0), (3, 10, 10));
        assert_eq!(repetitions(&plan, 300.0), (3, 10, 1));
        assert_eq!(repetitions(&plan, 1_000.0), (0, 3, 1));
        assert_eq!(repetitions(&plan, 60_000.0), (0, 1, 1));
    }
}
