//! A 256-bin histogram of 2^24 u32 values with device-scope atomics,
//! checked exactly against the CPU on fresh random data; prints the busiest
//! bin and the achieved bandwidth.
//!
//! `cargo run --release --example histogram [n]`: the GPU when there is one,
//! else the CPU backend (`VIGIL_DEVICE` chooses; `VIGIL_SANITIZE=1` turns
//! the sanitizer on). `VIGIL_EXAMPLE_SEED` reproduces a run.

use vigil::Context;
use vigil_tests::{example_seed, programs, size_arg};

fn main() -> Result<(), vigil::ErrorReport> {
    let ctx = Context::from_env()?;
    let n = size_arg(if ctx.is_cpu() { 1 << 22 } else { 1 << 24 });
    let reps = if ctx.is_cpu() { 5 } else { 20 };
    programs::histogram::run(&ctx, n, example_seed(), reps)?;
    Ok(())
}
