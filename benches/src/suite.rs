//! The suite run: every case on one GPU, Vigil plain against the nvcc
//! twin, then Vigil sanitized, each checked against the host reference
//! before it is timed; then the host overheads and the twins under
//! compute-sanitizer ([`tools`]). A failure in one cell is
//! recorded and the run moves on.
//!
//! The same run goes on the CPU backend ([`Device::Cpu`], small sizes),
//! where the GPU-only columns (twins, tools, raw launches, the shadow
//! allocator) say so: that is how the runner itself is tested without a GPU.

use crate::alloc::{Allocators, MIB};
use crate::cases::{case_rng, Case, Scale, CASES};
use crate::data::{max_difference, HostData};
use crate::error::{BenchError, Result};
use crate::kernels::{Impl, Twins, VigilKernels};
use crate::overhead::{launch_overhead, sanitized_launch_us};
use crate::results::{CaseResult, Cell, DeviceInfo, HostOverheads, SuiteResults};
use crate::timing::{measure, Plan};
use crate::tools::{self, Tool, ToolOptions};
use std::path::PathBuf;
use vigil::{Context, DeviceBuffer, LaunchVariant, Stream};

/// What the cell of a sanitized run says until the GPU sanitizer lands.
pub const SANITIZED_NOT_BUILT: &str = "n/a (sanitized GPU launch not built)";

/// Where the suite runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// GPU 0, full sizes.
    Gpu,
    /// The CPU backend, small sizes (to try the runner without a GPU).
    Cpu,
}

impl Device {
    fn builder(self) -> vigil::ContextBuilder {
        match self {
            Device::Gpu => Context::builder().gpu(0),
            Device::Cpu => Context::builder().cpu(),
        }
    }

    fn scale(self) -> Scale {
        match self {
            Device::Gpu => Scale::Full,
            Device::Cpu => Scale::Smoke,
        }
    }
}

/// What the GPU-only cells say on the CPU backend.
pub const GPU_ONLY: &str = "n/a (GPU only)";

/// Options of a suite run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where it runs.
    pub device: Device,
    /// How each series is timed ([`Plan::GPU`] for a real run).
    pub plan: Plan,
    /// The nvcc twins' cubin (or PTX); without it the twin columns say why.
    pub twins: Option<PathBuf>,
    /// Seed of the inputs.
    pub seed: u64,
    /// Timed repeats of every series (to show the spread).
    pub repeats: usize,
    /// Only these cases (all when empty).
    pub only: Vec<String>,
    /// compute-sanitizer runs, when wanted.
    pub tools: Option<ToolOptions>,
}

/// A sanitized context and the kernels on it.
struct Sanitized {
    ctx: Context,
    stream: Stream,
    kernels: VigilKernels,
}

/// The cases `only` selects, in table order.
pub fn selected(only: &[String]) -> Vec<&'static str> {
    CASES
        .iter()
        .map(|&(name, _)| name)
        .filter(|name| only.is_empty() || only.iter().any(|o| o == name))
        .collect()
}

/// Runs the suite as `opts` says.
pub fn run(opts: &Options) -> Result<SuiteResults> {
    let ctx = opts.device.builder().build()?;
    let stream = Stream::new(&ctx)?;
    let kernels = VigilKernels::load(&ctx)?;
    let mut results = SuiteResults {
        date: crate::report::utc_now(),
        seed: opts.seed,
        plan: opts.plan,
        repeats: opts.repeats.max(1),
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
        copy_gbps: copy_bandwidth(&stream, opts.device.scale(), opts.plan)?,
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
    let sanitized = sanitized_context(opts.device);
    for &(name, make) in CASES.iter() {
        if !selected(&opts.only).contains(&name) {
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
        r.sanitized = match &sanitized {
            Ok(s) => run_sanitized(&case, s, opts, &mut r.checks.sanitized),
            Err(why) => Cell::Unavailable(why.clone()),
        };
        results.cases.push(r);
    }
    results.host = host_overheads(&ctx, &kernels, sanitized);
    // The children load the same twins: without them there is nothing to run.
    let skip_tools = match (&twins, &opts.tools) {
        _ if ctx.is_cpu() => Some(GPU_ONLY.to_owned()),
        (_, None) => Some("not run (--no-tools)".to_owned()),
        (Err(why), Some(_)) => Some(format!("not run: the twins did not load ({why})")),
        (Ok(_), Some(_)) => None,
    };
    drop(twins);
    if let (Some(t), None) = (&opts.tools, &skip_tools) {
        for tool in Tool::ALL {
            let cells = tools::run_tool(t, tool, &selected(&opts.only), &mut results.notes);
            for r in &mut results.cases {
                let cell = cells
                    .get(r.name)
                    .cloned()
                    .unwrap_or_else(|| Cell::Failed("no result from the tool run".to_owned()));
                match tool {
                    Tool::Memcheck => r.memcheck = cell,
                    Tool::Racecheck => r.racecheck = cell,
                }
            }
        }
    } else if let Some(why) = skip_tools {
        for r in &mut results.cases {
            r.memcheck = Cell::Unavailable(why.clone());
            r.racecheck = Cell::Unavailable(why.clone());
        }
    }
    Ok(results)
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
    let stream = Stream::new(&ctx).map_err(|e| e.to_string())?;
    let kernels = VigilKernels::load(&ctx).map_err(|e| e.to_string())?;
    Ok(Sanitized {
        ctx,
        stream,
        kernels,
    })
}

/// Device-to-device copy of 1 GiB (4 MiB on the CPU backend): GB/s
/// counting bytes read and written.
fn copy_bandwidth(stream: &Stream, scale: Scale, plan: Plan) -> Result<f64> {
    let n = scale.pick(1usize << 28, 1 << 20);
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

/// Checks and times Vigil on the sanitized context; a race report on
/// these race-free kernels fails the cell.
fn run_sanitized(
    case: &Case,
    s: &Sanitized,
    opts: &Options,
    check: &mut Option<std::result::Result<f64, String>>,
) -> Cell {
    let outcome = (|| -> Result<Vec<Result<crate::timing::Timing>>> {
        let mut inst = case.instantiate(&s.stream)?;
        let checked = case
            .run_checked(Impl::Vigil(&s.kernels), &s.stream, &mut inst)
            .and_then(|(_, worst)| {
                s.ctx.synchronize()?;
                Ok(worst)
            });
        *check = Some(checked.as_ref().map(|w| *w).map_err(|e| e.to_string()));
        checked?;
        let mut times = Vec::with_capacity(opts.repeats);
        for _ in 0..opts.repeats.max(1) {
            let t = measure(&s.stream, opts.plan, || {
                case.run(Impl::Vigil(&s.kernels), &s.stream, &mut inst)
            });
            // A launch slower than the budget is timed once, not repeated.
            let slow = matches!(&t, Ok(t) if t.launches == 1);
            times.push(t);
            if slow {
                break;
            }
        }
        s.ctx.synchronize()?;
        Ok(times)
    })();
    match outcome {
        Ok(times) => Cell::from_repeats(times),
        Err(e) => Cell::Failed(e.to_string()),
    }
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
