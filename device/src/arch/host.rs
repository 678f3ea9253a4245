//! The host implementation of the platform layer, used by the CPU backend.
//!
//! A CPU executor runs each GPU thread of a block on a host thread (or a
//! coroutine) and installs a [`ThreadContext`] for it ([`set_current`], or
//! [`enter_thread`] around a call); the kernel API reads coordinates from it
//! and hands barriers, shared memory and warp collectives to the block's
//! [`BlockRuntime`]. Global memory is
//! host memory; plain accesses are relaxed atomics of the access's width so
//! that racy kernels stay defined behaviour on the host, and scoped atomics
//! map to `core::sync::atomic` with the same ordering.

pub use super::copy_accesses::CopyAccess;
pub use super::host_async::AsyncCopies;
use crate::atomic::sealed::{ArchAdd, ArchAnd, ArchAtomic, ArchMax, ArchMin, ArchOr, ArchXor};
use crate::index::Dim3;
use crate::sanitizer::{AtomicAccess, Checked, Sanitizer, SharedAccess};
use core::panic::Location;
use std::cell::Cell;
use std::sync::atomic::{self as sa, AtomicU16, AtomicU32, AtomicU64, AtomicU8};
use vigil_shared::{AccessKind, Ordering, Scope};

/// What a block's threads share: the barrier, shared memory and the
/// exchange behind warp collectives. Implemented by the CPU executor.
///
/// The calls that block ([`sync_threads`](BlockRuntime::sync_threads),
/// [`warp_collective`](BlockRuntime::warp_collective)) may run other GPU
/// threads on the same OS thread before they return (the CPU executor runs
/// a block's threads as coroutines and switches at these calls). They may
/// replace the OS thread's current [`ThreadContext`] meanwhile: the
/// platform layer reinstalls the caller's context when they return, so an
/// implementation need not. No `Sync` bound: a block's threads may share
/// one OS thread, and the runtime is reached only through the thread-local
/// context.
pub trait BlockRuntime {
    /// Blocks until every thread of the block that has not exited has
    /// called it (`__syncthreads`); `loc` is the call's source location
    /// (the kernel author's, through `#[track_caller]`), so that a runtime
    /// can say which barrier threads diverged at.
    fn sync_threads(&self, loc: &'static Location<'static>);
    /// This block's storage for the static shared array with identity `key`
    /// (one per `shared_array!` expansion), `bytes` long and aligned to
    /// `align`, zero-initialised on the block's first request.
    fn static_shared(&self, key: std::any::TypeId, bytes: usize, align: usize) -> *mut u8;
    /// This block's dynamic shared memory and its size in bytes.
    fn dynamic_shared(&self) -> (*mut u8, usize);
    /// A warp collective: the calling thread (lane `lane` of its warp)
    /// contributes `value`, waits until every non-exited lane of `mask` has
    /// contributed, and returns [`WarpOp::result`] for itself over the
    /// contributions.
    fn warp_collective(&self, lane: u32, mask: u32, value: u64, op: WarpOp) -> u64;
    /// The calling thread is about to read `bytes` bytes at `addr` (a plain,
    /// volatile or atomic load, or any other atomic but a store): it may be polling a flag
    /// that another thread of the block will set. A runtime that runs a
    /// block's threads cooperatively lets the others run when a thread
    /// keeps polling one address, so that spin-waits between threads of a
    /// block finish as they do under the GPU's independent thread
    /// scheduling. May run other GPU threads before it returns, like
    /// [`sync_threads`](BlockRuntime::sync_threads). `loc` is the
    /// kernel's source location of the read (the caller's
    /// `#[track_caller]` location), so that a runtime can say where a
    /// thread spins without a backtrace. Default: nothing.
    fn poll_hint(&self, addr: usize, bytes: usize, loc: &'static Location<'static>) {
        let _ = (addr, bytes, loc);
    }
    /// The block's asynchronous copies in flight (`cp.async` groups, bulk
    /// copies, copies waiting on an mbarrier), which the platform layer
    /// performs when they complete. A runtime that supports them keeps one
    /// [`AsyncCopies`] per block and calls its
    /// [`begin_block`](AsyncCopies::begin_block) before the block's first
    /// thread runs. Default: `None` (a kernel that issues one panics).
    fn async_copies(&self) -> Option<&AsyncCopies> {
        None
    }
}

