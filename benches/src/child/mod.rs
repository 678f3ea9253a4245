//! Measurements in child processes, so that a kernel that runs too long
//! (a sanitizer's on contended atomics, a tool's) can be ended: a running
//! kernel cannot be interrupted, only its process killed. The parent
//! re-runs this program (or compute-sanitizer on it) with a hidden flag;
//! the child reports each case on its stdout ([`protocol`]), measuring it
//! with [`measure`]; the parent ([`runner`]) reads the reports, kills the
//! child's process group at a case's limit or the budget's end, and
//! restarts it on the cases left.

pub mod measure;
pub mod protocol;
pub mod runner;

pub use runner::{run_cases, CaseOutcome, ChildLimits};
