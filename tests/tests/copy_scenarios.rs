//! Host-issued copies and memsets as accesses of their stream, on every
//! backend: a copy or fill races with a kernel on another stream unless an
//! event, a host synchronisation or stream order puts them in order. The
//! CPU sanitizer checks a transfer as a one-thread launch; the GPU
//! sanitizer launches its range-access entry on the transfer's stream.
//!
//! Every race is checked by kind, by what made each access (a kernel or a
//! copy on a named stream) and by both source lines: a copy's line is
//! where this file issued it (the copy methods are `#[track_caller]`).
//! Written once ([`scenarios`]) and instantiated per backend; a GPU case
//! skips without a GPU (fails with `VIGIL_REQUIRE_GPU=1`). Each case
//! prints what the sanitizer said (`--nocapture` shows it).

#[macro_use]
mod common;

/// Instantiates every scenario for one backend.
macro_rules! copy_scenarios {
    ($backend:ident, $make:expr) => {
        mod $backend {
            scenario_tests!($make;
                host_to_device_copy_after_a_kernel_read_on_another_stream,
                device_to_host_copy_after_a_kernel_write_on_another_stream,
                kernel_read_after_a_device_to_device_copy_on_another_stream,
                device_to_device_copy_reading_what_a_kernel_writes,
                kernel_write_after_a_memset_on_another_stream,
                memset_after_a_kernel_write_on_another_stream,
                a_kernel_after_a_blocking_copy_on_another_stream_is_ordered,
                copies_and_kernels_on_one_stream_do_not_race,
                many_large_copies_and_kernels_on_one_stream_do_not_race);
        }
    };
}

copy_scenarios!(cpu, super::common::cpu_context);
copy_scenarios!(gpu, super::common::gpu_context);

mod scenarios {
    use super::common::{MakeContext, TwoStreams};
    use vigil::{DeviceBuffer, RaceReport, RaceReports, ReportKind, Stream};

    /// The line of `races.rs` that carries `// @marker`.
    fn kernel_line(marker: &str) -> u32 {
        super::common::marker_line(include_str!("../kernels/src/races.rs"), "races.rs", marker)
    }

    /// Who made an access, as a report names it.
    #[derive(Clone, Debug, PartialEq, Eq)]
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
            at: ("copy_scenarios.rs".to_owned(), line),
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

    /// The same race seen from its other access (two streams running at
    /// once on a GPU reach the word in either order).
    fn swapped(kind: ReportKind) -> ReportKind {
        match kind {
            ReportKind::ReadAfterWrite => ReportKind::WriteAfterRead,
            ReportKind::WriteAfterRead => ReportKind::ReadAfterWrite,
            k => k,
        }
    }

    /// Asserts exactly one distinct race, of `kind`, between `current` and
    /// the earlier `prior`; where the two accesses ran at once (`either`),
    /// also the same race seen from the other side.
    fn assert_one_race(
        races: &RaceReports,
        kind: ReportKind,
        current: Side,
        prior: Side,
        either: bool,
    ) {
        assert_eq!(races.len(), 1, "one distinct race expected:\n{races}");
        let r: &RaceReport = &races.reports()[0];
        let text = r.to_string();
        for side in [&current, &prior] {
            if side.host {
                let named = format!("the host-issued {}", side.by);
                assert!(text.contains(&named), "{named} not in {text}");
            }
        }
        let (c, p) = (&r.current, &r.prior);
        let got = (
            r.kind,
            side_of(Some(&r.kernel), c.location.as_ref(), c.host_issued),
            side_of(p.kernel.as_deref(), p.location.as_ref(), p.host_issued),
        );
        let want = (kind, current, prior);
        let other = (swapped(want.0), want.2.clone(), want.1.clone());
        assert!(
            got == want || (either && got == other),
            "expected {want:?}, got {got:?}:\n{r}"
        );
        // A host-issued transfer runs on no SM.
        assert!(!p.host_issued || r.prior.smid.is_none(), "{r}");
        assert_eq!(races.dropped(), 0);
    }

    /// How the second operation is put after the first.
    #[derive(Clone, Copy, Debug)]
    enum Between {
        /// Nothing: two streams, unordered.
        Nothing,
        /// An event recorded after the first and waited for by the second
        /// stream.
        Event,
        /// The host waits for the first stream.
        HostSync,
        /// Both on one stream.
        StreamOrder,
    }

