//! The sanitizer's controls on every backend: which launches run
//! sanitized (kernel lists, launch skip and count), how a plain launch of
//! a sanitized context keeps the order of the sanitized ones around it,
//! and suppressions (by kernel, by location, by allocation site).
//!
//! Written once ([`scenarios`]) and instantiated per backend; a GPU case
//! skips without a GPU (fails with `VIGIL_REQUIRE_GPU=1`).

#[macro_use]
mod common;

use vigil::{Context, ContextBuilder};

/// Makes a sanitized context of one backend from `builder` (its
/// controls set), or `None` when the backend is not available here.
type MakeContext = fn(ContextBuilder) -> Option<Context>;

fn cpu(builder: ContextBuilder) -> Option<Context> {
    Some(
        builder
            .cpu()
            .sanitize(true)
            .cpu_workers(2)
            .build()
            .expect("a sanitized CPU context"),
    )
}

fn gpu(builder: ContextBuilder) -> Option<Context> {
    vigil::unstable::testing::require_gpu()?;
    Some(
        builder
            .gpu(0)
            .sanitize(true)
            .build()
            .expect("a sanitized GPU context"),
    )
}

/// One `#[test]` per scenario and backend; GPU cases take turns.
macro_rules! control_tests {
    ($backend:ident, $make:expr, $turn:expr; $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[test]
                fn $name() {
                    let _turn = $turn();
                    if $make(vigil::Context::builder()).is_none() {
                        return;
                    }
                    super::scenarios::$name($make)
                }
            )*
        }
    };
}

macro_rules! all_control_tests {
    ($backend:ident, $make:expr, $turn:expr) => {
        control_tests!($backend, $make, $turn;
            kernel_lists_choose_the_sanitized_launches,
            launch_skip_and_count_choose_among_selected_launches,
            a_plain_launch_keeps_the_order_of_the_sanitized_ones_around_it,
            suppressions_take_races_out_by_kernel_location_and_allocation);
    };
}

all_control_tests!(cpu, super::cpu, || ());
all_control_tests!(gpu, super::gpu, super::common::gpu_turn);

mod scenarios {
    use super::common::TwoStreams;
    use super::MakeContext;
    use vigil::{Context, DeviceBuffer, Event, LaunchConfig, RaceReports, ReportKind, Stream};
    use vigil_kernels::races::count_positive_racy;

    fn kernel_line(marker: &str) -> u32 {
        super::common::marker_line(include_str!("../kernels/src/races.rs"), "races.rs", marker)
    }

    fn bench(make: MakeContext, builder: vigil::ContextBuilder) -> TwoStreams {
        TwoStreams::new(make(builder).expect("the backend was there a moment ago"))
    }

    /// The distinct races as (kind, current kernel, prior kernel), sorted,
    /// a write-after-read race written as the read-after-write race of the
    /// same two accesses: on a GPU, kernels on two streams run in either
    /// order, and whichever access comes second finds the race.
    fn races_of(r: &RaceReports) -> Vec<(ReportKind, String, String)> {
        let mut out: Vec<_> = r
            .iter()
            .map(|r| {
                let (current, prior) =
                    (r.kernel.clone(), r.prior.kernel.clone().unwrap_or_default());
                match r.kind {
                    ReportKind::WriteAfterRead => (ReportKind::ReadAfterWrite, prior, current),
                    kind => (kind, current, prior),
                }
            })
            .collect();
        out.sort_by_key(|(k, a, b)| (*k as u32, a.clone(), b.clone()));
        out.dedup();
        out
    }

    /// The kernels of either side of the races of `races`, sorted.
    fn kernels(races: &[(ReportKind, String, String)]) -> Vec<String> {
        let mut k: Vec<String> = races
            .iter()
            .flat_map(|(_, a, b)| [a.clone(), b.clone()])
            .collect();
        k.sort();
        k.dedup();
        k
    }

    /// `write_one` on stream a, then `read_one` of the same word on
    /// stream b: unordered, a read-after-write race when both are checked.
    fn write_then_read_on_two_streams(t: &TwoStreams) -> DeviceBuffer<u32> {
        let (mut data, mut out) = (t.zeros(1), t.zeros(1));
        t.write(&t.a, &mut data, 1);
        t.read(&t.b, &mut data, &mut out);
        data
    }

    /// 4,096 positive values for [`racy_count`] (a blocking copy, made
    /// before the launches a case orders).
    fn positives(t: &TwoStreams) -> DeviceBuffer<i32> {
        DeviceBuffer::from_slice(&t.a, &[1i32; 4096]).expect("values")
    }

    /// `count_positive_racy` over `values` on `stream`, counting into
    /// `count[0]`: a race between its own blocks.
    fn racy_count(
        t: &TwoStreams,
        stream: &Stream,
        values: &DeviceBuffer<i32>,
        count: &mut DeviceBuffer<u32>,
    ) {
        stream
            .launch(
                &t.kernel::<count_positive_racy>(),
                LaunchConfig::for_num_elems(values.len(), 256),
                (values, count),
            )
            .expect("count_positive_racy");
    }

