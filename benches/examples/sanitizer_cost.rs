//! Where a sanitized streaming launch spends its time, side by side in one
//! run: the same 2^26-thread grid as the suite's `copy` with no access
//! (blocks alone: the sanitizer's CTA entry and exit), with one coalesced
//! load per thread, with one coalesced store per thread, and with both
//! (`copy`); then `copy` as a grid-stride loop over a few blocks per SM
//! (the same accesses, fewer blocks), and `copy` once more at the end,
//! after some 400 sanitized launches (a sanitizer that slows down as a
//! program runs shows there); then a counter every thread adds to, at
//! three grid sizes (how a hot word's atomics scale). Each row: plain
//! and sanitized time per launch (device events, medians), their ratio,
//! and the sanitized time over the rows' units (blocks, warp-wide
//! 128-byte line accesses or atomics, summed over the GPU), and the word
//! accesses its sanitized launches left unchecked against their own
//! block (the same-block table was full: 0 when nothing was bounded).
//!
//! ```text
//! cargo run --release -p vigil-bench --example sanitizer_cost
//! ```
//!
//! Without a GPU it prints why and exits 0; with `VIGIL_REQUIRE_GPU=1` it
//! fails instead. Every sanitized run must end with no race report.

use vigil::{Context, DeviceBuffer, KernelFn, LaunchConfig, Module, Stream};
use vigil_bench::error::Result;
use vigil_bench::kernels::BENCH_PTX;
use vigil_bench::timing::{measure, Plan, Timing};
use vigil_bench_kernels::{cost, streaming};

/// Elements of every buffer (the suite's `copy` size).
const N: usize = 1 << 26;
/// Threads per block (the suite's).
const BLOCK: u32 = 256;

/// One context's kernels and buffers.
struct Side {
    ctx: Context,
    stream: Stream,
    blocks_only: KernelFn<cost::blocks_only>,
    loads_only: KernelFn<cost::loads_only>,
    stores_only: KernelFn<cost::stores_only>,
    copy: KernelFn<streaming::copy>,
    copy_grid_stride: KernelFn<cost::copy_grid_stride>,
    counter: KernelFn<streaming::counter>,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    count: DeviceBuffer<u32>,
}

impl Side {
    fn new(sanitize: bool) -> Result<Side> {
        let ctx = Context::builder()
            .env_vars()
            .gpu(0)
            .sanitize(sanitize)
            .build()?;
        let stream = Stream::new(&ctx)?;
        let module = Module::from_ptx(&ctx, BENCH_PTX)?;
        let mut x = DeviceBuffer::alloc(&stream, N)?;
        let host: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();
        x.copy_from_host(&stream, &host)?;
        let y = DeviceBuffer::alloc_zeroed(&stream, N)?;
        let count = DeviceBuffer::alloc_zeroed(&stream, 1)?;
        ctx.synchronize()?;
        Ok(Side {
            blocks_only: module.kernel()?,
            loads_only: module.kernel()?,
            stores_only: module.kernel()?,
            copy: module.kernel()?,
            copy_grid_stride: module.kernel()?,
            counter: module.kernel()?,
            ctx,
            stream,
            x,
            y,
            count,
        })
    }

    /// Times `variant` with `plan`, then checks the context has no report
    /// (a race fails the row); the timing and the word accesses left
    /// unchecked against their block by the row's launches.
    fn time(&mut self, variant: Variant, blocks: u32, plan: Plan) -> Result<(Timing, u64)> {
        let cfg = LaunchConfig::new(blocks, BLOCK);
        let before = self.ctx.detection_bounds().unchecked_words;
        let Side {
            stream: s,
            x,
            y,
            count,
            ..
        } = self;
        let t = match variant {
            Variant::BlocksOnly => measure(s, plan, || {
                Ok(s.launch(&self.blocks_only, cfg, (0u32, &mut *y))?)
            }),
            Variant::LoadsOnly => measure(s, plan, || {
                Ok(s.launch(&self.loads_only, cfg, (&*x, &mut *y))?)
            }),
            Variant::StoresOnly => measure(s, plan, || {
                Ok(s.launch(&self.stores_only, cfg, (&mut *y,))?)
            }),
            Variant::Copy => measure(s, plan, || Ok(s.launch(&self.copy, cfg, (&*x, &mut *y))?)),
            Variant::CopyGridStride => measure(s, plan, || {
                Ok(s.launch(&self.copy_grid_stride, cfg, (&*x, &mut *y))?)
            }),
            Variant::Counter => {
                let n = (blocks * BLOCK) as usize;
                measure(s, plan, || {
                    Ok(s.launch(&self.counter, cfg, (n, &mut *count))?)
                })
            }
        }?;
        self.ctx.synchronize()?;
        Ok((t, self.ctx.detection_bounds().unchecked_words - before))
    }
}

