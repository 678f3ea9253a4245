//! The PTX implementation of asynchronous copies, mbarriers and
//! programmatic dependent launch: one inline-PTX instruction per
//! operation, spelt as CUDA C++ spells it (`cp.async`, `cp.async.bulk`,
//! `mbarrier.*`, `griddepcontrol.*`).
//!
//! Shared-memory operands are 32-bit shared-window addresses (what
//! `__cvta_generic_to_shared` gives a CUDA C++ kernel); global operands
//! are generic addresses of global memory, which PTX accepts where it asks
//! for `.global` ones. None of these is `nomem`: each is a compiler fence,
//! so plain shared-memory accesses stay on their side of a wait.
//!
//! The functions above [`raw`] have the signatures of `host_async`'s:
//! they take shared ranges as the sanitizer sees them and, in a checking
//! variant, report a copy where it is issued (`arch::copy_accesses`).

use super::copy_accesses::{copy_accesses, shared_units, CopyAccess, Direction, GlobalSide};
use crate::sanitizer::{BulkGlobal, Sanitizer, SharedAccess};
use core::panic::Location;
use vigil_shared::tensor_map::{TensorMapBytes, TiledMap, DESCRIPTION_OFFSET, MAX_RANK};

/// Tells `S` of a copy's accesses where the calling thread issues it: no
/// thread runs where the hardware completes it.
#[inline(always)]
#[track_caller]
fn report_at_issue<S: Sanitizer>(direction: Direction, global: GlobalSide, shared: SharedAccess) {
    if !S::ENABLED {
        return;
    }
    let loc = Location::caller();
    let GlobalSide::Tensor { .. } = global else {
        copy_accesses(direction, &global, shared, |access| match access {
            CopyAccess::Global { addr, size, kind } => S::access(addr, size, kind, loc),
            CopyAccess::Shared(access) => S::shared_access(access, loc),
        });
        return;
    };
    // A tensor copy's rows: whole ranges the issuing thread moves alone.
    let (global_kind, shared_kind) = direction.kinds();
    direction.in_order(
        &mut (),
        |_| global.for_each_range(|addr, bytes| S::copy_range_alone(addr, bytes, global_kind, loc)),
        |_| shared_units(shared, shared_kind, |a| S::shared_access(a, loc)),
    );
}

/// `bytes` bytes at `addr`.
#[inline(always)]
fn linear(addr: usize, bytes: usize) -> GlobalSide {
    GlobalSide::Linear { addr, bytes }
}

/// The global side of a tensor copy of the box at `coords` through the
/// map at `map`: the description the host wrote after the descriptor
/// (nothing, for memory that holds none).
///
/// # Safety
/// `map` points to a tensor map the host built, with its description.
#[inline(always)]
pub(crate) unsafe fn tensor_side(map: *const u8, coords: [i32; MAX_RANK]) -> GlobalSide {
    // SAFETY: the host allocates the description right after the
    // descriptor (the caller's contract), aligned like it.
    let bytes = unsafe { (map.add(DESCRIPTION_OFFSET) as *const TensorMapBytes).read_volatile() };
    match TiledMap::decode(&bytes) {
        Some(map) => GlobalSide::Tensor { map, coords },
        None => linear(0, 0),
    }
}

/// `cp.async` of `BYTES` (4, 8 or 16, `shared.size`) bytes from `global`
/// into `shared`.
///
/// # Safety
/// `shared` is inside its array; `global` valid for `BYTES` reads; both
/// aligned to `BYTES`.
#[inline(always)]
#[track_caller]
pub unsafe fn cp_async<S: Sanitizer, const BYTES: usize>(shared: SharedAccess, global: usize) {
    report_at_issue::<S>(Direction::ToShared, linear(global, BYTES), shared);
    S::copy_in_flight(shared, global, BYTES, Location::caller());
    // SAFETY: the caller's contract.
    unsafe { raw::cp_async_full::<BYTES>(shared_address(shared.addr), global as *const u8) }
}

/// [`cp_async`] reading only the first `global_bytes` bytes (the rest of
/// `shared` is zero-filled).
///
/// # Safety
/// As [`cp_async`], with `global` valid for `global_bytes` reads.
#[inline(always)]
#[track_caller]
pub unsafe fn cp_async_zfill<S: Sanitizer, const BYTES: usize>(
    shared: SharedAccess,
    global: usize,
    global_bytes: usize,
) {
    report_at_issue::<S>(Direction::ToShared, linear(global, global_bytes), shared);
    S::copy_in_flight(shared, global, global_bytes, Location::caller());
    // SAFETY: the caller's contract.
    unsafe {
        raw::cp_async::<BYTES>(
            shared_address(shared.addr),
            global as *const u8,
            global_bytes as u32,
        )
    }
}

