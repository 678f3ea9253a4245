//! The JSON format of race reports: what a JSON report file
//! (`VIGIL_REPORT=races.jsonl`) holds, one [`ReportDocument`] per line
//! (JSON Lines), and how the report types map to it.
//!
//! Each line is one collection (a synchronisation or
//! [`Context::take_reports`](crate::Context::take_reports) that found
//! something, or the races a context still held when it was dropped):
//!
//! ```text
//! {"format":"vigil-race-reports","version":1,"collected":true,
//!  "reports":[{"kind":"read-after-write race","address":..,"size":4,
//!              "allocation":{"base":..,"size":..,"offset":..,"site":{"file":..,"line":..,"column":..}},
//!              "space":"global","kernel":"reader",
//!              "current":{"access":"read","scope":"gpu","device":0,"smid":3,
//!                         "block":[1,0,0],"thread":[0,0,0],"location":{..},"host_issued":false},
//!              "prior":{"access":"write","scope":"gpu","tid":7,"device":0,"smid":null,"epoch":2,
//!                       "block":[0,0,0],"thread":[0,0,0],"kernel":"writer","location":{..},
//!                       "host_issued":false,"same_block":false}}],
//!  "divergent_barriers":[],"duplicates":0,"dropped":0,"suppressed":0,
//!  "unchecked_words":0,"unchecked_arrays":0,"history_lost":0}
//! ```
//!
//! Field names are those of [`RaceReport`](super::report::RaceReport) and
//! its parts; kinds, accesses and scopes are their readable names
//! ([`kind_name`](super::report::kind_name), `read` ... `atomic
//! read-modify-write`, the PTX scopes `cta`/`gpu`/`sys`); a `Dim3` is
//! `[x, y, z]`; a missing value is `null`. `collected` is `false` on the
//! line of a context dropped with races nobody collected. `version`
//! ([`REPORT_FORMAT_VERSION`]) changes whenever a field does; the JSON
//! Schema `host/schemas/race-reports.schema.json` pins the format, and a
//! test checks written files against it.

use super::report::RaceReports;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The `format` field of every report document.
pub const REPORT_FORMAT: &str = "vigil-race-reports";

/// The `version` field this crate writes and reads.
pub const REPORT_FORMAT_VERSION: u32 = 1;

/// One line of a JSON report file: a collection of reports with the
/// format's name and version, and whether the program collected it.
///
/// ```
/// use vigil::{RaceReports, ReportDocument};
/// let line = RaceReports::new().to_json();
/// let doc = ReportDocument::from_json(&line).unwrap();
/// assert!(doc.collected && doc.reports.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportDocument {
    /// Always [`REPORT_FORMAT`].
    pub format: String,
    /// [`REPORT_FORMAT_VERSION`] when written by this crate.
    pub version: u32,
    /// `false` when a context was dropped with these races uncollected.
    pub collected: bool,
    /// The collection.
    #[serde(flatten)]
    pub reports: RaceReports,
}

/// [`ReportDocument`] borrowing its collection, for writing.
#[derive(Serialize)]
struct DocumentRef<'a> {
    format: &'static str,
    version: u32,
    collected: bool,
    #[serde(flatten)]
    reports: &'a RaceReports,
}

/// Why a report file or line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportReadError {
    /// The text is not a report document.
    #[error("line {line}: not a Vigil report document: {source}")]
    Json {
        /// The line (from 1; 1 for a single document).
        line: usize,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// A document of another format.
    #[error("line {line}: format {found:?} is not {REPORT_FORMAT:?}")]
    Format {
        /// The line (from 1).
        line: usize,
        /// The `format` field found.
        found: String,
    },
    /// A document of a version this crate does not read.
    #[error("line {line}: report format version {found}; this crate reads version {REPORT_FORMAT_VERSION}")]
    Version {
        /// The line (from 1).
        line: usize,
        /// The `version` field found.
        found: u32,
    },
    /// The file could not be read.
    #[error("could not read the report file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl ReportDocument {
    /// One document from its JSON text (a line of a report file).
    pub fn from_json(text: &str) -> Result<ReportDocument, ReportReadError> {
        Self::parse_line(text, 1)
    }

    fn parse_line(text: &str, line: usize) -> Result<ReportDocument, ReportReadError> {
        let doc: ReportDocument =
            serde_json::from_str(text).map_err(|source| ReportReadError::Json { line, source })?;
        if doc.format != REPORT_FORMAT {
            return Err(ReportReadError::Format {
                line,
                found: doc.format,
            });
        }
        if doc.version != REPORT_FORMAT_VERSION {
            return Err(ReportReadError::Version {
                line,
                found: doc.version,
            });
        }
        Ok(doc)
    }

    /// Every document of a JSON report file (blank lines skipped), in the
    /// order they were written.
    pub fn read_file(path: impl AsRef<Path>) -> Result<Vec<ReportDocument>, ReportReadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ReportReadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| Self::parse_line(l, i + 1))
            .collect()
    }
}

