//! The main demo: Vigil's race sanitizer catches a data race in a kernel,
//! then finds nothing once it is fixed.
//!
//! `cargo run --release --example demo`
//!
//! Both kernels count the positive numbers of an array into one counter.
//! The racy one does `count = count + 1` with a plain read and a plain
//! write, so blocks that run at the same time overwrite each other's
//! updates; the fixed one uses an atomic add. The sanitizer reports each
//! race with its kind, the buffer and offset, and both accesses' blocks,
//! threads and source lines.
//!
//! It runs on the GPU sanitizer when a CUDA GPU is present, on the CPU
//! backend's sanitizer otherwise; both print the same reports. The
//! sanitizer's variables apply (`VIGIL_REPORT=races.sarif` writes a SARIF
//! log for a code-scanning service, `VIGIL_SUPPRESSIONS`, ...).

use vigil::Context;
use vigil_tests::programs::demo;

fn main() -> Result<(), vigil::ErrorReport> {
    let ctx = if vigil::gpu_available().is_ok() {
        println!("Running the demo on GPU 0 with the GPU race sanitizer.");
        Context::builder()
            .env_vars()
            .gpu(0)
            .sanitize(true)
            .build()?
    } else {
        println!("No CUDA GPU found: running the demo on the CPU backend.");
        Context::builder().env_vars().cpu().sanitize(true).build()?
    };
    demo::run(&ctx)?;
    Ok(())
}