pub(crate) use raw::fence_proxy_async_global;
pub use raw::{bulk_commit_group, bulk_wait_group, bulk_wait_group_read, commit_group};
pub use raw::{
    fence_proxy_async_shared, launch_dependents, wait_all, wait_for_prerequisite_grids, wait_group,
};

/// `cp.async.bulk` of `shared.size` bytes from `global` into `shared`,
/// completing on the mbarrier at generic address `bar`.
///
/// # Safety
/// As [`raw::bulk_to_shared`].
#[inline(always)]
#[track_caller]
pub unsafe fn bulk_to_shared<S: Sanitizer>(shared: SharedAccess, global: usize, bar: usize) {
    report_at_issue::<S>(Direction::ToShared, linear(global, shared.size), shared);
    if S::ENABLED {
        // SAFETY: `bar` is an initialised mbarrier (the caller's contract).
        let phase = unsafe { current_phase(bar) };
        let global = BulkGlobal::Range {
            addr: global,
            bytes: shared.size,
        };
        S::bulk_in_flight(shared, global, phase, Location::caller());
    }
    // SAFETY: the caller's contract.
    unsafe {
        raw::bulk_to_shared(
            shared_address(shared.addr),
            global as *const u8,
            shared.size as u32,
            shared_address(bar),
        )
    }
}

/// `cp.async.bulk` of `shared` to `global` in the open bulk group.
///
/// # Safety
/// As [`raw::bulk_to_global`].
#[inline(always)]
#[track_caller]
pub unsafe fn bulk_to_global<S: Sanitizer>(shared: SharedAccess, global: usize) {
    report_at_issue::<S>(Direction::ToGlobal, linear(global, shared.size), shared);
    let side = BulkGlobal::Range {
        addr: global,
        bytes: shared.size,
    };
    S::bulk_in_flight(shared, side, 0, Location::caller());
    // SAFETY: the caller's contract.
    unsafe {
        raw::bulk_to_global(
            global as *mut u8,
            shared_address(shared.addr),
            shared.size as u32,
        )
    }
}

/// A tensor load of the box at `coords` into `shared` (`shared.size` is
/// the box's bytes), completing on the mbarrier at `bar`. The sanitizer
/// hears of its global side from the map's description.
///
/// # Safety
/// As [`raw::tensor_to_shared`].
#[inline(always)]
#[track_caller]
pub unsafe fn tensor_to_shared<S: Sanitizer, const D: usize>(
    shared: SharedAccess,
    map: *const u8,
    coords: [i32; MAX_RANK],
    bar: usize,
) {
    if S::ENABLED {
        // SAFETY: the caller's contract.
        report_at_issue::<S>(
            Direction::ToShared,
            unsafe { tensor_side(map, coords) },
            shared,
        );
        // SAFETY: `bar` is an initialised mbarrier (the caller's contract).
        let phase = unsafe { current_phase(bar) };
        let global = BulkGlobal::Tensor {
            map: map as usize,
            coords,
        };
        S::bulk_in_flight(shared, global, phase, Location::caller());
    }
    // SAFETY: the caller's contract.
    unsafe {
        raw::tensor_to_shared::<D>(
            shared_address(shared.addr),
            map,
            coords,
            shared_address(bar),
        )
    }
}

/// A tensor store of the box at `coords` from `shared` in the open bulk
/// group.
///
/// # Safety
/// As [`raw::tensor_to_global`].
#[inline(always)]
#[track_caller]
pub unsafe fn tensor_to_global<S: Sanitizer, const D: usize>(
    shared: SharedAccess,
    map: *const u8,
    coords: [i32; MAX_RANK],
) {
    if S::ENABLED {
        // SAFETY: the caller's contract.
        report_at_issue::<S>(
            Direction::ToGlobal,
            unsafe { tensor_side(map, coords) },
            shared,
        );
        let global = BulkGlobal::Tensor {
            map: map as usize,
            coords,
        };
        S::bulk_in_flight(shared, global, 0, Location::caller());
    }
    // SAFETY: the caller's contract.
    unsafe { raw::tensor_to_global::<D>(map, coords, shared_address(shared.addr)) }
}

