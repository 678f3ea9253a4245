//! The host implementation of the platform layer, used by the CPU backend.
//!
//! A CPU executor runs each GPU thread of a block on a host thread (or
//! task) and installs a [`ThreadContext`] for it with [`enter_thread`]; the
//! kernel API reads coordinates from it and hands barriers, shared memory
//! and warp collectives to the block's [`BlockRuntime`]. Global memory is
//! host memory; plain accesses are relaxed atomics of the access's width so
//! that racy kernels stay defined behaviour on the host, and scoped atomics
//! map to `core::sync::atomic` with the same ordering.

use crate::atomic::sealed::{ArchAdd, ArchAnd, ArchAtomic, ArchMax, ArchMin, ArchOr, ArchXor};
use crate::index::Dim3;
use crate::sanitizer::AtomicAccess;
use core::panic::Location;
use std::cell::Cell;
use std::sync::atomic::{self as sa, AtomicU16, AtomicU32, AtomicU64, AtomicU8};
use vigil_shared::{AccessKind, Ordering, Scope};

/// What a block's threads share: the barrier, shared memory and the
/// exchange behind warp collectives. Implemented by the CPU executor.
pub trait BlockRuntime: Sync {
    /// Blocks until every thread of the block has called it (`__syncthreads`).
    fn sync_threads(&self);
    /// This block's storage for the static shared array with identity `key`
    /// (one per `shared_array!` expansion), `bytes` long and aligned to
    /// `align`, zero-initialised on the block's first request.
    fn static_shared(&self, key: std::any::TypeId, bytes: usize, align: usize) -> *mut u8;
    /// This block's dynamic shared memory and its size in bytes.
    fn dynamic_shared(&self) -> (*mut u8, usize);
    /// A warp collective: every lane of `mask` in the calling thread's warp
    /// contributes `value` and receives the whole warp's values (index =
    /// lane; lanes outside the mask hold 0).
    fn warp_exchange(&self, lane: u32, mask: u32, value: u64) -> [u64; 32];
}

/// The sanitizer runtime of the CPU backend, installed per thread so that
/// the `Checked` hooks can reach it. Implemented by the host crate.
pub trait SanitizerRuntime: Sync {
    /// A plain access.
    fn access(&self, addr: usize, size: usize, kind: AccessKind, loc: &'static Location<'static>);
    /// An atomic: `op` performs it and returns whether it wrote.
    fn atomic(
        &self,
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: &mut dyn FnMut() -> bool,
    );
    /// A fence.
    fn fence(&self, ordering: Ordering, scope: Scope, loc: &'static Location<'static>);
}

/// Everything the kernel API needs to know about the calling GPU thread.
#[derive(Clone, Copy)]
pub struct ThreadContext<'a> {
    /// `threadIdx`.
    pub thread_idx: Dim3,
    /// `blockIdx`.
    pub block_idx: Dim3,
    /// `blockDim`.
    pub block_dim: Dim3,
    /// `gridDim`.
    pub grid_dim: Dim3,
    /// The virtual SM the block runs on.
    pub smid: u32,
    /// The block's shared runtime.
    pub block: &'a dyn BlockRuntime,
    /// The sanitizer runtime, when the sanitized variant runs.
    pub sanitizer: Option<&'a dyn SanitizerRuntime>,
}

thread_local! {
    static CURRENT: Cell<Option<ThreadContext<'static>>> = const { Cell::new(None) };
}

/// Runs `f` as the GPU thread described by `ctx`: the kernel API called
/// inside `f` on this host thread sees `ctx`'s coordinates and runtimes.
/// Contexts nest (the previous one is restored afterwards, even on panic).
pub fn enter_thread<R>(ctx: ThreadContext<'_>, f: impl FnOnce() -> R) -> R {
    // SAFETY: the context is only reachable through `CURRENT` while `f`
    // runs; the guard restores the previous value before `ctx`'s borrows end,
    // so extending the lifetime to 'static is never observable.
    let ctx: ThreadContext<'static> = unsafe { std::mem::transmute(ctx) };
    struct Restore(Option<ThreadContext<'static>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(ctx))));
    f()
}

#[track_caller]
fn current() -> ThreadContext<'static> {
    CURRENT.with(|c| c.get()).unwrap_or_else(|| {
        panic!(
            "vigil: a kernel API function was called outside a kernel launch on the CPU backend; \
             launch the kernel through vigil's Context (CPU device) instead of calling it directly"
        )
    })
}

