//! Shared pieces of Vigil's examples and GPU tests: the embedded PTX of
//! `vigil-kernels`, fresh random data, and timing/bandwidth arithmetic.

use vigil::{Event, Result, Stream};

/// The examples' programs, one function each, so that the example binaries
/// and the tests run the same code (the tests on the CPU backend).
pub mod programs {
    pub mod axpy;
    pub mod demo;
    pub mod gemm_softmax;
    pub mod histogram;
    pub mod reduce_sum;

    use vigil::{Context, Kernel, KernelFn, Module, Stream};

    /// What every example starts from: a stream, its kernel loaded from
    /// [`KERNELS_PTX`](crate::KERNELS_PTX), and the name of the backend that
    /// bandwidth lines measure.
    pub struct Setup<K: Kernel> {
        /// `"GPU"` or `"CPU backend"` (with the sanitizer, if on).
        pub on: &'static str,
        /// A fresh stream on the context.
        pub stream: Stream,
        /// The example's kernel.
        pub kernel: KernelFn<K>,
    }

    impl<K: Kernel> Setup<K> {
        /// Loads `K` on `ctx` and prints which device the example `name` runs on.
        pub fn new(ctx: &Context, name: &str) -> vigil::Result<Setup<K>> {
            let stream = Stream::new(ctx)?;
            let kernel = Module::from_ptx(ctx, crate::KERNELS_PTX)?.kernel::<K>()?;
            println!(
                "{name}: {} on {} ({} SMs)",
                ctx.name(),
                ctx.device(),
                ctx.sm_count()
            );
            let on = match (ctx.is_cpu(), ctx.is_sanitized()) {
                (true, false) => "CPU backend",
                (true, true) => "CPU backend, race sanitizer on",
                (false, false) => "GPU",
                (false, true) => "GPU, race sanitizer on",
            };
            Ok(Setup { on, stream, kernel })
        }
    }

    /// Ends an example: waits for the device and returns the sanitizer's
    /// reports as an error (the examples are race-free: none expected).
    pub fn finish(ctx: &Context) -> Result<(), Box<dyn std::error::Error>> {
        ctx.synchronize()?;
        if ctx.is_sanitized() {
            println!("sanitizer: no race reported");
        }
        Ok(())
    }
}

/// The PTX of the `vigil-kernels` crate, built by `vigil-build` in `build.rs`.
pub const KERNELS_PTX: &str = vigil::include_ptx!("vigil-kernels");

/// A seed for example data: `VIGIL_EXAMPLE_SEED` if set (to reproduce a
/// run), else fresh from the clock. Printed by the examples.
pub fn example_seed() -> u64 {
    std::env::var("VIGIL_EXAMPLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed)
        })
}

/// SplitMix64: small, fast, good enough for test data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `n` floats uniform in [-1, 1).
    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect()
    }

    /// `n` integers uniform in [0, bound).
    pub fn u32s(&mut self, n: usize, bound: u32) -> Vec<u32> {
        (0..n)
            .map(|_| ((self.next_u64() >> 32) % bound as u64) as u32)
            .collect()
    }
}

/// Times `reps` runs of `f` on `stream` with events, after one warm-up run,
/// and returns the median milliseconds per run.
pub fn time_ms(stream: &Stream, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let ctx = stream.context();
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
        start.record(stream)?;
        f()?;
        end.record(stream)?;
        end.synchronize()?;
        times.push(start.elapsed_ms(&end)? as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Gigabytes (10^9 bytes) per second for `bytes` moved in `ms` milliseconds.
pub fn gb_per_s(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// The problem size for an example: the first command-line argument, else `default`.
pub fn size_arg(default: usize) -> usize {
    std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
