//! A block reduction (grid-stride loads, warp shuffles, shared memory,
//! barriers) summing 2^24 f32, checked against the CPU on fresh random data;
//! prints the sum and the achieved bandwidth.
//!
//! `cargo run --release --example reduce_sum [n]`: the GPU when there is one,
//! else the CPU backend (`VIGIL_DEVICE` chooses; `VIGIL_SANITIZE=1` turns
//! the sanitizer on). `VIGIL_EXAMPLE_SEED` reproduces a run.

use vigil::Context;
use vigil_tests::{example_seed, programs, size_arg};

fn main() -> Result<(), vigil::ErrorReport> {
    let ctx = Context::from_env()?;
    let n = size_arg(if ctx.is_cpu() { 1 << 22 } else { 1 << 24 });
    let reps = if ctx.is_cpu() { 5 } else { 20 };
    programs::reduce_sum::run(&ctx, n, example_seed(), reps)?;
    Ok(())
}