#[derive(Clone, Copy, Debug)]
enum Variant {
    BlocksOnly,
    LoadsOnly,
    StoresOnly,
    Copy,
    CopyGridStride,
    /// Every thread adds one to one word (a hot word's atomics).
    Counter,
}

fn main() -> std::result::Result<(), vigil::ErrorReport> {
    if vigil::testing::require_gpu().is_none() {
        return Ok(());
    }
    let mut plain = Side::new(false)?;
    let mut sanitized = Side::new(true)?;
    let sms = plain.ctx.sm_count();
    let full = (N as u32).div_ceil(BLOCK);
    let lines = (N * 4 / 128) as f64;
    println!(
        "{} ({sms} SMs), {N} f32, blocks of {BLOCK} threads",
        plain.ctx.name()
    );
    println!(
        "{:<28} {:>8} {:>11} {:>13} {:>9} {:>10}  sanitized per unit",
        "variant", "blocks", "plain ms", "sanitized ms", "ratio", "unchecked"
    );
    let rows: [(&str, Variant, u32, f64, &str); 11] = [
        (
            "blocks only",
            Variant::BlocksOnly,
            full,
            f64::from(full),
            "block",
        ),
        ("loads only", Variant::LoadsOnly, full, lines, "line"),
        ("stores only", Variant::StoresOnly, full, lines, "line"),
        ("copy", Variant::Copy, full, 2.0 * lines, "line"),
        (
            "copy, grid-stride 8/SM",
            Variant::CopyGridStride,
            8 * sms,
            2.0 * lines,
            "line",
        ),
        (
            "copy, grid-stride 32/SM",
            Variant::CopyGridStride,
            32 * sms,
            2.0 * lines,
            "line",
        ),
        (
            "blocks only, 8/SM",
            Variant::BlocksOnly,
            8 * sms,
            f64::from(8 * sms),
            "block",
        ),
        // Hundreds of launches later: a sanitizer that slows down as a
        // program runs (its epochs outgrowing the compact cells) shows here.
        (
            "copy, after the rows above",
            Variant::Copy,
            full,
            2.0 * lines,
            "line",
        ),
        // One hot word: how its atomics' cost grows with the grid.
        (
            "counter, 2^16 threads",
            Variant::Counter,
            1 << 8,
            f64::from((1 << 8) * BLOCK),
            "atomic",
        ),
        (
            "counter, 2^20 threads",
            Variant::Counter,
            1 << 12,
            f64::from((1 << 12) * BLOCK),
            "atomic",
        ),
        (
            "counter, 2^22 threads",
            Variant::Counter,
            1 << 14,
            f64::from((1 << 14) * BLOCK),
            "atomic",
        ),
    ];
    for (name, variant, blocks, units, unit) in rows {
        let (p, _) = plain.time(variant, blocks, Plan::GPU)?;
        let (s, unchecked) = sanitized.time(variant, blocks, Plan::SANITIZED)?;
        println!(
            "{name:<28} {blocks:>8} {:>11.4} {:>13.3} {:>8.1}x {unchecked:>10}  {:.2} ns/{unit} ({:.1} us/{unit} per SM)",
            p.median_ms,
            s.median_ms,
            s.median_ms / p.median_ms,
            s.median_ms * 1e6 / units,
            s.median_ms * 1e3 * f64::from(sms) / units,
        );
    }
    Ok(())
}
