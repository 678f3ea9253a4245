//! A kernel that never finishes is an error, not a hung test run, and on
//! a GPU work on another stream ends a kernel that waits for it, with the
//! sanitizer on as without it.
//!
//! On the CPU backend a launch whose threads all spin on a flag nobody sets
//! fails with a livelock naming the spinning thread and its kernel line,
//! and a launch timeout ends one the detector cannot see. On a GPU, with a
//! launch timeout, `synchronize` returns `Error::Timeout`, and the context
//! works again once the kernel ends: a host copy or a kernel launched on
//! another stream while it still runs sets its flag.
//!
//! The waiting family (GPU, sanitized and plain): a waiter ended by a
//! kernel, a host copy or a memset on another stream; a waiter started
//! while the setter's stream still has work ahead of the setter; several
//! waiters on several streams; a persistent kernel fed round by round by
//! launches on another stream. Each waits at most [`DEADLINE`] (the
//! context's launch timeout) for what it launched, far less than a
//! waiter's own give-up time ([`GIVE_UP`]), so a sanitizer that keeps the
//! setter from running beside its waiter fails the test in seconds.

use std::time::{Duration, Instant};
use vigil::unstable::cpu::CpuError;
use vigil::unstable::sys;
use vigil::{
    Context, DeviceBuffer, DeviceId, Error, Event, KernelFn, LaunchConfig, Module, RaceReports,
    ReportKind, Stream,
};
use vigil_kernels::hangs::{
    feed_round, serve_rounds, set_flag, wait_for_either_flag, wait_for_flag, wait_for_value,
};
use vigil_tests::KERNELS_PTX;

/// How long every test waits for its work on a GPU: the launch timeout of
/// its context.
const DEADLINE: Duration = Duration::from_secs(10);

/// About how long a GPU waiter polls before it gives up (and says so):
/// far past [`DEADLINE`], so that only a test that failed meets it, and
/// short enough that a kernel left running by one ends.
const GIVE_UP: Duration = Duration::from_secs(60);

/// The waiters' grid: two blocks, thread 0 of each polls.
fn waiter_config() -> LaunchConfig {
    LaunchConfig::new(2, 64)
}

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

/// The `max_polls` of a [`wait_for_value`] on `stream` that gives up
/// after about `time`: measured on a flag nobody sets, doubling the polls
/// until one run takes 50 ms (sanitized polls are far slower than plain
/// ones, and both vary by device).
fn polls_lasting(
    wait: &KernelFn<wait_for_value>,
    stream: &Stream,
    time: Duration,
) -> vigil::Result<u32> {
    let mut flag = DeviceBuffer::<u32>::alloc_zeroed(stream, 1)?;
    let mut seen = DeviceBuffer::<u32>::alloc_zeroed(stream, 2)?;
    let mut polls = 256u32;
    loop {
        let start = Instant::now();
        stream.launch(wait, waiter_config(), (&mut flag, &mut seen, 1u32, polls))?;
        stream.synchronize()?;
        let took = start.elapsed();
        if took >= Duration::from_millis(50) || polls >= 1 << 30 {
            let per_poll = took.as_secs_f64() / f64::from(polls);
            return Ok((time.as_secs_f64() / per_poll).min(f64::from(u32::MAX)) as u32);
        }
        polls *= 2;
    }
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
    // On the CPU the wait has no end; on a GPU it gives up after about
    // `GIVE_UP`, so that a failing test cannot leave a kernel running for
    // good.
    let max_polls = if ctx.is_cpu() {
        0
    } else {
        polls_lasting(&module.kernel::<wait_for_value>()?, &stream, GIVE_UP)?
    };
    let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut seen = DeviceBuffer::<u32>::alloc_zeroed(&stream, 2)?;
    // The stream that sets the flag later is ordered after its zeroing.
    let zeroed = Event::new(ctx)?;
    zeroed.record(&stream)?;
    let start = Instant::now();
    let launched = stream.launch(&wait, waiter_config(), (&mut flag, &mut seen, max_polls));
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
    assert_all_saw(&seen, &stream, "")?;
    if !ctx.is_sanitized() || setter == Setter::Kernel {
        return end;
    }
    let Err(Error::Races(reports)) = end else {
        panic!("expected the copy's race with the polls, got {end:?}");
    };
    assert_only_races_with_the_polls(&reports, copy_line);
    ctx.synchronize()
}

/// Every block of a waiter saw what it waited for (`seen`, read on
/// `stream`): none gave up after its polls (`why` says more).
fn assert_all_saw(seen: &DeviceBuffer<u32>, stream: &Stream, why: &str) -> vigil::Result<()> {
    let saw = seen.to_vec(stream)?;
    assert!(
        saw.iter().all(|&s| s == 1),
        "a waiting block gave up before its flag was set ({saw:?}){why}"
    );
    Ok(())
}