/// The sanitizer's name of the phase of the mbarrier at generic address
/// `bar` that a copy issued now completes on: the current one, whose
/// parity is odd when a wait for parity 0 would return at once.
///
/// # Safety
/// `bar` is an initialised mbarrier.
#[inline(always)]
unsafe fn current_phase(bar: usize) -> u32 {
    // SAFETY: the caller's contract.
    let odd = unsafe { raw::mbarrier_test_wait_parity(shared_address(bar), 0) };
    u32::from(vigil_shared::bulk_copies::phase_key(
        bar as u64,
        u32::from(odd),
    ))
}

/// The tensor-map proxy's acquire of the map at `map`.
///
/// # Safety
/// As [`raw::fence_tensormap_acquire`].
#[inline(always)]
pub unsafe fn fence_tensormap_acquire(map: *const u8) {
    // SAFETY: the caller's contract.
    unsafe { raw::fence_tensormap_acquire(map) }
}

/// `mbarrier.init` of the mbarrier at generic address `bar`.
///
/// # Safety
/// `bar` is an mbarrier's 8 aligned bytes of shared memory.
#[inline(always)]
#[track_caller]
pub unsafe fn mbarrier_init(bar: usize, count: u32) {
    // SAFETY: the caller's contract.
    unsafe { raw::mbarrier_init(shared_address(bar), count) }
}

/// `mbarrier.arrive`.
///
/// # Safety
/// `bar` is an initialised mbarrier.
#[inline(always)]
#[track_caller]
pub unsafe fn mbarrier_arrive(bar: usize) {
    // SAFETY: the caller's contract.
    unsafe { raw::mbarrier_arrive(shared_address(bar)) }
}

/// `mbarrier.arrive.expect_tx` of `tx` bytes.
///
/// # Safety
/// `bar` is an initialised mbarrier.
#[inline(always)]
#[track_caller]
pub unsafe fn mbarrier_arrive_expect_tx(bar: usize, tx: u32) {
    // SAFETY: the caller's contract.
    unsafe { raw::mbarrier_arrive_expect_tx(shared_address(bar), tx) }
}

/// `mbarrier.expect_tx`.
///
/// # Safety
/// `bar` is an initialised mbarrier.
#[inline(always)]
#[track_caller]
pub unsafe fn mbarrier_expect_tx(bar: usize, bytes: u32) {
    // SAFETY: the caller's contract.
    unsafe { raw::mbarrier_expect_tx(shared_address(bar), bytes) }
}

/// `mbarrier.try_wait.parity`.
///
/// # Safety
/// `bar` is an initialised mbarrier.
#[inline(always)]
#[track_caller]
pub unsafe fn mbarrier_try_wait_parity(bar: usize, parity: u32) -> bool {
    // SAFETY: the caller's contract.
    unsafe { raw::mbarrier_try_wait_parity(shared_address(bar), parity) }
}

/// The 32-bit shared-window address of the generic shared address `p`.
#[inline(always)]
fn shared_address(p: usize) -> u32 {
    super::ptx::shared_window_offset(p)
}

/// One instruction per operation, on shared-window addresses.
mod raw {
    use core::arch::asm;

    /// `cp.async` of `BYTES` (4, 8 or 16) from global `src` to shared `dst`;
    /// with `SRC_BYTES < BYTES` only the first `src_bytes` are read and the
    /// rest of the destination is zero-filled. 16-byte copies bypass L1
    /// (`.cg`), smaller ones cannot (`.ca`), as in CUTLASS.
    ///
    /// # Safety
    /// `dst` is a `BYTES`-aligned shared address with `BYTES` bytes of the
    /// block's shared memory; `src` is `BYTES`-aligned global memory valid
    /// for `src_bytes` reads.
    #[inline(always)]
    pub unsafe fn cp_async<const BYTES: usize>(dst: u32, src: *const u8, src_bytes: u32) {
        // SAFETY: the caller's contract; the copy completes at a group wait.
        unsafe {
            match BYTES {
                4 => {
                    asm!("cp.async.ca.shared.global [{d}], [{s}], 4, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes, options(nostack))
                }
                8 => {
                    asm!("cp.async.ca.shared.global [{d}], [{s}], 8, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes, options(nostack))
                }
                _ => {
                    asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes, options(nostack))
                }
            }
        }
    }

    /// [`cp_async`] of all `BYTES` (no source size operand).
    ///
    /// # Safety
    /// As [`cp_async`], with `src` valid for `BYTES` reads.
    #[inline(always)]
    pub unsafe fn cp_async_full<const BYTES: usize>(dst: u32, src: *const u8) {
        // SAFETY: the caller's contract.
        unsafe {
            match BYTES {
                4 => {
                    asm!("cp.async.ca.shared.global [{d}], [{s}], 4;", d = in(reg32) dst, s = in(reg64) src, options(nostack))
                }
                8 => {
                    asm!("cp.async.ca.shared.global [{d}], [{s}], 8;", d = in(reg32) dst, s = in(reg64) src, options(nostack))
                }
                _ => {
                    asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src, options(nostack))
                }
            }
        }
    }

