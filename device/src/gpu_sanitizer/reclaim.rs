//! The shadow-reclaim entry ([`SHADOW_RECLAIM_ENTRY`]): a freed buffer's
//! pool records go back to the pool.
//!
//! A sanitized context launches it when a buffer is freed, after the
//! device finished every use of it, over the buffer's whole lines; each
//! thread gives back the records of its words, grid-stride
//! ([`Engine::reclaim_word`]). It is not a kernel's check: it runs no CTA
//! entry or exit and takes no sanitizer thread. Defined here under its
//! exported name, so every kernel crate's PTX carries it beside the
//! range-access entry.

use vigil_shared::engine::Engine;
use vigil_shared::gpu::{GpuRuntime, SHADOW_RECLAIM_ENTRY};

use super::cta::grid_stride;
use super::device_atomics::EngineAtomics;
use super::memory::RuntimeMemory;
use super::range::same;

// `export_name` takes a literal: it must be the shared constant.
const _: () = assert!(same(SHADOW_RECLAIM_ENTRY, "vigil_shadow_reclaim__vigil"));

/// Gives back the pool records of the words of `[addr, addr + bytes)`
/// (whole lines: anything else is left alone) in the shadow of the
/// device `runtime` describes.
///
/// # Safety
/// Launched by the host's free path only: `runtime` is the device's live
/// runtime, and no access to the range is in flight or will come.
#[export_name = "vigil_shadow_reclaim__vigil"]
pub unsafe extern "ptx-kernel" fn shadow_reclaim(runtime: u64, addr: u64, bytes: u64) {
    // SAFETY: the host passes the device's live runtime (this function's
    // contract), laid out as `vigil_shared::gpu` says.
    let mem = unsafe { RuntimeMemory::<EngineAtomics>::new(&*(runtime as *const GpuRuntime)) };
    let engine = Engine::new(&mem, mem.config());
    let Some(words) = engine.whole_line_words(addr, bytes) else {
        return;
    };
    for k in grid_stride(words.end - words.start) {
        engine.reclaim_word(words.start + k, true);
    }
}