/// What a warp collective computes for each lane from the lanes' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarpOp {
    /// The value of lane `src & 31` (`__shfl_sync`).
    Idx(u32),
    /// The value of lane `lane - delta`, or the caller's own below lane 0.
    Up(u32),
    /// The value of lane `lane + delta`, or the caller's own past lane 31.
    Down(u32),
    /// The value of lane `lane ^ lane_mask`, or the caller's own past lane 31.
    Xor(u32),
    /// A bit per contributing lane of the mask whose value is non-zero.
    Ballot,
    /// 1 when any contributing lane of the mask has a non-zero value.
    Any,
    /// 1 when every contributing lane of the mask has a non-zero value.
    All,
}

impl WarpOp {
    /// The result for `lane`, whose mask is `mask`, when the lanes in
    /// `contributed` gave `values` (index = lane; other entries are 0).
    /// Votes count only lanes that are in `mask` and contributed, as CUDA's
    /// `*_sync` votes count only the mask's non-exited threads.
    pub fn result(self, lane: u32, mask: u32, contributed: u32, values: &[u64; 32]) -> u64 {
        // The lane a shuffle reads: `src` inside the warp, else the caller's
        // own (PTX keeps the caller's value when the source is out of range).
        let shuffle = |src: i64| -> u64 {
            let from = if (0..32).contains(&src) {
                src as usize
            } else {
                lane as usize
            };
            values[from]
        };
        // The lanes that vote: in the mask and contributing.
        let voters = mask & contributed;
        let ballot = || {
            (0..32)
                .filter(|&l| voters & (1 << l) != 0 && values[l] != 0)
                .fold(0u32, |b, l| b | (1 << l))
        };
        match self {
            WarpOp::Idx(src) => shuffle(i64::from(src & 31)),
            WarpOp::Up(d) => shuffle(i64::from(lane) - i64::from(d)),
            WarpOp::Down(d) => shuffle(i64::from(lane) + i64::from(d)),
            WarpOp::Xor(m) => shuffle(i64::from(lane ^ m)),
            WarpOp::Ballot => u64::from(ballot()),
            WarpOp::Any => u64::from(ballot() != 0),
            WarpOp::All => u64::from(ballot() == voters),
        }
    }
}

