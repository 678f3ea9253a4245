//! Helpers for tests that need a GPU.

use crate::Context;
use std::io::Write;

/// Name of the variable that turns "no GPU" from a skip into a failure.
pub const REQUIRE_GPU_ENV: &str = "VIGIL_REQUIRE_GPU";

/// Opens device 0 for a GPU test.
///
/// Without a usable GPU it prints `skipping: no CUDA GPU (<reason>)` to
/// stderr and returns `None`, so the test can return early, unless
/// `VIGIL_REQUIRE_GPU=1` is set, in which case it panics with the reason
/// (a GPU run must not pass by skipping).
///
/// ```ignore
/// let Some(ctx) = vigil::unstable::testing::require_gpu() else { return };
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

/// True when `VIGIL_REQUIRE_GPU=1` (GPU tests must run, not skip).
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v.trim() == "1")
}
