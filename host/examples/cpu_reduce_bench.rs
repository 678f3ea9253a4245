//! Benchmark of the CPU executor: `reduce_sum` with 1,024 threads per block
//! over 4,096 blocks (4,194,304 `f32` elements), plain and checked.
//!
//! ```text
//! cargo run --release -p vigil --example cpu_reduce_bench [-- --workers N --iters N]
//! ```
//!
//! The checked variant runs with a no-op `SanitizerRuntime`: it measures
//! the cost of the sanitizer hooks' plumbing only, until the real CPU
//! sanitizer is wired in. Prints wall times; it is not a timed test.

use std::panic::Location;
use std::time::Duration;
use vigil::cpu::{checked_entry, plain_entry, CpuExecutor, HostArgs, KernelEntry};
use vigil::device::host_runtime::{AtomicAccess, SanitizerRuntime, ThreadContext};
use vigil::device::{AccessKind, Ordering, Scope};
use vigil::{LaunchConfig, ParamBuffer};
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

/// Runs the reduction once; returns its wall time and the total.
fn reduce(
    ex: &CpuExecutor,
    entry: KernelEntry,
    sanitizer: Option<&dyn SanitizerRuntime>,
    x: &[f32],
) -> (Duration, u64, f32) {
    let mut partials = vec![0.0f32; BLOCKS as usize];
    let mut p = ParamBuffer::new();
    p.push_host_slice(x).push_host_slice_mut(&mut partials);
    // SAFETY: `reduce_sum`'s parameters, packed in order from live slices
    // that nothing touches until the launch returns.
    let stats = unsafe {
        ex.launch(
            &LaunchConfig::new(BLOCKS, REDUCE_BLOCK),
            entry,
            p.as_bytes(),
            sanitizer,
        )
    }
    .expect("reduction launch");
    let mut total = [0.0f32];
    let mut p = ParamBuffer::new();
    p.push_host_slice(&partials).push_host_slice_mut(&mut total);
    // SAFETY: as above.
    unsafe {
        ex.launch(
            &LaunchConfig::new(1, REDUCE_BLOCK),
            entry,
            p.as_bytes(),
            sanitizer,
        )
    }
    .expect("final reduction launch");
    (stats.elapsed, stats.resumes, total[0])
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

fn main() {
    let workers = arg("--workers", CpuExecutor::default_workers());
    let iters = arg("--iters", 3).max(1);
    let ex = CpuExecutor::new(workers).expect("start the CPU executor");
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
    let variants: [(&str, KernelEntry, Option<&dyn SanitizerRuntime>); 2] = [
        ("plain", plain_entry::<reduce_sum>(), None),
        (
            "checked, no-op sanitizer runtime (hook cost only)",
            checked_entry::<reduce_sum>(),
            Some(&noop),
        ),
    ];
    for (name, entry, sanitizer) in variants {
        let mut times = Vec::with_capacity(iters);
        let mut resumes = 0;
        for _ in 0..iters {
            let (t, r, total) = reduce(&ex, entry, sanitizer, &x);
            assert_eq!(total, want, "{name}: wrong total");
            times.push(t);
            resumes = r;
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
}
