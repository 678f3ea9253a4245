//! The CPU backend behind the host API: context modes and configuration,
//! kernel failures as typed errors, and the sanitizer hook driven by a fake
//! [`CpuSanitizer`] that records every call (so the hook's contract is
//! tested without the real race engine).

use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering as MemOrder};
use std::sync::{Arc, Mutex};
use vigil::device::host_runtime::{AtomicAccess, SanitizerRuntime, ThreadContext};
use vigil::unstable::cpu::{CpuError, CpuExecutor, LaunchStats};
use vigil::unstable::vmm::{SanitizerConfig, Vmm, VmmError};
use vigil::{
    AccessKind, Context, CpuSanitizer, DeviceBuffer, DeviceId, Dim3, Error, Event, HostAllocation,
    HostSync, LaunchConfig, LaunchInfo, LaunchVariant, MemorySpace, Module, PriorAccess,
    RaceAccess, RaceAllocation, RaceReport, RaceReports, ReportKind, Scope, SourceLocation, Stream,
};
use vigil_kernels::examples::axpy;

mod common;
use common::{axpy_stale, AXPY_PTX};

/// `axpy` with plain checked indices (the PTX's parameters), `x` indexed
/// with `y`'s bounds: a launch where `x` is the shorter panics.
mod indexed {
    use vigil::device::prelude::*;

    #[kernel]
    pub fn axpy(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
        let i = global_index_x();
        if i < y.len() {
            y.store(i, a * x.load(i) + y.load(i));
        }
    }
}

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn a_cpu_context_describes_itself() {
    let ctx = Context::cpu().unwrap();
    assert!(ctx.is_cpu());
    assert_eq!(ctx.device(), DeviceId::Cpu);
    assert!(!ctx.is_sanitized());
    assert_eq!(ctx.launch_variant(), LaunchVariant::Plain);
    assert!(ctx.sanitizer_pool().is_none());
    assert_eq!(ctx.limits(), &CpuExecutor::LIMITS);
    assert_eq!(
        ctx.sm_count(),
        ctx.cpu_executor().unwrap().num_virtual_sms()
    );
    assert!(ctx.name().contains("CPU"), "{}", ctx.name());
    assert!(ctx.raw().is_null());
    // Driver-only operations are typed errors, not panics.
    for e in [
        ctx.bind().unwrap_err(),
        ctx.memory_info().unwrap_err(),
        ctx.attribute(vigil::unstable::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE)
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                Error::Unsupported {
                    backend: DeviceId::Cpu,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("not supported on the CPU backend"),
            "{e}"
        );
    }
    ctx.synchronize().unwrap();
    assert!(ctx.take_reports().is_empty());
    // The VMM allocator refuses a CPU context with a typed error.
    let e = Vmm::new(&ctx, SanitizerConfig::default()).unwrap_err();
    assert!(
        matches!(&e, VmmError::Host(Error::Unsupported { .. })),
        "{e:?}"
    );
    assert!(matches!(Error::from(e), Error::Unsupported { .. }));
    assert!(matches!(
        Error::from(VmmError::ZeroSize),
        Error::Vmm(b) if *b == VmmError::ZeroSize
    ));
}