/// The document of `reports` as one line of JSON (no newline).
pub(crate) fn document_json(reports: &RaceReports, collected: bool) -> String {
    let doc = DocumentRef {
        format: REPORT_FORMAT,
        version: REPORT_FORMAT_VERSION,
        collected,
        reports,
    };
    // Plain data with string keys: serialising it cannot fail.
    serde_json::to_string(&doc).unwrap_or_default()
}

/// How the engine's vocabulary (`vigil-shared`'s enums, which know no
/// serde) and `Dim3` appear in JSON: `#[serde(with = "...")]` modules.
pub(crate) mod names {
    use crate::types::Dim3;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use vigil_shared::abi::ReportKind;
    use vigil_shared::{AccessKind, Scope};

    /// Every report kind (the engine's codes are below 64).
    pub(crate) fn all_kinds() -> impl Iterator<Item = ReportKind> + Clone {
        (0..64).filter_map(ReportKind::from_u32)
    }

    /// Every access kind.
    pub(crate) const ALL_ACCESSES: [AccessKind; 5] = [
        AccessKind::Read,
        AccessKind::Write,
        AccessKind::AtomicRead,
        AccessKind::AtomicWrite,
        AccessKind::AtomicRmw,
    ];

    /// Every scope.
    pub(crate) const ALL_SCOPES: [Scope; 3] = [Scope::Block, Scope::Device, Scope::System];

    /// The value of `all` whose name is `text`, or an error listing them.
    fn by_name<'de, D: Deserializer<'de>, T: Copy>(
        d: D,
        all: impl Iterator<Item = T> + Clone,
        name: impl Fn(T) -> &'static str,
    ) -> Result<T, D::Error> {
        let text = String::deserialize(d)?;
        all.clone().find(|&v| name(v) == text).ok_or_else(|| {
            let names: Vec<&str> = all.map(name).collect();
            D::Error::custom(format!("unknown name {text:?}, expected one of {names:?}"))
        })
    }

    /// [`ReportKind`] as [`kind_name`](crate::sanitizer::report::kind_name).
    pub(crate) mod kind {
        use super::*;
        use crate::sanitizer::report::kind_name;

        pub(crate) fn serialize<S: Serializer>(k: &ReportKind, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(kind_name(*k))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ReportKind, D::Error> {
            by_name(d, all_kinds(), kind_name)
        }
    }

    /// [`AccessKind`] as its readable name (`atomic read-modify-write`).
    pub(crate) mod access {
        use super::*;
        use crate::sanitizer::report::access_name;

        pub(crate) fn serialize<S: Serializer>(a: &AccessKind, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(access_name(*a))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AccessKind, D::Error> {
            by_name(d, ALL_ACCESSES.into_iter(), access_name)
        }
    }

    /// [`Scope`] as its PTX qualifier (`cta`, `gpu`, `sys`).
    pub(crate) mod scope {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(v: &Scope, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(v.ptx())
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Scope, D::Error> {
            by_name(d, ALL_SCOPES.into_iter(), Scope::ptx)
        }
    }

    /// [`Dim3`] as `[x, y, z]`.
    pub(crate) mod dim3 {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(v: &Dim3, s: S) -> Result<S::Ok, S::Error> {
            [v.x, v.y, v.z].serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Dim3, D::Error> {
            let [x, y, z] = <[u32; 3]>::deserialize(d)?;
            Ok(Dim3::new(x, y, z))
        }
    }

