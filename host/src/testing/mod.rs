//! A test harness for kernel authors' own `cargo test`: each
//! `#[vigil::test]` function runs once per backend (the CPU backend always,
//! each CUDA GPU when the machine has one), sanitized by default, and fails
//! with the sanitizer's formatted race reports when a race is found.
//!
//! A backend this machine lacks is reported as **skipped**, per test
//! (`test gpu::my_test ... skipped`), with the reason printed once and a
//! skipped count in the summary line, not counted as passed.
//! `VIGIL_REQUIRE_GPU=1` turns the skips into failures (for GPU CI).
//!
//! # Set-up
//!
//! In the host crate's `Cargo.toml`, a test target without libtest's
//! harness:
//!
//! ```toml
//! [[test]]
//! name = "kernels"
//! harness = false
//! ```
//!
//! and in `tests/kernels.rs`:
//!
//! ```ignore
//! use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
//!
//! #[vigil::test]
//! fn axpy_matches_the_host(ctx: &Context) -> vigil::Result<()> {
//!     let stream = Stream::new(ctx)?;
//!     let axpy = Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<kernels::axpy>()?;
//!     // ... launch, copy back, assert ...
//!     Ok(())
//! }
//!
//! vigil::test_main!();
//! ```
//!
//! The function takes the trial's `&Context` and returns `()` (fail by
//! panicking) or a `Result` whose error is `Display`; an error type's
//! causes (`source()`) are printed after its message. Options:
//! `#[vigil::test(cpu)]` or `(gpu)` for one backend only, `(plain)` without
//! the sanitizer. `VIGIL_SANITIZE`, `VIGIL_LAUNCH_TIMEOUT` and the
//! sanitizer's variables apply to every trial's context.
//!
//! A test can skip itself for a reason of its own with [`skip`] (it is
//! then reported as skipped with that reason, not as passed).
//!
//! Trials are named `cpu::<path>`, `gpu::<path>` (device 0), `gpu1::<path>`,
//! ...; the usual `cargo test` filters and libtest's `--exact`, `--skip`,
//! `--list`, `--test-threads` and `-q` work.
//! Trials on one GPU run one at a time (CPU trials run in parallel beside
//! them): the GPU sanitizer keeps some state per device that parallel
//! sanitized tests would share.

mod args;
mod case;
mod gpu;
mod run;

pub use case::{Outcome, TestCase, TestOutcome};
pub use gpu::{gpu_required, require_gpu, REQUIRE_GPU_ENV};
pub use run::{run, skip};

/// Expands to the `main` of a `harness = false` test target: runs every
/// `#[vigil::test]` of the binary ([`run`]) and exits with its status.
#[macro_export]
macro_rules! test_main {
    () => {
        fn main() {
            ::std::process::exit($crate::testing::run())
        }
    };
}

/// What `#[vigil::test]` expands to refers to, and the harness's own
/// tests' entry; not for direct use.
#[doc(hidden)]
pub mod __private {
    pub use super::case::{Returned, TestCase, TestOutcome, WithCauses, WithDisplay};
    pub use inventory;

    /// Runs `cases` with command line `args` as on a machine with `gpus`
    /// GPUs (or none, for the reason given), writing what [`run`](super::run)
    /// prints to `out`; returns the exit code.
    pub fn run_cases(
        args: &[&str],
        cases: &[&'static TestCase],
        gpus: Result<usize, String>,
        require_gpu: bool,
        out: &mut (dyn std::io::Write + Send),
    ) -> i32 {
        let args = match super::args::Args::parse(args.iter().map(|a| a.to_string())) {
            Ok(a) => a,
            Err(e) => {
                let _ = writeln!(out, "error: {e}");
                return 101;
            }
        };
        let machine = super::run::Machine { gpus, require_gpu };
        super::run::run_with(&args, cases, &machine, out)
    }
}