/// `reports` are races of a host transfer issued at line `line` of this
/// file with the atomic polls of a waiter (in `kernels/src/hangs.rs`),
/// and nothing else; at least one.
fn assert_only_races_with_the_polls(reports: &RaceReports, line: u32) {
    assert!(!reports.is_empty(), "no race reported for line {line}");
    for r in reports.iter() {
        let at = |l: Option<&vigil::SourceLocation>| l.map(|l| (l.file.clone(), l.line));
        let mut sites = [
            at(r.current.location.as_ref()),
            at(r.prior.location.as_ref()),
        ];
        sites.sort();
        let ok = r.kind == ReportKind::AtomicNonAtomic
            && matches!(&sites, [Some((k, _)), Some((t, l))]
                if k.ends_with("kernels/src/hangs.rs") && t.ends_with("tests/hangs.rs") && *l == line);
        assert!(ok, "unexpected report:\n{r}");
    }
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

// ----- the waiting family, on a GPU ----------------------------------------

/// What the family's tests share: a context like the harness's with the
/// [`DEADLINE`] launch timeout, the test kernels, a stream whose work
/// every other stream is ordered after (the buffers' set-up), and the
/// waiters' poll limit ([`GIVE_UP`]).
struct Rig {
    ctx: Context,
    module: Module,
    wait: KernelFn<wait_for_value>,
    set: KernelFn<set_flag>,
    setup: Stream,
    max_polls: u32,
}

/// A waiter's flag, the value it waits for and its blocks' outcomes.
struct Waiter {
    flag: DeviceBuffer<u32>,
    value: u32,
    seen: DeviceBuffer<u32>,
}

impl Rig {
    fn new(ctx: &Context) -> vigil::Result<Rig> {
        let ctx = with_timeout(ctx, DEADLINE)?;
        let module = Module::from_ptx(&ctx, KERNELS_PTX)?;
        let setup = Stream::new(&ctx)?;
        let wait = module.kernel::<wait_for_value>()?;
        let max_polls = polls_lasting(&wait, &setup, GIVE_UP)?;
        Ok(Rig {
            set: module.kernel::<set_flag>()?,
            wait,
            module,
            setup,
            max_polls,
            ctx,
        })
    }

    /// A waiter for `value` in a flag that starts at `start` (set up on
    /// the set-up stream).
    fn waiter(&self, start: u32, value: u32) -> vigil::Result<Waiter> {
        Ok(Waiter {
            flag: DeviceBuffer::from_slice(&self.setup, &[start])?,
            value,
            seen: DeviceBuffer::alloc_zeroed(&self.setup, 2)?,
        })
    }

    /// `N` new streams, each ordered after everything set up so far.
    fn streams<const N: usize>(&self) -> vigil::Result<[Stream; N]> {
        let ready = Event::new(&self.ctx)?;
        ready.record(&self.setup)?;
        let mut streams = Vec::with_capacity(N);
        for _ in 0..N {
            let s = Stream::new(&self.ctx)?;
            s.wait_event(&ready)?;
            streams.push(s);
        }
        Ok(streams
            .try_into()
            .unwrap_or_else(|_| unreachable!("N streams were made")))
    }

    /// Launches `w`'s waiter on `stream`.
    fn start(&self, w: &mut Waiter, stream: &Stream) -> vigil::Result<()> {
        let args = (&mut w.flag, &mut w.seen, w.value, self.max_polls);
        stream.launch(&self.wait, waiter_config(), args)
    }

    /// Launches the kernel setter of `w`'s flag on `stream`, which must
    /// return at once, not once the waiter gave up.
    fn set(&self, w: &mut Waiter, stream: &Stream) -> vigil::Result<()> {
        let start = Instant::now();
        stream.launch(&self.set, LaunchConfig::new(1, 32), (&mut w.flag,))?;
        let took = start.elapsed();
        assert!(
            took < DEADLINE,
            "launching a setter took {took:?}: it waited for a running kernel"
        );
        Ok(())
    }

    /// Waits for `streams`, then the whole context, each within
    /// [`DEADLINE`], then checks that every one of `waiters` saw its
    /// value; returns the races the waits collected. After a timeout the
    /// waiters' flags get their values by host copies (so that no waiter
    /// of a failed test keeps the GPU until it gives up) and the timeout
    /// is the test's error.
    fn finish(
        &self,
        streams: &[&Stream],
        waiters: &mut [&mut Waiter],
    ) -> vigil::Result<RaceReports> {
        let mut races = RaceReports::new();
        let waits = (streams.iter().map(|s| s.synchronize()))
            .chain(std::iter::once_with(|| self.ctx.synchronize()));
        for r in waits {
            match r {
                Ok(()) => {}
                Err(Error::Races(found)) => races.merge(found),
                Err(e @ Error::Timeout { .. }) => {
                    let releaser = Stream::new(&self.ctx)?;
                    for w in waiters.iter_mut() {
                        // Best effort: the test fails with the timeout anyway.
                        let _ = w.flag.copy_from_host(&releaser, &[w.value]);
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        for w in waiters.iter() {
            assert_all_saw(&w.seen, &self.setup, "")?;
        }
        Ok(races)
    }
}

/// `races` holds nothing: every setter was an atomic kernel.
fn assert_race_free(races: &RaceReports) {
    assert!(races.is_empty(), "unexpected races:\n{races}");
}

/// A kernel that waits for a flag ends when a kernel on another stream
/// sets it: a launch on a fresh stream runs beside one that is still
/// running (a cross-stream producer and consumer), and their atomics on
/// the flag do not race. (The CPU backend runs a launch to its end before
/// the next, so the waiter could only give up there.)
fn a_kernel_on_another_stream_ends_a_waiting_one(ctx: &Context) -> vigil::Result<()> {
    let rig = Rig::new(ctx)?;
    let mut w = rig.waiter(0, 1)?;
    let [waiting, setting] = rig.streams()?;
    rig.start(&mut w, &waiting)?;
    // The setter's stream is new: its first launch sets up what the
    // sanitizer keeps per stream while the waiter runs.
    rig.set(&mut w, &setting)?;
    assert_race_free(&rig.finish(&[&setting, &waiting], &mut [&mut w])?);
    Ok(())
}

/// A host copy on another stream ends a waiting kernel. Sanitized, the
/// copy's plain write races with the polls, and that race is all it
/// reports.
fn a_host_copy_on_another_stream_ends_a_waiting_kernel(ctx: &Context) -> vigil::Result<()> {
    let rig = Rig::new(ctx)?;
    let mut w = rig.waiter(0, 1)?;
    let [waiting, copying] = rig.streams()?;
    rig.start(&mut w, &waiting)?;
    let line = line!() + 1;
    w.flag.copy_from_host(&copying, &[1])?;
    let races = rig.finish(&[&copying, &waiting], &mut [&mut w])?;
    if rig.ctx.is_sanitized() {
        assert_only_races_with_the_polls(&races, line);
    } else {
        assert_race_free(&races);
    }
    Ok(())
}

/// A memset on another stream ends a kernel waiting for the flag to be
/// zero; sanitized, its race with the polls is all it reports.
fn a_memset_on_another_stream_ends_a_waiting_kernel(ctx: &Context) -> vigil::Result<()> {
    let rig = Rig::new(ctx)?;
    let mut w = rig.waiter(7, 0)?;
    let [waiting, zeroing] = rig.streams()?;
    rig.start(&mut w, &waiting)?;
    let line = line!() + 1;
    w.flag.fill_zero(&zeroing)?;
    let races = rig.finish(&[&zeroing, &waiting], &mut [&mut w])?;
    if rig.ctx.is_sanitized() {
        assert_only_races_with_the_polls(&races, line);
    } else {
        assert_race_free(&races);
    }
    Ok(())
}

/// A waiter started while the setter's stream still has work ahead of the
/// setter ends once that work is done: the setter's stream first waits on
/// a gate (a kernel that runs until a third stream opens it), then sets
/// the flag; the waiter starts only after both are queued.
fn a_waiter_started_behind_the_setters_queued_work_ends(ctx: &Context) -> vigil::Result<()> {
    let rig = Rig::new(ctx)?;
    let mut gate = rig.waiter(0, 1)?;
    let mut w = rig.waiter(0, 1)?;
    let [setting, waiting, opening] = rig.streams()?;
    rig.start(&mut gate, &setting)?;
    rig.set(&mut w, &setting)?;
    rig.start(&mut w, &waiting)?;
    rig.set(&mut gate, &opening)?;
    let races = rig.finish(&[&opening, &setting, &waiting], &mut [&mut gate, &mut w])?;
    assert_race_free(&races);
    Ok(())
}

/// Several waiters on several streams each end by their own setter on a
/// stream of its own, the setters launched last waiter first: every
/// waiter runs beside the others and its setter.
fn several_waiters_on_several_streams_end_by_their_setters(ctx: &Context) -> vigil::Result<()> {
    const PAIRS: usize = 4;
    let rig = Rig::new(ctx)?;
    let mut waiters = (0..PAIRS)
        .map(|_| rig.waiter(0, 1))
        .collect::<vigil::Result<Vec<_>>>()?;
    let streams: [Stream; 2 * PAIRS] = rig.streams()?;
    let (waiting, setting) = streams.split_at(PAIRS);
    for (w, s) in waiters.iter_mut().zip(waiting) {
        rig.start(w, s)?;
    }
    for (w, s) in waiters.iter_mut().zip(setting).rev() {
        rig.set(w, s)?;
    }
    let all: Vec<&Stream> = setting.iter().chain(waiting).collect();
    let mut waiting_on: Vec<&mut Waiter> = waiters.iter_mut().collect();
    assert_race_free(&rig.finish(&all, &mut waiting_on)?);
    Ok(())
}

/// A persistent kernel serves rounds that launches on another stream
/// feed it, one launch a round, each waiting until the server took the
/// round before: server and feeds run side by side for every round.
fn a_persistent_kernel_is_fed_by_launches_on_another_stream(ctx: &Context) -> vigil::Result<()> {
    const ROUNDS: u32 = 8;
    let rig = Rig::new(ctx)?;
    let (serve, feed) = (
        rig.module.kernel::<serve_rounds>()?,
        rig.module.kernel::<feed_round>()?,
    );
    let mut counter = DeviceBuffer::<u32>::alloc_zeroed(&rig.setup, 1)?;
    let mut ack = DeviceBuffer::<u32>::alloc_zeroed(&rig.setup, 1)?;
    let mut served = DeviceBuffer::<u32>::alloc_zeroed(&rig.setup, 1)?;
    let mut fed = DeviceBuffer::<u32>::alloc_zeroed(&rig.setup, ROUNDS as usize)?;
    let [serving, feeding] = rig.streams()?;
    let polls = rig.max_polls;
    let one = LaunchConfig::new(1, 32);
    let args = (&mut counter, &mut ack, &mut served, ROUNDS, polls);
    serving.launch(&serve, one, args)?;
    for round in 1..=ROUNDS {
        let args = (&mut counter, &mut ack, &mut fed, round, polls);
        feeding.launch(&feed, one, args)?;
    }
    // No waiter to release after a timeout: the server and the feeds
    // give up on their own.
    assert_race_free(&rig.finish(&[&feeding, &serving], &mut [])?);
    assert_eq!(served.to_vec(&rig.setup)?, [ROUNDS], "rounds served");
    assert_eq!(fed.to_vec(&rig.setup)?, [1; ROUNDS as usize], "rounds fed");
    Ok(())
}

/// Loading a module reserves the stack every one of its kernels needs:
/// a launch never grows it, which would make the launch wait for every
/// kernel then running (a kernel launched to end a waiting one would
/// start only once the waiter gave up).
fn a_module_load_reserves_the_stack_its_kernels_need(ctx: &Context) -> vigil::Result<()> {
    let module = Module::from_ptx(ctx, KERNELS_PTX)?;
    let raws = [
        module.kernel::<wait_for_value>()?.function().raw(),
        module.kernel::<set_flag>()?.function().raw(),
        module.kernel::<serve_rounds>()?.function().raw(),
        module.kernel::<feed_round>()?.function().raw(),
    ];
    ctx.bind()?;
    let mut stack = 0usize;
    // SAFETY: valid out-pointer; the context is current.
    let r = unsafe { sys::cuCtxGetLimit(&mut stack, sys::CUlimit::CU_LIMIT_STACK_SIZE) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    for raw in raws {
        let mut local = 0i32;
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
        // SAFETY: valid out-pointer; `raw` is a live function of `module`.
        let r = unsafe { sys::cuFuncGetAttribute(&mut local, attr, raw) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        assert!(
            local as usize <= stack,
            "a kernel needs {local} bytes of stack, the context reserves {stack}"
        );
    }
    Ok(())
}

/// Declares each check (a `fn(&Context) -> vigil::Result<()>`) as two GPU
/// tests, `sanitized::<check>` and `plain::<check>`.
macro_rules! sanitized_and_plain_on_gpu {
    ($($check:ident),* $(,)?) => {
        mod sanitized {
            $(
                #[vigil::test(gpu)]
                fn $check(ctx: &vigil::Context) -> vigil::Result<()> {
                    super::$check(ctx)
                }
            )*
        }
        mod plain {
            $(
                #[vigil::test(gpu, plain)]
                fn $check(ctx: &vigil::Context) -> vigil::Result<()> {
                    super::$check(ctx)
                }
            )*
        }
    };
}

sanitized_and_plain_on_gpu!(
    a_kernel_on_another_stream_ends_a_waiting_one,
    a_host_copy_on_another_stream_ends_a_waiting_kernel,
    a_memset_on_another_stream_ends_a_waiting_kernel,
    a_waiter_started_behind_the_setters_queued_work_ends,
    several_waiters_on_several_streams_end_by_their_setters,
    a_persistent_kernel_is_fed_by_launches_on_another_stream,
    a_module_load_reserves_the_stack_its_kernels_need,
);

vigil::test_main!();
