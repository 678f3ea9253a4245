//! Vigil's sanitized cells, measured in a child process
//! (`--sanitized-child`) time-boxed by [`crate::child`]: a sanitized kernel
//! can run for minutes (contended atomics), and only ending its process
//! stops it, so the parent's context never waits on one.

use crate::child::measure::{each_case, first_launch, timed_repeats, ChildPlan};
use crate::child::protocol::Line;
use crate::child::{run_cases, CaseOutcome, ChildLimits};
use crate::device::Device;
use crate::error::Result;
use crate::kernels::{Impl, VigilKernels};
use std::path::PathBuf;
use std::process::Command;
use vigil::Stream;

/// How to run the sanitized child.
#[derive(Clone, Debug)]
pub struct SanitizedOptions {
    /// This program (run as the child).
    pub exe: PathBuf,
    /// Where it measures.
    pub device: Device,
    /// Seed of the inputs (the same as the parent's).
    pub seed: u64,
    /// Timed repeats per case.
    pub repeats: usize,
    /// Whether the child's sanitizer trusts what the launches' types
    /// prove (`VIGIL_TRUST_TYPES`): off, every access is checked.
    pub trust_types: bool,
}

/// Runs `cases` sanitized within `limits`, one child per case: each case
/// measures its kernel on a fresh sanitizer (a context's record pool is
/// not given back when buffers are freed, so a case run after a stencil
/// over 256 MB would measure the pool the stencil left, not its kernel).
/// Calls `on_case` as each case ends; adds a note per child to `notes`.
pub fn run_sanitized(
    opts: &SanitizedOptions,
    cases: &[&'static str],
    limits: ChildLimits,
    notes: &mut Vec<String>,
    on_case: &mut dyn FnMut(&'static str, CaseOutcome),
) {
    let command = |left: &[&'static str]| {
        let mut cmd = Command::new(&opts.exe);
        cmd.arg("--sanitized-child");
        if opts.device == Device::Cpu {
            cmd.arg("--cpu");
        }
        cmd.args(["--seed", &opts.seed.to_string()])
            .args(["--repeats", &opts.repeats.to_string()])
            .args(["--only", left.first().copied().unwrap_or_default()]);
        if !opts.trust_types {
            cmd.env("VIGIL_TRUST_TYPES", "0");
        }
        cmd
    };
    let name = if opts.trust_types {
        "sanitized"
    } else {
        "sanitized, all checked"
    };
    run_cases(name, &command, cases, limits, notes, on_case);
}

/// The child: a sanitized context on `device`, then for every selected
/// case its first launch (checked against the reference, and against
/// race reports: these kernels have none), then the timed repeats, each
/// step reported ([`Line`]) as it goes.
pub fn child_main(device: Device, seed: u64, repeats: usize, only: &[String]) -> Result<()> {
    let ctx = device.builder().sanitize(true).build()?;
    let stream = Stream::new(&ctx)?;
    let kernels = VigilKernels::load(&ctx)?;
    let plan = ChildPlan {
        plan: device.sanitized_plan(),
        repeats,
        events: true,
    };
    let imp = Impl::Vigil(&kernels);
    each_case(only, device.scale(), ctx.sm_count(), seed, |name, case| {
        let mut inst = case.instantiate(&stream)?;
        case.reset(&stream, &mut inst)?;
        stream.synchronize()?;
        let first = first_launch(
            name,
            || case.run(imp, &stream, &mut inst),
            || Ok(ctx.synchronize()?),
        )?;
        let checked = case.check(&stream, &inst).map(|(_, worst)| worst);
        let failed = checked.is_err();
        Line::Check(name, checked.map_err(|e| e.to_string())).emit();
        if !failed {
            timed_repeats(name, &stream, plan, first, || {
                case.run(imp, &stream, &mut inst)
            })?;
            ctx.synchronize()?;
        }
        Ok(())
    });
    Ok(())
}
