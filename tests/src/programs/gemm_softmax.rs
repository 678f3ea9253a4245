//! A GEMM and a row softmax in one kernel whose two phases' tiles share
//! one region of shared memory (a shared stack): 192 KiB per block where
//! the same tiles laid out side by side would need 321 KiB, more than a
//! GPU gives a block. Checked against a host reference, timed, and run
//! under the race sanitizer with the GEMM's tiles popped without a
//! barrier, which it reports.

use super::Setup;
use crate::{time_ms, Rng, KERNELS_PTX};
use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, RaceReports, Stream};
use vigil_kernels::shared_stack::{
    gemm_softmax, gemm_softmax_unsynced, BK, BM, BN, GEMM_PHASE, GEMM_SOFTMAX_STACK,
    GEMM_SOFTMAX_STATIC, GEMM_THREADS, SOFTMAX_PHASE,
};

/// What the example saw.
#[derive(Debug)]
pub struct GemmSoftmaxOutcome {
    /// The sanitizer's reports for the kernel that pops its GEMM tiles
    /// without a barrier.
    pub reuse_reports: RaceReports,
}

/// Row `r` of `softmax(a b)`, in `f64`: `a` has `k` columns, `b` is `k` x
/// `BN`.
pub fn reference_row(a: &[f32], b: &[f32], k: usize, r: usize) -> Vec<f64> {
    let mut row: Vec<f64> = (0..BN)
        .map(|c| {
            (0..k)
                .map(|i| f64::from(a[r * k + i]) * f64::from(b[i * BN + c]))
                .sum()
        })
        .collect();
    let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
    row.iter_mut().for_each(|v| *v = (*v - max).exp() / total);
    row
}

/// Rows checked against the host at most: a larger output is checked
/// every `m / CHECKED_ROWS`-th row (and its last).
pub const CHECKED_ROWS: usize = 2048;

/// The inputs of one launch, on the device and on the host.
pub struct GemmInputs {
    /// Rows of `a` and of the output (`BM` per block).
    pub m: usize,
    /// Columns of `a`, rows of `b` (a multiple of `BK`).
    pub k: usize,
    /// `a` on the host.
    pub a: Vec<f32>,
    /// `b` on the host.
    pub b: Vec<f32>,
    /// `a` on the device.
    pub da: DeviceBuffer<f32>,
    /// `b` on the device.
    pub db: DeviceBuffer<f32>,
    /// The output, `m` x `BN`.
    pub out: DeviceBuffer<f32>,
}

impl GemmInputs {
    /// Random inputs for `blocks` blocks and depth `k` (a multiple of
    /// `BK`), from `seed`, uploaded on `stream`.
    pub fn new(stream: &Stream, blocks: usize, k: usize, seed: u64) -> vigil::Result<GemmInputs> {
        assert!(
            k.is_multiple_of(BK) && k > 0,
            "k = {k} is not a positive multiple of {BK}"
        );
        let m = blocks * BM;
        let mut rng = Rng::new(seed);
        // Small entries keep the rows' logits within a few units.
        let a: Vec<f32> = rng.f32s(m * k).iter().map(|v| v * 0.25).collect();
        let b = rng.f32s(k * BN);
        Ok(GemmInputs {
            m,
            k,
            da: DeviceBuffer::from_slice(stream, &a)?,
            db: DeviceBuffer::from_slice(stream, &b)?,
            out: DeviceBuffer::alloc_zeroed(stream, m * BN)?,
            a,
            b,
        })
    }

    /// One block of `GEMM_THREADS` threads per `BM` rows. No dynamic
    /// shared memory is asked for: the launch gives the kernel its stack.
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig::new((self.m / BM) as u32, GEMM_THREADS)
    }

    /// The largest relative error of the output against [`reference_row`]
    /// (every row, or [`CHECKED_ROWS`] spread over a larger output), or an
    /// error naming the first element out of tolerance.
    pub fn check(&self, stream: &Stream) -> Result<f64, Box<dyn std::error::Error>> {
        let got = self.out.to_vec(stream)?;
        let step = self.m.div_ceil(CHECKED_ROWS).max(1);
        let rows = (0..self.m).step_by(step).chain([self.m - 1]);
        let mut worst = 0.0f64;
        for r in rows {
            let want = reference_row(&self.a, &self.b, self.k, r);
            for (c, (&g, &w)) in got[r * BN..(r + 1) * BN].iter().zip(&want).enumerate() {
                let err = (f64::from(g) - w).abs();
                if err > 1e-6 + 1e-3 * w {
                    return Err(format!("row {r} column {c}: {g} against the host's {w}").into());
                }
                worst = worst.max(err / w.max(1e-30));
            }
        }
        Ok(worst)
    }
}

