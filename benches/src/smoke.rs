//! `--cpu-smoke`: every Vigil kernel of the suite once on the CPU backend,
//! plain and sanitized, at small odd sizes, checked against the host
//! reference (and, sanitized, against false race reports). Runs in
//! `cargo test`; needs no GPU.

use crate::cases::{case_rng, Scale, CASES};
use crate::error::Result;
use crate::kernels::{Impl, VigilKernels};
use vigil::{Context, Stream};

/// The outcome of one case on one context.
#[derive(Debug)]
pub struct SmokeOutcome {
    /// The case's name.
    pub case: &'static str,
    /// Whether the context was sanitized.
    pub sanitized: bool,
    /// The largest scaled error, or what went wrong.
    pub result: Result<f64>,
}

/// Runs every case once on `ctx` with inputs from `seed`.
pub fn run_on(ctx: &Context, seed: u64) -> Result<Vec<SmokeOutcome>> {
    let stream = Stream::new(ctx)?;
    let kernels = VigilKernels::load(ctx)?;
    Ok(CASES
        .iter()
        .map(|&(name, make)| {
            let case = make(Scale::Smoke, ctx.sm_count(), &mut case_rng(seed, name));
            let result = case.instantiate(&stream).and_then(|mut inst| {
                let (_, worst) = case.run_checked(Impl::Vigil(&kernels), &stream, &mut inst)?;
                // A sanitized context reports races here; these kernels have none.
                ctx.synchronize()?;
                Ok(worst)
            });
            SmokeOutcome {
                case: name,
                sanitized: ctx.is_sanitized(),
                result,
            }
        })
        .collect())
}

/// Runs the smoke suite on a plain and a sanitized CPU context.
pub fn run(seed: u64) -> Result<Vec<SmokeOutcome>> {
    let mut all = Vec::new();
    for sanitize in [false, true] {
        let ctx = Context::builder().cpu().sanitize(sanitize).build()?;
        all.extend(run_on(&ctx, seed)?);
    }
    Ok(all)
}
