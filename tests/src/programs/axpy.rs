//! `y = a*x + y`, checked against the CPU, with its bandwidth beside a
//! device-to-device copy of the same size measured in the same run.

use super::Setup;
use crate::{gb_per_s, time_ms, Rng};
use vigil::{Context, DeviceBuffer, LaunchConfig};
use vigil_kernels::examples::axpy;

/// Runs the example on `ctx` with `n` elements of data from `seed`, timing
/// `reps` runs; an error when the result disagrees with the CPU reference.
pub fn run(
    ctx: &Context,
    n: usize,
    seed: u64,
    reps: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let Setup { on, stream, kernel } = Setup::<axpy>::new(ctx, "axpy")?;
    println!("axpy: n = {n}, seed = {seed}");

    let mut rng = Rng::new(seed);
    let (a, xs, ys) = (1.5f32, rng.f32s(n), rng.f32s(n));
    let x = DeviceBuffer::from_slice(&stream, &xs)?;
    let mut y = DeviceBuffer::from_slice(&stream, &ys)?;
    let cfg = LaunchConfig::for_num_elems(n, 256);

    stream.launch(&kernel, cfg, (a, &x, &mut y))?;
    let got = y.to_vec(&stream)?;
    let wrong = got
        .iter()
        .zip(xs.iter().zip(&ys))
        .filter(|(g, (x, y))| **g != a * **x + **y)
        .count();
    if wrong != 0 {
        return Err(format!("axpy: {wrong} of {n} elements differ from the CPU reference").into());
    }
    println!("check: all {n} elements equal the CPU's a*x+y");

    // Bandwidth: axpy moves 3 arrays (read x, read y, write y), the copy 2.
    let axpy_ms = time_ms(&stream, reps, || {
        stream.launch(&kernel, cfg, (a, &x, &mut y))
    })?;
    let mut dst = DeviceBuffer::<f32>::alloc(&stream, n)?;
    let copy_ms = time_ms(&stream, reps, || dst.copy_from(&stream, &x))?;
    let bytes = n * std::mem::size_of::<f32>();
    let (axpy_bw, copy_bw) = (gb_per_s(3 * bytes, axpy_ms), gb_per_s(2 * bytes, copy_ms));
    println!("bandwidth ({on}): axpy {axpy_bw:.1} GB/s ({axpy_ms:.3} ms), device-to-device copy {copy_bw:.1} GB/s ({copy_ms:.3} ms)");
    println!("ratio: axpy / copy = {:.1}%", 100.0 * axpy_bw / copy_bw);
    super::finish(ctx)
}
