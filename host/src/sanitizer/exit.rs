//! What the process's sanitized contexts found, said once when the
//! process exits, and `VIGIL_EXITCODE`.
//!
//! Races normally reach the program through
//! [`Context::synchronize`](crate::Context::synchronize)'s error or
//! [`Context::take_reports`](crate::Context::take_reports). Two kinds get
//! lost on the way, and are printed on stderr at exit instead:
//!
//! - races a context still held when it was dropped (never collected);
//! - collections handed to the program and dropped before anything read
//!   them (`let _ = ctx.synchronize();`; see [`RaceReports`]).
//!
//! The exit summary also says how many reports suppressions took out, per
//! suppression, and, with an exit code configured
//! ([`SanitizerConfigBuilder::exit_code`](super::config::SanitizerConfigBuilder::exit_code),
//! `VIGIL_EXITCODE`), the process then exits with that status when any
//! race was reported, collected or not.
//!
//! The hook is a C `atexit` handler, registered by the first sanitized
//! context (or the first context with an exit code): it runs when `main`
//! returns or `std::process::exit` is called, after Rust's own clean-up,
//! also in test binaries (libtest exits through `exit` too). Changing the
//! status from inside `exit` takes `_exit`, after flushing stdio: handlers
//! registered before Vigil's do not run then.

use super::report::{RaceReports, ReadMark};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, Once};

/// Everything the exit summary says, gathered over the process's life.
#[derive(Default)]
struct Ledger {
    /// Races reported in the process (kept reports and records the
    /// runtime could not keep), collected or not, suppressed ones aside.
    reported: u64,
    /// Races of contexts dropped uncollected.
    uncollected: RaceReports,
    /// Collections handed to the program and dropped unread (read
    /// later through a clone: the mark tells).
    unread: Vec<(Arc<ReadMark>, RaceReports)>,
    /// Reports suppressed, per suppression (its description).
    suppressed: Vec<(String, u64)>,
    /// The status to exit with when races were reported.
    exit_code: Option<i32>,
}

static LEDGER: Mutex<Option<Ledger>> = Mutex::new(None);
static HOOK: Once = Once::new();

fn with_ledger<R>(f: impl FnOnce(&mut Ledger) -> R) -> R {
    let mut guard: MutexGuard<'_, Option<Ledger>> =
        LEDGER.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(Ledger::default))
}

/// Registers the exit hook (once per process).
pub(crate) fn install_hook() {
    HOOK.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds.
        let failed = unsafe { libc::atexit(at_exit) } != 0;
        if failed {
            eprintln!("vigil: could not register the exit summary (atexit failed)");
        }
    });
}

/// `n` races were reported (after suppressions).
pub(crate) fn note_reported(n: u64) {
    if n > 0 {
        with_ledger(|l| l.reported = l.reported.saturating_add(n));
    }
}

/// A suppression (described by `rule`) took `n` reports out.
pub(crate) fn note_suppressed(rule: &str, n: u64) {
    with_ledger(|l| match l.suppressed.iter_mut().find(|(r, _)| r == rule) {
        Some((_, count)) => *count += n,
        None => l.suppressed.push((rule.to_owned(), n)),
    });
}

/// A context was dropped with `reports` uncollected.
pub(crate) fn note_uncollected(reports: &RaceReports) {
    let copy = reports.detached();
    with_ledger(|l| l.uncollected.merge(copy));
}

/// A collection handed to the program was dropped unread (`reports`
/// holds its findings, without the mark).
pub(crate) fn note_unread(mark: Arc<ReadMark>, reports: RaceReports) {
    with_ledger(|l| {
        if !l.unread.iter().any(|(m, _)| Arc::ptr_eq(m, &mark)) {
            l.unread.push((mark, reports));
        }
    });
}

/// The process exits with `code` when races were reported.
pub(crate) fn set_exit_code(code: i32) {
    with_ledger(|l| l.exit_code = Some(code));
    install_hook();
}

