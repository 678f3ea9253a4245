//! What the scenario suites (`race_scenarios.rs`, `scale_scenarios.rs`)
//! share: how a backend's sanitized context is made, the bench every case
//! runs on, and the lookup of `// @marker` lines in the kernels' sources.
#![allow(dead_code)] // each suite uses its part

use vigil::{
    Context, DeviceBuffer, Kernel, KernelArgs, KernelFn, LaunchConfig, Module, RaceReports,
    ReportKind, Stream,
};
use vigil_tests::KERNELS_PTX;

/// One `#[test]` per scenario name, each calling
/// `super::scenarios::<name>($make)` (from the module the suite
/// instantiates for a backend), skipped without the backend: it returns
/// (or fails, with `VIGIL_REQUIRE_GPU=1`) when `$make` makes no context,
/// so a case that expects a race cannot pass by not running.
#[allow(unused_macros)] // used by the suites, not by every test file
macro_rules! scenario_tests {
    ($make:expr; $($name:ident),* $(,)?) => {
        scenario_tests!($make, || (); $($name),*);
    };
    // `$turn()` is held for each test (`gpu_turn`: the GPU's tests take turns).
    ($make:expr, $turn:expr; $($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let _turn = $turn();
            if $make(1).is_none() {
                return;
            }
            super::scenarios::$name($make)
        }
    )*};
}

/// The verdict helpers of a suite over one kernel file of
/// `tests/kernels/src/` (`$file`, its text `$source`, an `include_str!`
/// written in the suite so that its path is the suite's):
/// `type Verdict` (kind, line of the current access, line of the prior
/// one), `line_of(marker)` (the line carrying `// @marker`),
/// `race(kind, current, prior)` (the expected report at two markers) and
/// `check(what, outcome, expected)` (the distinct reports against the
/// expected ones; none: `Ok`).
#[allow(unused_macros)] // used by the suites over one kernel file
macro_rules! kernel_file_verdicts {
    ($file:literal, $source:expr) => {
        /// A distinct report: kind, line of the current access, line of
        /// the prior one.
        type Verdict = (vigil::ReportKind, u32, u32);

        /// The line of the kernel file that carries `// @marker`.
        fn line_of(marker: &str) -> u32 {
            common::marker_line($source, $file, marker)
        }

        /// The expected report: `kind`, the current access at `current`'s
        /// marker, the prior one at `prior`'s.
        fn race(kind: vigil::ReportKind, current: &str, prior: &str) -> Verdict {
            (kind, line_of(current), line_of(prior))
        }

        /// Checks a synchronisation's outcome against the expected
        /// distinct reports (none: `Ok`).
        fn check(what: &str, outcome: vigil::Result<()>, expected: &[Verdict]) {
            common::check_reports(what, concat!("src/", $file), outcome, expected);
        }
    };
}

/// Makes a sanitized context with `workers` CPU workers (ignored on a GPU),
/// or `None` when the backend is not available here (the case is skipped).
pub type MakeContext = fn(usize) -> Option<Context>;

/// A sanitized CPU context (the built-in CPU sanitizer).
pub fn cpu_context(workers: usize) -> Option<Context> {
    Some(
        Context::builder()
            .cpu()
            .sanitize(true)
            .cpu_workers(workers)
            .build()
            .expect("a sanitized CPU context"),
    )
}

/// A sanitized context on GPU 0, or `None` without a usable GPU (the case
/// is skipped, or fails with `VIGIL_REQUIRE_GPU=1`). The worker count is
/// the CPU backend's; a GPU runs blocks as its SMs take them.
pub fn gpu_context(_workers: usize) -> Option<Context> {
    vigil::unstable::testing::require_gpu()?;
    Some(
        Context::builder()
            .gpu(0)
            .sanitize(true)
            .build()
            .expect("a sanitized GPU context"),
    )
}

/// Holds GPU 0 for the calling test until dropped: sanitized GPU tests
/// whose verdicts depend on state the device's sanitizer shares (the
/// record pool, the side table, sanitizer-thread clocks that another
/// test's kernels can advance; docs/src/design/address-space.md) take turns, as
/// `#[vigil::test]` trials on one GPU do.
pub fn gpu_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// True when at least two CUDA GPUs are there; otherwise says on stderr
/// that the calling test is skipped and why (fewer GPUs skip even with
/// `VIGIL_REQUIRE_GPU=1`: most GPU machines have one).
pub fn two_gpus() -> bool {
    match vigil::device_count() {
        Ok(n) if n >= 2 => true,
        found => {
            eprintln!("skipping: this test needs two CUDA GPUs ({found:?})");
            false
        }
    }
}

