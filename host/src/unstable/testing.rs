//! GPU-test helpers, now part of the public [`crate::testing`] module
//! (kept here so that existing paths keep working).

pub use crate::testing::{gpu_required, require_gpu, REQUIRE_GPU_ENV};
