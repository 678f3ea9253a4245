//! The shadow-reclaim entry ([`SHADOW_RECLAIM_ENTRY`]): a freed buffer's
//! pool records go back to the pool.
//!
//! A sanitized context launches it when a buffer is freed, after the
//! device finished every use of it, over the buffer's whole lines; each
//! thread gives back the records of its lines, grid-stride
//! (`vigil_shared::race::reclaim`). It is not a kernel's check: it runs no
//! CTA entry or exit. Defined here under its exported name, so every
//! kernel crate's PTX carries it beside the range-access entry.

use vigil_shared::gpu::{GpuRuntime, SHADOW_RECLAIM_ENTRY};
use vigil_shared::race::line::LINE_BYTES;
use vigil_shared::race::reclaim::reclaim_line;

use super::cta::grid_stride;
use super::device_atomics::DeviceAtomics;
use super::memory::GpuMemory;
use super::range::same;

// `export_name` takes a literal: it must be the shared constant.
const _: () = assert!(same(SHADOW_RECLAIM_ENTRY, "vigil_shadow_reclaim__vigil"));

/// Gives back the pool records of the lines of `[addr, addr + bytes)`
/// (whole lines: a partial one at either end is left alone) in the
/// shadow of the device `runtime` describes.
///
/// # Safety
/// Launched by the host's free path only: `runtime` is the device's live
/// runtime, and no access to the range is in flight or will come.
#[export_name = "vigil_shadow_reclaim__vigil"]
pub unsafe extern "ptx-kernel" fn shadow_reclaim(runtime: u64, addr: u64, bytes: u64) {
    // SAFETY: the host passes the device's live runtime (this function's
    // contract), laid out as `vigil_shared::gpu` says.
    let mem = unsafe { GpuMemory::<DeviceAtomics>::new(&*(runtime as *const GpuRuntime)) };
    if !mem.manages(addr) || bytes == 0 {
        return;
    }
    let first = addr.div_ceil(LINE_BYTES) * LINE_BYTES;
    let end = (addr + bytes) / LINE_BYTES * LINE_BYTES;
    if end <= first {
        return;
    }
    for k in grid_stride((end - first) / LINE_BYTES) {
        reclaim_line(&mem, mem.word_of(first + k * LINE_BYTES));
    }
}
