//! The suite run, in phases: every case on one GPU, Vigil plain against
//! the nvcc twin, each checked against the host reference before it is
//! timed; the host overheads; then, sharing one time budget, Vigil
//! sanitized and the twins under each compute-sanitizer tool, all in
//! time-boxed child processes ([`crate::sanitized`], [`tools`]). A failure in one
//! cell is recorded and the run moves on; the results so far go to a
//! callback after every case of every phase, so a run ended from outside
//! still leaves its report.
//!
//! The same run goes on the CPU backend ([`Device::Cpu`], small sizes),
//! where the GPU-only columns (twins, tools, raw launches, the shadow
//! allocator) say so: that is how the runner itself is tested without a GPU.

use crate::alloc::{Allocators, MIB};
use crate::budget::Budget;
use crate::cases::{case_rng, Case, CASES};
use crate::child::{CaseOutcome, ChildLimits};
use crate::data::{max_difference, HostData};
use crate::error::{BenchError, Result};
use crate::kernels::{Impl, Twins, VigilKernels};
use crate::overhead::{launch_overhead, sanitized_launch_us};
use crate::results::{CaseResult, Cell, DeviceInfo, HostOverheads, PhaseTime, SuiteResults};
use crate::sanitized::{run_sanitized, SanitizedOptions};
use crate::timing::{measure, Plan};
use crate::tools::{self, Tool, ToolOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use vigil::{Context, DeviceBuffer, LaunchVariant, Stream};

pub use crate::cases::selected;
pub use crate::device::Device;

/// What the cell of a sanitized run says until the GPU sanitizer lands.
pub const SANITIZED_NOT_BUILT: &str = "n/a (sanitized GPU launch not built)";

/// What the GPU-only cells say on the CPU backend.
pub const GPU_ONLY: &str = "n/a (GPU only)";

/// The default per-case limit of a sanitized or compute-sanitizer cell (s).
pub const DEFAULT_CASE_LIMIT_S: u64 = 20;

/// The default budget of a whole run (s): the plain phase takes what it
/// needs and the sanitized and tool columns share the rest, so that with
/// nvcc's compile of the twins `bench-run/run.sh` ends within seven
/// minutes.
pub const DEFAULT_BUDGET_S: u64 = 390;

/// Options of a suite run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where it runs.
    pub device: Device,
    /// How each plain series is timed ([`Plan::GPU`] for a real run).
    pub plan: Plan,
    /// The nvcc twins' cubin (or PTX); without it the twin columns say why.
    pub twins: Option<PathBuf>,
    /// Seed of the inputs.
    pub seed: u64,
    /// Timed repeats of every series (to show the spread).
    pub repeats: usize,
    /// Only these cases (all when empty).
    pub only: Vec<String>,
    /// This program, re-run as the measuring children.
    pub exe: PathBuf,
    /// compute-sanitizer, when its columns are wanted.
    pub compute_sanitizer: Option<PathBuf>,
    /// The whole run's wall time: what the plain phase leaves of it, the
    /// sanitized cells and the tool columns share.
    pub budget: Duration,
    /// A child's limit on one case, from its first launch.
    pub case_limit: Duration,
}

/// A sanitized context and the kernels on it.
struct Sanitized {
    ctx: Context,
    kernels: VigilKernels,
}

/// The columns measured in children, sharing the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Sanitized,
    /// Sanitized trusting no type (`VIGIL_TRUST_TYPES=0`).
    AllChecked,
    Tool(Tool),
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Sanitized => "sanitized",
            Phase::AllChecked => "sanitized, all checked",
            Phase::Tool(t) => t.name(),
        }
    }

    /// Its weight in the budget: the sanitized column is the one the
    /// suite is about.
    fn weight(self) -> u32 {
        match self {
            Phase::Sanitized => 2,
            Phase::AllChecked | Phase::Tool(_) => 1,
        }
    }

    fn cell(self, r: &mut CaseResult) -> &mut Cell {
        match self {
            Phase::Sanitized => &mut r.sanitized,
            Phase::AllChecked => &mut r.sanitized_all_checked,
            Phase::Tool(Tool::Memcheck) => &mut r.memcheck,
            Phase::Tool(Tool::Racecheck) => &mut r.racecheck,
        }
    }
}

