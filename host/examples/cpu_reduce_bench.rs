//! Benchmark of the CPU executor: `reduce_sum` with 1,024 threads per block
//! over 4,096 blocks (4,194,304 `f32` elements), plain and checked.
//!
//! ```text
//! cargo run --release -p vigil --example cpu_reduce_bench [-- --workers N --iters N]
//! ```
//!
//! Three variants over the same buffers (allocated from the CPU
//! sanitizer's shadow arena): plain; checked with a no-op
//! `SanitizerRuntime` (the cost of the hooks' plumbing alone); checked with
//! the real CPU sanitizer ([`CpuRaceSanitizer`]: the race engine over host
//! shadow memory). Prints wall times; it is not a timed test.

use std::panic::Location;
use std::time::Duration;
use vigil::device::host_runtime::{AtomicAccess, SanitizerRuntime, ThreadContext};
use vigil::device::{AccessKind, Ordering, Scope};
use vigil::unstable::cpu::sanitizer::CpuRaceSanitizer;
use vigil::unstable::cpu::{checked_entry, plain_entry, CpuExecutor, HostArgs, KernelEntry};
use vigil::{ErrorReport, LaunchConfig, ParamBuffer, StreamId};
use vigil_kernels::examples::{reduce_sum, REDUCE_BLOCK};

const BLOCKS: u32 = 4096;
const ELEMENTS: usize = BLOCKS as usize * REDUCE_BLOCK as usize;

/// A sanitizer runtime whose hooks do nothing but perform the atomics.
struct NoopSanitizer;

impl SanitizerRuntime for NoopSanitizer {
    fn access(&self, _: &ThreadContext<'_>, _: usize, _: usize, _: AccessKind, _: &Location<'_>) {}
    fn atomic(
        &self,
        _: &ThreadContext<'_>,
        _: AtomicAccess,
        _: &'static Location<'static>,
        op: &mut dyn FnMut() -> bool,
    ) {
        op();
    }
    fn fence(&self, _: &ThreadContext<'_>, _: Ordering, _: Scope, _: &Location<'_>) {}
}

/// Sanitized buffers from the sanitizer's arena: the input and the partials.
struct Buffers<'a> {
    x: &'a [f32],
    partials: &'a mut [f32],
    total: &'a mut [f32],
}

impl<'a> Buffers<'a> {
    fn new(san: &'a CpuRaceSanitizer, x: &[f32]) -> Self {
        let slice = |n: usize| -> &'a mut [f32] {
            let a = san
                .alloc((n * size_of::<f32>()) as u64)
                .expect("sanitized buffer");
            // SAFETY: a fresh, zeroed, suitably aligned arena allocation of
            // `n` f32s that lives as long as `san` and is used only here.
            unsafe { std::slice::from_raw_parts_mut(a.address as *mut f32, n) }
        };
        let xs = slice(x.len());
        xs.copy_from_slice(x);
        Buffers {
            x: xs,
            partials: slice(BLOCKS as usize),
            total: slice(1),
        }
    }
}

/// Runs the reduction once; returns its wall time and the total.
fn reduce(
    ex: &CpuExecutor,
    entry: KernelEntry,
    sanitizer: Option<&dyn SanitizerRuntime>,
    real: Option<&CpuRaceSanitizer>,
    b: &mut Buffers<'_>,
) -> Result<(Duration, u64, f32), ErrorReport> {
    let stream = StreamId(1);
    let launch = |grid: u32, params: &ParamBuffer| {
        if let Some(s) = real {
            s.begin_launch(stream, "reduce_sum", grid.into(), REDUCE_BLOCK.into())?;
        }
        // SAFETY: `reduce_sum`'s parameters, packed in order from live
        // slices that nothing else touches until the launch returns.
        let stats = unsafe {
            ex.launch(
                &LaunchConfig::new(grid, REDUCE_BLOCK),
                entry,
                params.as_bytes(),
                sanitizer,
            )
        }?;
        if let Some(s) = real {
            s.end_launch();
        }
        Ok::<_, ErrorReport>(stats)
    };
    let mut p = ParamBuffer::new();
    p.push_host_slice(b.x).push_host_slice_mut(b.partials);
    let stats = launch(BLOCKS, &p)?;
    let mut p = ParamBuffer::new();
    p.push_host_slice(b.partials).push_host_slice_mut(b.total);
    launch(1, &p)?;
    Ok((stats.elapsed, stats.resumes, b.total[0]))
}

/// The value of `--name N` on the command line, or `default`.
fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got {v:?}"))
        })
}

fn main() -> Result<(), ErrorReport> {
    let workers = arg("--workers", CpuExecutor::default_workers());
    let iters = arg("--iters", 3).max(1);
    let ex = CpuExecutor::new(workers)?;
    // Small integers: every summation order gives the exact total.
    let x: Vec<f32> = (0..ELEMENTS).map(|i| (i % 5) as f32).collect();
    let want: f32 = x.iter().sum();
    println!(
        "reduce_sum on the CPU executor: {BLOCKS} blocks x {REDUCE_BLOCK} threads, \
         {ELEMENTS} f32, {} worker(s), {} iteration(s)",
        ex.num_virtual_sms(),
        iters
    );
    let noop = NoopSanitizer;
    let san = CpuRaceSanitizer::new()?;
    let mut buffers = Buffers::new(&san, &x);
    type Variant<'a> = (
        &'a str,
        KernelEntry,
        Option<&'a dyn SanitizerRuntime>,
        Option<&'a CpuRaceSanitizer>,
    );
    let variants: [Variant<'_>; 3] = [
        ("plain", plain_entry::<reduce_sum>(), None, None),
        (
            "checked, no-op sanitizer runtime (hook cost only)",
            checked_entry::<reduce_sum>(),
            Some(&noop),
            None,
        ),
        (
            "checked, CPU race sanitizer",
            checked_entry::<reduce_sum>(),
            Some(&san),
            Some(&san),
        ),
    ];
    for (name, entry, sanitizer, real) in variants {
        let mut times = Vec::with_capacity(iters);
        let mut resumes = 0;
        for _ in 0..iters {
            let (t, r, total) = reduce(&ex, entry, sanitizer, real, &mut buffers)?;
            assert_eq!(total, want, "{name}: wrong total");
            times.push(t);
            resumes = r;
            if let Some(s) = real {
                // The host waited for the launches: the next run is ordered
                // after this one.
                s.host_sync(vigil::HostSync::Context);
                let reports = s.take();
                assert!(reports.is_empty(), "{name}: unexpected races:\n{reports}");
            }
        }
        let best = times.iter().min().copied().unwrap_or_default();
        let all: Vec<String> = times
            .iter()
            .map(|t| format!("{:.3}", t.as_secs_f64()))
            .collect();
        println!(
            "{name:<52} best {:>7.3} s  ({:.1} M elements/s, {resumes} coroutine resumptions; runs: {} s)",
            best.as_secs_f64(),
            ELEMENTS as f64 / best.as_secs_f64() / 1e6,
            all.join(", ")
        );
    }
    Ok(())
}
