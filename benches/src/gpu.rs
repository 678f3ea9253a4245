//! The GPU run: every case on one GPU, Vigil plain against the nvcc twin,
//! then Vigil sanitized, each checked against the host reference before it
//! is timed; then the twins under compute-sanitizer ([`tools`](crate::tools))
//! and the host overheads. A failure in one cell is recorded and the run
//! moves on.

use crate::alloc::{Allocators, MIB};
use crate::cases::{Case, Scale, CASES};
use crate::data::{max_difference, HostData};
use crate::error::{BenchError, Result};
use crate::kernels::{Impl, Twins, VigilKernels};
use crate::overhead::{launch_overhead, sanitized_launch_us};
use crate::results::{CaseResult, Cell, DeviceInfo, HostOverheads, SuiteResults};
use crate::timing::{measure, Plan};
use crate::tools::{self, Tool, ToolOptions};
use std::path::PathBuf;
use vigil::{Context, DeviceBuffer, LaunchVariant, Stream};
use vigil_tests::Rng;

/// What the cell of a sanitized run says until the GPU sanitizer lands.
pub const SANITIZED_NOT_BUILT: &str = "n/a (sanitized GPU launch not built)";

/// Options of a GPU run.
#[derive(Clone, Debug)]
pub struct Options {
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

/// Runs the suite on GPU 0.
pub fn run(opts: &Options) -> Result<SuiteResults> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let kernels = VigilKernels::load(&ctx)?;
    let mut results = SuiteResults {
        date: crate::report::utc_now(),
        seed: opts.seed,
        ..SuiteResults::default()
    };
    results.device = DeviceInfo {
        name: ctx.name().to_owned(),
        sm_count: ctx.sm_count(),
        copy_gbps: copy_bandwidth(&stream)?,
        driver: vigil::driver_version().map_or_else(
            |e| format!("unknown ({e})"),
            |(major, minor)| format!("{major}.{minor}"),
        ),
    };
    let twins = match &opts.twins {
        None => Err("n/a (no --twins cubin: run scripts/bench-gpu.sh)".to_owned()),
        Some(path) => std::fs::read(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))
            .and_then(|image| Twins::load(&ctx, &image).map_err(|e| e.to_string())),
    };
    if let Err(why) = &twins {
        results.notes.push(format!("nvcc twins not loaded: {why}"));
    }
    let sanitized = sanitized_context();
    let mut rng = Rng::new(opts.seed);
    for &(name, make) in CASES.iter() {
        if !selected(&opts.only).contains(&name) {
            continue;
        }
        let case = make(Scale::Full, ctx.sm_count(), &mut rng);
        eprintln!("vigil-bench: {name} ({})", case.size);
        let mut r = CaseResult::new(&case);
        run_plain(
            &case,
            &stream,
            &kernels,
            twins.as_ref().ok(),
            opts.repeats,
            &mut r,
        );
        if let Err(why) = &twins {
            r.twin = Cell::Unavailable(why.clone());
        }
        r.sanitized = match &sanitized {
            Ok(s) => run_sanitized(&case, s, opts.repeats, &mut r.checks.sanitized),
            Err(why) => Cell::Unavailable(why.clone()),
        };
        results.cases.push(r);
    }
    results.host = host_overheads(&ctx, &kernels, &sanitized);
    drop(twins);
    if let Some(t) = &opts.tools {
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
    } else {
        for r in &mut results.cases {
            let skipped = Cell::Unavailable("not run (--no-tools)".to_owned());
            r.memcheck = skipped.clone();
            r.racecheck = skipped;
        }
    }
    Ok(results)
}

/// A sanitized context on GPU 0 whose launches run the sanitized variant,
/// or what the cell says instead.
fn sanitized_context() -> std::result::Result<Sanitized, String> {
    let ctx = Context::builder()
        .gpu(0)
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

/// Device-to-device copy of 1 GiB: GB/s counting bytes read and written.
fn copy_bandwidth(stream: &Stream) -> Result<f64> {
    let n = 1usize << 28;
    let src = DeviceBuffer::<f32>::alloc_zeroed(stream, n)?;
    let mut dst = DeviceBuffer::<f32>::alloc(stream, n)?;
    let t = measure(stream, Plan::GPU, || Ok(dst.copy_from(stream, &src)?))?;
    Ok(vigil_tests::gb_per_s(2 * 4 * n, t.median_ms))
}

/// Checks Vigil and the twin on the plain context, compares them, then
/// times both, repeats interleaved.
fn run_plain(
    case: &Case,
    stream: &Stream,
    kernels: &VigilKernels,
    twins: Option<&Twins>,
    repeats: usize,
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
    for _ in 0..repeats.max(1) {
        if vigil_out.is_some() {
            vigil_times.push(measure(stream, Plan::GPU, || {
                case.run(Impl::Vigil(kernels), stream, &mut inst)
            }));
        }
        if let (Some(t), Some(_)) = (twins, &twin_out) {
            twin_times.push(measure(stream, Plan::GPU, || {
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
    repeats: usize,
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
        let times = (0..repeats.max(1))
            .map(|_| {
                measure(&s.stream, Plan::GPU, || {
                    case.run(Impl::Vigil(&s.kernels), &s.stream, &mut inst)
                })
            })
            .collect();
        s.ctx.synchronize()?;
        Ok(times)
    })();
    match outcome {
        Ok(times) => Cell::from_repeats(times),
        Err(e) => Cell::Failed(e.to_string()),
    }
}

/// Launch and allocation overheads; each failure is recorded, not fatal.
fn host_overheads(
    ctx: &Context,
    kernels: &VigilKernels,
    sanitized: &std::result::Result<Sanitized, String>,
) -> HostOverheads {
    let text = |e: BenchError| e.to_string();
    HostOverheads {
        launch: Some(launch_overhead(ctx, kernels).map_err(text)),
        sanitized_launch_us: Some(match sanitized {
            Ok(s) => sanitized_launch_us(&s.ctx, &s.kernels)
                .map_err(text)
                .and_then(|us| us.ok_or_else(|| SANITIZED_NOT_BUILT.to_owned())),
            Err(why) => Err(why.clone()),
        }),
        alloc: Some(
            Allocators::new(ctx)
                .and_then(|a| a.measure(MIB, 5000))
                .map_err(text),
        ),
    }
}