    /// `cp.async.commit_group`.
    #[inline(always)]
    pub fn commit_group() {
        // SAFETY: closes the calling thread's open group; no operands.
        unsafe { asm!("cp.async.commit_group;", options(nostack)) }
    }

    /// `cp.async.wait_group N`.
    #[inline(always)]
    pub fn wait_group<const N: u32>() {
        // SAFETY: waits for the calling thread's own groups.
        unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) }
    }

    /// `cp.async.wait_all`.
    #[inline(always)]
    pub fn wait_all() {
        // SAFETY: waits for the calling thread's own copies.
        unsafe { asm!("cp.async.wait_all;", options(nostack)) }
    }

    /// `mbarrier.init.shared::cta.b64`.
    ///
    /// # Safety
    /// `bar` is the 8-byte-aligned shared address of an mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_init(bar: u32, count: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count, options(nostack))
        }
    }

    /// `mbarrier.arrive.shared::cta.b64` (release at CTA scope).
    ///
    /// # Safety
    /// `bar` is the shared address of an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_arrive(bar: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar, options(nostack))
        }
    }

    /// `mbarrier.arrive.expect_tx.shared::cta.b64`.
    ///
    /// # Safety
    /// `bar` is the shared address of an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {t};", b = in(reg32) bar, t = in(reg32) bytes, options(nostack))
        }
    }

    /// `mbarrier.expect_tx.relaxed.cta.shared::cta.b64`.
    ///
    /// # Safety
    /// `bar` is the shared address of an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_expect_tx(bar: u32, bytes: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{b}], {t};", b = in(reg32) bar, t = in(reg32) bytes, options(nostack))
        }
    }

    /// `mbarrier.{$op}.parity.shared::cta.b64 p, [bar], parity` as a
    /// `bool` (`try_wait` or `test_wait`).
    macro_rules! parity_wait {
        ($op:literal, $bar:expr, $parity:expr) => {{
            let done: u32;
            asm!(
                concat!("{{ .reg .pred p; mbarrier.", $op, ".parity.shared::cta.b64 p, [{b}], {q}; selp.u32 {r}, 1, 0, p; }}"),
                r = out(reg32) done, b = in(reg32) $bar, q = in(reg32) $parity, options(nostack)
            );
            done != 0
        }};
    }

    /// `mbarrier.try_wait.parity.shared::cta.b64` (acquire at CTA scope): true
    /// once the phase of parity `parity` has completed.
    ///
    /// # Safety
    /// `bar` is the shared address of an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_try_wait_parity(bar: u32, parity: u32) -> bool {
        // SAFETY: the caller's contract.
        unsafe { parity_wait!("try_wait", bar, parity) }
    }

    /// `mbarrier.test_wait.parity.shared::cta.b64`, which does not wait:
    /// true when the phase of parity `parity` has completed.
    ///
    /// # Safety
    /// `bar` is the shared address of an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_test_wait_parity(bar: u32, parity: u32) -> bool {
        // SAFETY: the caller's contract.
        unsafe { parity_wait!("test_wait", bar, parity) }
    }

    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`.
    ///
    /// # Safety
    /// `dst` is a 16-byte-aligned shared address with `bytes` (a multiple of
    /// 16) of the block's shared memory; `src` 16-byte-aligned global memory
    /// valid for `bytes` reads; `bar` an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn bulk_to_shared(dst: u32, src: *const u8, bytes: u32, bar: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
                d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar, options(nostack)
            )
        }
    }

    /// `cp.async.bulk.global.shared::cta.bulk_group`.
    ///
    /// # Safety
    /// `dst` is 16-byte-aligned global memory valid for `bytes` (a multiple of
    /// 16) writes; `src` a 16-byte-aligned shared address with `bytes` bytes.
    #[inline(always)]
    pub unsafe fn bulk_to_global(dst: *mut u8, src: u32, bytes: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};",
                d = in(reg64) dst, s = in(reg32) src, n = in(reg32) bytes, options(nostack)
            )
        }
    }

    /// `cp.async.bulk.commit_group`.
    #[inline(always)]
    pub fn bulk_commit_group() {
        // SAFETY: closes the calling thread's open bulk group.
        unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
    }

    /// `cp.async.bulk.wait_group N`.
    #[inline(always)]
    pub fn bulk_wait_group<const N: u32>() {
        // SAFETY: waits for the calling thread's own bulk groups.
        unsafe { asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack)) }
    }

    /// `cp.async.bulk.wait_group.read N`.
    #[inline(always)]
    pub fn bulk_wait_group_read<const N: u32>() {
        // SAFETY: waits for the source reads of the calling thread's bulk groups.
        unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack)) }
    }

    /// `fence.proxy.async.global`.
    #[inline(always)]
    pub fn fence_proxy_async_global() {
        // SAFETY: a fence; no operands.
        unsafe { asm!("fence.proxy.async.global;", options(nostack)) }
    }

    /// `fence.proxy.async.shared::cta`.
    #[inline(always)]
    pub fn fence_proxy_async_shared() {
        // SAFETY: a fence; no operands.
        unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
    }

    /// `fence.proxy.tensormap::generic.acquire.sys` on the 128-byte tensor map
    /// at `map` (written by a host copy, the generic proxy).
    ///
    /// # Safety
    /// `map` is the global address of a 64-byte-aligned tensor map.
    #[inline(always)]
    pub unsafe fn fence_tensormap_acquire(map: *const u8) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) map, options(nostack))
        }
    }

    /// `$go!` of the rank `$d` (1 to 5) and its coordinate operands
    /// `{c0}`.. (`$d` is a constant, so one arm is left).
    macro_rules! by_rank {
        ($d:expr, $go:ident) => {
            match $d {
                1 => $go!("1", "{c0}", c0 = 0),
                2 => $go!("2", "{c0}, {c1}", c0 = 0, c1 = 1),
                3 => $go!("3", "{c0}, {c1}, {c2}", c0 = 0, c1 = 1, c2 = 2),
                4 => $go!(
                    "4",
                    "{c0}, {c1}, {c2}, {c3}",
                    c0 = 0,
                    c1 = 1,
                    c2 = 2,
                    c3 = 3
                ),
                _ => $go!(
                    "5",
                    "{c0}, {c1}, {c2}, {c3}, {c4}",
                    c0 = 0,
                    c1 = 1,
                    c2 = 2,
                    c3 = 3,
                    c4 = 4
                ),
            }
        };
    }

    /// `cp.async.bulk.tensor.{D}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`
    /// of the box at `c` (the first `D` coordinates, innermost first).
    ///
    /// # Safety
    /// `map` is the global address of a tensor map of rank `D`; `dst` a
    /// 128-byte-aligned shared address with room for the map's box; `bar` an
    /// initialised mbarrier.
    #[inline(always)]
    pub unsafe fn tensor_to_shared<const D: usize>(
        dst: u32,
        map: *const u8,
        c: [i32; 5],
        bar: u32,
    ) {
        macro_rules! go {
            ($d:literal, $coords:literal, $($n:ident = $i:literal),+) => {
                asm!(
                    concat!("cp.async.bulk.tensor.", $d, "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{", $coords, "}}], [{b}];"),
                    d = in(reg32) dst, m = in(reg64) map, b = in(reg32) bar,
                    $($n = in(reg32) c[$i],)+
                    options(nostack)
                )
            };
        }
        // SAFETY: the caller's contract.
        unsafe { by_rank!(D, go) }
    }

    /// `cp.async.bulk.tensor.{D}d.global.shared::cta.tile.bulk_group` of the
    /// box at `c` from shared `src`.
    ///
    /// # Safety
    /// `map` is the global address of a tensor map of rank `D` over writable
    /// memory; `src` a 128-byte-aligned shared address holding the map's box.
    #[inline(always)]
    pub unsafe fn tensor_to_global<const D: usize>(map: *const u8, c: [i32; 5], src: u32) {
        macro_rules! go {
            ($d:literal, $coords:literal, $($n:ident = $i:literal),+) => {
                asm!(
                    concat!("cp.async.bulk.tensor.", $d, "d.global.shared::cta.tile.bulk_group [{m}, {{", $coords, "}}], [{s}];"),
                    s = in(reg32) src, m = in(reg64) map,
                    $($n = in(reg32) c[$i],)+
                    options(nostack)
                )
            };
        }
        // SAFETY: the caller's contract.
        unsafe { by_rank!(D, go) }
    }

    /// `griddepcontrol.launch_dependents`.
    #[inline(always)]
    pub fn launch_dependents() {
        // SAFETY: a scheduling hint; no operands.
        unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) }
    }

    /// `griddepcontrol.wait`.
    #[inline(always)]
    pub fn wait_for_prerequisite_grids() {
        // SAFETY: waits for the prerequisite grids; no operands.
        unsafe { asm!("griddepcontrol.wait;", options(nostack)) }
    }
}
