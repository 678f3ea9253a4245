//! The host side of the sanitizer that both backends share, on the CPU
//! backend: host-issued copies and memsets as accesses of their stream
//! (racing with kernels on other streams unless an event or a host
//! synchronisation orders them), halt on the first race, the report file
//! (`VIGIL_REPORT`) and `take_reports`.
//!
//! Every race is checked by kind, by what made each access (a kernel or
//! a copy on a named stream) and by both source lines: a copy's line is
//! where this file issued it (the copy methods are `#[track_caller]`).

use std::collections::HashMap;
use std::path::PathBuf;
use vigil::{
    Context, DeviceBuffer, Error, Kernel, KernelFn, LaunchConfig, Module, RaceReport, RaceReports,
    ReportKind, Stream,
};
use vigil_kernels::races::{many_races, read_one, write_one};
use vigil_tests::KERNELS_PTX;

/// A sanitized one-worker CPU context, its module and two streams.
struct Bench {
    ctx: Context,
    module: Module,
    a: Stream,
    b: Stream,
}

impl Bench {
    fn new() -> Bench {
        Bench::with(Context::builder())
    }

    fn with(builder: vigil::ContextBuilder) -> Bench {
        let ctx = builder
            .cpu()
            .sanitize(true)
            .cpu_workers(1)
            .build()
            .expect("a sanitized CPU context");
        let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
        let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
        Bench { ctx, module, a, b }
    }

    fn kernel<K: Kernel>(&self) -> KernelFn<K> {
        self.module.kernel::<K>().expect("kernel in the module")
    }

    /// A buffer of `n` zeros, ready for every stream (a blocking copy).
    fn zeros(&self, n: usize) -> DeviceBuffer<u32> {
        DeviceBuffer::from_slice(&self.a, &vec![0; n]).expect("buffer")
    }

    /// `write_one(data, v)` on `s`.
    fn write(&self, s: &Stream, data: &mut DeviceBuffer<u32>, v: u32) {
        s.launch(
            &self.kernel::<write_one>(),
            LaunchConfig::new(1, 1),
            (data, v),
        )
        .expect("write_one");
    }

    /// `read_one(data, out)` on `s`.
    fn read(&self, s: &Stream, data: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32>) {
        s.launch(
            &self.kernel::<read_one>(),
            LaunchConfig::new(1, 1),
            (data, out),
        )
        .expect("read_one");
    }

    /// The distinct races of the next synchronisation (none: `Ok`).
    fn races(&self) -> RaceReports {
        match self.ctx.synchronize() {
            Ok(()) => RaceReports::new(),
            Err(Error::Races(r)) => r,
            Err(e) => panic!("synchronize failed: {e}"),
        }
    }
}

/// The line of `races.rs` that carries `// @marker`.
fn kernel_line(marker: &str) -> u32 {
    const SOURCE: &str = include_str!("../kernels/src/races.rs");
    let tag = format!("// @{marker}");
    SOURCE
        .lines()
        .position(|l| l.trim_end().ends_with(&tag))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("no {tag} in races.rs"))
}

/// Who made an access, as a report names it.
#[derive(Debug, PartialEq, Eq)]
struct Side {
    /// The kernel, or the copy (`host-to-device copy on stream #3`).
    by: String,
    /// File (its last path component) and line.
    at: (String, u32),
    /// A copy or fill issued by the host, not a kernel thread.
    host: bool,
}

/// A kernel access at `marker` in `races.rs`.
fn kernel_side(name: &str, marker: &str) -> Side {
    Side {
        by: name.to_owned(),
        at: ("races.rs".to_owned(), kernel_line(marker)),
        host: false,
    }
}

/// A copy or fill issued by this file at `line`.
fn copy_side(what: &str, stream: &Stream, line: u32) -> Side {
    Side {
        by: format!("{what} on stream #{}", stream.id().0),
        at: ("sanitizer_host.rs".to_owned(), line),
        host: true,
    }
}

fn side_of(by: Option<&str>, loc: Option<&vigil::SourceLocation>, host: bool) -> Side {
    let loc = loc.expect("a source location");
    Side {
        by: by.expect("who made the access").to_owned(),
        at: (loc.file.rsplit('/').next().unwrap().to_owned(), loc.line),
        host,
    }
}

