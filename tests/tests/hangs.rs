//! A kernel that never finishes is an error, not a hung test run. On the
//! CPU backend a launch whose threads all spin on a flag nobody sets fails
//! with a livelock naming the spinning thread and its kernel line, and a
//! launch timeout ends one the detector cannot see. On a GPU, with a launch
//! timeout, `synchronize` returns `Error::Timeout`, and the context works
//! again once the kernel ends.

use std::time::{Duration, Instant};
use vigil::unstable::cpu::CpuError;
use vigil::{
    Context, DeviceBuffer, DeviceId, Error, Event, LaunchConfig, Module, ReportKind, Stream,
};
use vigil_kernels::hangs::{wait_for_either_flag, wait_for_flag};
use vigil_tests::KERNELS_PTX;

/// The same device as `ctx`, with a launch timeout of `limit`.
fn with_timeout(ctx: &Context, limit: Duration) -> vigil::Result<Context> {
    let builder = Context::builder()
        .sanitize(ctx.is_sanitized())
        .launch_timeout(Some(limit));
    match ctx.device() {
        DeviceId::Cuda(ordinal) => builder.gpu(ordinal),
        DeviceId::Cpu => builder.cpu(),
    }
    .build()
}

#[vigil::test]
fn a_spin_on_a_flag_nobody_sets_is_an_error(ctx: &Context) -> vigil::Result<()> {
    // On the CPU the detector ends the launch, well within a generous
    // limit; on a GPU only the limit does.
    let limit = if ctx.is_cpu() {
        Duration::from_secs(60)
    } else {
        Duration::from_millis(500)
    };
    let ctx = &with_timeout(ctx, limit)?;
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, KERNELS_PTX)?;
    let wait = module.kernel::<wait_for_flag>()?;
    let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    // The stream that sets the flag later is ordered after its zeroing.
    let zeroed = Event::new(ctx)?;
    zeroed.record(&stream)?;
    // On the CPU the wait has no end; on a GPU it gives up after 2^26 polls
    // (seconds, far past the timeout) so that a failing test cannot leave
    // a kernel running for good.
    let max_polls = if ctx.is_cpu() { 0 } else { 1 << 26 };
    let start = Instant::now();
    let launched = stream.launch(&wait, LaunchConfig::new(2, 64), (&mut flag, max_polls));
    if ctx.is_cpu() {
        let err = launched.unwrap_err();
        let msg = err.to_string();
        match &err {
            Error::Cpu(CpuError::Livelock { blocks, unstarted }) => {
                assert!(blocks.len() + *unstarted as usize == 2, "{msg}");
                let t = &blocks[0].spinning[0];
                assert_eq!((t.address, t.bytes), (flag.device_ptr(), 4), "{msg}");
                let loc = t.location.as_str();
                assert!(loc.contains("hangs.rs:"), "{msg}");
            }
            other => panic!("expected a livelock, got: {other}"),
        }
        assert!(start.elapsed() < limit, "{msg}");
        return Ok(());
    }
    launched?;
    let done = Event::new(ctx)?;
    done.record(&stream)?;
    // Each kind of wait gives up with a typed error.
    let waits = [
        ("Stream::synchronize", stream.synchronize()),
        ("Event::synchronize", done.synchronize()),
        ("Context::synchronize", ctx.synchronize()),
    ];
    for (what, r) in waits {
        let err = r.unwrap_err();
        assert!(
            matches!(err, Error::Timeout { op, .. } if op == what),
            "{err}"
        );
        assert!(err.to_string().contains("may still be running"), "{err}");
    }
    // Set the flag from another stream, ordered after the zeroing: the
    // kernel ends, the context is usable again. A copy is a plain write,
    // so sanitized it races with the kernel's atomic polls, and that race
    // is all the sanitizer reports. (A kernel's atomic store would be
    // race-free, but a sanitized launch queued behind a kernel that never
    // ends is not a wait this test can bound.)
    let other = Stream::new(ctx)?;
    other.wait_event(&zeroed)?;
    let copy_line = line!() + 1;
    flag.copy_from_host(&other, &[1])?;
    let end = stream.synchronize().and_then(|()| ctx.synchronize());
    if !ctx.is_sanitized() {
        return end;
    }
    let Err(Error::Races(reports)) = end else {
        panic!("expected the copy's race with the polls, got {end:?}");
    };
    for r in reports.iter() {
        let at = |l: Option<&vigil::SourceLocation>| l.map(|l| (l.file.clone(), l.line));
        let mut sites = [
            at(r.current.location.as_ref()),
            at(r.prior.location.as_ref()),
        ];
        sites.sort();
        let ok = r.kind == ReportKind::AtomicNonAtomic
            && matches!(&sites, [Some((k, _)), Some((t, l))]
                if k.ends_with("kernels/src/hangs.rs") && t.ends_with("tests/hangs.rs") && *l == copy_line);
        assert!(ok, "unexpected report:\n{r}");
    }
    ctx.synchronize()
}

#[vigil::test(cpu)]
fn a_launch_timeout_ends_a_cpu_launch_the_detector_cannot_see(ctx: &Context) -> vigil::Result<()> {
    let limit = Duration::from_millis(200);
    let ctx = &with_timeout(ctx, limit)?;
    let stream = Stream::new(ctx)?;
    let wait = Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<wait_for_either_flag>()?;
    let mut flags = DeviceBuffer::<u32>::alloc_zeroed(&stream, 2)?;
    let err = stream
        .launch(&wait, LaunchConfig::new(3, 32), (&mut flags,))
        .unwrap_err();
    match &err {
        Error::Cpu(CpuError::Timeout {
            limit: l, total, ..
        }) => assert_eq!((*l, *total), (limit, 3)),
        other => panic!("expected a timeout, got: {other}"),
    }
    assert!(err.to_string().contains("VIGIL_LAUNCH_TIMEOUT"), "{err}");
    Ok(())
}

vigil::test_main!();
