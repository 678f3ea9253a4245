//! The report file's formats, on the CPU backend: the JSON format against
//! its JSON Schema (`host/schemas/race-reports.schema.json`) and a golden
//! list of its fields; the demo's SARIF file against the SARIF 2.1.0
//! schema (vendored in `tests/schemas/`), naming both lines of each race;
//! and a report written by another process (the demo, run as a child with
//! `VIGIL_REPORT`) read back equal to that process's own reports.

mod common;

use common::TwoStreams;
use serde_json::Value;
use std::path::{Path, PathBuf};
use vigil::{
    Context, MemorySpace, PriorAccess, RaceAccess, RaceReport, RaceReports, ReportDocument,
    ReportFormat, ReportKind,
};
use vigil_tests::programs::demo;

/// A fresh path in the system's temporary directory.
fn temp_path(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("vigil-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The official SARIF 2.1.0 schema's pattern of a `language` (of a run,
/// of a tool component): it has a stray `]`, which the validator's check
/// of the schema itself refuses as no ECMA-262 expression.
const SARIF_LANGUAGE_ERRATUM: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";

/// The schema at `path`, a SARIF `language` pattern read as the one it
/// means (a language code, an optional region). Nothing Vigil writes has
/// a `language`.
fn load_schema(path: &Path) -> Value {
    fn fix(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    if k == "pattern" && v == SARIF_LANGUAGE_ERRATUM {
                        *v = Value::from("^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
                    } else {
                        fix(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(fix),
            _ => {}
        }
    }
    let mut schema = read_json(path);
    fix(&mut schema);
    schema
}

/// Checks `instance` against the schema at `schema`, with formats
/// (`uri`, `uri-reference`) checked too.
fn assert_valid(schema: &Path, instance: &Value) {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&load_schema(schema))
        .expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} does not accept the output:\n{}\n{instance:#}",
        schema.display(),
        errors.join("\n")
    );
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn kernel_line(marker: &str) -> u32 {
    common::marker_line(include_str!("../kernels/src/races.rs"), "races.rs", marker)
}

/// A sanitized one-worker CPU context from `builder`.
fn cpu(builder: vigil::ContextBuilder) -> Context {
    builder
        .cpu()
        .sanitize(true)
        .cpu_workers(2)
        .build()
        .expect("a sanitized CPU context")
}

/// Every key path of a JSON value (`reports[].current.block`), sorted.
fn key_paths(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.push(path.clone());
                key_paths(v, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// The fields of format version 1, every one of them (a change here is a
/// change of the format: its version goes up).
const GOLDEN_FIELDS: &[&str] = &[
    "collected",
    "divergent_barriers",
    "dropped",
    "duplicates",
    "format",
    "history_lost",
    "reports",
    "reports[].address",
    "reports[].allocation",
    "reports[].allocation.base",
    "reports[].allocation.offset",
    "reports[].allocation.site",
    "reports[].allocation.site.column",
    "reports[].allocation.site.file",
    "reports[].allocation.site.line",
    "reports[].allocation.size",
    "reports[].current",
    "reports[].current.access",
    "reports[].current.block",
    "reports[].current.device",
    "reports[].current.host_issued",
    "reports[].current.location",
    "reports[].current.location.column",
    "reports[].current.location.file",
    "reports[].current.location.line",
    "reports[].current.scope",
    "reports[].current.shared_view",
    "reports[].current.smid",
    "reports[].current.thread",
    "reports[].kernel",
    "reports[].kind",
    "reports[].prior",
    "reports[].prior.access",
    "reports[].prior.block",
    "reports[].prior.device",
    "reports[].prior.epoch",
    "reports[].prior.host_issued",
    "reports[].prior.kernel",
    "reports[].prior.location",
    "reports[].prior.location.column",
    "reports[].prior.location.file",
    "reports[].prior.location.line",
    "reports[].prior.same_block",
    "reports[].prior.scope",
    "reports[].prior.shared_view",
    "reports[].prior.smid",
    "reports[].prior.thread",
    "reports[].prior.tid",
    "reports[].size",
    "reports[].space",
    "suppressed",
    "unchecked_arrays",
    "unchecked_words",
    "version",
];

/// A race between a write on one stream and a read on another, and the
/// demo's races, written to a JSON report file: every line passes the
/// schema, carries the format and version, has exactly the golden
/// fields, and reads back equal to what the program got.
#[test]
fn the_json_report_file_matches_its_schema_and_field_list() {
    let path = temp_path("formats.jsonl");
    let t = TwoStreams::new(cpu(Context::builder().report_path(&path)));
    let (mut data, mut out) = (t.zeros(1), t.zeros(1));
    t.write(&t.a, &mut data, 1);
    t.read(&t.b, &mut data, &mut out);
    let two_streams = t.races();
    let outcome = demo::run(&t.ctx).expect("the demo");
    let schema = workspace().join("host/schemas/race-reports.schema.json");
    let docs = ReportDocument::read_file(&path).expect("the report file");
    assert_eq!(docs.len(), 2, "one line per collection with races");
    assert_eq!(docs[0].reports, two_streams);
    assert_eq!(docs[1].reports, outcome.racy_reports);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut fields = Vec::new();
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).unwrap();
        assert_valid(&schema, &value);
        assert_eq!(value["format"], vigil::REPORT_FORMAT);
        assert_eq!(value["version"], vigil::REPORT_FORMAT_VERSION);
        key_paths(&value, "", &mut fields);
    }
    fields.sort();
    fields.dedup();
    assert_eq!(fields, GOLDEN_FIELDS);
    let _ = std::fs::remove_file(&path);
}

/// Reports with every optional part missing, shared memory and a
/// host-issued access also pass the schema; the schema's kinds are
/// exactly Vigil's.
#[test]
fn sparse_reports_pass_the_schema_and_its_kinds_are_vigils() {
    let schema_path = workspace().join("host/schemas/race-reports.schema.json");
    let schema = read_json(&schema_path);
    let kinds: Vec<&str> = (0..64)
        .filter_map(ReportKind::from_u32)
        .map(vigil::kind_name)
        .collect();
    let in_schema: Vec<&str> = schema["definitions"]["kind"]["enum"]
        .as_array()
        .expect("the kinds")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(in_schema, kinds);
    let sparse = RaceReport {
        kind: ReportKind::EpochOverflow,
        address: u64::MAX,
        size: 1,
        allocation: None,
        space: MemorySpace::Shared,
        kernel: "memset on stream #2".to_owned(),
        current: RaceAccess {
            access: vigil::AccessKind::AtomicRmw,
            scope: vigil::Scope::System,
            device: 7,
            smid: 0,
            block: vigil::Dim3::new(0, 0, 0),
            thread: vigil::Dim3::new(0, 0, 0),
            location: None,
            shared_view: None,
            host_issued: true,
        },
        prior: PriorAccess {
            access: vigil::AccessKind::AtomicRead,
            scope: vigil::Scope::Block,
            tid: 3,
            device: 1,
            smid: None,
            epoch: 0,
            block: None,
            thread: None,
            kernel: None,
            location: None,
            shared_view: None,
            host_issued: false,
            same_block: true,
        },
    };
    let mut reports: RaceReports = [sparse].into_iter().collect();
    reports.add_dropped(u64::MAX);
    let value: Value = serde_json::from_str(&reports.to_json()).unwrap();
    assert_valid(&schema_path, &value);
    assert_eq!(RaceReports::from_json(&reports.to_json()).unwrap(), reports);
}

/// The demo with a `.sarif` report file: a SARIF 2.1.0 log the schema
/// accepts, one result per race, each at one of the racy kernel's two
/// lines with the earlier access (the other line, or the same) as its
/// related location, linked from the message; both lines appear.
#[test]
fn the_demos_sarif_file_passes_the_schema_and_names_both_lines() {
    let path = temp_path("demo.sarif");
    let ctx = cpu(Context::builder().report_path(&path));
    let outcome = demo::run(&ctx).expect("the demo");
    let log = read_json(&path);
    assert_valid(
        &workspace().join("tests/schemas/sarif-schema-2.1.0.json"),
        &log,
    );
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "Vigil");
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), outcome.racy_reports.len());
    let racy = [
        kernel_line("demo-racy-read"),
        kernel_line("demo-racy-write"),
    ];
    let line_of = |l: &Value| {
        assert!(
            l["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .is_some_and(|u| u.ends_with("races.rs")),
            "{l}"
        );
        l["physicalLocation"]["region"]["startLine"]
            .as_u64()
            .expect("a line") as u32
    };
    let mut named = Vec::new();
    for (result, report) in results.iter().zip(outcome.racy_reports.iter()) {
        let here = line_of(&result["locations"][0]);
        let there = line_of(&result["relatedLocations"][0]);
        assert_eq!(result["relatedLocations"][0]["id"], 1);
        assert!(racy.contains(&here) && racy.contains(&there), "{result:#}");
        assert_eq!(here, report.current.location.as_ref().unwrap().line);
        assert_eq!(there, report.prior.location.as_ref().unwrap().line);
        let message = result["message"]["text"].as_str().unwrap();
        assert!(message.contains(&format!(":{there}:")) && message.contains("](1)"));
        let rule = result["ruleId"].as_str().unwrap();
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(run["tool"]["driver"]["rules"][index]["id"], rule);
        assert_eq!(
            result["codeFlows"][0]["threadFlows"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        named.extend([here, there]);
    }
    named.sort();
    named.dedup();
    assert_eq!(named, racy, "both lines of the racy kernel are named");
    let _ = std::fs::remove_file(&path);

    // A `.json` path with the SARIF format asked for explicitly, from the
    // builder and from VIGIL_REPORT_FORMAT.
    let env_path = temp_path("env-report.json");
    let env_text = env_path.display().to_string();
    let env = move |n: &str| match n {
        "VIGIL_REPORT" => Some(env_text.clone()),
        "VIGIL_REPORT_FORMAT" => Some("sarif".to_owned()),
        _ => None,
    };
    let builder_path = temp_path("builder-report.json");
    for (builder, path) in [
        (Context::builder().env(env), &env_path),
        (
            Context::builder()
                .report_path(&builder_path)
                .report_format(ReportFormat::Sarif),
            &builder_path,
        ),
    ] {
        let t = TwoStreams::new(cpu(builder));
        let (mut data, mut out) = (t.zeros(1), t.zeros(1));
        t.write(&t.a, &mut data, 1);
        t.read(&t.b, &mut data, &mut out);
        assert_eq!(t.races().len(), 1);
        let log = read_json(path);
        assert_eq!(log["runs"][0]["results"].as_array().unwrap().len(), 1);
        assert_eq!(
            log["runs"][0]["results"][0]["ruleId"],
            "race/read-after-write"
        );
        let _ = std::fs::remove_file(path);
    }
}

/// Run as a child by [`a_report_written_by_another_process_reads_back_equal`]:
/// the demo on the CPU backend, its report file from `VIGIL_REPORT`, and
/// its own reports printed in Rust's debug form.
#[test]
#[ignore = "run as a child process by a_report_written_by_another_process_reads_back_equal"]
fn child_runs_the_demo_with_a_report_file() {
    let ctx = Context::builder()
        .env_vars()
        .cpu()
        .sanitize(true)
        .build()
        .expect("a sanitized CPU context");
    let outcome = demo::run(&ctx).expect("the demo");
    println!("in-process reports: {:?}", outcome.racy_reports);
}

#[test]
fn a_report_written_by_another_process_reads_back_equal() {
    let path = temp_path("child.jsonl");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_runs_the_demo_with_a_report_file",
            "--nocapture",
        ])
        .env("VIGIL_REPORT", &path)
        .env_remove("VIGIL_REPORT_FORMAT")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = stdout
        .lines()
        .find_map(|l| l.strip_prefix("in-process reports: "))
        .unwrap_or_else(|| panic!("the child printed no reports:\n{stdout}"));
    let docs = ReportDocument::read_file(&path).expect("the child's report file");
    assert_eq!(docs.len(), 1, "the racy kernel's collection");
    assert!(docs[0].collected && !docs[0].reports.is_empty());
    assert_eq!(format!("{:?}", docs[0].reports), theirs);
    let _ = std::fs::remove_file(&path);
}
