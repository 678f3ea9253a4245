//! A kernel that traps under the GPU sanitizer gives a typed error that
//! says the CUDA context is unusable, and nothing hangs. The trap runs in
//! a child process (this test binary again): CUDA leaves a faulted
//! process's device state poisoned, so "a context afterwards" means two
//! things, both checked: in the faulted process every new context is a
//! typed error or works (never a hang or a crash), and a new process gets
//! a working sanitized GPU context at once (no device reset needed).

use std::process::Command;
use std::time::{Duration, Instant};
use vigil::unstable::testing::require_gpu;
use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, Stream};
use vigil_kernels::races::{race_waw, write_at};
use vigil_kernels::tests::{fill_pattern, pattern};
use vigil_tests::KERNELS_PTX;

/// Set in the child process that runs the trapping kernel.
const CHILD: &str = "GPU_FAULT_TEST_CHILD";
const TEST: &str = "a_trapping_sanitized_kernel_is_a_kernel_fault";

#[test]
fn a_trapping_sanitized_kernel_is_a_kernel_fault() {
    if require_gpu().is_none() {
        return;
    }
    if std::env::var_os(CHILD).is_some() {
        trap_then_try_new_contexts();
        return;
    }
    let started = Instant::now();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child test process runs");
    let out = String::from_utf8_lossy(&child.stdout);
    let err = String::from_utf8_lossy(&child.stderr);
    println!(
        "child ({:.1} s):\n{out}{err}",
        started.elapsed().as_secs_f64()
    );
    assert!(child.status.success(), "the faulting child failed");
    assert!(out.contains("fault: "), "the child saw no fault:\n{out}");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the fault took too long to come back"
    );

    // This process never faulted: a sanitized context works at once, and
    // still finds races (the device was not left wedged).
    let ctx = Context::builder().gpu(0).sanitize(true).build().unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let module = Module::from_ptx(&ctx, KERNELS_PTX).unwrap();
    fill_and_check(&ctx, &stream, &module);
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 4).unwrap();
    stream
        .launch(
            &module.kernel::<race_waw>().unwrap(),
            LaunchConfig::new(64, 1),
            (&mut data,),
        )
        .unwrap();
    match ctx.synchronize() {
        Err(Error::Races(r)) => println!("after the child's fault: {} race(s) found", r.len()),
        other => panic!("expected the write-write race, got {other:?}"),
    }
}

/// `fill_pattern` on `ctx` computes what the host does, with no report.
fn fill_and_check(ctx: &Context, stream: &Stream, module: &Module) {
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(stream, 4096).unwrap();
    stream
        .launch(
            &module.kernel::<fill_pattern>().unwrap(),
            LaunchConfig::new(16, 256),
            (&mut out, 7u32),
        )
        .unwrap();
    ctx.synchronize().expect("no report on a race-free kernel");
    let want: Vec<u32> = (0..4096).map(|i| pattern(i, 7)).collect();
    assert_eq!(out.to_vec(stream).unwrap(), want);
}

/// The child: a sanitized kernel indexes out of bounds and traps.
fn trap_then_try_new_contexts() {
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
            println!("fault: {e}");
        }
        other => panic!("expected a kernel fault, got {other:?}"),
    }
    // New contexts in the faulted process: each is either usable and
    // correct or a typed error naming the fault; none hangs.
    match Context::builder().gpu(0).build() {
        Ok(plain) => {
            let stream = Stream::new(&plain).unwrap();
            let module = Module::from_ptx(&plain, KERNELS_PTX).unwrap();
            fill_and_check(&plain, &stream, &module);
            println!("after the fault: a plain context works");
        }
        Err(e @ Error::KernelFault { .. }) => {
            println!("after the fault: a plain context is refused: {e}")
        }
        Err(e) => panic!("an untyped failure after the fault: {e:?}"),
    }
    match Context::builder().gpu(0).sanitize(true).build() {
        Err(e @ (Error::Unsupported { .. } | Error::KernelFault { .. })) => {
            println!("after the fault: a sanitized context is refused: {e}")
        }
        Err(e) => panic!("an untyped failure after the fault: {e:?}"),
        Ok(_) => panic!("a sanitized context on the poisoned device state"),
    }
}