/// Times a phase and records it.
fn phase_done(
    results: &mut SuiteResults,
    name: &'static str,
    since: Instant,
    share: Option<Duration>,
) {
    let seconds = since.elapsed().as_secs_f64();
    let share_s = share.map(|d| d.as_secs_f64());
    match share_s {
        Some(s) => {
            eprintln!("vigil-bench: phase {name} took {seconds:.1} s (its share: {s:.0} s)")
        }
        None => eprintln!("vigil-bench: phase {name} took {seconds:.1} s"),
    }
    results.phases.push(PhaseTime {
        name,
        seconds,
        share_s,
    });
}

/// Runs the suite as `opts` says, handing the results so far to
/// `progress` after every case of every phase.
pub fn run(opts: &Options, progress: &mut dyn FnMut(&SuiteResults)) -> Result<SuiteResults> {
    let start = Instant::now();
    let budget = Budget::new(opts.budget);
    let ctx = opts.device.builder().build()?;
    let stream = Stream::new(&ctx)?;
    let kernels = VigilKernels::load(&ctx)?;
    let mut results = SuiteResults {
        date: crate::report::utc_now(),
        seed: opts.seed,
        plan: opts.plan,
        sanitized_plan: opts.device.sanitized_plan(),
        repeats: opts.repeats.max(1),
        not_run_yet: selected(&opts.only),
        ..SuiteResults::default()
    };
    if ctx.is_cpu() {
        results.notes.push(
            "CPU backend at small sizes: a try-out of the runner, not a benchmark".to_owned(),
        );
    }
    results.device = DeviceInfo {
        name: ctx.name().to_owned(),
        sm_count: ctx.sm_count(),
        copy_gbps: copy_bandwidth(&stream, opts.device, opts.plan)?,
        driver: vigil::driver_version().map_or_else(
            |_| "not found".to_owned(),
            |(major, minor)| format!("{major}.{minor}"),
        ),
    };
    let twins = match &opts.twins {
        _ if ctx.is_cpu() => Err(GPU_ONLY.to_owned()),
        None => Err("n/a (no --twins cubin; bench-run/run.sh compiles it)".to_owned()),
        Some(path) => Twins::from_files(&ctx, path).map_err(|e| e.to_string()),
    };
    match &twins {
        Err(why) => results.notes.push(format!("nvcc twins not loaded: {why}")),
        Ok(t) if !t.signatures_checked() => results
            .notes
            .push("nvcc twins loaded without their PTX: parameter lists not checked".to_owned()),
        Ok(_) => {}
    }
    phase_done(&mut results, "start-up", start, None);
    progress(&results);

    let plain = Instant::now();
    for &(name, make) in CASES.iter() {
        if !results.not_run_yet.contains(&name) {
            continue;
        }
        let case = make(
            opts.device.scale(),
            ctx.sm_count(),
            &mut case_rng(opts.seed, name),
        );
        eprintln!("vigil-bench: {name} ({})", case.size);
        let mut r = CaseResult::new(&case);
        run_plain(&case, &stream, &kernels, twins.as_ref().ok(), opts, &mut r);
        if let Err(why) = &twins {
            r.twin = Cell::Unavailable(why.clone());
        }
        results.not_run_yet.retain(|n| *n != name);
        results.cases.push(r);
        progress(&results);
    }
    phase_done(&mut results, "plain", plain, None);

    let host = Instant::now();
    let sanitized = sanitized_context(opts.device);
    // The children load their own sanitized context; this one is for the
    // launch overhead, and says whether there is a sanitized launch at all.
    let sanitized_gate = sanitized.as_ref().err().cloned();
    results.host = host_overheads(&ctx, &kernels, sanitized);
    phase_done(&mut results, "host overheads", host, None);
    progress(&results);

    // The children load the same twins: without them there is nothing to run.
    let skip_tools = match (&twins, &opts.compute_sanitizer) {
        _ if ctx.is_cpu() => Some(GPU_ONLY.to_owned()),
        (_, None) => Some("not run (--no-tools)".to_owned()),
        (Err(why), Some(_)) => Some(format!("not run: the twins did not load ({why})")),
        (Ok(_), Some(_)) => None,
    };
    drop(twins);
    let mut phases = Vec::new();
    match sanitized_gate {
        None => phases.push(Phase::Sanitized),
        Some(why) => set_column(&mut results, Phase::Sanitized, &why),
    }
    // The CPU backend checks every access whatever the types prove.
    if ctx.is_cpu() {
        let why = "the CPU backend checks every access either way";
        set_column(&mut results, Phase::AllChecked, why);
    } else if phases.contains(&Phase::Sanitized) {
        phases.push(Phase::AllChecked);
    } else {
        set_column(
            &mut results,
            Phase::AllChecked,
            "not run: no sanitized launch",
        );
    }
    match (&skip_tools, &opts.compute_sanitizer, &opts.twins) {
        (None, Some(cs), Some(twins)) => {
            let tool_opts = ToolOptions {
                compute_sanitizer: cs.clone(),
                exe: opts.exe.clone(),
                twins: twins.clone(),
                seed: opts.seed,
            };
            phases.extend(Tool::ALL.map(Phase::Tool));
            run_phases(
                opts,
                budget,
                &phases,
                Some(&tool_opts),
                &mut results,
                progress,
            );
        }
        _ => {
            let why = skip_tools.unwrap_or_else(|| "not run".to_owned());
            for tool in Tool::ALL {
                set_column(&mut results, Phase::Tool(tool), &why);
            }
            run_phases(opts, budget, &phases, None, &mut results, progress);
        }
    }
    phase_done(&mut results, "total", start, None);
    Ok(results)
}