    /// `Option<Dim3>` as `[x, y, z]` or `null`.
    pub(crate) mod optional_dim3 {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(v: &Option<Dim3>, s: S) -> Result<S::Ok, S::Error> {
            v.map(|v| [v.x, v.y, v.z]).serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Dim3>, D::Error> {
            Ok(Option::<[u32; 3]>::deserialize(d)?.map(|[x, y, z]| Dim3::new(x, y, z)))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::names::{all_kinds, ALL_ACCESSES, ALL_SCOPES};
    use super::*;
    use crate::sanitizer::barrier::DivergentBarrier;
    use crate::sanitizer::report::{
        MemorySpace, PriorAccess, RaceAccess, RaceAllocation, RaceReport, SourceLocation,
    };
    use crate::types::Dim3;
    use proptest::prelude::*;

    fn dim3() -> impl Strategy<Value = Dim3> {
        (0u32..70_000, 0u32..3, any::<u32>()).prop_map(|(x, y, z)| Dim3::new(x, y, z))
    }

    fn location() -> impl Strategy<Value = SourceLocation> {
        // File names with what JSON must escape: quotes, backslashes,
        // control characters, non-ASCII.
        (
            "[a-z/\"\\\\\\n\\t\u{e9}\u{1f600}]{0,12}",
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(|(file, line, column)| SourceLocation { file, line, column })
    }

    fn kind() -> impl Strategy<Value = vigil_shared::abi::ReportKind> {
        let kinds: Vec<_> = all_kinds().collect();
        proptest::sample::select(kinds)
    }

    fn report() -> impl Strategy<Value = RaceReport> {
        let access = || proptest::sample::select(ALL_ACCESSES.to_vec());
        let scope = || proptest::sample::select(ALL_SCOPES.to_vec());
        let allocation = proptest::option::of(
            (
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                proptest::option::of(location()),
            )
                .prop_map(|(base, size, offset, site)| RaceAllocation {
                    base,
                    size,
                    offset,
                    site,
                }),
        );
        let current = (
            access(),
            scope(),
            any::<u32>(),
            any::<u32>(),
            dim3(),
            dim3(),
            proptest::option::of(location()),
            proptest::option::of(location()),
            any::<bool>(),
        )
            .prop_map(
                |(
                    access,
                    scope,
                    device,
                    smid,
                    block,
                    thread,
                    location,
                    shared_view,
                    host_issued,
                )| {
                    RaceAccess {
                        access,
                        scope,
                        device,
                        smid,
                        block,
                        thread,
                        location,
                        shared_view,
                        host_issued,
                    }
                },
            );
        let prior = (
            (access(), scope(), any::<u32>(), any::<u32>()),
            (
                proptest::option::of(any::<u32>()),
                any::<u32>(),
                proptest::option::of(dim3()),
                proptest::option::of(dim3()),
            ),
            (
                proptest::option::of("[a-z_]{1,10}"),
                proptest::option::of(location()),
                proptest::option::of(location()),
                any::<bool>(),
                any::<bool>(),
            ),
        )
            .prop_map(
                |(
                    (access, scope, tid, device),
                    (smid, epoch, block, thread),
                    (kernel, location, shared_view, host_issued, same_block),
                )| PriorAccess {
                    access,
                    scope,
                    tid,
                    device,
                    smid,
                    epoch,
                    block,
                    thread,
                    kernel,
                    location,
                    shared_view,
                    host_issued,
                    same_block,
                },
            );
        (
            kind(),
            any::<u64>(),
            any::<u32>(),
            allocation,
            any::<bool>(),
            "[a-z_]{1,12}",
            current,
            prior,
        )
            .prop_map(
                |(kind, address, size, allocation, shared, kernel, current, prior)| RaceReport {
                    kind,
                    address,
                    size,
                    allocation,
                    space: if shared {
                        MemorySpace::Shared
                    } else {
                        MemorySpace::Global
                    },
                    kernel,
                    current,
                    prior,
                },
            )
    }

    fn collection() -> impl Strategy<Value = RaceReports> {
        (
            proptest::collection::vec(report(), 0..5),
            proptest::collection::vec((dim3(), ".{0,8}", ".{0,8}"), 0..3),
            proptest::collection::vec(any::<u64>(), 5),
        )
            .prop_map(|(reports, divergent, counts)| {
                let mut out: RaceReports = reports.into_iter().collect();
                for (block, barrier, detail) in divergent {
                    out.push_divergent_barrier(DivergentBarrier {
                        block,
                        barrier,
                        detail,
                    });
                }
                out.add_dropped(counts[0]);
                out.add_unchecked_words(counts[1]);
                out.add_unchecked_arrays(counts[2]);
                out.add_history_lost(counts[3]);
                out
            })
    }

    /// A read-after-write race with every field known.
    pub(crate) fn sample_report() -> RaceReport {
        let at = |line| SourceLocation {
            file: "src/kernels.rs".to_owned(),
            line,
            column: 9,
        };
        RaceReport {
            kind: vigil_shared::abi::ReportKind::ReadAfterWrite,
            address: 0x7f00_0000_0010,
            size: 4,
            allocation: Some(RaceAllocation {
                base: 0x7f00_0000_0000,
                size: 1024,
                offset: 0x10,
                site: Some(at(3)),
            }),
            space: MemorySpace::Global,
            kernel: "reader".to_owned(),
            current: RaceAccess {
                access: vigil_shared::AccessKind::Read,
                scope: vigil_shared::Scope::Device,
                device: 0,
                smid: 3,
                block: Dim3::new(1, 0, 0),
                thread: Dim3::new(5, 0, 0),
                location: Some(at(12)),
                shared_view: None,
                host_issued: false,
            },
            prior: PriorAccess {
                access: vigil_shared::AccessKind::Write,
                scope: vigil_shared::Scope::Device,
                tid: 7,
                device: 0,
                smid: None,
                epoch: 2,
                block: Some(Dim3::new(0, 0, 0)),
                thread: Some(Dim3::new(5, 0, 0)),
                kernel: Some("writer".to_owned()),
                location: Some(at(8)),
                shared_view: None,
                host_issued: false,
                same_block: false,
            },
        }
    }

    proptest! {
        /// Any collection survives the file form unchanged.
        #[test]
        fn a_collection_round_trips_through_its_json(reports in collection()) {
            let line = reports.to_json();
            prop_assert!(!line.contains('\n'), "one line per collection");
            let back = RaceReports::from_json(&line).unwrap();
            prop_assert_eq!(&back, &reports);
            let doc = ReportDocument::from_json(&line).unwrap();
            prop_assert_eq!((doc.format.as_str(), doc.version, doc.collected), (REPORT_FORMAT, 1, true));
        }
    }

    #[test]
    fn names_are_distinct_and_read_back() {
        let kinds: std::collections::HashSet<_> = all_kinds()
            .map(crate::sanitizer::report::kind_name)
            .collect();
        assert_eq!(kinds.len(), all_kinds().count());
        assert!(all_kinds().count() >= 10);
        let accesses: std::collections::HashSet<_> = ALL_ACCESSES
            .iter()
            .map(|&a| crate::sanitizer::report::access_name(a))
            .collect();
        assert_eq!(accesses.len(), ALL_ACCESSES.len());
    }

    #[test]
    fn other_formats_versions_and_junk_are_refused() {
        let line = RaceReports::new().to_json();
        let newer = line.replace("\"version\":1", "\"version\":2");
        assert!(matches!(
            ReportDocument::from_json(&newer),
            Err(ReportReadError::Version { found: 2, .. })
        ));
        let other = line.replace(REPORT_FORMAT, "something-else");
        assert!(matches!(
            ReportDocument::from_json(&other),
            Err(ReportReadError::Format { .. })
        ));
        let one: RaceReports = [sample_report()].into_iter().collect();
        let misnamed = one
            .to_json()
            .replace("read-after-write race", "read-after-read race");
        let e = ReportDocument::from_json(&misnamed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("read-after-read race") && e.contains("write-after-read race"),
            "{e}"
        );
        let e = ReportDocument::from_json("{\"format\":").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 1: not a Vigil report document"),
            "{e}"
        );
    }
}