/// Asserts exactly one distinct race, of `kind`, between `current` and
/// the earlier `prior`.
fn assert_one_race(races: &RaceReports, kind: ReportKind, current: Side, prior: Side) {
    assert_eq!(races.len(), 1, "one distinct race expected:\n{races}");
    let r: &RaceReport = &races.reports()[0];
    assert_eq!(r.kind, kind, "{r}");
    let text = r.to_string();
    for side in [&current, &prior] {
        if side.host {
            let named = format!("the host-issued {}", side.by);
            assert!(text.contains(&named), "{named} not in {text}");
        }
    }
    let (c, p) = (&r.current, &r.prior);
    assert_eq!(
        side_of(Some(&r.kernel), c.location.as_ref(), c.host_issued),
        current,
        "{r}"
    );
    assert_eq!(
        side_of(p.kernel.as_deref(), p.location.as_ref(), p.host_issued),
        prior,
        "{r}"
    );
    // A kernel's access names the worker (virtual SM) it ran on, from the
    // side table; a host-issued transfer runs on no SM.
    assert_eq!(r.prior.smid.is_none(), p.host_issued, "{r}");
    assert_eq!(races.dropped(), 0);
}

/// How the second operation is ordered after the first (on other streams).
#[derive(Clone, Copy, Debug)]
enum Between {
    Nothing,
    Event,
    HostSync,
}

impl Between {
    fn apply(self, first: &Stream, second: &Stream) {
        match self {
            Between::Nothing => {}
            Between::Event => second.wait_event(&first.record_event().unwrap()).unwrap(),
            Between::HostSync => first.synchronize().expect("no race before the sync"),
        }
    }
}

/// What one case saw, and between which accesses it expects a race when
/// nothing orders them.
struct Observed {
    races: RaceReports,
    current: Side,
    prior: Side,
}

/// Runs `case` with nothing ordering its two operations (exactly one race,
/// of `kind`, between the accesses it names), then with an event and with
/// a host synchronisation between them (no race).
fn racy_unless_ordered(kind: ReportKind, case: impl Fn(Between) -> Observed) {
    let o = case(Between::Nothing);
    assert_one_race(&o.races, kind, o.current, o.prior);
    for between in [Between::Event, Between::HostSync] {
        let o = case(between);
        assert!(o.races.is_empty(), "{between:?}: {}", o.races);
    }
}

/// A kernel on stream b reads `data` while a host-to-device copy on
/// stream a writes it: the copy (issued second) is the reporting access.
#[test]
fn host_to_device_copy_after_a_kernel_read_on_another_stream() {
    racy_unless_ordered(ReportKind::WriteAfterRead, |between| {
        let t = Bench::new();
        let (mut data, mut out) = (t.zeros(1), t.zeros(1));
        t.read(&t.b, &mut data, &mut out);
        between.apply(&t.b, &t.a);
        let line = line!() + 1;
        data.copy_from_host(&t.a, &[7]).unwrap();
        Observed {
            races: t.races(),
            current: copy_side("host-to-device copy", &t.a, line),
            prior: kernel_side("read_one", "read-one"),
        }
    });
}

/// A kernel on stream a writes `data`; a device-to-host copy on stream b
/// reads it.
#[test]
fn device_to_host_copy_after_a_kernel_write_on_another_stream() {
    racy_unless_ordered(ReportKind::ReadAfterWrite, |between| {
        let t = Bench::new();
        let mut data = t.zeros(1);
        t.write(&t.a, &mut data, 5);
        between.apply(&t.a, &t.b);
        let line = line!() + 1;
        assert_eq!(data.to_vec(&t.b).unwrap(), [5]);
        Observed {
            races: t.races(),
            current: copy_side("device-to-host copy", &t.b, line),
            prior: kernel_side("write_one", "write-one"),
        }
    });
}

