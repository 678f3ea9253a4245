//! A GEMM and a row softmax in one kernel, its phases' tiles on one
//! shared stack: 192 KiB of shared memory per block where a static layout
//! of the same tiles would need 321 KiB (more than the 227 KiB an H100 or
//! H200 gives a block). Checked against the host, timed, then run under
//! the race sanitizer with the GEMM's tiles popped without a barrier,
//! which it reports with both accesses and both tiles' pushes.
//!
//! `cargo run --release --example gemm_softmax [blocks]`: the GPU when
//! there is one, else the CPU backend (`VIGIL_DEVICE` chooses;
//! `VIGIL_SANITIZE=1` sanitizes the timed run too). `VIGIL_EXAMPLE_SEED`
//! reproduces a run.

use vigil::Context;
use vigil_kernels::shared_stack::BK;
use vigil_tests::programs::gemm_softmax;
use vigil_tests::{example_seed, size_arg};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::from_env()?;
    let sanitized = Context::builder().env_vars().sanitize(true).build()?;
    let (blocks, k, reps) = if ctx.is_cpu() {
        (size_arg(2), 2 * BK, 2)
    } else {
        (size_arg(4 * ctx.sm_count() as usize), 8 * BK, 20)
    };
    gemm_softmax::run(&ctx, &sanitized, blocks, k, example_seed(), reps)?;
    Ok(())
}
