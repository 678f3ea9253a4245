//! A kernel that never finishes is an error, not a hung test run. On the
//! CPU backend a launch whose threads all spin on a flag nobody sets fails
//! with a livelock naming the spinning thread and its kernel line, and a
//! launch timeout ends one the detector cannot see. On a GPU, with a launch
//! timeout, `synchronize` returns `Error::Timeout`, and the context works
//! again once the kernel ends: a host copy or a kernel launched on another
//! stream while it still runs sets its flag.

use std::time::{Duration, Instant};
use vigil::unstable::cpu::CpuError;
use vigil::{
    Context, DeviceBuffer, DeviceId, Error, Event, LaunchConfig, Module, ReportKind, Stream,
};
use vigil_kernels::hangs::{set_flag, wait_for_either_flag, wait_for_flag};
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

/// How the test sets the flag a timed-out kernel waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setter {
    /// A host copy on another stream: a plain write, so sanitized it races
    /// with the kernel's atomic polls, and that race is all it reports.
    Copy,
    /// A kernel's atomic store on another stream: race-free, and launched
    /// while the timed-out kernel still runs.
    Kernel,
}

#[vigil::test]
fn a_spin_on_a_flag_nobody_sets_is_an_error(ctx: &Context) -> vigil::Result<()> {
    spin_until_set(ctx, Setter::Copy)
}

#[vigil::test(gpu)]
fn a_kernel_on_another_stream_ends_a_timed_out_spin(ctx: &Context) -> vigil::Result<()> {
    spin_until_set(ctx, Setter::Kernel)
}

/// A kernel spins on a flag: on the CPU a livelock error; on a GPU every
/// wait times out, then `setter` sets the flag and the kernel ends.
fn spin_until_set(ctx: &Context, setter: Setter) -> vigil::Result<()> {
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
    let mut seen = DeviceBuffer::<u32>::alloc_zeroed(&stream, 2)?;
    // The stream that sets the flag later is ordered after its zeroing.
    let zeroed = Event::new(ctx)?;
    zeroed.record(&stream)?;
    // On the CPU the wait has no end; on a GPU it gives up after 2^26 polls
    // (seconds, far past the timeout) so that a failing test cannot leave
    // a kernel running for good.
    let max_polls = if ctx.is_cpu() { 0 } else { 1 << 26 };
    let start = Instant::now();
    let launched = stream.launch(
        &wait,
        LaunchConfig::new(2, 64),
        (&mut flag, &mut seen, max_polls),
    );
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
    // kernel ends, the context is usable again.
    let other = Stream::new(ctx)?;
    other.wait_event(&zeroed)?;
    // The copy's line, for its report (none for the kernel).
    let copy_line = if setter == Setter::Kernel {
        // Looked up only now, while the spinner runs: the function must
        // have been loaded with its module, not at this first use.
        let set = module.kernel::<set_flag>()?;
        other.launch(&set, LaunchConfig::new(1, 32), (&mut flag,))?;
        0
    } else {
        let line = line!() + 1;
        flag.copy_from_host(&other, &[1])?;
        line
    };
    let end = stream.synchronize().and_then(|()| ctx.synchronize());
    assert_saw_the_flag(&seen, &stream, "")?;
    if !ctx.is_sanitized() || setter == Setter::Kernel {
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

/// A kernel that waits for a flag ends when a kernel on another stream
/// sets it: a launch on a fresh stream runs beside one that is still
/// running (a cross-stream producer and consumer), sanitized too, and
/// their atomics on the flag do not race. (The CPU backend runs a launch
/// to its end before the next, so the waiter could only give up there.)
#[vigil::test(gpu)]
fn a_kernel_on_another_stream_ends_a_waiting_one(ctx: &Context) -> vigil::Result<()> {
    let ctx = &with_timeout(ctx, Duration::from_secs(20))?;
    let module = Module::from_ptx(ctx, KERNELS_PTX)?;
    let (wait, set) = (
        module.kernel::<wait_for_flag>()?,
        module.kernel::<set_flag>()?,
    );
    let waiting = Stream::new(ctx)?;
    let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&waiting, 1)?;
    let mut seen = DeviceBuffer::<u32>::alloc_zeroed(&waiting, 2)?;
    let zeroed = Event::new(ctx)?;
    zeroed.record(&waiting)?;
    // 2^22 polls: seconds, then the waiter gives up (and says so in
    // `seen`) rather than hold the GPU if the setter never runs.
    let config = LaunchConfig::new(2, 64);
    waiting.launch(&wait, config, (&mut flag, &mut seen, 1u32 << 22))?;
    // The setter's stream is new: its first launch sets up what the
    // sanitizer keeps per stream while the waiter runs.
    let setter = Stream::new(ctx)?;
    setter.wait_event(&zeroed)?;
    let start = Instant::now();
    setter.launch(&set, LaunchConfig::new(1, 32), (&mut flag,))?;
    let launched = start.elapsed();
    setter.synchronize()?;
    let set_ran = start.elapsed();
    let timing = format!(
        ": the setter did not run beside it (its launch call took {launched:?}, its \
         stream's synchronize ended after {set_ran:?})"
    );
    assert_saw_the_flag(&seen, &waiting, &timing)?;
    ctx.synchronize()
}

/// Both blocks of [`wait_for_flag`] saw the flag (`seen`, read on
/// `stream`): they did not give up after their polls (`why` says more).
fn assert_saw_the_flag(seen: &DeviceBuffer<u32>, stream: &Stream, why: &str) -> vigil::Result<()> {
    let mut saw = [0u32; 2];
    seen.copy_to_host(stream, &mut saw)?;
    stream.synchronize()?;
    assert_eq!(
        saw,
        [1, 1],
        "a waiting block gave up before the flag was set{why}"
    );
    Ok(())
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