/// Sets `phase`'s cell of every case to "unavailable: `why`".
fn set_column(results: &mut SuiteResults, phase: Phase, why: &str) {
    for r in &mut results.cases {
        *phase.cell(r) = Cell::Unavailable(why.to_owned());
    }
}

/// Runs the budgeted phases in order, each within its share of what is
/// left of the budget.
fn run_phases(
    opts: &Options,
    budget: Budget,
    phases: &[Phase],
    tool_opts: Option<&ToolOptions>,
    results: &mut SuiteResults,
    progress: &mut dyn FnMut(&SuiteResults),
) {
    let cases: Vec<&'static str> = results.cases.iter().map(|r| r.name).collect();
    for (i, &phase) in phases.iter().enumerate() {
        let later: u32 = phases[i + 1..].iter().map(|p| p.weight()).sum();
        let since = Instant::now();
        let limits = ChildLimits {
            case: opts.case_limit,
            deadline: budget.share(phase.weight(), later),
        };
        eprintln!(
            "vigil-bench: {} ({:.0} s of the budget)",
            phase.name(),
            limits
                .deadline
                .saturating_duration_since(since)
                .as_secs_f64()
        );
        let mut notes = Vec::new();
        let mut on_case = |case: &'static str, outcome: CaseOutcome| {
            if let Some(r) = results.cases.iter_mut().find(|r| r.name == case) {
                *phase.cell(r) = outcome.cell;
                if phase == Phase::Sanitized {
                    r.checks.sanitized = outcome.check;
                }
            }
            progress(results);
        };
        match (phase, tool_opts) {
            (Phase::Sanitized | Phase::AllChecked, _) => run_sanitized(
                &SanitizedOptions {
                    exe: opts.exe.clone(),
                    device: opts.device,
                    seed: opts.seed,
                    repeats: opts.repeats.max(1),
                    trust_types: phase == Phase::Sanitized,
                },
                &cases,
                limits,
                &mut notes,
                &mut on_case,
            ),
            (Phase::Tool(tool), Some(t)) => {
                tools::run_tool(t, tool, &cases, limits, &mut notes, &mut on_case)
            }
            (Phase::Tool(_), None) => {}
        }
        results.notes.append(&mut notes);
        let share = limits.deadline.saturating_duration_since(since);
        phase_done(results, phase.name(), since, Some(share));
        progress(results);
    }
}

/// A sanitized context on `device` whose launches run the sanitized
/// variant, or what the cell says instead.
fn sanitized_context(device: Device) -> std::result::Result<Sanitized, String> {
    let ctx = device
        .builder()
        .sanitize(true)
        .build()
        .map_err(|e| format!("sanitized context: {e}"))?;
    if ctx.launch_variant() != LaunchVariant::Sanitized {
        return Err(SANITIZED_NOT_BUILT.to_owned());
    }
    let kernels = VigilKernels::load(&ctx).map_err(|e| e.to_string())?;
    Ok(Sanitized { ctx, kernels })
}

/// Device-to-device copy of 1 GiB (4 MiB on the CPU backend): GB/s
/// counting bytes read and written.
fn copy_bandwidth(stream: &Stream, device: Device, plan: Plan) -> Result<f64> {
    let n = device.scale().pick(1usize << 28, 1 << 20);
    let src = DeviceBuffer::<f32>::alloc_zeroed(stream, n)?;
    let mut dst = DeviceBuffer::<f32>::alloc(stream, n)?;
    let t = measure(stream, plan, || Ok(dst.copy_from(stream, &src)?))?;
    Ok(vigil_tests::gb_per_s(2 * 4 * n, t.median_ms))
}