/// The summary text (empty when there is nothing to say) and the status
/// to exit with, if any.
fn summary(ledger: &Ledger) -> (String, Option<i32>) {
    let mut out = String::new();
    if ledger.uncollected.has_findings() {
        let _ = writeln!(
            out,
            "vigil: races of contexts dropped before a synchronize or take_reports collected them:\n{}",
            ledger.uncollected
        );
    }
    let mut unread = RaceReports::new();
    for (mark, reports) in &ledger.unread {
        if !mark.is_read() {
            unread.merge(reports.detached());
        }
    }
    if unread.has_findings() {
        let _ = writeln!(
            out,
            "vigil: races returned to the program and dropped unread (an ignored \
             synchronize() error or take_reports() result):\n{unread}"
        );
    }
    if !ledger.suppressed.is_empty() {
        let total: u64 = ledger.suppressed.iter().map(|(_, n)| n).sum();
        let each: Vec<String> = (ledger.suppressed.iter())
            .map(|(rule, n)| format!("{n} by {rule}"))
            .collect();
        let _ = writeln!(
            out,
            "vigil: {total} race report(s) suppressed: {}",
            each.join(", ")
        );
    }
    let code = ledger.exit_code.filter(|_| ledger.reported > 0);
    if let Some(code) = code {
        let _ = writeln!(
            out,
            "vigil: {} race report(s) in this process: exit status {code} (VIGIL_EXITCODE)",
            ledger.reported
        );
    }
    (out, code)
}

extern "C" fn at_exit() {
    let said = std::panic::catch_unwind(|| {
        let (text, code) = with_ledger(|l| summary(l));
        if !text.is_empty() {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
        code
    });
    if let Ok(Some(code)) = said {
        let _ = std::io::stdout().flush();
        // SAFETY: flushes every C stream, then ends the process without
        // running `exit` again (which, inside an exit handler, would be
        // undefined behaviour).
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sanitizer::report_json::tests::sample_report;

    fn one_race() -> RaceReports {
        [sample_report()].into_iter().collect()
    }

    #[test]
    fn a_quiet_process_says_nothing() {
        let (text, code) = summary(&Ledger::default());
        assert!(text.is_empty() && code.is_none());
        // An exit code alone changes nothing without races.
        let l = Ledger {
            exit_code: Some(66),
            ..Ledger::default()
        };
        assert_eq!(summary(&l), (String::new(), None));
    }

    #[test]
    fn uncollected_and_unread_races_are_printed_with_the_exit_code() {
        let mut l = Ledger {
            reported: 3,
            exit_code: Some(66),
            ..Ledger::default()
        };
        l.uncollected.merge(one_race());
        let read = Arc::new(ReadMark::default());
        let unread = Arc::new(ReadMark::default());
        l.unread.push((unread, one_race()));
        l.unread.push((read.clone(), one_race()));
        l.suppressed
            .push(("`race:kernel=x` (s.txt:2)".to_owned(), 4));
        let (text, code) = summary(&l);
        assert_eq!(code, Some(66));
        assert!(text.contains("dropped before a synchronize"), "{text}");
        assert!(text.contains("dropped unread"), "{text}");
        assert!(text.contains("src/kernels.rs:12:9"), "{text}");
        assert!(
            text.contains("4 race report(s) suppressed: 4 by `race:kernel=x` (s.txt:2)"),
            "{text}"
        );
        assert!(text.contains("3 race report(s) in this process: exit status 66"));
    }

    #[test]
    fn a_collection_read_through_a_clone_is_not_unread() {
        let mark = Arc::new(ReadMark::default());
        let l = Ledger {
            unread: vec![(mark.clone(), one_race())],
            ..Ledger::default()
        };
        assert!(summary(&l).0.contains("dropped unread"));
        let noted =
            |m: &Arc<ReadMark>| with_ledger(|l| l.unread.iter().any(|(x, _)| Arc::ptr_eq(x, m)));
        let mut handed = one_race();
        handed.hand_out();
        let mark = handed.read_mark().expect("handed out");
        let clone = handed.clone();
        assert_eq!(clone.len(), 1, "reading the clone reads the collection");
        drop(handed);
        drop(clone);
        assert!(!noted(&mark));
        // Dropped with nothing read: kept for the exit summary.
        let mut ignored = one_race();
        ignored.hand_out();
        let mark = ignored.read_mark().expect("handed out");
        drop(ignored);
        assert!(noted(&mark));
        // A collection without findings is never kept.
        let mut empty = RaceReports::new();
        empty.hand_out();
        assert!(empty.read_mark().is_none());
    }
}