/// The sanitizer runtime of the CPU backend, installed per GPU thread (in
/// its [`ThreadContext`]) so that the `Checked` hooks can reach it.
/// Implemented by the host crate.
///
/// The executor calls [`block_start`](SanitizerRuntime::block_start) on the
/// worker that runs a block before any of its threads runs and
/// [`block_end`](SanitizerRuntime::block_end) after all have finished (or
/// the block was abandoned after a panic). Virtual SM `smid` runs one block
/// at a time, so per-SM sanitizer state is never shared by two live blocks.
pub trait SanitizerRuntime: Sync {
    /// A block starts on virtual SM `smid` (GSan: a CTA entry bumps the SM's epoch).
    fn block_start(&self, smid: u32, block_idx: Dim3) {
        let _ = (smid, block_idx);
    }
    /// The block that ran on virtual SM `smid` is over.
    fn block_end(&self, smid: u32, block_idx: Dim3) {
        let _ = (smid, block_idx);
    }
    /// A plain access by `thread`.
    fn access(
        &self,
        thread: &ThreadContext<'_>,
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    );
    /// An atomic by `thread`: `op` performs it and returns whether it wrote.
    fn atomic(
        &self,
        thread: &ThreadContext<'_>,
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: &mut dyn FnMut() -> bool,
    );
    /// A fence by `thread`.
    fn fence(
        &self,
        thread: &ThreadContext<'_>,
        ordering: Ordering,
        scope: Scope,
        loc: &'static Location<'static>,
    );
    /// An access to block-shared memory by `thread`. Default: nothing.
    fn shared_access(
        &self,
        thread: &ThreadContext<'_>,
        access: SharedAccess,
        loc: &'static Location<'static>,
    ) {
        let _ = (thread, access, loc);
    }
    /// `issuer` issued the block's asynchronous copy number `copy` (from
    /// 1, counted per block), one of whose accesses is `access`: the copy
    /// makes it some time between now and its completion
    /// ([`copy_completed`](SanitizerRuntime::copy_completed)), ordered
    /// after what `issuer` did before. Default: nothing.
    fn copy_issued(
        &self,
        issuer: &ThreadContext<'_>,
        copy: u32,
        access: CopyAccess,
        loc: &'static Location<'static>,
    ) {
        let _ = (issuer, copy, access, loc);
    }
    /// Copy `copy`, issued by `issuer` at `loc`, has completed and
    /// `waiter` (the issuer, or a thread of its block waiting on the
    /// copy's mbarrier) is the first to see it; `access` is one of its
    /// accesses, as [`copy_issued`](SanitizerRuntime::copy_issued) gave
    /// it. Default: the access as `issuer`'s, made now.
    fn copy_completed(
        &self,
        waiter: &ThreadContext<'_>,
        issuer: &ThreadContext<'_>,
        copy: u32,
        access: CopyAccess,
        loc: &'static Location<'static>,
    ) {
        let _ = (waiter, copy);
        match access {
            CopyAccess::Global { addr, size, kind } => self.access(issuer, addr, size, kind, loc),
            CopyAccess::Shared(shared) => self.shared_access(issuer, shared, loc),
        }
    }
    /// `thread` waited for the grids its launch depends on
    /// (`griddepcontrol.wait` in a programmatic dependent launch): its
    /// block's later accesses are ordered after them. Default: nothing.
    fn grid_dependency_waited(&self, thread: &ThreadContext<'_>) {
        let _ = thread;
    }
    /// `thread` acquired everything its block released so far, in a way
    /// not followed word by word (an mbarrier phase completing): for the
    /// same-block check, every earlier access of the block is ordered
    /// before the thread's later ones. Default: nothing.
    fn acquire_everything(&self, thread: &ThreadContext<'_>) {
        let _ = thread;
    }
    /// `thread` arrives at `sync_threads` at `loc` (before it waits).
    /// Default: nothing.
    fn barrier(&self, thread: &ThreadContext<'_>, loc: &'static Location<'static>) {
        let _ = (thread, loc);
    }
    /// A warp collective of warp `warp` of the block on virtual SM `smid`
    /// released `lanes`, with `contributed` the lanes whose values it
    /// combined: each released lane is now ordered after everything the
    /// contributing lanes did before they joined. Called by the executor,
    /// which alone knows when a mask's lanes have all arrived. Default:
    /// nothing.
    fn warp_joined(&self, smid: u32, warp: u32, lanes: u32, contributed: u32) {
        let _ = (smid, warp, lanes, contributed);
    }
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
    /// Where the launch's module put its device globals: (the address of a
    /// global's value in its host static, the address of the loading
    /// context's copy).
    pub globals: &'a [(usize, usize)],
}

impl ThreadContext<'_> {
    /// The thread's linear index in its block (x fastest).
    #[inline]
    pub fn linear_thread_index(&self) -> u32 {
        let (t, d) = (self.thread_idx, self.block_dim);
        t.x + d.x * (t.y + d.y * t.z)
    }
}

thread_local! {
    /// The GPU thread the OS thread is running, as a pointer so that
    /// switching between GPU threads costs one store.
    static CURRENT: Cell<*const ThreadContext<'static>> = const { Cell::new(std::ptr::null()) };
}