/// The races a synchronisation found; any other outcome panics with
/// `expected` (what the test expected) and what came instead.
pub fn expect_races(outcome: vigil::Result<()>, expected: &str) -> vigil::RaceReports {
    match outcome {
        Err(vigil::Error::Races(r)) => r,
        other => panic!("expected {expected}, got {other:?}"),
    }
}

/// The line of `source` (the text of kernel file `file`) that carries
/// `// @marker`; the marker must be unique.
pub fn marker_line(source: &str, file: &str, marker: &str) -> u32 {
    let tag = format!("// @{marker}");
    let mut found = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(&tag));
    let (i, _) = found
        .next()
        .unwrap_or_else(|| panic!("no `{tag}` marker in {file}"));
    assert!(found.next().is_none(), "marker `{tag}` is not unique");
    i as u32 + 1
}

/// A verdict (kind, current line, prior line) up to which of its two
/// accesses came second: blocks that run at once on a GPU take turns in no
/// fixed order, so a read-after-write race may be seen as a
/// write-after-read one (the same two lines), and a symmetric race from
/// either side.
pub fn unordered((kind, current, prior): (u32, u32, u32)) -> (u32, u32, u32) {
    let (raw, war) = (
        ReportKind::ReadAfterWrite as u32,
        ReportKind::WriteAfterRead as u32,
    );
    match kind {
        k if k == war => (raw, prior, current),
        k if k == raw => (raw, current, prior),
        k => (k, current.min(prior), current.max(prior)),
    }
}

/// Checks the outcome of a synchronisation against the expected distinct
/// reports, each (kind, current line, prior line) of kernel file `file`
/// (none: `Ok`), up to which of a race's two accesses came second
/// ([`unordered`]).
pub fn check_reports(
    what: &str,
    file: &str,
    outcome: vigil::Result<()>,
    expected: &[(ReportKind, u32, u32)],
) {
    let reports = match outcome {
        Ok(()) => vigil::RaceReports::new(),
        Err(vigil::Error::Races(r)) => r,
        Err(e) => panic!("{what}: synchronisation failed: {e}"),
    };
    let mut got = std::collections::BTreeSet::new();
    for r in reports.iter() {
        let cur = r.current.location.as_ref().expect("current location");
        let prior = r
            .prior
            .location
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: prior location missing in\n{r}"));
        for l in [cur, prior] {
            assert!(
                l.file.ends_with(file),
                "{what}: location outside the kernels: {l}\n{reports}"
            );
        }
        got.insert(unordered((r.kind as u32, cur.line, prior.line)));
    }
    let want: std::collections::BTreeSet<_> = expected
        .iter()
        .map(|(k, c, p)| unordered((*k as u32, *c, *p)))
        .collect();
    assert_eq!(
        got, want,
        "{what}: distinct reports (kind, current line, prior line) differ; the sanitizer said:\n{reports}"
    );
    assert_eq!(reports.dropped(), 0, "{what}: reports dropped");
}

/// A sanitized context, a stream and the kernels' module.
pub struct Bench {
    pub ctx: Context,
    pub stream: Stream,
    pub module: Module,
}

impl Bench {
    pub fn new(make: MakeContext, workers: usize) -> Option<Bench> {
        Some(Bench::on(make(workers)?))
    }

    /// The bench on `ctx`.
    pub fn on(ctx: Context) -> Bench {
        let stream = Stream::new(&ctx).expect("stream");
        let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
        Bench {
            ctx,
            stream,
            module,
        }
    }

    pub fn kernel<K: Kernel>(&self) -> KernelFn<K> {
        self.module.kernel::<K>().expect("kernel in the module")
    }

    /// Launches `K` with `config` on the bench's stream and synchronises:
    /// the launch's races, as the synchronisation returns them.
    pub fn run<K: Kernel, A: KernelArgs<K::Params>>(
        &self,
        config: LaunchConfig,
        args: A,
    ) -> vigil::Result<()> {
        self.stream
            .launch(&self.kernel::<K>(), config, args)
            .and_then(|()| self.sync())
    }

