//! Which GPUs a test run has, and `VIGIL_REQUIRE_GPU`.

use crate::api::context::Context;
use crate::backend::device_count;
use std::io::Write;

/// Name of the variable that turns "no GPU" from a skip into a failure.
pub const REQUIRE_GPU_ENV: &str = "VIGIL_REQUIRE_GPU";

/// True when `VIGIL_REQUIRE_GPU=1` (GPU tests must run, not skip).
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v.trim() == "1")
}

/// The GPUs of this machine: their count, or why there are none.
pub(crate) fn available_gpus() -> Result<usize, String> {
    match device_count() {
        Ok(0) => Err("the CUDA driver reports no device".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Opens device 0 for a test written without the harness.
///
/// Without a usable GPU it prints `skipping: no CUDA GPU (<reason>)` to
/// stderr and returns `None`, so the test can return early, unless
/// `VIGIL_REQUIRE_GPU=1` is set, in which case it panics with the reason.
/// Note that libtest counts such an early return as a pass: prefer
/// `#[vigil::test]`, whose harness reports a skip as a skip.
///
/// ```ignore
/// let Some(ctx) = vigil::testing::require_gpu() else { return };
/// ```
pub fn require_gpu() -> Option<Context> {
    match Context::default_device() {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            if gpu_required() {
                panic!("{REQUIRE_GPU_ENV}=1 but no CUDA GPU is usable: {e}");
            }
            // Written to the stderr handle directly so that the test
            // harness's output capture does not hide it.
            let _ = writeln!(std::io::stderr(), "skipping: no CUDA GPU ({e})");
            None
        }
    }
}