/// Calls `f` with the installed sanitizer runtime, if any.
#[inline]
pub(crate) fn with_sanitizer(f: impl FnOnce(&dyn SanitizerRuntime)) {
    if let Some(rt) = CURRENT.with(|c| c.get()).and_then(|c| c.sanitizer) {
        f(rt)
    }
}

macro_rules! coord {
    ($($name:ident => $field:ident . $c:ident),* $(,)?) => {$(
        #[inline]
        pub fn $name() -> u32 { current().$field.$c }
    )*};
}
coord! {
    thread_idx_x => thread_idx.x, block_idx_x => block_idx.x,
    block_dim_x => block_dim.x, grid_dim_x => grid_dim.x,
}

pub fn thread_idx() -> Dim3 {
    current().thread_idx
}
pub fn block_idx() -> Dim3 {
    current().block_idx
}
pub fn block_dim() -> Dim3 {
    current().block_dim
}
pub fn grid_dim() -> Dim3 {
    current().grid_dim
}
#[allow(dead_code)]
pub fn smid() -> u32 {
    current().smid
}

/// The lane of this thread within its warp: its linear index in the block mod 32.
pub fn lane_id() -> u32 {
    (linear_thread_index() % 32) as u32
}

fn linear_thread_index() -> u64 {
    let c = current();
    let (t, d) = (c.thread_idx, c.block_dim);
    t.x as u64 + d.x as u64 * (t.y as u64 + d.y as u64 * t.z as u64)
}

pub fn sync_threads() {
    current().block.sync_threads()
}

pub fn fence(ordering: Ordering, _scope: Scope) {
    match ordering {
        Ordering::Relaxed => {}
        Ordering::SeqCst => sa::fence(sa::Ordering::SeqCst),
        _ => sa::fence(sa::Ordering::AcqRel),
    }
}

/// A plain load, done as relaxed atomic loads of the widest naturally
/// aligned units so concurrent racy accesses stay defined on the host.
///
/// # Safety
/// `p` must be valid for reads and aligned.
pub unsafe fn load<T: Copy>(p: *const T) -> T {
    let mut out = std::mem::MaybeUninit::<T>::uninit();
    // SAFETY: `p` is valid for `size_of::<T>()` bytes (caller) and `out` is
    // writable for as many; both are distinct.
    unsafe {
        copy_relaxed(
            p as *const u8,
            out.as_mut_ptr() as *mut u8,
            std::mem::size_of::<T>(),
            true,
        )
    };
    // SAFETY: every byte was initialised from `p`, which held a valid `T`.
    unsafe { out.assume_init() }
}

/// A plain store; see [`load`].
///
/// # Safety
/// `p` must be valid for writes and aligned.
pub unsafe fn store<T: Copy>(p: *mut T, v: T) {
    // SAFETY: as in `load`, with the roles of the pointers swapped.
    unsafe {
        copy_relaxed(
            &v as *const T as *const u8,
            p as *mut u8,
            std::mem::size_of::<T>(),
            false,
        )
    }
}

