//! The SARIF 2.1.0 form of race reports (`VIGIL_REPORT=races.sarif`, or
//! `VIGIL_REPORT_FORMAT=sarif`), which code-scanning services read.
//!
//! One log per file and process, rewritten at every collection with
//! every race the process reported to that file so far (a SARIF file is
//! one document; a file from an earlier run is replaced). One run, tool
//! `Vigil`, one rule per report kind (`race/read-after-write`, ...,
//! `sanitizer-error/...`, `divergent-barrier`); each race is a result
//! whose
//!
//! - `locations[0]` is the access that found the race (`file:line:column`);
//! - `relatedLocations[0]` (id 1) is the earlier access, linked from the
//!   message (`[file:line:column](1)`), which is how code-scanning pages
//!   show a second place;
//! - `codeFlows[0]` holds one thread flow per access, earlier first, for
//!   viewers that draw concurrent flows;
//! - `partialFingerprints["vigilRace/v1"]` is the de-duplication key (kind
//!   and both locations), stable across runs;
//! - `properties.vigil` is the report in the JSON format
//!   ([`report_json`](super::report_json)).
//!
//! File names become URI references: relative ones (as the compiler
//! names files of the workspace) with `uriBaseId` `%SRCROOT%`, which
//! code-scanning services resolve against the repository, absolute ones
//! as `file://` URIs. The counts of the
//! collections (duplicates, dropped, suppressed, bounded detection) are
//! the run's `properties`. A test checks the output against the SARIF
//! 2.1.0 schema.
//!
//! The types are Vigil's own, the subset written: the `serde-sarif`
//! crate generates all of SARIF's at build time from the schema (a dozen
//! more build dependencies for every user of `vigil`), and builds only
//! where another crate turns on serde's `derive`.

use super::barrier::DivergentBarrier;
use super::report::{
    access_name, kind_name, RaceReport, RaceReports, ReportCounts, SourceLocation,
};
use super::report_json::names::all_kinds;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use vigil_shared::abi::ReportKind;

/// The `$schema` the log names.
pub const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The rule of divergent barriers (not a [`ReportKind`]).
const DIVERGENT_BARRIER_RULE: &str = "divergent-barrier";

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: [Run<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: Tool,
    results: Vec<SarifResult<'a>>,
    properties: &'a ReportCounts,
}

#[derive(Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    semantic_version: &'static str,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    id: String,
    short_description: Message,
    default_configuration: Configuration,
}

#[derive(Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Serialize)]
struct Message {
    text: String,
}

fn message(text: impl Into<String>) -> Message {
    Message { text: text.into() }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: String,
    rule_index: usize,
    level: &'static str,
    message: Message,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<Location>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    related_locations: Vec<Location>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    code_flows: Vec<CodeFlow>,
    partial_fingerprints: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<ResultProperties<'a>>,
}

#[derive(Serialize)]
struct ResultProperties<'a> {
    vigil: &'a RaceReport,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u32>,
    physical_location: PhysicalLocation,
    message: Message,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation {
    artifact_location: ArtifactLocation,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<Region>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactLocation {
    uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri_base_id: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_column: Option<u32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CodeFlow {
    message: Message,
    thread_flows: Vec<ThreadFlow>,
}

#[derive(Serialize)]
struct ThreadFlow {
    message: Message,
    locations: [ThreadFlowLocation; 1],
}

#[derive(Serialize)]
struct ThreadFlowLocation {
    location: Location,
}

/// The base that relative file names are resolved against.
const SRCROOT: &str = "%SRCROOT%";

/// A file name as a URI reference: unreserved characters and `/` kept,
/// everything else percent-encoded; absolute paths as `file://` URIs.
fn uri_of(file: &str) -> ArtifactLocation {
    let file = file.replace('\\', "/");
    let mut encoded = String::with_capacity(file.len());
    for b in file.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                encoded.push(b as char)
            }
            _ => encoded.push_str(&format!("%{b:02X}")),
        }
    }
    if file.starts_with('/') {
        ArtifactLocation {
            uri: format!("file://{encoded}"),
            uri_base_id: None,
        }
    } else {
        ArtifactLocation {
            uri: encoded,
            uri_base_id: Some(SRCROOT),
        }
    }
}

