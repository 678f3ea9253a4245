//! [`ReportSink`]: where a context's race reports go when they are
//! collected from its backend, the same for both backends.
//!
//! Every collection (a synchronisation or
//! [`Context::take_reports`](crate::Context::take_reports)), and the races
//! a context still holds when it is dropped, pass through the context's
//! sink once, which
//!
//! 1. takes out the races its suppressions match (counted in
//!    [`RaceReports::suppressed`] and in the exit summary);
//! 2. counts the rest as reported in the process (`VIGIL_EXITCODE`);
//! 3. with a report file configured (`VIGIL_REPORT`,
//!    [`SanitizerConfigBuilder::report_path`](super::config::SanitizerConfigBuilder::report_path)),
//!    writes a collection that found something, whose detection was
//!    bounded ([`RaceReports::detection_bounded`]) or that had races
//!    suppressed: one JSON line ([`report_json`](super::report_json)), or
//!    the process's SARIF log rewritten ([`sarif`](super::sarif));
//! 4. keeps a dropped context's races for the exit summary.
//!
//! The reports themselves go back to the caller ([`Error::Races`](crate::Error::Races)),
//! whose `Display` is the one printed form of both backends. A bounded
//! detection without races is also said once per context on stderr: a
//! synchronisation that finds no race returns `Ok`, and its counts would
//! otherwise reach nobody.

use super::config::{err, ConfigError, SanitizerConfig};
use super::exit;
use super::report::{DetectionBounds, RaceReports};
use super::report_json::document_json;
use super::suppressions::Suppressions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The format of the report file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportFormat {
    /// JSON Lines: one [`ReportDocument`](crate::ReportDocument)
    /// per collection, appended.
    Json,
    /// One SARIF 2.1.0 log, rewritten at every collection with every race
    /// the process reported to that file so far (code-scanning services
    /// read it).
    Sarif,
}

impl ReportFormat {
    /// The format a report path asks for: SARIF for a `.sarif` file,
    /// JSON otherwise.
    ///
    /// ```
    /// use vigil::ReportFormat;
    /// assert_eq!(ReportFormat::for_path("out/races.sarif".as_ref()), ReportFormat::Sarif);
    /// assert_eq!(ReportFormat::for_path("races.jsonl".as_ref()), ReportFormat::Json);
    /// ```
    pub fn for_path(path: &Path) -> ReportFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("sarif") => ReportFormat::Sarif,
            _ => ReportFormat::Json,
        }
    }

    /// `json` or `sarif` (any case).
    pub(crate) fn parse(source_name: &str, text: &str) -> Result<ReportFormat, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "json" | "jsonl" => Ok(ReportFormat::Json),
            "sarif" => Ok(ReportFormat::Sarif),
            _ => Err(err(source_name, text, "`json` or `sarif`")),
        }
    }
}

/// The destination of a context's collected reports.
#[derive(Debug, Default)]
pub struct ReportSink {
    file: Option<(PathBuf, ReportFormat)>,
    suppressions: Option<Suppressions>,
    /// A failed write was said on stderr (said once per context).
    said_failure: AtomicBool,
    /// A bounded detection was said on stderr (once per context).
    said_bounded: AtomicBool,
    /// Every delivered collection's bounds, summed.
    bounds: Mutex<DetectionBounds>,
}

impl ReportSink {
    /// The sink `config` asks for.
    pub fn new(config: &SanitizerConfig) -> ReportSink {
        ReportSink {
            file: config
                .report_path()
                .map(|p| (p.to_path_buf(), config.report_format())),
            suppressions: config.suppressions().cloned(),
            said_failure: AtomicBool::new(false),
            said_bounded: AtomicBool::new(false),
            bounds: Mutex::new(DetectionBounds::default()),
        }
    }

    /// The bounds of every collection delivered so far, summed.
    pub fn bounds(&self) -> DetectionBounds {
        *self.bounds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Delivers one collection's reports (see the [module docs](self));
    /// `collected`: the program asked for them (else a context is being
    /// dropped with them). Returns what is left after suppression. A file
    /// that cannot be written is said once on stderr; the races still
    /// reach the caller, which matters more than the file.
    pub fn deliver(&self, mut reports: RaceReports, collected: bool) -> RaceReports {
        if let Some(s) = &self.suppressions {
            reports.suppress(|r| match s.matching(r) {
                Some(rule) => {
                    exit::note_suppressed(&rule, 1);
                    true
                }
                None => false,
            });
        }
        exit::note_reported(reports.race_count());
        let bounded = reports.detection_bounded();
        if bounded {
            let mut total = self.bounds.lock().unwrap_or_else(|e| e.into_inner());
            *total = total.plus(reports.bounds());
        }
        // With races the caller gets the counts in their text already.
        if bounded && !reports.has_findings() && !self.said_bounded.swap(true, Ordering::Relaxed) {
            eprintln!(
                "vigil: race detection was bounded: {} (said once per context; every \
                 collection's reports carry the counts)",
                reports.detection_limits().join("; ")
            );
        }
        if !collected && reports.has_findings() {
            exit::note_uncollected(&reports);
        }
        let worth_writing = reports.has_findings() || bounded || reports.suppressed() > 0;
        if let (Some((path, format)), true) = (&self.file, worth_writing) {
            let written = match format {
                ReportFormat::Json => append_line(path, &document_json(&reports, collected)),
                ReportFormat::Sarif => super::sarif::add_to_log(path, &reports),
            };
            if let Err(e) = written {
                if !self.said_failure.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "vigil: could not write race reports to {} (VIGIL_REPORT): {e}",
                        path.display()
                    );
                }
            }
        }
        reports
    }
}

/// Appends `line` and a newline to the file at `path` (created if
/// missing): one line per call, so a file written over a run is JSON
/// Lines.
fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut line = line.to_owned();
    line.push('\n');
    // One write call per line: appends from several contexts or
    // processes do not interleave within a line.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A context's bounds are every collection's, summed; a collection
    /// that was not bounded adds nothing.
    #[test]
    fn bounds_sum_every_delivered_collection() {
        let sink = ReportSink::default();
        assert!(!sink.bounds().any());
        let mut a = RaceReports::default();
        a.add_unchecked_words(3);
        a.add_history_lost(1);
        let mut b = RaceReports::default();
        b.add_unchecked_words(4);
        b.add_unchecked_arrays(2);
        for r in [a, RaceReports::default(), b] {
            let back = sink.deliver(r.clone(), true);
            assert_eq!(
                back.bounds(),
                r.bounds(),
                "the collection keeps its own counts"
            );
        }
        assert_eq!(
            sink.bounds(),
            DetectionBounds {
                unchecked_words: 7,
                unchecked_arrays: 2,
                history_lost: 1,
            }
        );
    }
}
