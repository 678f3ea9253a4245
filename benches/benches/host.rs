//! Host benchmarks, no GPU needed: every suite kernel at its small (smoke)
//! size on the CPU backend, plain and sanitized (the sanitized runs put
//! every global access through the happens-before engine), so that
//! regressions of the executor or the engine show on any machine.
//!
//! ```text
//! cargo bench -p vigil-bench --bench host
//! ```

use divan::Bencher;
use vigil::{Context, Stream};
use vigil_bench::cases::{self, Scale};
use vigil_bench::kernels::{Impl, VigilKernels};
use vigil_tests::Rng;

fn main() {
    divan::main();
}

/// One case, launched and synchronised per iteration on a CPU context.
fn bench_case(bencher: Bencher, name: &str, sanitize: bool) {
    let ctx = Context::builder()
        .cpu()
        .sanitize(sanitize)
        .build()
        .expect("CPU context");
    let stream = Stream::new(&ctx).expect("stream");
    let kernels = VigilKernels::load(&ctx).expect("suite kernels");
    let make = cases::find(name).expect("a suite case");
    let case = make(Scale::Smoke, ctx.sm_count(), &mut Rng::new(0x5eed));
    let mut inst = case.instantiate(&stream).expect("buffers");
    bencher.bench_local(|| {
        case.run(Impl::Vigil(&kernels), &stream, &mut inst)
            .expect("launch");
        ctx.synchronize().expect("no races");
    });
}

/// The plain host build of each kernel on the CPU executor.
#[divan::bench(args = cases::NAMES, sample_count = 10, sample_size = 1)]
fn cpu_plain(bencher: Bencher, name: &str) {
    bench_case(bencher, name, false);
}

/// The checked host build with the CPU race sanitizer (the engine).
#[divan::bench(args = cases::NAMES, sample_count = 10, sample_size = 1)]
fn cpu_sanitized(bencher: Bencher, name: &str) {
    bench_case(bencher, name, true);
}