fn physical(l: &SourceLocation) -> PhysicalLocation {
    PhysicalLocation {
        artifact_location: uri_of(&l.file),
        // SARIF lines and columns start at 1; 0 means unknown.
        region: (l.line > 0).then(|| Region {
            start_line: l.line,
            start_column: (l.column > 0).then_some(l.column),
        }),
    }
}

/// The rule id of a report kind: `race/read-after-write`,
/// `sanitizer-error/epoch-overflow`, ...
pub(crate) fn rule_id(kind: ReportKind) -> String {
    let name = kind_name(kind);
    let (family, rest) = match name.strip_prefix("sanitizer error: ") {
        Some(rest) => ("sanitizer-error", rest),
        None => ("race", name.strip_suffix(" race").unwrap_or(name)),
    };
    let slug: String = rest
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{family}/{slug}")
}

fn level(kind: ReportKind) -> &'static str {
    if kind.is_error() {
        "warning"
    } else {
        "error"
    }
}

fn rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = all_kinds()
        .map(|k| Rule {
            id: rule_id(k),
            short_description: message(kind_name(k)),
            default_configuration: Configuration { level: level(k) },
        })
        .collect();
    rules.push(Rule {
        id: DIVERGENT_BARRIER_RULE.to_owned(),
        short_description: message("threads of a block reached different barriers"),
        default_configuration: Configuration { level: "error" },
    });
    rules
}

/// Who made an access, for messages.
fn who(block: Option<crate::types::Dim3>, thread: Option<crate::types::Dim3>) -> String {
    let d = |d: crate::types::Dim3| format!("({}, {}, {})", d.x, d.y, d.z);
    match (block, thread) {
        (Some(b), Some(t)) => format!("block {} thread {}", d(b), d(t)),
        (None, Some(t)) => format!("thread {}", d(t)),
        (Some(b), None) => format!("block {}", d(b)),
        (None, None) => "an unknown thread".to_owned(),
    }
}

fn race_result(r: &RaceReport, rule_index: usize) -> SarifResult<'_> {
    let (c, p) = (&r.current, &r.prior);
    let this = if c.host_issued {
        format!(
            "this {} by the host-issued {}",
            access_name(c.access),
            r.kernel
        )
    } else {
        format!(
            "this {} by {} in kernel `{}`",
            access_name(c.access),
            who(Some(c.block), Some(c.thread)),
            r.kernel
        )
    };
    let earlier = {
        let by = if p.same_block {
            format!("{} of the same block", who(None, p.thread))
        } else {
            who(p.block, p.thread)
        };
        let kernel = p
            .kernel
            .as_deref()
            .map_or(String::new(), |k| format!(" in `{k}`"));
        format!("earlier {} by {by}{kernel}", access_name(p.access))
    };
    let place = match &p.location {
        Some(l) => format!("[{l}](1)"),
        None => "an unknown place".to_owned(),
    };
    let text = format!(
        "{} on {} byte(s): {this} is unordered with an {earlier} at {place}.\n{r}",
        kind_name(r.kind),
        r.size
    );
    let here = c.location.as_ref().map(|l| Location {
        id: None,
        physical_location: physical(l),
        message: message(this.clone()),
    });
    let there = |id| {
        p.location.as_ref().map(|l| Location {
            id,
            physical_location: physical(l),
            message: message(earlier.clone()),
        })
    };
    let code_flows = match (there(None), c.location.as_ref()) {
        (Some(first), Some(l)) => vec![CodeFlow {
            message: message("the two unordered accesses, earlier first"),
            thread_flows: vec![
                ThreadFlow {
                    message: message(earlier.clone()),
                    locations: [ThreadFlowLocation { location: first }],
                },
                ThreadFlow {
                    message: message(this.clone()),
                    locations: [ThreadFlowLocation {
                        location: Location {
                            id: None,
                            physical_location: physical(l),
                            message: message(this.clone()),
                        },
                    }],
                },
            ],
        }],
        _ => Vec::new(),
    };
    let loc = |l: &Option<SourceLocation>| l.as_ref().map_or("?".to_owned(), ToString::to_string);
    SarifResult {
        rule_id: rule_id(r.kind),
        rule_index,
        level: level(r.kind),
        message: message(text),
        locations: here.into_iter().collect(),
        related_locations: there(Some(1)).into_iter().collect(),
        code_flows,
        partial_fingerprints: BTreeMap::from([(
            "vigilRace/v1",
            format!(
                "{}|{}|{}",
                rule_id(r.kind),
                loc(&c.location),
                loc(&p.location)
            ),
        )]),
        properties: Some(ResultProperties { vigil: r }),
    }
}