    /// Launches `K` with `config`, waits for it through an event (which,
    /// unlike a synchronisation, leaves the reports to collect) and
    /// returns its races as a synchronisation would, asserting that every
    /// shared array was checked (none counted unchecked: on the GPU the
    /// large and dynamic ones go through the window shadow).
    pub fn run_all_checked<K: Kernel, A: KernelArgs<K::Params>>(
        &self,
        config: LaunchConfig,
        args: A,
    ) -> vigil::Result<()> {
        self.stream.launch(&self.kernel::<K>(), config, args)?;
        let done = vigil::Event::new(&self.ctx)?;
        done.record(&self.stream)?;
        done.synchronize()?;
        let reports = self.ctx.take_reports();
        assert_eq!(reports.unchecked_arrays(), 0, "{reports}");
        if reports.is_empty() {
            Ok(())
        } else {
            Err(vigil::Error::Races(reports))
        }
    }

    /// `n` zeroed `u32`s, ready for every stream.
    pub fn zeros(&self, n: usize) -> DeviceBuffer<u32> {
        self.zeros_of(n)
    }

    /// `n` zeroed elements of `T`, ready for every stream: a blocking copy
    /// (a memset is an access of its stream, which a kernel on another
    /// stream would race with).
    pub fn zeros_of<T: bytemuck::Pod>(&self, n: usize) -> DeviceBuffer<T> {
        DeviceBuffer::from_slice(&self.stream, &vec![T::zeroed(); n]).expect("buffer")
    }

    /// The SMs an access can be reported on (the CPU backend's virtual
    /// SMs are its workers).
    pub fn sms(&self) -> usize {
        self.ctx.sm_count() as usize
    }

    pub fn sync(&self) -> vigil::Result<()> {
        self.ctx.synchronize()
    }

    /// Waits for the stream's work through an event (a synchronisation
    /// without races would drop the counts) and takes the reports,
    /// counts included.
    pub fn wait_and_take_reports(&self) -> RaceReports {
        let done = vigil::Event::new(&self.ctx).expect("event");
        done.record(&self.stream).expect("record");
        done.synchronize().expect("event wait");
        self.ctx.take_reports()
    }
}

/// A sanitized context, the kernels' module and two streams: the bench of
/// the cases between streams (host-issued copies, reports).
pub struct TwoStreams {
    pub ctx: Context,
    pub module: Module,
    pub a: Stream,
    pub b: Stream,
}

impl TwoStreams {
    pub fn new(ctx: Context) -> TwoStreams {
        let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
        let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
        TwoStreams { ctx, module, a, b }
    }

    pub fn kernel<K: Kernel>(&self) -> KernelFn<K> {
        self.module.kernel::<K>().expect("kernel in the module")
    }

    /// A buffer of `n` zeros, ready for every stream (a blocking copy).
    pub fn zeros(&self, n: usize) -> DeviceBuffer<u32> {
        DeviceBuffer::from_slice(&self.a, &vec![0; n]).expect("buffer")
    }

    /// `write_one(data, v)` on `s`.
    pub fn write(&self, s: &Stream, data: &mut DeviceBuffer<u32>, v: u32) {
        use vigil_kernels::races::write_one;
        s.launch(
            &self.kernel::<write_one>(),
            LaunchConfig::new(1, 1),
            (data, v),
        )
        .expect("write_one");
    }

    /// `read_one(data, out)` on `s`.
    pub fn read(&self, s: &Stream, data: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32>) {
        use vigil_kernels::races::read_one;
        s.launch(
            &self.kernel::<read_one>(),
            LaunchConfig::new(1, 1),
            (data, out),
        )
        .expect("read_one");
    }

    /// The distinct races of the next synchronisation (none: `Ok`).
    pub fn races(&self) -> RaceReports {
        match self.ctx.synchronize() {
            Ok(()) => RaceReports::new(),
            Err(vigil::Error::Races(r)) => r,
            Err(e) => panic!("synchronize failed: {e}"),
        }
    }
}

/// Short names both suites give report kinds, and the ordering and scope
/// codes of `vigil_kernels::races::{ordering, scope}`.
pub mod codes {
    use vigil::ReportKind;

    pub const RAW: ReportKind = ReportKind::ReadAfterWrite;
    pub const WAR: ReportKind = ReportKind::WriteAfterRead;
    pub const WAW: ReportKind = ReportKind::WriteAfterWrite;
    pub const MIX: ReportKind = ReportKind::AtomicNonAtomic;
    pub const SCOPE: ReportKind = ReportKind::ScopeMismatch;
    pub const SIZE: ReportKind = ReportKind::AtomicSizeMismatch;

    pub const RELAXED: u32 = 0;
    pub const ACQUIRE: u32 = 1;
    pub const RELEASE: u32 = 2;
    pub const ACQ_REL: u32 = 3;
    pub const SEQ_CST: u32 = 4;

    pub const BLOCK: u32 = 0;
    pub const DEVICE: u32 = 1;
    pub const SYSTEM: u32 = 2;
}