/// Checks Vigil and the twin on the plain context, compares them, then
/// times both, repeats interleaved.
fn run_plain(
    case: &Case,
    stream: &Stream,
    kernels: &VigilKernels,
    twins: Option<&Twins>,
    opts: &Options,
    r: &mut CaseResult,
) {
    let mut inst = match case.instantiate(stream) {
        Ok(inst) => inst,
        Err(e) => {
            r.vigil = Cell::Failed(e.to_string());
            return;
        }
    };
    let mut check = |imp: Impl<'_>| match case.run_checked(imp, stream, &mut inst) {
        Ok((out, worst)) => (Some(out), Some(Ok(worst))),
        Err(e) => (None, Some(Err(e.to_string()))),
    };
    let (vigil_out, vigil_check) = check(Impl::Vigil(kernels));
    let (twin_out, twin_check) = match twins {
        Some(t) => check(Impl::Twin(t)),
        None => (None, None),
    };
    r.checks.vigil = vigil_check;
    r.checks.twin = twin_check;
    if let (Some(a), Some(b)) = (&vigil_out, &twin_out) {
        r.checks.vigil_vs_twin = compare(case, a, b);
    }
    let mut vigil_times = Vec::new();
    let mut twin_times = Vec::new();
    for _ in 0..opts.repeats.max(1) {
        if vigil_out.is_some() {
            vigil_times.push(measure(stream, opts.plan, || {
                case.run(Impl::Vigil(kernels), stream, &mut inst)
            }));
        }
        if let (Some(t), Some(_)) = (twins, &twin_out) {
            twin_times.push(measure(stream, opts.plan, || {
                case.run(Impl::Twin(t), stream, &mut inst)
            }));
        }
    }
    r.vigil = timed_or_wrong(vigil_times, &r.checks.vigil);
    r.twin = timed_or_wrong(twin_times, &r.checks.twin);
}

/// The timing cell, or the failed check that kept it from being timed.
fn timed_or_wrong(
    times: Vec<Result<crate::timing::Timing>>,
    check: &Option<std::result::Result<f64, String>>,
) -> Cell {
    match check {
        Some(Err(e)) => Cell::Failed(format!("wrong result, not timed: {e}")),
        None => Cell::Unavailable("not run".to_owned()),
        Some(Ok(_)) => Cell::from_repeats(times),
    }
}

/// The largest scaled difference over the checked outputs.
fn compare(case: &Case, a: &[HostData], b: &[HostData]) -> Option<f64> {
    let scale = case.compare_scale();
    case.outputs
        .iter()
        .zip(a.iter().zip(b))
        .filter(|(o, _)| o.expect.is_some())
        .map(|(_, (a, b))| max_difference(a, b, scale))
        .try_fold(0.0f64, |m, d| d.map(|d| m.max(d)))
}

/// Launch and allocation overheads; each failure is recorded, not fatal.
/// The sanitized context is dropped (its shadow allocator released) before
/// the allocators are timed, so that theirs is the only one.
fn host_overheads(
    ctx: &Context,
    kernels: &VigilKernels,
    sanitized: std::result::Result<Sanitized, String>,
) -> HostOverheads {
    let text = |e: BenchError| e.to_string();
    let sanitized_launch = match &sanitized {
        Ok(s) => sanitized_launch_us(&s.ctx, &s.kernels)
            .map_err(text)
            .and_then(|us| us.ok_or_else(|| SANITIZED_NOT_BUILT.to_owned())),
        Err(why) => Err(why.clone()),
    };
    drop(sanitized);
    if ctx.is_cpu() {
        return HostOverheads {
            launch: Some(Err(GPU_ONLY.to_owned())),
            sanitized_launch_us: Some(sanitized_launch),
            alloc: Some(Err(GPU_ONLY.to_owned())),
        };
    }
    HostOverheads {
        launch: Some(launch_overhead(ctx, kernels).map_err(text)),
        sanitized_launch_us: Some(sanitized_launch),
        alloc: Some(
            Allocators::new(ctx)
                .and_then(|a| a.measure(MIB, 5000))
                .map_err(text),
        ),
    }
}
