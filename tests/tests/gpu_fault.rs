//! A kernel that traps under the GPU sanitizer gives a typed error that
//! says the CUDA context is unusable, and nothing hangs; afterwards a new
//! plain context works, and a new sanitized one is a clear error. Its own
//! test binary: after the trap the device's primary context is poisoned
//! for the whole process.

use vigil::unstable::testing::require_gpu;
use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, Stream};
use vigil_kernels::races::write_at;
use vigil_kernels::tests::fill_pattern;
use vigil_tests::KERNELS_PTX;

#[test]
fn a_trapping_sanitized_kernel_is_a_kernel_fault() {
    if require_gpu().is_none() {
        return;
    }
    let ctx = Context::builder()
        .gpu(0)
        .sanitize(true)
        .build()
        .expect("a sanitized GPU context");
    let stream = Stream::new(&ctx).unwrap();
    let module = Module::from_ptx(&ctx, KERNELS_PTX).unwrap();
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 4).unwrap();
    stream
        .launch(
            &module.kernel::<write_at>().unwrap(),
            LaunchConfig::new(1, 1),
            (&mut data, 4u32),
        )
        .expect("the launch itself is fine");
    match ctx.synchronize() {
        Err(e @ Error::KernelFault { .. }) => {
            assert!(e.to_string().contains("unusable"), "{e}");
        }
        other => panic!("expected a kernel fault, got {other:?}"),
    }

    // A second, plain context on the same device runs kernels correctly.
    let plain = Context::builder().gpu(0).build().expect("a plain context after the fault");
    let stream = Stream::new(&plain).unwrap();
    let module = Module::from_ptx(&plain, KERNELS_PTX).unwrap();
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 4096).unwrap();
    stream
        .launch(
            &module.kernel::<fill_pattern>().unwrap(),
            LaunchConfig::new(16, 256),
            (&mut out, 7u32),
        )
        .unwrap();
    let got = out.to_vec(&stream).unwrap();
    let want: Vec<u32> = (0..4096).map(|i| vigil_kernels::tests::pattern(i, 7)).collect();
    assert_eq!(got, want, "the plain context after the fault computes correctly");
    println!("after the fault: a plain context ran fill_pattern over 4096 words correctly");

    // A sanitized one says why it cannot be made, instead of faulting.
    match Context::builder().gpu(0).sanitize(true).build() {
        Err(e @ Error::Unsupported { .. }) => {
            assert!(e.to_string().contains("kernel fault"), "{e}");
            println!("after the fault: a sanitized context is refused: {e}");
        }
        other => panic!("expected a clear refusal, got {:?}", other.map(|_| ())),
    }
}
