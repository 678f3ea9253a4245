//! [`ReportSink`]: where a context's race reports go when they are
//! collected from its backend, the same for both backends.
//!
//! Every collection (a synchronisation or
//! [`Context::take_reports`](crate::Context::take_reports)) passes the
//! reports it took through the context's sink once: with a report file
//! configured (`VIGIL_REPORT`, [`SanitizerConfigBuilder::report_path`](super::config::SanitizerConfigBuilder::report_path)),
//! a collection that found races, or whose detection was bounded
//! ([`RaceReports::detection_bounded`]), appends them as one JSON line. The
//! reports themselves go back to the caller ([`Error::Races`](crate::Error::Races)),
//! whose `Display` is the one printed form of both backends. A bounded
//! detection without races is also said once per context on stderr: a
//! synchronisation that finds no race returns `Ok`, and its counts would
//! otherwise reach nobody.

use super::config::SanitizerConfig;
use super::report::RaceReports;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The destination of a context's collected reports.
#[derive(Debug, Default)]
pub struct ReportSink {
    path: Option<PathBuf>,
    /// A failed write was said on stderr (said once per context).
    said_failure: AtomicBool,
    /// A bounded detection was said on stderr (once per context).
    said_bounded: AtomicBool,
}

impl ReportSink {
    /// The sink `config` asks for.
    pub fn new(config: &SanitizerConfig) -> ReportSink {
        ReportSink {
            path: config.report_path().map(PathBuf::from),
            said_failure: AtomicBool::new(false),
            said_bounded: AtomicBool::new(false),
        }
    }

    /// Delivers one collection's reports: appended to the report file when
    /// there are any or the detection was bounded, which a collection
    /// without races also says once per context on stderr. A file that
    /// cannot be written is said once on
    /// stderr; the races still reach the caller, which matters more than
    /// the file.
    pub fn deliver(&self, reports: &RaceReports) {
        let bounded = reports.detection_bounded();
        // With races the caller gets the counts in their text already.
        if bounded && reports.is_empty() && !self.said_bounded.swap(true, Ordering::Relaxed) {
            eprintln!(
                "vigil: race detection was bounded: {} (said once per context; every \
                 collection's reports carry the counts)",
                reports.detection_limits().join("; ")
            );
        }
        let Some(path) = &self.path else { return };
        if reports.is_empty() && !bounded {
            return;
        }
        if let Err(e) = reports.append_json(path) {
            if !self.said_failure.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "vigil: could not append race reports to {} (VIGIL_REPORT): {e}",
                    path.display()
                );
            }
        }
    }
}