/// A divergent barrier as a result, at the barrier's `file:line:column`.
fn barrier_result(d: &DivergentBarrier, rule_index: usize) -> SarifResult<'static> {
    let mut parts = d.barrier.rsplitn(3, ':');
    let (column, line, file) = (parts.next(), parts.next(), parts.next());
    let location = match (file, line.and_then(|l| l.parse().ok()), column) {
        (Some(file), Some(line), Some(column)) => Some(SourceLocation {
            file: file.to_owned(),
            line,
            column: column.parse().unwrap_or(0),
        }),
        _ => None,
    };
    SarifResult {
        rule_id: DIVERGENT_BARRIER_RULE.to_owned(),
        rule_index,
        level: "error",
        message: message(d.to_string()),
        locations: location
            .iter()
            .map(|l| Location {
                id: None,
                physical_location: physical(l),
                message: message("the barrier"),
            })
            .collect(),
        related_locations: Vec::new(),
        code_flows: Vec::new(),
        partial_fingerprints: BTreeMap::from([(
            "vigilRace/v1",
            format!("{DIVERGENT_BARRIER_RULE}|{}", d.barrier),
        )]),
        properties: None,
    }
}

/// The SARIF log of `reports`, as text.
pub(crate) fn to_sarif(reports: &RaceReports) -> String {
    let rules = rules();
    let index = |id: &str| rules.iter().position(|r| r.id == id).unwrap_or(0);
    let mut results: Vec<SarifResult<'_>> = (reports.entries().iter())
        .map(|r| race_result(r, index(&rule_id(r.kind))))
        .collect();
    let barriers = reports.divergent_entries();
    results.extend(
        barriers
            .iter()
            .map(|d| barrier_result(d, index(DIVERGENT_BARRIER_RULE))),
    );
    let log = Log {
        schema: SARIF_SCHEMA,
        version: "2.1.0",
        runs: [Run {
            tool: Tool {
                driver: Driver {
                    name: "Vigil",
                    semantic_version: env!("CARGO_PKG_VERSION"),
                    rules,
                },
            },
            results,
            properties: reports.counts(),
        }],
    };
    // Plain data with string keys: serialising it cannot fail.
    serde_json::to_string_pretty(&log).unwrap_or_default()
}

/// Per SARIF file: every race the process delivered to it so far.
static LOGS: Mutex<Vec<(PathBuf, RaceReports)>> = Mutex::new(Vec::new());

/// Adds `reports` to the process's log at `path` and rewrites the file
/// (written aside and renamed, so a reader never sees half a log).
pub(crate) fn add_to_log(path: &Path, reports: &RaceReports) -> std::io::Result<()> {
    let mut logs = LOGS.lock().unwrap_or_else(|p| p.into_inner());
    let at = match logs.iter().position(|(p, _)| p == path) {
        Some(at) => at,
        None => {
            logs.push((path.to_path_buf(), RaceReports::new()));
            logs.len() - 1
        }
    };
    logs[at].1.merge(reports.detached());
    let text = to_sarif(&logs[at].1);
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_distinct_slugs() {
        let ids: Vec<String> = all_kinds().map(rule_id).collect();
        assert!(ids.contains(&"race/read-after-write".to_owned()));
        assert!(ids.contains(&"race/atomic-non-atomic".to_owned()));
        assert!(ids.contains(&"sanitizer-error/epoch-overflow".to_owned()));
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
    }

    #[test]
    fn file_names_become_uri_references() {
        let rel = uri_of("tests/kernels/src/races.rs");
        assert_eq!(
            (rel.uri.as_str(), rel.uri_base_id),
            ("tests/kernels/src/races.rs", Some(SRCROOT))
        );
        let abs = uri_of("/home/me/my crate/src/lib.rs");
        assert_eq!(abs.uri, "file:///home/me/my%20crate/src/lib.rs");
        assert_eq!(uri_of("c:\\x\\y.rs").uri, "c%3A/x/y.rs");
        assert_eq!(uri_of("caf\u{e9}.rs").uri, "caf%C3%A9.rs");
    }
}