/// Copies `n` bytes with relaxed atomics on the shared side (`src` when
/// `shared_is_src`, else `dst`), in the widest units the alignment allows.
unsafe fn copy_relaxed(src: *const u8, dst: *mut u8, n: usize, shared_is_src: bool) {
    let shared = if shared_is_src {
        src as usize
    } else {
        dst as usize
    };
    let mut i = 0;
    macro_rules! unit {
        ($a:ty, $u:ty, $w:expr) => {
            while i + $w <= n && (shared + i) % $w == 0 {
                // SAFETY: in bounds (`i + w <= n`), aligned on the shared side;
                // the private side is accessed unaligned.
                unsafe {
                    if shared_is_src {
                        let v = <$a>::from_ptr(src.add(i) as *mut $u).load(sa::Ordering::Relaxed);
                        (dst.add(i) as *mut $u).write_unaligned(v);
                    } else {
                        let v = (src.add(i) as *const $u).read_unaligned();
                        <$a>::from_ptr(dst.add(i) as *mut $u).store(v, sa::Ordering::Relaxed);
                    }
                }
                i += $w;
            }
        };
    }
    while i < n {
        let before = i;
        unit!(AtomicU64, u64, 8);
        unit!(AtomicU32, u32, 4);
        unit!(AtomicU16, u16, 2);
        unit!(AtomicU8, u8, 1);
        debug_assert!(i > before);
    }
}

pub fn dynamic_shared() -> (*mut u8, usize) {
    current().block.dynamic_shared()
}

/// This block's storage for one `shared_array!` expansion (identified by `key`).
pub fn static_shared(key: std::any::TypeId, bytes: usize, align: usize) -> *mut u8 {
    current().block.static_shared(key, bytes, align)
}

fn warp_exchange(mask: u32, v: u64) -> (u32, [u64; 32]) {
    let c = current();
    let lane = lane_id();
    (lane, c.block.warp_exchange(lane, mask, v))
}

/// The lane a shuffle reads from: `src` when it is inside the warp, else
/// the caller's own lane (PTX keeps the caller's value out of range).
fn source_lane(lane: u32, src: i64) -> usize {
    if (0..32).contains(&src) {
        src as usize
    } else {
        lane as usize
    }
}

pub fn shfl_idx(mask: u32, v: u32, src_lane: u32, _clamp: u32) -> u32 {
    let (lane, all) = warp_exchange(mask, v as u64);
    all[source_lane(lane, (src_lane & 31) as i64)] as u32
}
pub fn shfl_up(mask: u32, v: u32, delta: u32, _clamp: u32) -> u32 {
    let (lane, all) = warp_exchange(mask, v as u64);
    all[source_lane(lane, lane as i64 - delta as i64)] as u32
}
pub fn shfl_down(mask: u32, v: u32, delta: u32, _clamp: u32) -> u32 {
    let (lane, all) = warp_exchange(mask, v as u64);
    all[source_lane(lane, lane as i64 + delta as i64)] as u32
}
pub fn shfl_xor(mask: u32, v: u32, lane_mask: u32, _clamp: u32) -> u32 {
    let (lane, all) = warp_exchange(mask, v as u64);
    all[source_lane(lane, (lane ^ lane_mask) as i64)] as u32
}
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    let (_, all) = warp_exchange(mask, pred as u64);
    (0..32)
        .filter(|&l| mask & (1 << l) != 0 && all[l] != 0)
        .fold(0, |b, l| b | (1 << l))
}
pub fn vote_any(mask: u32, pred: bool) -> bool {
    vote_ballot(mask, pred) != 0
}
pub fn vote_all(mask: u32, pred: bool) -> bool {
    let (_, all) = warp_exchange(mask, pred as u64);
    (0..32).all(|l| mask & (1 << l) == 0 || all[l] != 0)
}

fn load_order(o: Ordering) -> sa::Ordering {
    if o.acquires() {
        sa::Ordering::Acquire
    } else {
        sa::Ordering::Relaxed
    }
}
fn store_order(o: Ordering) -> sa::Ordering {
    if o.releases() {
        sa::Ordering::Release
    } else {
        sa::Ordering::Relaxed
    }
}
fn rmw_order(o: Ordering) -> sa::Ordering {
    match o {
        Ordering::Relaxed => sa::Ordering::Relaxed,
        Ordering::Acquire => sa::Ordering::Acquire,
        Ordering::Release => sa::Ordering::Release,
        Ordering::AcqRel => sa::Ordering::AcqRel,
        Ordering::SeqCst => sa::Ordering::SeqCst,
    }
}
fn fail_order(o: Ordering) -> sa::Ordering {
    load_order(o)
}