/// Makes `ctx` the OS thread's current GPU thread (`None`: no GPU thread):
/// the kernel API called afterwards on this OS thread reads it. Cheap (one
/// thread-local store), for executors that switch GPU threads on one OS
/// thread.
///
/// # Safety
/// `ctx`, and everything it borrows, must stay valid until it is replaced
/// by another call or [`enter_thread`] restores a previous one, and no
/// kernel API may be called on this OS thread after it dies.
#[inline]
pub unsafe fn set_current(ctx: Option<&ThreadContext<'_>>) {
    let p = ctx.map_or(std::ptr::null(), |c| c as *const ThreadContext<'_>);
    CURRENT.with(|c| c.set(p.cast()));
}

/// Runs `f` as the GPU thread described by `ctx`: the kernel API called
/// inside `f` on this host thread sees `ctx`'s coordinates and runtimes.
/// Contexts nest (the previous one is restored afterwards, even on panic).
pub fn enter_thread<R>(ctx: ThreadContext<'_>, f: impl FnOnce() -> R) -> R {
    struct Restore(*const ThreadContext<'static>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.get()));
    // SAFETY: `ctx` lives on this frame until `f` returns or unwinds, and
    // the guard restores the previous context before the frame goes away.
    unsafe { set_current(Some(&ctx)) };
    f()
}

/// Calls `f` with the current GPU thread's context.
#[inline]
#[track_caller]
pub(crate) fn with_current<R>(f: impl FnOnce(&ThreadContext<'_>) -> R) -> R {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        outside_kernel()
    }
    // SAFETY: a non-null current context is valid while installed
    // (`set_current`'s contract, or `enter_thread`'s frame).
    f(unsafe { &*p })
}

/// Calls a blocking block-runtime operation for the current GPU thread and
/// reinstalls its context afterwards (the runtime may have run other GPU
/// threads on this OS thread meanwhile).
#[inline]
fn blocking<R>(f: impl FnOnce(&ThreadContext<'_>) -> R) -> R {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        outside_kernel()
    }
    // SAFETY: as in `with_current`; the context outlives the call even when
    // other GPU threads run meanwhile (it belongs to this GPU thread).
    let r = f(unsafe { &*p });
    CURRENT.with(|c| c.set(p));
    r
}

/// Tells the block runtime that the current GPU thread reads `bytes` bytes
/// at `addr`, from the kernel's source location `loc` (see
/// [`BlockRuntime::poll_hint`]): a point where the block's other threads
/// may run. The kernel API calls it before every read that a spin-wait
/// may repeat (plain and volatile loads, every atomic but a store), in
/// plain and sanitized entries alike, and outside the sanitizer's hooks
/// (which may hold a shadow lock that another GPU thread of this OS
/// thread would wait for).
#[inline]
pub(crate) fn poll(addr: usize, bytes: usize, loc: &'static Location<'static>) {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        return;
    }
    // SAFETY: as in `with_current`.
    let ctx = unsafe { &*p };
    ctx.block.poll_hint(addr, bytes, loc);
    CURRENT.with(|c| c.set(p));
}

#[cold]
#[track_caller]
fn outside_kernel() -> ! {
    panic!(
        "vigil: a kernel API function was called outside a kernel launch on the CPU backend; \
         launch the kernel through vigil's Context (CPU device) instead of calling it directly"
    )
}

/// Calls `f` with the installed sanitizer runtime and the calling thread's
/// context, if a sanitizer is installed.
#[inline]
pub(crate) fn with_sanitizer(f: impl FnOnce(&dyn SanitizerRuntime, &ThreadContext<'_>)) {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        return;
    }
    // SAFETY: as in `with_current`.
    let ctx = unsafe { &*p };
    if let Some(rt) = ctx.sanitizer {
        f(rt, ctx)
    }
}

macro_rules! coord {
    ($($name:ident => $field:ident . $c:ident),* $(,)?) => {$(
        #[inline]
        pub fn $name() -> u32 { with_current(|c| c.$field.$c) }
    )*};
}
coord! {
    thread_idx_x => thread_idx.x, block_idx_x => block_idx.x,
    block_dim_x => block_dim.x, grid_dim_x => grid_dim.x,
    thread_idx_y => thread_idx.y, block_idx_y => block_idx.y,
    block_dim_y => block_dim.y,
}

pub fn thread_idx() -> Dim3 {
    with_current(|c| c.thread_idx)
}
pub fn block_idx() -> Dim3 {
    with_current(|c| c.block_idx)
}
pub fn block_dim() -> Dim3 {
    with_current(|c| c.block_dim)
}
pub fn grid_dim() -> Dim3 {
    with_current(|c| c.grid_dim)
}
/// Waits a little in a spin loop (the GPU's `nanosleep`): gives the core
/// up, since what the loop waits for is often another device's worker
/// (a group of simulated devices), which a machine with fewer cores than
/// spinning workers would otherwise starve.
pub fn backoff() {
    std::thread::yield_now()
}

/// The two `u64`s at `p`, each read relaxed (the GPU's paired load).
///
/// # Safety
/// `p` must be 16-aligned, valid for reads of 16 bytes, and accessed only
/// atomically.
pub unsafe fn load_relaxed_pair(p: *const u64) -> [u64; 2] {
    use vigil_shared::atomic::{AtomicFamily, CoreAtomics};
    // SAFETY: forwarded from the caller; `AtomicU64` has `u64`'s layout.
    unsafe { CoreAtomics::load_pair_relaxed(p as *const std::sync::atomic::AtomicU64) }
}

pub fn smid() -> u32 {
    with_current(|c| c.smid)
}

/// Nanoseconds of the host's monotonic clock since the first call in
/// this process (the GPU's `%globaltimer` stands for a device clock).
pub fn global_timer() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let ns = EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// The lane of this thread within its warp: its linear index in the block mod 32.
pub fn lane_id() -> u32 {
    with_current(|c| c.linear_thread_index() % 32)
}

/// `__syncthreads` at the kernel's `loc`: the sanitizer (when one is
/// installed: the host runs the sanitized variant then) sees the arrival
/// first.
pub fn sync_threads_at(loc: &'static Location<'static>) {
    Checked::barrier(loc);
    blocking(|c| c.block.sync_threads(loc))
}

/// A shared-memory access (`access` describes it) at the caller's
/// location (`#[track_caller]`: the kernel's, through the shared array's
/// accessor), for the sanitizer when one is installed.
///
/// The array's sanitizer type `S` plays no part: the host runs the
/// sanitized variant exactly when a runtime is installed.
#[inline]
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx`, which uses `S`
pub fn shared_access<S>(access: impl FnOnce() -> SharedAccess) {
    Checked::shared_access(access(), Location::caller())
}

/// Where the running launch's module put the device global whose value
/// is at `p` in its host static (each module load has its own copy, in
/// its context's memory); `p` itself for a module that has none.
#[inline]
pub fn relocated<T>(p: *mut T) -> *mut T {
    with_current(|c| {
        c.globals
            .iter()
            .find(|(at, _)| *at == p as usize)
            .map_or(p, |&(_, to)| to as *mut T)
    })
}

/// `p` itself: the host has one address space.
#[inline(always)]
pub fn assume_shared<T>(p: *mut T) -> *mut T {
    p
}

/// A shared array or dynamic view declared without a `.shared` shadow:
/// nothing on the host (the CPU backend's shadow is keyed by address and
/// covers every shared byte).
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx`, which uses `S`
pub fn shared_declared<S>(_access: impl FnOnce() -> SharedAccess) {}

/// `sync_threads` in a kernel checked by `S`: as [`sync_threads_at`] (the
/// installed runtime, not `S`, decides what the host checks).
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx`, which uses `S`
pub fn sync_threads_for<S>(loc: &'static Location<'static>) {
    sync_threads_at(loc)
}

/// A lane about to join a collective: nothing (the executor tells the
/// runtime which lanes each collective released).
#[inline(always)]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx`, which uses `S`
pub fn warp_joining<S>(_mask: u32) {}

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
pub(crate) unsafe fn copy_relaxed(src: *const u8, dst: *mut u8, n: usize, shared_is_src: bool) {
    let shared = if shared_is_src {
        src as usize
    } else {
        dst as usize
    };
    // Whether a `w`-byte unit at offset `i` is in bounds and aligned on the shared side.
    let fits = |i: usize, w: usize| i + w <= n && (shared + i).is_multiple_of(w);
    let mut i = 0;
    macro_rules! unit {
        ($a:ty, $u:ty, $w:expr) => {
            while fits(i, $w) {
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
    with_current(|c| c.block.dynamic_shared())
}

/// This block's storage for one `shared_array!` expansion (identified by `key`).
pub fn static_shared(key: std::any::TypeId, bytes: usize, align: usize) -> *mut u8 {
    with_current(|c| c.block.static_shared(key, bytes, align))
}

fn warp_collective(mask: u32, v: u64, op: WarpOp) -> u64 {
    blocking(|c| {
        c.block
            .warp_collective(c.linear_thread_index() % 32, mask, v, op)
    })
}

pub fn shfl_idx(mask: u32, v: u32, src_lane: u32, _clamp: u32) -> u32 {
    warp_collective(mask, v.into(), WarpOp::Idx(src_lane)) as u32
}
pub fn shfl_up(mask: u32, v: u32, delta: u32, _clamp: u32) -> u32 {
    warp_collective(mask, v.into(), WarpOp::Up(delta)) as u32
}
pub fn shfl_down(mask: u32, v: u32, delta: u32, _clamp: u32) -> u32 {
    warp_collective(mask, v.into(), WarpOp::Down(delta)) as u32
}
pub fn shfl_xor(mask: u32, v: u32, lane_mask: u32, _clamp: u32) -> u32 {
    warp_collective(mask, v.into(), WarpOp::Xor(lane_mask)) as u32
}
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    warp_collective(mask, pred.into(), WarpOp::Ballot) as u32
}
pub fn vote_any(mask: u32, pred: bool) -> bool {
    warp_collective(mask, pred.into(), WarpOp::Any) != 0
}
pub fn vote_all(mask: u32, pred: bool) -> bool {
    warp_collective(mask, pred.into(), WarpOp::All) != 0
}

/// `__syncwarp(mask)`: a collective of the lanes of `mask` with no value
/// (the executor's warp release orders them, for the sanitizer too).
pub fn sync_warp(mask: u32) {
    warp_collective(mask, 0, WarpOp::Ballot);
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

/// Atomic load and compare-exchange, for the read-modify-write loops.
trait RawAtomic: Copy {
    /// # Safety
    /// `p` must be valid, aligned memory.
    unsafe fn raw_load(p: *const Self, o: Ordering) -> Self;
    /// Returns the value found.
    ///
    /// # Safety
    /// `p` must be valid, aligned memory.
    unsafe fn raw_cas(p: *mut Self, cmp: Self, new: Self, o: Ordering) -> Self;
}

macro_rules! host_atomics {
    ($t:ty, $a:ty, $bits:ty, |$x:ident| $to:expr, |$y:ident| $from:expr) => {
        impl RawAtomic for $t {
            unsafe fn raw_load(p: *const Self, o: Ordering) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                let $y = unsafe { <$a>::from_ptr(p as *mut $bits) }.load(load_order(o));
                $from
            }
            unsafe fn raw_cas(p: *mut Self, cmp: Self, new: Self, o: Ordering) -> Self {
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
        impl ArchAtomic for $t {
            unsafe fn arch_load(p: *const Self, o: Ordering, _: Scope) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { <$t as RawAtomic>::raw_load(p, o) }
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
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { <$t as RawAtomic>::raw_cas(p, cmp, new, o) }
            }
            // On the host, shared memory is ordinary memory.
            unsafe fn arch_shared_exchange(p: *mut Self, v: Self) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { Self::arch_exchange(p, v, Ordering::Relaxed, Scope::Block) }
            }
            unsafe fn arch_shared_cas(p: *mut Self, cmp: Self, new: Self) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { Self::arch_cas(p, cmp, new, Ordering::Relaxed, Scope::Block) }
            }
            // A volatile access is a relaxed atomic (the PTX memory model's
            // `ld.volatile`/`st.volatile` are relaxed at system scope).
            unsafe fn arch_load_volatile(p: *const Self) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { <$t as RawAtomic>::raw_load(p, Ordering::Relaxed) }
            }
            unsafe fn arch_store_volatile(p: *mut Self, v: Self) {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { Self::arch_store(p, v, Ordering::Relaxed, Scope::System) }
            }
            unsafe fn arch_shared_load_volatile(p: *const Self) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { Self::arch_load_volatile(p) }
            }
            unsafe fn arch_shared_store_volatile(p: *mut Self, v: Self) {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { Self::arch_store_volatile(p, v) }
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
/// and type (`fetch_min` on signed values and float add need it anyway);
/// on shared memory, which on the host is ordinary memory, the same
/// relaxed at block scope.
macro_rules! host_rmw {
    ($trait:ident :: $m:ident / $shared:ident, $f:expr, $($t:ty),*) => {$(
        impl $trait for $t {
            unsafe fn $m(p: *mut Self, v: Self, o: Ordering, _: Scope) -> Self {
                let f: fn($t, $t) -> $t = $f;
                // SAFETY: valid aligned memory (caller's contract).
                let mut cur = unsafe { <$t as RawAtomic>::raw_load(p, Ordering::Relaxed) };
                loop {
                    // SAFETY: as above.
                    let seen = unsafe { <$t as RawAtomic>::raw_cas(p, cur, f(cur, v), o) };
                    if crate::atomic::sealed::BitEq::bit_eq(seen, cur) {
                        return cur;
                    }
                    cur = seen;
                }
            }
            unsafe fn $shared(p: *mut Self, v: Self) -> Self {
                // SAFETY: valid aligned memory (caller's contract).
                unsafe { Self::$m(p, v, Ordering::Relaxed, Scope::Block) }
            }
        }
    )*};
}
host_rmw!(
    ArchAdd::arch_add / arch_shared_add,
    |a, b| a.wrapping_add(b),
    u32,
    i32,
    u64,
    i64
);
host_rmw!(ArchAdd::arch_add / arch_shared_add, |a, b| a + b, f32, f64);
host_rmw!(
    ArchMin::arch_min / arch_shared_min,
    |a, b| a.min(b),
    u32,
    i32,
    u64,
    i64
);
host_rmw!(
    ArchMax::arch_max / arch_shared_max,
    |a, b| a.max(b),
    u32,
    i32,
    u64,
    i64
);
host_rmw!(
    ArchAnd::arch_and / arch_shared_and,
    |a, b| a & b,
    u32,
    i32,
    u64,
    i64
);
host_rmw!(
    ArchOr::arch_or / arch_shared_or,
    |a, b| a | b,
    u32,
    i32,
    u64,
    i64
);
host_rmw!(
    ArchXor::arch_xor / arch_shared_xor,
    |a, b| a ^ b,
    u32,
    i32,
    u64,
    i64
);

/// The host has no PTX to mark (`ptx::no_runtime_checks_marker`).
#[inline(always)]
pub fn no_runtime_checks_marker() {}

#[cfg(test)]
mod tests {
    use super::WarpOp;

    /// Lane `l` contributes `l + 10`; lanes outside `contributed` gave nothing.
    fn values(contributed: u32) -> [u64; 32] {
        let mut v = [0u64; 32];
        for (l, x) in v.iter_mut().enumerate() {
            if contributed & (1 << l) != 0 {
                *x = l as u64 + 10;
            }
        }
        v
    }

    #[test]
    fn shuffles_read_the_source_lane_or_keep_their_own() {
        let all = values(u32::MAX);
        let r = |op: WarpOp, lane: u32| op.result(lane, u32::MAX, u32::MAX, &all);
        assert_eq!(r(WarpOp::Idx(7), 3), 17);
        assert_eq!(r(WarpOp::Idx(39), 3), 17, "source lane taken mod 32");
        assert_eq!(r(WarpOp::Up(2), 5), 13);
        assert_eq!(r(WarpOp::Up(2), 1), 11, "below lane 0: own value");
        assert_eq!(r(WarpOp::Down(4), 27), 41);
        assert_eq!(r(WarpOp::Down(4), 28), 38, "past lane 31: own value");
        assert_eq!(r(WarpOp::Xor(1), 6), 17);
        assert_eq!(r(WarpOp::Xor(32), 6), 16, "xor out of the warp: own value");
    }

    #[test]
    fn votes_count_contributing_lanes_of_the_mask_only() {
        // Lanes 0..8 contributed; lane l votes true when l is odd.
        let contributed = 0xff;
        let mut v = [0u64; 32];
        for (l, x) in v.iter_mut().enumerate().take(8) {
            *x = (l % 2) as u64;
        }
        let vote = |op: WarpOp, mask: u32| op.result(0, mask, contributed, &v);
        assert_eq!(vote(WarpOp::Ballot, u32::MAX), 0xaa);
        assert_eq!(vote(WarpOp::Ballot, 0x0f), 0x0a);
        assert_eq!(vote(WarpOp::Any, 0x55), 0);
        assert_eq!(vote(WarpOp::Any, 0x03), 1);
        assert_eq!(vote(WarpOp::All, 0xaa), 1);
        assert_eq!(
            vote(WarpOp::All, 0xaaaa_aaaa),
            1,
            "absent lanes do not vote"
        );
        assert_eq!(vote(WarpOp::All, 0x03), 0);
    }
}