/// The shared memory a block of the kernel needs, against a static
/// layout of its tiles, as the example prints it.
pub fn layout_line(limit: u32) -> String {
    let saved = GEMM_SOFTMAX_STATIC - GEMM_SOFTMAX_STACK;
    let past = if GEMM_SOFTMAX_STATIC > limit as usize {
        "past"
    } else {
        "within"
    };
    format!(
        "shared memory per block: {} KiB on the stack (the larger phase: GEMM {} KiB, softmax \
         {} KiB); laid out side by side the same tiles need {} KiB, {past} this device's {} KiB; \
         reuse saves {} KiB ({saved} bytes)",
        GEMM_SOFTMAX_STACK / 1024,
        GEMM_PHASE / 1024,
        SOFTMAX_PHASE / 1024,
        GEMM_SOFTMAX_STATIC / 1024,
        limit / 1024,
        saved / 1024,
    )
}

/// Runs the example: on `ctx`, the kernel on `blocks` blocks and depth
/// `k`, checked against the host and timed over `reps` runs; on
/// `sanitized` (a sanitized context of the same backend), the kernel on
/// one block without a report, then the one that pops its GEMM tiles
/// without a barrier, whose reports it returns.
pub fn run(
    ctx: &Context,
    sanitized: &Context,
    blocks: usize,
    k: usize,
    seed: u64,
    reps: usize,
) -> Result<GemmSoftmaxOutcome, Box<dyn std::error::Error>> {
    let Setup { on, stream, kernel } = Setup::<gemm_softmax>::new(ctx, "gemm_softmax")?;
    println!(
        "gemm_softmax: {}",
        layout_line(ctx.max_shared_mem_per_block_optin())
    );
    let mut inputs = GemmInputs::new(&stream, blocks, k, seed)?;
    println!(
        "gemm_softmax: softmax(a b) by rows, a {} x {k}, b {k} x {BN}, seed = {seed}",
        inputs.m
    );
    let config = inputs.config();
    let launch = || {
        stream.launch(
            &kernel,
            config,
            (&inputs.da, &inputs.db, &mut inputs.out, k as u32),
        )
    };
    let ms = time_ms(&stream, reps, launch)?;
    let worst = inputs.check(&stream)?;
    println!("check: matches the host reference (f64), worst relative error {worst:.2e}");
    let flops = 2.0 * inputs.m as f64 * k as f64 * BN as f64;
    println!(
        "time ({on}): {ms:.3} ms, {:.2} GFLOP/s for the GEMM",
        flops / (ms * 1e-3) / 1e9
    );
    super::finish(ctx)?;

    let stream = Stream::new(sanitized)?;
    let module = Module::from_ptx(sanitized, KERNELS_PTX)?;
    let one_wave = if sanitized.is_cpu() {
        1
    } else {
        sanitized.sm_count() as usize
    };
    let mut small = GemmInputs::new(&stream, one_wave, BK, seed ^ 1)?;
    let config = small.config();
    let synced = module.kernel::<gemm_softmax>()?;
    stream.launch(
        &synced,
        config,
        (&small.da, &small.db, &mut small.out, BK as u32),
    )?;
    sanitized.synchronize()?;
    small.check(&stream)?;
    println!("sanitizer: gemm_softmax (pop_synced) on {one_wave} block(s): no race reported");
    let unsynced = module.kernel::<gemm_softmax_unsynced>()?;
    stream.launch(
        &unsynced,
        config,
        (&small.da, &small.db, &mut small.out, BK as u32),
    )?;
    let reuse_reports = match sanitized.synchronize() {
        Err(Error::Races(reports)) => reports,
        Err(e) => return Err(e.into()),
        Ok(()) => return Err("the unsynced reuse was not reported".into()),
    };
    println!(
        "sanitizer: gemm_softmax_unsynced (pop_unsynced), the reuse reported:\n{reuse_reports}"
    );
    Ok(GemmSoftmaxOutcome { reuse_reports })
}
