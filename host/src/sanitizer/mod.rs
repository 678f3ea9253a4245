//! What the sanitizers of both backends share on the host:
//!
//! - [`config`]: the settings ([`VmmConfig`](config::VmmConfig)), from a
//!   builder or `VIGIL_*` variables through one parser (which
//!   [`ContextBuilder::env`](crate::ContextBuilder::env) uses too);
//! - [`report`]: decoded race reports, de-duplication, text and JSON;
//! - `gpu_report`, `location`: the GPU sanitizer's report records decoded
//!   into those reports, with source locations read back from the
//!   module's device memory;
//! - [`buddy`]: the buddy tree both shadow allocators hand ranges out with
//!   (the CPU sanitizer's host arena and the GPU's virtual reservation).
//!
//! The happens-before engine itself is `vigil-shared`'s; this layer maps
//! its results to host types and depends only on the leaf types.

pub mod buddy;
pub mod config;
pub(crate) mod gpu_report;
pub(crate) mod location;
pub mod report;
