//! A 256-bin histogram of 2^24 u32 values (or the first argument) with
//! device-scope atomics, checked exactly against the CPU on fresh random
//! data; prints the busiest bin and the achieved bandwidth. Runs on the GPU
//! when there is one, else on the CPU backend.
//!
//! `cargo run --release --example histogram [n]`

use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use vigil_kernels::examples::histogram;
use vigil_tests::{example_seed, gb_per_s, size_arg, time_ms, Rng, KERNELS_PTX};

const BINS: usize = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The GPU when there is one, else the CPU backend (`VIGIL_DEVICE`
    // chooses; `VIGIL_SANITIZE=1` turns the sanitizer on).
    let ctx = Context::from_env()?;
    let n = size_arg(if ctx.is_cpu() { 1 << 22 } else { 1 << 24 });
    let seed = example_seed();
    // Bandwidth lines say what they measured (a GPU or the CPU backend).
    let on = if ctx.is_cpu() { "CPU backend" } else { "GPU" };
    let reps = if ctx.is_cpu() { 5 } else { 20 };
    let stream = Stream::new(&ctx)?;
    let module = Module::from_ptx(&ctx, KERNELS_PTX)?;
    let kernel = module.kernel::<histogram>()?;
    println!(
        "histogram: {} ({} SMs), n = {n}, {BINS} bins, seed = {seed}",
        ctx.name(),
        ctx.sm_count()
    );

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
    Ok(())
}