    impl Between {
        /// The streams of the first and the second operation.
        fn streams(self, t: &TwoStreams) -> (&Stream, &Stream) {
            match self {
                Between::StreamOrder => (&t.a, &t.a),
                _ => (&t.a, &t.b),
            }
        }

        /// Orders what comes next on `second` after what was issued on
        /// `first`.
        fn apply(self, first: &Stream, second: &Stream) {
            match self {
                Between::Nothing | Between::StreamOrder => {}
                Between::Event => second.wait_event(&first.record_event().unwrap()).unwrap(),
                Between::HostSync => first.synchronize().expect("no race before the sync"),
            }
        }

        /// True when the two operations are ordered (values are then known).
        fn orders(self) -> bool {
            !matches!(self, Between::Nothing)
        }
    }

    /// What one case saw, and between which accesses it expects a race
    /// when nothing orders them.
    struct Observed {
        races: RaceReports,
        current: Side,
        prior: Side,
    }

    /// Runs `case` (first operation on `first`, second on `second`) with
    /// nothing ordering its two operations (exactly one race, of `kind`,
    /// between the accesses it names), then with an event, a host
    /// synchronisation and stream order between them (no race).
    fn racy_unless_ordered(
        make: MakeContext,
        kind: ReportKind,
        case: impl Fn(&TwoStreams, Between, &Stream, &Stream) -> Observed,
    ) {
        for between in [
            Between::Nothing,
            Between::Event,
            Between::HostSync,
            Between::StreamOrder,
        ] {
            let t = TwoStreams::new(make(1).expect("the backend"));
            let (first, second) = between.streams(&t);
            let o = case(&t, between, first, second);
            println!(
                "{} {between:?}: {} distinct race(s)\n{}",
                t.ctx.device(),
                o.races.len(),
                o.races
            );
            match between {
                Between::Nothing => {
                    assert_one_race(&o.races, kind, o.current, o.prior, !t.ctx.is_cpu())
                }
                _ => assert!(o.races.is_empty(), "{between:?}: {}", o.races),
            }
        }
    }

    /// A kernel on one stream reads `data`; a host-to-device copy on the
    /// other writes it (the copy, issued second, is the reporting access).
    /// Copies from host memory block, so only this order can race.
    pub fn host_to_device_copy_after_a_kernel_read_on_another_stream(make: MakeContext) {
        racy_unless_ordered(make, ReportKind::WriteAfterRead, |t, between, a, b| {
            let (mut data, mut out) = (t.zeros(1), t.zeros(1));
            t.read(a, &mut data, &mut out);
            between.apply(a, b);
            let line = line!() + 1;
            data.copy_from_host(b, &[7]).unwrap();
            Observed {
                races: t.races(),
                current: copy_side("host-to-device copy", b, line),
                prior: kernel_side("read_one", "read-one"),
            }
        });
    }

    /// A kernel on one stream writes `data`; a device-to-host copy on the
    /// other reads it.
    pub fn device_to_host_copy_after_a_kernel_write_on_another_stream(make: MakeContext) {
        racy_unless_ordered(make, ReportKind::ReadAfterWrite, |t, between, a, b| {
            let mut data = t.zeros(1);
            t.write(a, &mut data, 5);
            between.apply(a, b);
            let line = line!() + 1;
            let got = data.to_vec(b).unwrap();
            if between.orders() {
                assert_eq!(got, [5]);
            }
            Observed {
                races: t.races(),
                current: copy_side("device-to-host copy", b, line),
                prior: kernel_side("write_one", "write-one"),
            }
        });
    }

    /// A device-to-device copy on one stream writes `data`; a kernel on
    /// the other reads it while the copy may still run: the copy is the
    /// earlier access, named with its stream and line.
    pub fn kernel_read_after_a_device_to_device_copy_on_another_stream(make: MakeContext) {
        racy_unless_ordered(make, ReportKind::ReadAfterWrite, |t, between, a, b| {
            let (mut data, mut out) = (t.zeros(1), t.zeros(1));
            let src = DeviceBuffer::from_slice(a, &[9u32]).unwrap();
            let line = line!() + 1;
            data.copy_from(a, &src).unwrap();
            between.apply(a, b);
            t.read(b, &mut data, &mut out);
            let races = t.races();
            if between.orders() {
                assert_eq!(out.to_vec(a).unwrap(), [9]);
            }
            Observed {
                races,
                current: kernel_side("read_one", "read-one"),
                prior: copy_side("device-to-device copy", a, line),
            }
        });
    }

