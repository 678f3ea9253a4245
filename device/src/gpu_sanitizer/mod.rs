//! The GPU race sanitizer's device runtime (docs/src/design/engine.md,
//! reports.md): what a
//! sanitized PTX entry (`name__vigil`) runs around and inside the body.
//!
//! - `memory`: the race engine's memory over the device's runtime state
//!   (one file, so changes to the engine's memory interface land here).
//! - `device_atomics`: the device-scoped atomics the hooks' engine runs on.
//! - `report`: the report buffer.
//! - `cta` (PTX): a CTA's sanitizer state and geometry.
//! - `regions` (PTX): the regions of its SM a CTA holds, claimed when it
//!   first needs them.
//! - `block` (PTX): races between threads of one CTA in shared memory,
//!   with the CTA's barrier intervals and warp collectives.
//! - `block_table` (PTX): races between threads of one CTA in global
//!   memory, through the CTA slot's same-block table (a warp's
//!   whole-line run keeps one line entry).
//! - `block_word` (PTX): the words of those same-block shadows, at the
//!   CTA's scope.
//! - `hooks` (PTX): `GpuSanitizer`, the hooks every global access calls.
//! - `in_flight` (PTX): a thread's `cp.async` copies between their issue
//!   and their completion.
//! - `bulk` (PTX): a CTA's bulk and tensor copies between their issue and
//!   their completion.
//! - `warp` (PTX): lanes of a warp making one access together check it
//!   once, and an atomic on one word once.
//! - `entry` (PTX): CTA entry and exit around the body.
//! - `range` (PTX): the range-access entry, which checks a host-issued
//!   copy or fill as accesses of its stream.
//! - `reclaim` (PTX): the shadow-reclaim entry, which gives a freed
//!   buffer's pool records back.
//!
//! The first three are plain atomics over memory and are unit-tested in
//! the host build; the PTX-only parts use `arch::ptx` for `%smid`,
//! barriers, the CTA's shared state and `trap`.
//!
//! Layers, lowest first; a module imports only from those below it
//! (`host/tests/layers.rs` checks it): `device_atomics`, `report`,
//! `warp`, `block_word`; `memory`; `cta`; `regions`; `bulk`; `in_flight`; `block`;
//! `block_table`; `hooks`; `entry`; `range`; `reclaim`.

#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
mod device_atomics;
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
mod memory;
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
mod report;

#[cfg(target_arch = "nvptx64")]
mod block;
#[cfg(target_arch = "nvptx64")]
mod block_table;
#[cfg(target_arch = "nvptx64")]
mod block_word;
#[cfg(target_arch = "nvptx64")]
mod bulk;
#[cfg(target_arch = "nvptx64")]
mod cta;
#[cfg(target_arch = "nvptx64")]
mod entry;
#[cfg(target_arch = "nvptx64")]
mod hooks;
#[cfg(target_arch = "nvptx64")]
mod in_flight;
// The runtime's own entries: in the sanitized PTX build only.
#[cfg(all(target_arch = "nvptx64", vigil_sanitized))]
mod range;
#[cfg(all(target_arch = "nvptx64", vigil_sanitized))]
mod reclaim;
#[cfg(target_arch = "nvptx64")]
mod regions;
#[cfg(target_arch = "nvptx64")]
mod warp;

#[cfg(target_arch = "nvptx64")]
pub use entry::{run_cta, LaunchArgs};
#[cfg(target_arch = "nvptx64")]
pub use hooks::GpuSanitizer;
#[cfg(all(target_arch = "nvptx64", vigil_sanitized))]
pub use range::range_access;
#[cfg(all(target_arch = "nvptx64", vigil_sanitized))]
pub use reclaim::shadow_reclaim;