#[test]
fn environment_picks_backend_and_sanitizer() {
    let ctx = Context::builder()
        .env(env(&[("VIGIL_DEVICE", "cpu"), ("VIGIL_SANITIZE", "off")]))
        .build()
        .unwrap();
    assert!(ctx.is_cpu() && !ctx.is_sanitized());
    // `auto` without a GPU is the CPU backend.
    if vigil::gpu_available().is_err() {
        let ctx = Context::builder()
            .env(env(&[("VIGIL_DEVICE", "auto")]))
            .build()
            .unwrap();
        assert!(ctx.is_cpu());
        assert!(Context::from_env().unwrap().is_cpu() || std::env::var("VIGIL_DEVICE").is_ok());
        // An explicit GPU is an error, not a silent fallback.
        let e = Context::builder()
            .env(env(&[("VIGIL_DEVICE", "gpu:0")]))
            .build()
            .unwrap_err();
        assert!(e.is_no_gpu(), "{e:?}");
    }
    // Malformed values name the variable, the value and what is accepted.
    let cases: &[(&str, &str, &str)] = &[
        ("VIGIL_DEVICE", "tpu", "`cpu`"),
        ("VIGIL_DEVICE", "gpu:x", "gpu:<ordinal>"),
        ("VIGIL_DEVICE", "gpu:-1", "gpu:<ordinal>"),
        ("VIGIL_SANITIZE", "maybe", "on/off"),
        ("VIGIL_SEED", "seed", "0..=4294967295"),
        ("VIGIL_CLOCK_BUFFER_SIZE", "0", "1..=4096"),
        ("VIGIL_LAUNCH_TIMEOUT", "soon", "`500ms`"),
        ("VIGIL_LAUNCH_TIMEOUT", "-1s", "`off`"),
        ("VIGIL_LAUNCH_TIMEOUT", "5h", "`10m`"),
        ("VIGIL_LAUNCH_TIMEOUT", "1e400", "seconds"),
    ];
    for &(var, value, accepted) in cases {
        let e = Context::builder()
            .cpu()
            .env(env(&[(var, value)]))
            .build()
            .unwrap_err();
        match &e {
            Error::Config(c) => {
                assert_eq!((c.source_name.as_str(), c.value.as_str()), (var, value));
                assert!(c.accepted.contains(accepted), "{var}={value}: {e}");
            }
            e => panic!("{var}={value}: unexpected {e:?}"),
        }
        let msg = e.to_string();
        assert!(msg.contains(var) && msg.contains(value), "{msg}");
    }
    // The sanitizer on the CPU: the built-in runtime when there is one,
    // else a typed error that says how to supply one.
    match Context::builder()
        .env(env(&[("VIGIL_DEVICE", "cpu"), ("VIGIL_SANITIZE", "1")]))
        .build()
    {
        Ok(ctx) => {
            assert!(ctx.is_sanitized());
            assert_eq!(ctx.launch_variant(), LaunchVariant::Sanitized);
        }
        Err(e) => assert!(matches!(e, Error::Unsupported { .. }), "{e:?}"),
    }
}