macro_rules! host_atomics {
    ($t:ty, $a:ty, $bits:ty, |$x:ident| $to:expr, |$y:ident| $from:expr) => {
        impl ArchAtomic for $t {
            unsafe fn arch_load(p: *const Self, o: Ordering, _: Scope) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                let $y = unsafe { <$a>::from_ptr(p as *mut $bits) }.load(load_order(o));
                $from
            }
            unsafe fn arch_store(p: *mut Self, v: Self, o: Ordering, _: Scope) {
                let $x = v;
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { <$a>::from_ptr(p as *mut $bits) }.store($to, store_order(o))
            }
            unsafe fn arch_exchange(p: *mut Self, v: Self, o: Ordering, _: Scope) -> Self {
                let $x = v;
                // SAFETY: valid aligned memory (caller's contract).
                let $y = unsafe { <$a>::from_ptr(p as *mut $bits) }.swap($to, rmw_order(o));
                $from
            }
            unsafe fn arch_cas(p: *mut Self, cmp: Self, new: Self, o: Ordering, _: Scope) -> Self {
                let c = {
                    let $x = cmp;
                    $to
                };
                let n = {
                    let $x = new;
                    $to
                };
                // SAFETY: valid aligned memory (caller's contract).
                let a = unsafe { <$a>::from_ptr(p as *mut $bits) };
                let $y = match a.compare_exchange(c, n, rmw_order(o), fail_order(o)) {
                    Ok(v) | Err(v) => v,
                };
                $from
            }
        }
    };
}
host_atomics!(u32, AtomicU32, u32, |x| x, |y| y);
host_atomics!(i32, AtomicU32, u32, |x| x as u32, |y| y as i32);
host_atomics!(u64, AtomicU64, u64, |x| x, |y| y);
host_atomics!(i64, AtomicU64, u64, |x| x as u64, |y| y as i64);
host_atomics!(f32, AtomicU32, u32, |x| x.to_bits(), |y| f32::from_bits(y));
host_atomics!(f64, AtomicU64, u64, |x| x.to_bits(), |y| f64::from_bits(y));

/// Read-modify-write through a compare-exchange loop, for every operation
/// and type (`fetch_min` on signed values and float add need it anyway).
macro_rules! host_rmw {
    ($trait:ident :: $m:ident, $f:expr, $($t:ty),*) => {$(
        impl $trait for $t {
            unsafe fn $m(p: *mut Self, v: Self, o: Ordering, s: Scope) -> Self {
                let f: fn($t, $t) -> $t = $f;
                // SAFETY: valid aligned memory (caller's contract).
                let mut cur = unsafe { <$t as ArchAtomic>::arch_load(p, Ordering::Relaxed, s) };
                loop {
                    // SAFETY: as above.
                    let seen = unsafe { <$t as ArchAtomic>::arch_cas(p, cur, f(cur, v), o, s) };
                    if crate::atomic::sealed::BitEq::bit_eq(seen, cur) {
                        return cur;
                    }
                    cur = seen;
                }
            }
        }
    )*};
}
host_rmw!(
    ArchAdd::arch_add,
    |a, b| a.wrapping_add(b),
    u32,
    i32,
    u64,
    i64
);
host_rmw!(ArchAdd::arch_add, |a, b| a + b, f32, f64);
host_rmw!(ArchMin::arch_min, |a, b| a.min(b), u32, i32, u64, i64);
host_rmw!(ArchMax::arch_max, |a, b| a.max(b), u32, i32, u64, i64);
host_rmw!(ArchAnd::arch_and, |a, b| a & b, u32, i32, u64, i64);
host_rmw!(ArchOr::arch_or, |a, b| a | b, u32, i32, u64, i64);
host_rmw!(ArchXor::arch_xor, |a, b| a ^ b, u32, i32, u64, i64);