    /// A kernel on one stream writes the source of a device-to-device copy
    /// on the other: the copy's read races.
    pub fn device_to_device_copy_reading_what_a_kernel_writes(make: MakeContext) {
        racy_unless_ordered(make, ReportKind::ReadAfterWrite, |t, between, a, b| {
            let (mut src, mut dst) = (t.zeros(1), t.zeros(1));
            t.write(a, &mut src, 3);
            between.apply(a, b);
            let line = line!() + 1;
            dst.copy_from(b, &src).unwrap();
            let races = t.races();
            if between.orders() {
                assert_eq!(dst.to_vec(a).unwrap(), [3]);
            }
            Observed {
                races,
                current: copy_side("device-to-device copy", b, line),
                prior: kernel_side("write_one", "write-one"),
            }
        });
    }

    /// A memset on one stream, then a kernel write on the other.
    pub fn kernel_write_after_a_memset_on_another_stream(make: MakeContext) {
        racy_unless_ordered(make, ReportKind::WriteAfterWrite, |t, between, a, b| {
            let mut data = t.zeros(1);
            let line = line!() + 1;
            data.fill_zero(a).unwrap();
            between.apply(a, b);
            t.write(b, &mut data, 1);
            Observed {
                races: t.races(),
                current: kernel_side("write_one", "write-one"),
                prior: copy_side("memset", a, line),
            }
        });
    }

    /// A kernel write on one stream, then a memset on the other.
    pub fn memset_after_a_kernel_write_on_another_stream(make: MakeContext) {
        racy_unless_ordered(make, ReportKind::WriteAfterWrite, |t, between, a, b| {
            let mut data = t.zeros(1);
            t.write(a, &mut data, 1);
            between.apply(a, b);
            let line = line!() + 1;
            data.fill_zero(b).unwrap();
            let races = t.races();
            if between.orders() {
                assert_eq!(data.to_vec(a).unwrap(), [0]);
            }
            Observed {
                races,
                current: copy_side("memset", b, line),
                prior: kernel_side("write_one", "write-one"),
            }
        });
    }

    /// A copy from host memory returns when it is done: it is a host
    /// synchronisation of its stream, so a kernel on another stream after
    /// it is ordered (no report), and reads what it wrote.
    pub fn a_kernel_after_a_blocking_copy_on_another_stream_is_ordered(make: MakeContext) {
        let t = TwoStreams::new(make(1).expect("the backend"));
        let (mut data, mut out) = (t.zeros(1), t.zeros(1));
        data.copy_from_host(&t.a, &[4]).unwrap();
        t.read(&t.b, &mut data, &mut out);
        assert_eq!(out.to_vec(&t.b).unwrap(), [4]);
        let races = t.races();
        println!("{}: {races}", t.ctx.device());
        assert!(races.is_empty(), "{races}");
    }

    /// Copies and kernels on one stream are ordered: no report.
    pub fn copies_and_kernels_on_one_stream_do_not_race(make: MakeContext) {
        let t = TwoStreams::new(make(1).expect("the backend"));
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
        println!("{}: {races}", t.ctx.device());
        assert!(races.is_empty(), "{races}");
    }

    /// Rounds of megabyte fills and copies (many chunks, several blocks of
    /// the GPU's range check) and kernels on one stream: no false race, and
    /// the data is what stream order gives.
    pub fn many_large_copies_and_kernels_on_one_stream_do_not_race(make: MakeContext) {
        let t = TwoStreams::new(make(1).expect("the backend"));
        let n = 1 << 18; // 1 MiB of u32
        let host: Vec<u32> = (0..n as u32).collect();
        let src = DeviceBuffer::from_slice(&t.a, &host).unwrap();
        let (mut data, mut copy, mut out) = (t.zeros(n), t.zeros(n), t.zeros(1));
        for round in 0..8u32 {
            data.fill_zero(&t.a).unwrap();
            data.copy_from(&t.a, &src).unwrap();
            t.read(&t.a, &mut data, &mut out);
            t.write(&t.a, &mut data, round);
            copy.copy_from(&t.a, &data).unwrap();
            copy.copy_from_host(&t.a, &host).unwrap();
        }
        let back = copy.to_vec(&t.a).unwrap();
        assert_eq!(back, host);
        assert_eq!(data.to_vec(&t.a).unwrap()[0], 7);
        let races = t.races();
        println!("{}: {races}", t.ctx.device());
        assert!(races.is_empty(), "{races}");
    }
}
