//! A 256-bin histogram with device-scope atomics, checked exactly against
//! the CPU, with its bandwidth.

use super::Setup;
use crate::{gb_per_s, time_ms, Rng};
use vigil::{Context, DeviceBuffer, LaunchConfig};
use vigil_kernels::examples::histogram;
const BINS: usize = 256;

/// Runs the example on `ctx` with `n` elements of data from `seed`, timing
/// `reps` runs; an error when the result disagrees with the CPU reference.
pub fn run(
    ctx: &Context,
    n: usize,
    seed: u64,
    reps: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let Setup { on, stream, kernel } = Setup::<histogram>::new(ctx, "histogram")?;
    println!("histogram: n = {n}, {BINS} bins, seed = {seed}");

    let values = Rng::new(seed).u32s(n, 1 << 20);
    let data = DeviceBuffer::from_slice(&stream, &values)?;
    let mut bins = DeviceBuffer::<u32>::alloc_zeroed(&stream, BINS)?;
    let cfg = LaunchConfig::for_grid_stride(n, 256, 8 * ctx.sm_count());
    stream.launch(&kernel, cfg, (&data, &mut bins))?;
    let got = bins.to_vec(&stream)?;
    let mut want = vec![0u32; BINS];
    for v in &values {
        want[*v as usize % BINS] += 1;
    }
    if got != want {
        let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        return Err(
            format!("histogram: {bad} of {BINS} bins differ from the CPU reference").into(),
        );
    }
    let (busiest, count) = got
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(b, c)| (b, *c))
        .unwrap_or((0, 0));
    println!("check: all {BINS} bins equal the CPU's counts (busiest bin {busiest}: {count})");
    let ms = time_ms(&stream, reps, || {
        bins.fill_zero(&stream)?;
        stream.launch(&kernel, cfg, (&data, &mut bins))
    })?;
    println!(
        "bandwidth ({on}): histogram {:.1} GB/s ({ms:.3} ms for {} MB)",
        gb_per_s(n * 4, ms),
        n * 4 / 1_000_000
    );
    super::finish(ctx)
}
