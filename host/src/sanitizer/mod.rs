//! What the sanitizers of both backends share on the host:
//!
//! - [`config`]: the settings ([`SanitizerConfig`](config::SanitizerConfig)), from a
//!   builder or `VIGIL_*` variables through one parser (which
//!   [`ContextBuilder::env`](crate::ContextBuilder::env) uses too);
//! - [`env`]: every `VIGIL_*` variable the project reads, in one list, and
//!   the warning for unknown ones;
//! - [`report`]: decoded race reports, de-duplication, text;
//! - [`report_json`]: their JSON format (versioned) and [`sarif`] their
//!   SARIF 2.1.0 form;
//! - [`suppressions`]: races to leave out of reports, and
//!   [`launch_filter`]: which launches run sanitized;
//! - [`exit`]: what is said when the process exits (races nobody
//!   collected, suppression counts) and `VIGIL_EXITCODE`;
//! - [`barrier`]: a divergent barrier ([`DivergentBarrier`](barrier::DivergentBarrier)),
//!   the CPU executor's and the GPU's, and the GPU's record decoded;
//! - [`decode`]: the one decoder from the engine's raw records to
//!   reports, with the [`ReportResolver`](decode::ReportResolver) each
//!   backend implements;
//! - [`sink`]: where a context's reports go when collected (suppression,
//!   the `VIGIL_REPORT` file).
//!
//! The happens-before engine itself is `vigil-shared`'s; this layer maps
//! its results to host types and depends only on the leaf types.

pub mod barrier;
pub mod config;
pub mod decode;
pub mod env;
pub mod exit;
pub mod launch_filter;
pub mod report;
pub mod report_json;
pub mod sarif;
pub mod sink;
pub mod suppressions;