/// A device-to-device copy on stream a writes `data`; a kernel on stream
/// b reads it while the copy may still run: the copy is the earlier
/// access, named with its stream and line.
#[test]
fn kernel_read_after_a_device_to_device_copy_on_another_stream() {
    racy_unless_ordered(ReportKind::ReadAfterWrite, |between| {
        let t = Bench::new();
        let (mut data, mut out) = (t.zeros(1), t.zeros(1));
        let src = DeviceBuffer::from_slice(&t.a, &[9u32]).unwrap();
        let line = line!() + 1;
        data.copy_from(&t.a, &src).unwrap();
        between.apply(&t.a, &t.b);
        t.read(&t.b, &mut data, &mut out);
        let races = t.races();
        assert_eq!(out.to_vec(&t.a).unwrap(), [9]);
        Observed {
            races,
            current: kernel_side("read_one", "read-one"),
            prior: copy_side("device-to-device copy", &t.a, line),
        }
    });
}

/// A kernel on stream a writes the source of a device-to-device copy on
/// stream b: the copy's read races.
#[test]
fn device_to_device_copy_reading_what_a_kernel_writes() {
    racy_unless_ordered(ReportKind::ReadAfterWrite, |between| {
        let t = Bench::new();
        let (mut src, mut dst) = (t.zeros(1), t.zeros(1));
        t.write(&t.a, &mut src, 3);
        between.apply(&t.a, &t.b);
        let line = line!() + 1;
        dst.copy_from(&t.b, &src).unwrap();
        Observed {
            races: t.races(),
            current: copy_side("device-to-device copy", &t.b, line),
            prior: kernel_side("write_one", "write-one"),
        }
    });
}

/// A memset on stream a, then a kernel write on stream b.
#[test]
fn kernel_write_after_a_memset_on_another_stream() {
    racy_unless_ordered(ReportKind::WriteAfterWrite, |between| {
        let t = Bench::new();
        let mut data = t.zeros(1);
        let line = line!() + 1;
        data.fill_zero(&t.a).unwrap();
        between.apply(&t.a, &t.b);
        t.write(&t.b, &mut data, 1);
        Observed {
            races: t.races(),
            current: kernel_side("write_one", "write-one"),
            prior: copy_side("memset", &t.a, line),
        }
    });
}

/// A kernel write on stream a, then a memset on stream b.
#[test]
fn memset_after_a_kernel_write_on_another_stream() {
    racy_unless_ordered(ReportKind::WriteAfterWrite, |between| {
        let t = Bench::new();
        let mut data = t.zeros(1);
        t.write(&t.a, &mut data, 1);
        between.apply(&t.a, &t.b);
        let line = line!() + 1;
        data.fill_zero(&t.b).unwrap();
        Observed {
            races: t.races(),
            current: copy_side("memset", &t.b, line),
            prior: kernel_side("write_one", "write-one"),
        }
    });
}

/// Copies and kernels on one stream are ordered: no report.
#[test]
fn copies_and_kernels_on_one_stream_do_not_race() {
    let t = Bench::new();
    let (mut data, mut out) = (t.zeros(4), t.zeros(1));
    let src = DeviceBuffer::from_slice(&t.a, &[1u32, 2, 3, 4]).unwrap();
    data.fill_zero(&t.a).unwrap();
    data.copy_from(&t.a, &src).unwrap();
    t.read(&t.a, &mut data, &mut out);
    t.write(&t.a, &mut data, 8);
    data.fill_zero(&t.a).unwrap();
    out.copy_from(&t.a, &data.slice(0..1).unwrap()).unwrap();
    assert_eq!(out.to_vec(&t.a).unwrap(), [0]);
    let races = t.races();
    assert!(races.is_empty(), "{races}");
}

/// `many_races` over 64 one-thread blocks: every block after the first
/// writes the element block 0 wrote. Returns the races and the final value.
fn many_blocks_racing(t: &Bench) -> (RaceReports, u32) {
    let mut data = t.zeros(1);
    t.a.launch(
        &t.kernel::<many_races>(),
        LaunchConfig::new(64, 1),
        (&mut data, 1u32),
    )
    .expect("a halted launch is not an error");
    let races = t.races();
    (races, data.to_vec(&t.a).unwrap()[0])
}

