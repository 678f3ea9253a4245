//! A block reduction (grid-stride loads, warp shuffles, shared memory,
//! barriers) checked against an f64 CPU sum, with its bandwidth.

use super::Setup;
use crate::{gb_per_s, time_ms, Rng};
use vigil::{Context, DeviceBuffer, LaunchConfig};
use vigil_kernels::examples::{reduce_sum, REDUCE_BLOCK};

/// Runs the example on `ctx` with `n` elements of data from `seed`, timing
/// `reps` runs; an error when the result disagrees with the CPU reference.
pub fn run(
    ctx: &Context,
    n: usize,
    seed: u64,
    reps: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let Setup { on, stream, kernel } = Setup::<reduce_sum>::new(ctx, "reduce_sum")?;
    println!("reduce_sum: n = {n}, seed = {seed}");

    let xs = Rng::new(seed).f32s(n);
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    // Two blocks per SM cover the input with a grid-stride loop; one more
    // block folds the partials.
    let blocks = (2 * ctx.sm_count()).max(1);
    let mut partials = DeviceBuffer::<f32>::alloc_zeroed(&stream, blocks as usize)?;
    let mut total = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1)?;
    let run =
        |partials: &mut DeviceBuffer<f32>, total: &mut DeviceBuffer<f32>| -> vigil::Result<()> {
            stream.launch(
                &kernel,
                LaunchConfig::new(blocks, REDUCE_BLOCK),
                (&x, &mut *partials),
            )?;
            stream.launch(
                &kernel,
                LaunchConfig::new(1, REDUCE_BLOCK),
                (&*partials, total),
            )
        };
    run(&mut partials, &mut total)?;
    let got = total.to_vec(&stream)?[0] as f64;
    let want: f64 = xs.iter().map(|&v| v as f64).sum();
    let scale: f64 = xs.iter().map(|&v| (v as f64).abs()).sum();
    let err = (got - want).abs();
    println!(
        "sum: {on} {got:.6}, host reference (f64) {want:.6}, |error| {err:.3e} (tolerance {:.3e})",
        1e-6 * scale
    );
    if err > 1e-6 * scale {
        return Err(format!("reduce_sum: error {err} exceeds tolerance").into());
    }
    println!("check: sum within tolerance");
    let ms = time_ms(&stream, reps, || run(&mut partials, &mut total))?;
    println!(
        "bandwidth ({on}): reduce_sum {:.1} GB/s ({ms:.3} ms for {} MB)",
        gb_per_s(n * 4, ms),
        n * 4 / 1_000_000
    );
    super::finish(ctx)
}