    /// The read-after-write race of [`write_then_read_on_two_streams`].
    fn raw() -> (ReportKind, String, String) {
        (
            ReportKind::ReadAfterWrite,
            "read_one".to_owned(),
            "write_one".to_owned(),
        )
    }

    /// The kernels of the races the launches of
    /// [`write_then_read_on_two_streams`] and [`racy_count`] report on a
    /// context built with `builder`.
    fn kernels_reported(make: MakeContext, builder: vigil::ContextBuilder) -> Vec<String> {
        let t = bench(make, builder);
        let (values, mut count) = (positives(&t), t.zeros(1));
        write_then_read_on_two_streams(&t);
        racy_count(&t, &t.a, &values, &mut count);
        kernels(&races_of(&t.races()))
    }

    /// Kernel lists: exact names, `/regex/` items, an exclude list, and
    /// the same from the environment variables. A kernel left out runs
    /// plain: its accesses are not checked, so `read_one` alone races
    /// with nothing.
    pub fn kernel_lists_choose_the_sanitized_launches(make: MakeContext) {
        let both = ["count_positive_racy", "read_one", "write_one"];
        let pair = ["read_one", "write_one"];
        let b = Context::builder;
        assert_eq!(kernels_reported(make, b()), both);
        assert!(kernels_reported(make, b().sanitize_kernels(["read_one"])).is_empty());
        assert_eq!(
            kernels_reported(make, b().sanitize_kernels(["/^(read|write)_one$/"])),
            pair
        );
        assert_eq!(
            kernels_reported(make, b().exclude_kernels(["count_positive_racy"])),
            pair
        );
        assert_eq!(
            kernels_reported(make, b().exclude_kernels(["/one$/"])),
            ["count_positive_racy"]
        );
        let env = |name: &str| match name {
            "VIGIL_SANITIZE_KERNELS" => Some("write_one, /^read/, count_positive_racy".to_owned()),
            "VIGIL_SANITIZE_KERNELS_EXCLUDE" => Some("count_positive_racy".to_owned()),
            _ => None,
        };
        assert_eq!(kernels_reported(make, b().env(env)), pair);
    }

    /// Launch skip and count, among the launches the kernel list
    /// selects: with `write_one` and `read_one` selected, skip 2 and count
    /// 2, the first write/read pair runs plain, the second sanitized
    /// (a race), the third plain again; `count_positive_racy`, not
    /// selected, runs plain in between without taking a turn.
    pub fn launch_skip_and_count_choose_among_selected_launches(make: MakeContext) {
        let builder = Context::builder()
            .sanitize_kernels(["write_one", "read_one"])
            .launch_skip(2)
            .launch_count(Some(2));
        let t = bench(make, builder);
        let (values, mut count) = (positives(&t), t.zeros(1));
        let mut seen = Vec::new();
        for _ in 0..3 {
            racy_count(&t, &t.a, &values, &mut count);
            write_then_read_on_two_streams(&t);
            seen.push(races_of(&t.races()));
        }
        assert_eq!(seen, [vec![], vec![raw()], vec![]]);
        // From the environment, every kernel selected: launch 0 runs
        // plain, 1 and 2 sanitized (a race between them), 3 and 4 plain.
        let env = |name: &str| match name {
            "VIGIL_LAUNCH_SKIP" => Some("1".to_owned()),
            "VIGIL_LAUNCH_COUNT" => Some("2".to_owned()),
            _ => None,
        };
        let t = bench(make, Context::builder().env(env));
        let (mut data, mut out) = (t.zeros(1), t.zeros(1));
        t.write(&t.a, &mut data, 1);
        t.write(&t.a, &mut data, 2);
        t.read(&t.b, &mut data, &mut out);
        assert_eq!(races_of(&t.races()), [raw()]);
        write_then_read_on_two_streams(&t);
        assert!(t.races().is_empty(), "launches past the count ran plain");
    }