#[test]
fn halt_on_error_stops_the_launch_at_its_first_race() {
    // Without halting, all 64 blocks run: one distinct race, 62 repeats.
    let (races, last) = many_blocks_racing(&Bench::new());
    assert_eq!((races.len(), races.duplicates(), last), (1, 62, 63));

    // Halting (from the builder and from VIGIL_HALT_ON_ERROR): block 1's
    // racing store is not performed and no later block starts.
    let env: HashMap<&str, &str> = [("VIGIL_HALT_ON_ERROR", "1")].into();
    let builders = [
        Context::builder().halt_on_error(true),
        Context::builder().env(|n| env.get(n).map(|v| v.to_string())),
    ];
    for builder in builders {
        let t = Bench::with(builder);
        let (races, last) = many_blocks_racing(&t);
        assert_eq!(
            (races.len(), races.duplicates(), last),
            (1, 0, 0),
            "{races}"
        );
        let r = &races.reports()[0];
        assert_eq!(r.kind, ReportKind::WriteAfterWrite);
        assert_eq!(r.current.block, vigil::Dim3::new(1, 0, 0));
        // The context stays usable: a race-free launch reports nothing.
        let mut data = t.zeros(1);
        t.write(&t.a, &mut data, 4);
        assert!(t.races().is_empty());
        assert_eq!(data.to_vec(&t.a).unwrap(), [4]);
    }
}

/// A fresh path in the system's temporary directory.
fn temp_path(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("vigil-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn lines(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn the_report_file_gets_one_json_line_per_collection_with_races() {
    let path = temp_path("report.jsonl");
    let t = Bench::with(Context::builder().report_path(&path));
    let (mut data, mut out) = (t.zeros(1), t.zeros(1));
    assert!(t.races().is_empty());
    assert!(lines(&path).is_empty(), "nothing written without races");

    t.write(&t.a, &mut data, 1);
    t.read(&t.b, &mut data, &mut out);
    let races = t.races();
    assert_eq!(races.len(), 1);
    let written = lines(&path);
    assert_eq!(written, [races.to_json()]);
    let line = &written[0];
    for needle in [
        "\"kind\":\"read-after-write race\"",
        "\"kernel\":\"read_one\"",
        "\"kernel\":\"write_one\"",
        "races.rs",
        "\"duplicates\":0,\"dropped\":0}",
    ] {
        assert!(line.contains(needle), "{needle} not in {line}");
    }

    // take_reports collects (and writes) the same way; an empty
    // collection writes nothing.
    t.write(&t.a, &mut data, 2);
    t.write(&t.b, &mut data, 3);
    let taken = t.ctx.take_reports();
    assert_eq!(taken.len(), 1);
    assert!(t.ctx.take_reports().is_empty());
    assert!(t.races().is_empty());
    let written = lines(&path);
    assert_eq!(written.len(), 2);
    assert_eq!(written[1], taken.to_json());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn malformed_settings_name_the_variable() {
    let env: HashMap<&str, &str> = [("VIGIL_HALT_ON_ERROR", "maybe")].into();
    let e = Context::builder()
        .cpu()
        .env(|n| env.get(n).map(|v| v.to_string()))
        .build()
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("VIGIL_HALT_ON_ERROR") && msg.contains("on/off"),
        "{msg}"
    );
    let e = Context::builder()
        .cpu()
        .report_path("")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("report_path"), "{e}");
}

/// Run as a child by [`a_misspelt_variable_is_warned_about_once`]: reads
/// the environment twice, as a program opening two contexts would.
#[test]
#[ignore = "run as a child process by a_misspelt_variable_is_warned_about_once"]
fn child_reads_the_environment_twice() {
    for _ in 0..2 {
        let b = Context::builder().cpu().env_vars();
        let ctx = b.build().expect("a CPU context");
        // The misspelling changes nothing: the context is not sanitized.
        assert!(!ctx.is_sanitized());
    }
}

#[test]
fn a_misspelt_variable_is_warned_about_once() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_reads_the_environment_twice",
            "--nocapture",
        ])
        .env("VIGIL_SANITISE", "1")
        .env_remove("VIGIL_SANITIZE")
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run: {stdout}"
    );
    let warning =
        "vigil: unknown environment variable VIGIL_SANITISE (ignored); did you mean VIGIL_SANITIZE?";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
}