#[test]
fn the_launch_timeout_comes_from_the_environment_or_the_builder() {
    use std::time::Duration;
    let timeout = |value: &str| {
        Context::builder()
            .cpu()
            .env(env(&[("VIGIL_LAUNCH_TIMEOUT", value)]))
            .build()
            .unwrap()
            .launch_timeout()
    };
    assert_eq!(timeout("30"), Some(Duration::from_secs(30)));
    assert_eq!(timeout(" 2.5s "), Some(Duration::from_millis(2500)));
    assert_eq!(timeout("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(timeout("10m"), Some(Duration::from_secs(600)));
    for off in ["0", "off", "none", "0ms"] {
        assert_eq!(timeout(off), None, "{off}");
    }
    assert_eq!(Context::cpu().unwrap().launch_timeout(), None);
    let ctx = Context::builder()
        .cpu()
        .launch_timeout(Some(Duration::from_secs(3)))
        .build()
        .unwrap();
    assert_eq!(ctx.launch_timeout(), Some(Duration::from_secs(3)));
}

#[test]
fn a_panicking_kernel_is_a_typed_error_and_the_context_stays_usable() {
    let ctx = Context::cpu().unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let module = Module::from_ptx(&ctx, AXPY_PTX).unwrap();
    let k = module.kernel::<indexed::axpy>().unwrap();
    // `x` shorter than `y`: thread 10 indexes past the end of `x`.
    let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 10]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, 32).unwrap();
    let e = stream
        .launch(&k, LaunchConfig::new(1, 32), (1.0f32, &x, &mut y))
        .unwrap_err();
    match &e {
        Error::Cpu(CpuError::KernelPanic { location, .. }) => {
            let loc = location.as_deref().unwrap_or("");
            assert!(loc.contains("cpu_backend.rs"), "{e}");
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(
        e.to_string().starts_with("CPU backend: kernel panicked"),
        "{e}"
    );
    // The `axpy` whose launch proves `x` as long as `y` refuses it first.
    let proven = module.kernel::<axpy>().unwrap();
    let e = stream
        .launch(&proven, LaunchConfig::new(1, 32), (1.0f32, &x, &mut y))
        .unwrap_err();
    assert!(matches!(e, Error::Argument { .. }), "{e}");
    // Stale PTX and bad text fail as on a GPU.
    assert!(matches!(
        module.kernel::<axpy_stale>(),
        Err(Error::SignatureType { .. })
    ));
    assert!(matches!(
        Module::from_ptx(&ctx, "abc\0def"),
        Err(Error::PtxText { .. })
    ));
    // The context still runs kernels.
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, 10).unwrap();
    stream
        .launch(&k, LaunchConfig::new(1, 32), (2.0f32, &x, &mut y))
        .unwrap();
    assert_eq!(y.to_vec(&stream).unwrap(), [2.0; 10]);
    let stats = ctx.last_cpu_launch().unwrap();
    assert_eq!((stats.blocks, stats.threads_per_block), (1, 32));
}

#[test]
fn buffers_are_aligned_zeroed_host_memory() {
    let ctx = Context::builder().cpu().cpu_workers(2).build().unwrap();
    assert_eq!(ctx.sm_count(), 2);
    let stream = Stream::new(&ctx).unwrap();
    for len in [1usize, 3, 1000, 1 << 16] {
        let b = DeviceBuffer::<u8>::alloc(&stream, len).unwrap();
        assert_eq!(b.device_ptr() % vigil::HOST_ALIGN as u64, 0);
        assert!(b.to_vec(&stream).unwrap().iter().all(|&v| v == 0));
    }
    let empty = DeviceBuffer::<u64>::alloc(&stream, 0).unwrap();
    assert_eq!(empty.device_ptr(), 0);
    // Events time host work.
    let (start, end) = (Event::new(&ctx).unwrap(), Event::new(&ctx).unwrap());
    assert!(matches!(
        start.elapsed_ms(&end),
        Err(Error::EventTiming { .. })
    ));
    start.record(&stream).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    end.record(&stream).unwrap();
    end.synchronize().unwrap();
    assert!(end.is_complete().unwrap() && stream.is_idle().unwrap());
    let ms = start.elapsed_ms(&end).unwrap();
    assert!(ms >= 2.0, "{ms}");
    assert!(end.elapsed_ms(&start).unwrap() < 0.0);
}

// ---------------------------------------------------------------------------
// The sanitizer hook, driven by a fake.

/// Records every call it receives; counts per-thread hooks; hands out the
/// reports a test staged.
#[derive(Default)]
struct Fake {
    log: Mutex<Vec<String>>,
    accesses: AtomicU64,
    staged: Mutex<Vec<RaceReport>>,
}

impl Fake {
    fn say(&self, s: String) {
        self.log.lock().unwrap().push(s);
    }
    fn log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

impl SanitizerRuntime for Fake {
    fn access(
        &self,
        _t: &ThreadContext<'_>,
        _addr: usize,
        _size: usize,
        _kind: AccessKind,
        _loc: &'static Location<'static>,
    ) {
        self.accesses.fetch_add(1, MemOrder::Relaxed);
    }
    fn atomic(
        &self,
        _t: &ThreadContext<'_>,
        _access: AtomicAccess,
        _loc: &'static Location<'static>,
        op: &mut dyn FnMut() -> bool,
    ) {
        op();
    }
    fn fence(
        &self,
        _t: &ThreadContext<'_>,
        _o: vigil_shared::Ordering,
        _s: Scope,
        _loc: &'static Location<'static>,
    ) {
    }
}

impl CpuSanitizer for Fake {
    fn runtime_for_launch(&self, launch: &LaunchInfo<'_>) -> &dyn SanitizerRuntime {
        self.say(format!("runtime {}", launch.kernel));
        self
    }
    fn on_launch_begin(&self, l: &LaunchInfo<'_>) {
        self.say(format!("begin {} on {}", l.kernel, l.stream.0));
    }
    fn on_launch_end(&self, l: &LaunchInfo<'_>, outcome: Result<&LaunchStats, &CpuError>) {
        self.say(format!("end {} ok={}", l.kernel, outcome.is_ok()));
    }
    fn on_alloc(&self, a: HostAllocation) {
        self.say(format!("alloc {}", a.size));
    }
    fn on_free(&self, a: HostAllocation) {
        self.say(format!("free {}", a.size));
    }
    fn on_event_record(&self, e: vigil::EventId, s: vigil::StreamId) {
        self.say(format!("record {} on {}", e.0, s.0));
    }
    fn on_stream_wait(&self, s: vigil::StreamId, e: vigil::EventId) {
        self.say(format!("wait {} for {}", s.0, e.0));
    }
    fn on_host_sync(&self, sync: HostSync) {
        self.say(match sync {
            HostSync::Context => "sync context".to_owned(),
            HostSync::Stream(s) => format!("sync stream {}", s.0),
            HostSync::Event(e) => format!("sync event {}", e.0),
        });
    }
    fn take_reports(&self) -> RaceReports {
        self.staged.lock().unwrap().drain(..).collect()
    }
}

fn report(file: &str, line: u32, kind: ReportKind) -> RaceReport {
    let loc = |line| SourceLocation {
        file: file.to_owned(),
        line,
        column: 9,
    };
    RaceReport {
        kind,
        address: 0x7000_0000_1004,
        size: 4,
        allocation: Some(RaceAllocation {
            base: 0x7000_0000_1000,
            size: 64,
            offset: 4,
            site: None,
        }),
        space: MemorySpace::Global,
        kernel: "racy".to_owned(),
        current: RaceAccess {
            access: AccessKind::Write,
            scope: Scope::Device,
            device: 0,
            smid: 1,
            block: Dim3::new(1, 0, 0),
            thread: Dim3::new(3, 0, 0),
            location: Some(loc(line)),
            shared_view: None,
            host_issued: false,
        },
        prior: PriorAccess {
            access: AccessKind::AtomicRmw,
            scope: Scope::Block,
            tid: 0,
            device: 0,
            smid: Some(0),
            epoch: 2,
            block: Some(Dim3::new(0, 0, 0)),
            thread: None,
            kernel: Some("racy".to_owned()),
            location: Some(loc(line + 1)),
            shared_view: None,
            host_issued: false,
            same_block: false,
        },
    }
}

#[test]
fn the_sanitizer_hears_of_everything_that_orders_work() {
    let fake = Arc::new(Fake::default());
    let ctx = Context::builder()
        .cpu()
        .cpu_sanitizer(fake.clone())
        .build()
        .unwrap();
    assert!(ctx.is_sanitized());
    assert_eq!(ctx.launch_variant(), LaunchVariant::Sanitized);
    let (s1, s2) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let (id1, id2) = (s1.id().0, s2.id().0);
    assert_ne!(id1, id2);
    let module = Module::from_ptx(&ctx, AXPY_PTX).unwrap();
    let k = module.kernel::<axpy>().unwrap();

    let x = DeviceBuffer::from_slice(&s1, &[1.0f32; 64]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&s1, 64).unwrap();
    assert_eq!(
        fake.log(),
        ["alloc 256", &format!("sync stream {id1}"), "alloc 256"]
    );

    s1.launch(&k, LaunchConfig::new(2, 32), (2.0f32, &x, &mut y))
        .unwrap();
    assert_eq!(
        fake.log(),
        [
            format!("begin axpy on {id1}"),
            "runtime axpy".to_owned(),
            "end axpy ok=true".to_owned()
        ]
    );
    // The checked entry ran: 3 accesses (load x, load y, store y) per thread.
    assert_eq!(fake.accesses.load(MemOrder::Relaxed), 3 * 64);

    let e = s1.record_event().unwrap();
    s2.wait_event(&e).unwrap();
    e.synchronize().unwrap();
    assert_eq!(
        fake.log(),
        [
            format!("record {} on {id1}", e.id().0),
            format!("wait {id2} for {}", e.id().0),
            format!("sync event {}", e.id().0),
        ]
    );

    // Reports: a copy to the host waits for its stream but leaves the
    // reports for the next synchronize, which returns them as an error.
    fake.staged.lock().unwrap().extend([
        report("src/k.rs", 10, ReportKind::WriteAfterWrite),
        report("src/k.rs", 10, ReportKind::WriteAfterWrite),
        report("src/k.rs", 20, ReportKind::ReadAfterWrite),
    ]);
    assert_eq!(y.to_vec(&s2).unwrap(), [2.0; 64]);
    assert_eq!(fake.log(), [format!("sync stream {id2}")]);
    let err = s2.synchronize().unwrap_err();
    let races = err.races().expect("Error::Races");
    assert_eq!(
        (races.len(), races.duplicates(), races.dropped()),
        (2, 1, 0)
    );
    assert_eq!(races.reports()[1].kind, ReportKind::ReadAfterWrite);
    let text = err.to_string();
    assert!(
        text.contains("2 data race report(s) (1 duplicate(s) not shown)"),
        "{text}"
    );
    assert!(
        text.contains("write-after-write race on 4 byte(s) at 0x700000001004"),
        "{text}"
    );
    assert!(
        text.contains("offset 4 of the 64-byte allocation at 0x700000001000"),
        "{text}"
    );
    assert!(
        text.contains("block (1, 0, 0) thread (3, 0, 0) on device 0 SM 1 at src/k.rs:10:9"),
        "{text}"
    );
    assert!(
        text.contains("atomic read-modify-write (.cta) by sanitizer thread 0"),
        "{text}"
    );
    // Collected once: the context is clean again and still usable.
    s2.synchronize().unwrap();
    ctx.synchronize().unwrap();
    let sync2 = format!("sync stream {id2}");
    assert_eq!(fake.log(), [&sync2, &sync2, "sync context"]);
    fake.staged
        .lock()
        .unwrap()
        .push(report("src/k.rs", 30, ReportKind::AtomicNonAtomic));
    assert_eq!(ctx.take_reports().len(), 1);

    drop(y);
    assert_eq!(fake.log(), ["free 256"]);
}

#[test]
fn reports_print_and_serialise() {
    let mut r: RaceReports = [report("src/\"q\".rs", 5, ReportKind::WriteAfterRead)]
        .into_iter()
        .collect();
    r.add_dropped(7);
    let mut other = RaceReports::new();
    other.push(report("src/\"q\".rs", 5, ReportKind::WriteAfterRead));
    other.push(report("src/b.rs", 1, ReportKind::ScopeMismatch));
    r.merge(other);
    assert_eq!((r.len(), r.duplicates(), r.dropped()), (2, 1, 7));
    let text = r.to_string();
    assert!(text.contains("7 more could not be recorded"), "{text}");
    assert!(text.contains("[2] atomic scope race"), "{text}");
    let json = r.to_json();
    assert!(
        json.starts_with(
            "{\"format\":\"vigil-race-reports\",\"version\":1,\"collected\":true,\
             \"reports\":[{\"kind\":\"write-after-read race\""
        ),
        "{json}"
    );
    assert!(
        json.contains("\"file\":\"src/\\\"q\\\".rs\",\"line\":5,\"column\":9"),
        "{json}"
    );
    assert!(
        json.contains(
            "\"allocation\":{\"base\":123145302315008,\"size\":64,\"offset\":4,\"site\":null}"
        ),
        "{json}"
    );
    assert!(json.contains("\"thread\":null"), "{json}");
    assert!(
        json.ends_with(
            "],\"divergent_barriers\":[],\"duplicates\":1,\"dropped\":7,\"suppressed\":0,\
             \"unchecked_words\":0,\"unchecked_arrays\":0,\"history_lost\":0}"
        ),
        "{json}"
    );
    assert_eq!(json.matches('{').count(), json.matches('}').count());
}

/// Words the GPU's same-block check skipped, arrays it could not check and
/// accesses that lost history are lines and fields, never a finding; a divergent barrier is one, in the text and the JSON.
#[test]
fn unchecked_accesses_and_divergent_barriers_in_reports() {
    let mut r = RaceReports::new();
    r.add_unchecked_words(12);
    r.add_unchecked_arrays(3);
    r.add_history_lost(5);
    assert!(r.is_empty());
    let text = r.to_string();
    assert!(text.contains("12 word access(es) went unchecked"), "{text}");
    assert!(
        text.contains("3 shared array(s) (per block) past the GPU's shadow"),
        "{text}"
    );
    assert!(
        text.contains("5 access(es) lost part of their word's history"),
        "{text}"
    );
    assert!(
        r.to_json()
            .ends_with("\"unchecked_words\":12,\"unchecked_arrays\":3,\"history_lost\":5}"),
        "{}",
        r.to_json()
    );
    r.push_divergent_barrier(vigil::DivergentBarrier {
        block: vigil::Dim3::new(1, 0, 0),
        barrier: "k.rs:3:5".into(),
        detail: "thread(s) 0..=15 wait here".into(),
    });
    assert!(!r.is_empty());
    let text = r.to_string();
    assert!(
        text.contains(
            "divergent barrier in block (1, 0, 0) at k.rs:3:5: thread(s) 0..=15 wait here"
        ),
        "{text}"
    );
    assert!(
        r.to_json().contains(
            "\"divergent_barriers\":[{\"block\":[1,0,0],\"barrier\":\"k.rs:3:5\",\"detail\":\"thread(s) 0..=15 wait here\"}]"
        ),
        "{}",
        r.to_json()
    );
}
