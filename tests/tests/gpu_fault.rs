//! A kernel that traps under the GPU sanitizer gives a typed error that
//! says the CUDA context is unusable, and nothing hangs. Its own test
//! binary: after the trap the process's context is gone for every test.

use vigil::unstable::testing::require_gpu;
use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, Stream};
use vigil_kernels::races::write_at;
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
}
