//! The range-access entry ([`RANGE_ACCESS_ENTRY`]): a host-issued copy or
//! fill as accesses of its stream.
//!
//! A sanitized context launches it on the transfer's stream just before
//! the transfer, with the ranges the transfer reads and writes. It runs
//! inside the CTA entry and exit hooks like every sanitized kernel, with
//! one serial for all its CTAs, so streams, events and host
//! synchronisations order it exactly as they order kernels; each thread
//! checks units of [`RANGE_UNIT_BYTES`] (aligned in memory) grid-stride,
//! as plain reads or writes made at the host call site the `site` tag
//! names. Defined here under its exported
//! name, so every kernel crate's PTX carries it (the sanitized cut keeps
//! it: it is a `__vigil` entry; the plain cut drops it).

#[cfg(doc)]
use vigil_shared::gpu::RANGE_UNIT_BYTES;
use vigil_shared::gpu::{range_unit, range_units, RANGE_ACCESS_ENTRY};

use super::cta::grid_stride;
use super::entry::{run_cta, LaunchArgs};
use super::hooks::check_host_access;

/// True when `a` and `b` are the same string (in a constant).
pub(super) const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// `export_name` takes a literal: it must be the shared constant.
const _: () = assert!(same(RANGE_ACCESS_ENTRY, "vigil_range_access__vigil"));

/// Checks `[read_addr, +read_bytes)` as reads and `[write_addr,
/// +write_bytes)` as writes made at host call site `site` (a tag the host
/// resolves), `line`, `column`; the parameters after these are the hidden
/// ones of every sanitized entry (the host passes no read-only range, and
/// a launch record whose every CTA is the transfer's one serial).
///
/// # Safety
/// Launched by the host's sanitized transfer path only: the hidden
/// parameters are a live runtime and launch record (as for `run_cta`).
#[export_name = "vigil_range_access__vigil"]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn range_access(
    read_addr: u64,
    read_bytes: u64,
    write_addr: u64,
    write_bytes: u64,
    site: u64,
    line: u32,
    column: u32,
    runtime: u64,
    record: u64,
    base: u32,
    launch: u32,
    extensions: u32,
    count: u32,
    flags: u32,
    tag: u32,
    device: u32,
    own_bound: u32,
    path_word: u64,
    real_base: u64,
    read_only_0_start: u64,
    read_only_0_end: u64,
    read_only_1_start: u64,
    read_only_1_end: u64,
) {
    let args = LaunchArgs {
        runtime,
        record,
        base,
        launch,
        extensions,
        count,
        flags,
        tag,
        device,
        own_bound,
        path_word,
        real_base,
        read_only: [
            read_only_0_start,
            read_only_0_end,
            read_only_1_start,
            read_only_1_end,
        ],
    };
    // SAFETY: the host's sanitized launch passes a live runtime and
    // launch record, and no read-only range (this function's contract).
    unsafe {
        run_cta(args, || {
            let at = (line, column);
            check_range(read_addr, read_bytes, false, site, at);
            check_range(write_addr, write_bytes, true, site, at);
        })
    }
}

/// This thread's units of `[addr, addr + bytes)`, grid-stride.
#[inline(always)]
fn check_range(addr: u64, bytes: u64, write: bool, site: u64, at: (u32, u32)) {
    for unit in grid_stride(range_units(addr, bytes)) {
        let (start, size) = range_unit(addr, bytes, unit);
        check_host_access(start, size, write, site, at);
    }
}