    /// A plain launch (an excluded kernel) on the word a sanitized write
    /// and read touch, in between them: same stream, still ordered; the
    /// read on another stream, still a race; through an event or a host
    /// synchronisation, still ordered. The plain launch's own write of
    /// the word is not checked.
    pub fn a_plain_launch_keeps_the_order_of_the_sanitized_ones_around_it(make: MakeContext) {
        let t = bench(
            make,
            Context::builder().exclude_kernels(["count_positive_racy"]),
        );
        let check = |what: &str, got: RaceReports, want: Vec<(ReportKind, String, String)>| {
            assert_eq!(races_of(&got), want, "{what}:\n{got}");
        };
        let (values, mut data, mut out) = (positives(&t), t.zeros(1), t.zeros(1));

        t.write(&t.a, &mut data, 1);
        racy_count(&t, &t.a, &values, &mut data);
        t.read(&t.a, &mut data, &mut out);
        check("one stream", t.races(), vec![]);

        t.write(&t.a, &mut data, 2);
        racy_count(&t, &t.b, &values, &mut data);
        t.read(&t.b, &mut data, &mut out);
        check(
            "the plain launch on the reader's stream",
            t.races(),
            vec![raw()],
        );

        t.write(&t.a, &mut data, 3);
        racy_count(&t, &t.a, &values, &mut data);
        let done = Event::new(&t.ctx).expect("event");
        done.record(&t.a).expect("record");
        t.b.wait_event(&done).expect("wait");
        t.read(&t.b, &mut data, &mut out);
        check(
            "after an event recorded past the plain launch",
            t.races(),
            vec![],
        );

        t.write(&t.a, &mut data, 4);
        t.ctx.synchronize().expect("no race yet");
        racy_count(&t, &t.b, &values, &mut data);
        t.read(&t.b, &mut data, &mut out);
        check("after a host synchronisation", t.races(), vec![]);
    }

    /// A fresh path in the system's temporary directory.
    fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("vigil-{}-{name}", std::process::id()));
        std::fs::write(&p, text).expect("write a temporary file");
        p
    }

    /// Suppressions by kernel, by either access's location and by the
    /// allocation's site (where this file allocated the buffer), from the
    /// builder and from `VIGIL_SUPPRESSIONS`: the matching race leaves the
    /// collection, counted in `suppressed` and in the report file.
    pub fn suppressions_take_races_out_by_kernel_location_and_allocation(make: MakeContext) {
        let write_line = kernel_line("write-one");
        let run = |builder: vigil::ContextBuilder| {
            let t = bench(make, builder);
            let (values, mut data, mut out) = (positives(&t), t.zeros(1), t.zeros(1));
            let mut count = DeviceBuffer::<u32>::alloc_zeroed(&t.a, 1).expect("count");
            let alloc_line = line!() - 1;
            t.ctx.synchronize().expect("zeroed before the launches");
            t.write(&t.a, &mut data, 1);
            t.read(&t.b, &mut data, &mut out);
            racy_count(&t, &t.a, &values, &mut count);
            let races = t.races();
            (races_of(&races), races.suppressed(), races, alloc_line)
        };
        let (all, none_suppressed, races, alloc_line) = run(Context::builder());
        assert_eq!(none_suppressed, 0);
        assert_eq!(
            kernels(&all),
            ["count_positive_racy", "read_one", "write_one"],
            "{races}"
        );
        // The racy count's buffer is named by where this file allocated it.
        let count_race = races
            .iter()
            .find(|r| r.kernel == "count_positive_racy")
            .expect("the racy count");
        let site = count_race.allocation.as_ref().and_then(|a| a.site.as_ref());
        let site = site.unwrap_or_else(|| panic!("no allocation site in\n{races}"));
        assert!(
            site.file.ends_with("sanitizer_controls.rs") && site.line == alloc_line,
            "allocation site {site}, expected this file's line {alloc_line}"
        );
        let (count_only, read_only) = (vec!["count_positive_racy"], vec!["read_one", "write_one"]);
        for (name, text, left) in [
            (
                "kernel",
                "race:kernel=count_positive_*\n".to_owned(),
                &read_only,
            ),
            (
                "location",
                format!("# the write of write_one\nrace:location=*races.rs:{write_line}\n"),
                &count_only,
            ),
            (
                "alloc",
                format!("race:alloc=*sanitizer_controls.rs:{alloc_line}"),
                &read_only,
            ),
            ("any", "race:read_one".to_owned(), &count_only),
        ] {
            let file = temp_file(&format!("{name}.supp"), &text);
            let report = temp_file(&format!("{name}.jsonl"), "");
            let (got, suppressed, races, _) =
                run(Context::builder().suppressions(&file).report_path(&report));
            // A race may be seen as one or two distinct reports (which of
            // its accesses came second): compare kernels.
            assert_eq!(kernels(&got), *left, "{name}: {races}");
            assert!(suppressed >= 1, "{name}: nothing suppressed\n{races}");
            let docs = vigil::ReportDocument::read_file(&report).expect("the report file");
            assert_eq!(docs.len(), 1, "{name}");
            assert_eq!(docs[0].reports.suppressed(), suppressed, "{name}");
            // The same file through the environment.
            let var = file.display().to_string();
            let env = move |n: &str| (n == "VIGIL_SUPPRESSIONS").then(|| var.clone());
            let (again, _, _, _) = run(Context::builder().env(env));
            assert_eq!(kernels(&again), *left, "{name} from VIGIL_SUPPRESSIONS");
            let _ = std::fs::remove_file(&file);
            let _ = std::fs::remove_file(&report);
        }
    }
}
