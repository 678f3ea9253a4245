//! `y = a*x + y` on 2^26 f32 elements (2^22 on the CPU backend), checked
//! against the CPU on fresh random data, with its bandwidth printed beside a
//! device-to-device copy of the same size measured in the same run.
//!
//! `cargo run --release --example axpy [n]`: the GPU when there is one,
//! else the CPU backend (`VIGIL_DEVICE` chooses; `VIGIL_SANITIZE=1` turns
//! the sanitizer on). `VIGIL_EXAMPLE_SEED` reproduces a run.

use vigil::Context;
use vigil_tests::{example_seed, programs, size_arg};

fn main() -> Result<(), vigil::ErrorReport> {
    let ctx = Context::from_env()?;
    let n = size_arg(if ctx.is_cpu() { 1 << 22 } else { 1 << 26 });
    let reps = if ctx.is_cpu() { 5 } else { 20 };
    programs::axpy::run(&ctx, n, example_seed(), reps)?;
    Ok(())
}
