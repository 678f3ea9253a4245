//! The CPU backend's model of asynchronous copies and mbarriers.
//!
//! # When a copy happens
//!
//! The PTX memory model lets an asynchronous copy read its source and
//! write its destination at any time between its issue and the
//! completion the kernel waits for. The CPU backend performs both at the
//! latest point: nothing moves at the issue; a `cp.async` group, a bulk
//! group and a thread's remaining copies move when the issuing thread
//! waits for them (or returns), and a copy that completes on an mbarrier
//! moves when a thread waits on the barrier's phase after its last
//! arrival. A kernel that reads a destination or overwrites a source too
//! early therefore sees a value the GPU may also show it (the old one),
//! rather than the one the copy happens to deliver first; and no staging
//! buffer is needed. Global memory is read and written with relaxed
//! atomics, as every global access on the host is.
//!
//! # mbarriers
//!
//! An mbarrier's 8 bytes of shared memory hold its pending arrivals, its
//! expected arrivals, its transaction count and its phase parity
//! ([`BarrierState`]). A phase completes when its pending arrivals and
//! its transaction count are both zero: at the last arrival, or, when
//! copies still owe their bytes, at a wait that performs them. A wait on
//! a phase that never completes spins on the barrier's word, which the
//! executor's livelock detector sees, so it ends the launch instead of
//! hanging.
//!
//! The sanitizer (when one is installed) hears of each copy's accesses
//! (`arch::copy_accesses`) twice: at its issue, as the issuing thread's,
//! in flight from then on; and when it is performed, as completed by the
//! thread that performs it (the issuer at a group wait or its return, a
//! waiter at an mbarrier phase).

use super::copy_accesses::{copy_accesses, Direction, GlobalSide};
use super::host::{copy_relaxed, poll, with_current, CopyAccess, SanitizerRuntime, ThreadContext};
use crate::index::Dim3;
use crate::sanitizer::SharedAccess;
use core::panic::Location;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering as MemOrder};
use vigil_shared::tensor_map::{TensorMapBytes, TiledMap, MAX_RANK};

/// A copy issued and not performed yet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingCopy {
    /// Its number in its block, from 1 (the sanitizer's name for it).
    pub(crate) id: u32,
    /// Which way it moves data.
    pub(crate) direction: Direction,
    /// Its shared side: `size` bytes at `addr`, in its array.
    pub(crate) shared: SharedAccess,
    /// Its global side.
    pub(crate) global: GlobalSide,
    /// `threadIdx` of the thread that issued it.
    pub(crate) issuer: Dim3,
    /// Where it was issued.
    pub(crate) loc: &'static Location<'static>,
    /// A store whose read of shared memory completed
    /// (`cp.async.bulk.wait_group.read`): its data has moved, its write
    /// of global memory is still in flight for the sanitizer.
    pub(crate) source_read: bool,
}

/// Copies of one kind that a thread commits into groups and waits for
/// by group (`cp.async`, or bulk stores).
#[derive(Default)]
struct GroupQueue {
    /// Issued since the last commit.
    open: Vec<PendingCopy>,
    /// Committed groups, oldest first.
    groups: VecDeque<Vec<PendingCopy>>,
}

impl GroupQueue {
    /// Closes the open copies into a group (an empty one too).
    fn commit(&mut self) {
        let group = std::mem::take(&mut self.open);
        self.groups.push_back(group);
    }

    /// Takes every group but the newest `n`, oldest first.
    fn older_than(&mut self, n: usize) -> Vec<PendingCopy> {
        let older = self.groups.len().saturating_sub(n);
        self.groups.drain(..older).flatten().collect()
    }

    /// Every group but the newest `n`, oldest first, left in the queue.
    fn older_than_mut(&mut self, n: usize) -> impl Iterator<Item = &mut PendingCopy> {
        let older = self.groups.len().saturating_sub(n);
        self.groups.range_mut(..older).flatten()
    }

    /// Takes everything, committed groups first.
    fn all(&mut self) -> impl Iterator<Item = PendingCopy> {
        let q = std::mem::take(self);
        q.groups.into_iter().flatten().chain(q.open)
    }

    fn is_empty(&self) -> bool {
        self.open.is_empty() && self.groups.is_empty()
    }
}

/// One thread's copies in flight.
#[derive(Default)]
struct ThreadCopies {
    /// `cp.async` copies.
    cp_async: GroupQueue,
    /// Bulk and tensor stores.
    bulk: GroupQueue,
}

/// Which of a thread's queues an operation works on.
type Queue = fn(&mut ThreadCopies) -> &mut GroupQueue;

fn cp_async_queue(t: &mut ThreadCopies) -> &mut GroupQueue {
    &mut t.cp_async
}

fn bulk_queue(t: &mut ThreadCopies) -> &mut GroupQueue {
    &mut t.bulk
}

/// A block's asynchronous copies in flight: each thread's groups and the
/// copies that complete on an mbarrier. The executor keeps one per
/// worker (its blocks run one at a time, their threads on the worker's OS
/// thread) and calls [`AsyncCopies::begin_block`] before each block.
#[derive(Default)]
pub struct AsyncCopies {
    /// By linear thread index.
    threads: RefCell<Vec<ThreadCopies>>,
    /// Copies completing on an mbarrier, with its address, in issue order.
    on_barriers: RefCell<Vec<(usize, PendingCopy)>>,
    /// Copies the block issued.
    issued: Cell<u32>,
}

impl std::fmt::Debug for AsyncCopies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncCopies")
            .field("on_barriers", &self.on_barriers.borrow().len())
            .finish_non_exhaustive()
    }
}

impl AsyncCopies {
    /// Forgets the previous block's copies (a copy still in flight when
    /// its block ended wrote shared memory nobody reads any more).
    pub fn begin_block(&self) {
        for t in self.threads.borrow_mut().iter_mut() {
            *t = ThreadCopies::default();
        }
        self.on_barriers.borrow_mut().clear();
        self.issued.set(0);
    }

    /// The number of the block's next copy.
    fn next_id(&self) -> u32 {
        let id = self.issued.get().wrapping_add(1).max(1);
        self.issued.set(id);
        id
    }

    /// Runs `f` on thread `t`'s copies.
    fn thread<R>(&self, t: u32, f: impl FnOnce(&mut ThreadCopies) -> R) -> R {
        let mut threads = self.threads.borrow_mut();
        let t = t as usize;
        if threads.len() <= t {
            threads.resize_with(t + 1, ThreadCopies::default);
        }
        f(&mut threads[t])
    }

    /// Takes the copies completing on the mbarrier at `bar`.
    fn take_on_barrier(&self, bar: usize) -> Vec<PendingCopy> {
        let mut all = self.on_barriers.borrow_mut();
        let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(b, _)| *b == bar);
        *all = rest;
        mine.into_iter().map(|(_, c)| c).collect()
    }
}

/// Calls `f` with the calling thread's context and its block's copies.
#[track_caller]
fn with_copies<R>(f: impl FnOnce(&ThreadContext<'_>, &AsyncCopies) -> R) -> R {
    with_current(|ctx| {
        let copies = ctx.block.async_copies().unwrap_or_else(|| {
            panic!("vigil: this CPU block runtime does not run asynchronous copies")
        });
        f(ctx, copies)
    })
}

/// Calls `each` with every access of `copy` (its source, then its
/// destination), when a sanitizer is installed.
fn tell_sanitizer(
    ctx: &ThreadContext<'_>,
    copy: &PendingCopy,
    each: impl Fn(&dyn SanitizerRuntime, CopyAccess),
) {
    if let Some(rt) = ctx.sanitizer {
        copy_accesses(copy.direction, &copy.global, copy.shared, |a| each(rt, a));
    }
}

/// Which of a copy's accesses complete.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sides {
    /// Both.
    Both,
    /// Its shared side (a store's read, at `.read`).
    Shared,
    /// Its global side (a store whose read completed earlier).
    Global,
}

impl Sides {
    fn covers(self, a: &CopyAccess) -> bool {
        matches!(
            (self, a),
            (Sides::Both, _)
                | (Sides::Shared, CopyAccess::Shared(_))
                | (Sides::Global, CopyAccess::Global { .. })
        )
    }
}

/// Tells the sanitizer (if one is installed) that the calling thread
/// (`ctx`) saw `sides` of `copy` complete.
fn tell_completed(ctx: &ThreadContext<'_>, copy: &PendingCopy, sides: Sides) {
    let issuer = ThreadContext {
        thread_idx: copy.issuer,
        ..*ctx
    };
    tell_sanitizer(ctx, copy, |rt, a| {
        if sides.covers(&a) {
            rt.copy_completed(ctx, &issuer, copy.id, a, copy.loc)
        }
    });
}

/// Tells the sanitizer that the calling thread (`ctx`) issued `copy`.
fn announce(ctx: &ThreadContext<'_>, copy: &PendingCopy) {
    tell_sanitizer(ctx, copy, |rt, a| rt.copy_issued(ctx, copy.id, a, copy.loc));
}

/// Performs `copy` now, on behalf of the thread that issued it, and tells
/// the sanitizer (if one is installed) that the calling thread saw it
/// complete. `ctx` is the calling thread's context (the issuer's, or a
/// waiter's of the same block). A store whose read completed at a
/// `.read` wait moved its data then: its write completes now.
fn perform(ctx: &ThreadContext<'_>, copy: &PendingCopy) {
    if copy.source_read {
        return tell_completed(ctx, copy, Sides::Global);
    }
    move_data(copy);
    tell_completed(ctx, copy, Sides::Both);
}

/// Moves `copy`'s data.
fn move_data(copy: &PendingCopy) {
    let shared = copy.shared.addr as *mut u8;
    match copy.global {
        GlobalSide::Linear { addr, bytes } => {
            // SAFETY: the issuing call checked both ranges: `bytes` bytes of
            // global memory at `addr` the kernel may access, and the shared
            // range inside its array of the running block.
            unsafe {
                match copy.direction {
                    Direction::ToShared => {
                        copy_relaxed(addr as *const u8, shared, bytes, true);
                        shared.add(bytes).write_bytes(0, copy.shared.size - bytes);
                    }
                    Direction::ToGlobal => copy_relaxed(shared, addr as *mut u8, bytes, false),
                }
            }
        }
        GlobalSide::Tensor { map, coords } => {
            let eb = map.elem_bytes as usize;
            map.for_each_row(coords, |row| {
                for e in 0..map.box_dims[0] as usize {
                    let at = map.swizzle.apply(row.shared_offset + e * eb);
                    let inside = (row.first..row.end).contains(&e);
                    let global = (row.global as usize).wrapping_add(e * eb);
                    // SAFETY: the box lies inside the shared range (checked
                    // at the issue); an element inside the tensor is memory
                    // the map was built over, valid for the launch.
                    unsafe {
                        match (copy.direction, inside) {
                            (Direction::ToShared, true) => {
                                copy_relaxed(global as *const u8, shared.add(at), eb, true)
                            }
                            (Direction::ToShared, false) => shared.add(at).write_bytes(0, eb),
                            (Direction::ToGlobal, true) => {
                                copy_relaxed(shared.add(at), global as *mut u8, eb, false)
                            }
                            (Direction::ToGlobal, false) => {}
                        }
                    }
                }
            });
        }
    }
}

/// Performs `copies` in order.
fn perform_all(ctx: &ThreadContext<'_>, copies: &[PendingCopy]) {
    for c in copies {
        perform(ctx, c);
    }
}

/// Panics with `what` at the kernel's line unless `addr` is a multiple
/// of `align`.
#[track_caller]
fn check_aligned(addr: usize, align: usize, what: &str) {
    assert!(
        addr.is_multiple_of(align),
        "vigil: {what} address {addr:#x} is not {align}-byte aligned"
    );
}

/// A new copy by the calling thread, of its block's `copies`, issued at
/// `loc`: numbered, and announced to the sanitizer.
fn pending(
    ctx: &ThreadContext<'_>,
    copies: &AsyncCopies,
    direction: Direction,
    shared: SharedAccess,
    global: GlobalSide,
    loc: &'static Location<'static>,
) -> PendingCopy {
    let copy = PendingCopy {
        id: copies.next_id(),
        direction,
        shared,
        global,
        issuer: ctx.thread_idx,
        loc,
        source_read: false,
    };
    announce(ctx, &copy);
    copy
}

/// `cp.async` of `BYTES` (`shared.size`) bytes from `global` into `shared`.
///
/// # Safety
/// `shared` is inside its array of the running block; `global` valid for
/// `BYTES` reads for the launch.
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx_async`
pub(crate) unsafe fn cp_async<S, const BYTES: usize>(shared: SharedAccess, global: usize) {
    // SAFETY: forwarded.
    unsafe { cp_async_zfill::<S, BYTES>(shared, global, BYTES) }
}

/// [`cp_async`] reading only the first `global_bytes` bytes (the rest of
/// `shared` is zero-filled).
///
/// # Safety
/// As [`cp_async`], with `global` valid for `global_bytes` reads.
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx_async`
pub(crate) unsafe fn cp_async_zfill<S, const BYTES: usize>(
    shared: SharedAccess,
    global: usize,
    global_bytes: usize,
) {
    check_aligned(shared.addr, BYTES, "cp.async shared");
    check_aligned(global, BYTES, "cp.async global");
    let side = GlobalSide::Linear {
        addr: global,
        bytes: global_bytes,
    };
    issue(cp_async_queue, Direction::ToShared, shared, side)
}

/// A copy by the calling thread into its queue `queue`'s open group.
#[track_caller]
fn issue(queue: Queue, direction: Direction, shared: SharedAccess, global: GlobalSide) {
    let loc = Location::caller();
    with_copies(|ctx, copies| {
        let c = pending(ctx, copies, direction, shared, global, loc);
        copies.thread(ctx.linear_thread_index(), |t| queue(t).open.push(c));
    })
}

/// Commits the calling thread's open copies of `queue`.
#[track_caller]
fn commit(queue: Queue) {
    with_copies(|ctx, copies| copies.thread(ctx.linear_thread_index(), |t| queue(t).commit()))
}

/// Performs every group of the calling thread's `queue` but the newest `n`.
#[track_caller]
fn wait_for(queue: Queue, n: usize) {
    with_copies(|ctx, copies| {
        let done = copies.thread(ctx.linear_thread_index(), |t| queue(t).older_than(n));
        perform_all(ctx, &done);
    })
}

/// `cp.async.commit_group`.
#[track_caller]
pub(crate) fn commit_group() {
    commit(cp_async_queue)
}

/// `cp.async.wait_group N`: performs every group but the newest `N`.
#[track_caller]
pub(crate) fn wait_group<const N: u32>() {
    wait_for(cp_async_queue, N as usize)
}

/// `cp.async.wait_all`: commits the open copies and performs them all.
#[track_caller]
pub(crate) fn wait_all() {
    commit(cp_async_queue);
    wait_for(cp_async_queue, 0)
}

/// `cp.async.bulk` (or a tensor store) into the calling thread's open
/// bulk group.
#[track_caller]
fn bulk_store(shared: SharedAccess, global: GlobalSide) {
    issue(bulk_queue, Direction::ToGlobal, shared, global)
}

/// `cp.async.bulk.global.shared::cta.bulk_group` of `shared` to `global`.
///
/// # Safety
/// `shared` is inside its array of the running block; `global` valid for
/// `shared.size` writes for the launch.
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx_async`
pub(crate) unsafe fn bulk_to_global<S>(shared: SharedAccess, global: usize) {
    check_bulk(shared, global);
    bulk_store(
        shared,
        GlobalSide::Linear {
            addr: global,
            bytes: shared.size,
        },
    )
}

/// `cp.async.bulk.commit_group`.
#[track_caller]
pub(crate) fn bulk_commit_group() {
    commit(bulk_queue)
}

/// `cp.async.bulk.wait_group N`: performs every bulk group but the
/// newest `N`.
#[track_caller]
pub(crate) fn bulk_wait_group<const N: u32>() {
    wait_for(bulk_queue, N as usize)
}

/// `cp.async.bulk.wait_group.read N`: every bulk group but the newest
/// `N` moves its data (a copy may finish its writes as soon as its
/// reads) and completes its reads of shared memory; its writes of global
/// memory stay in flight for the sanitizer until a wait without `.read`.
#[track_caller]
pub(crate) fn bulk_wait_group_read<const N: u32>() {
    with_copies(|ctx, copies| {
        copies.thread(ctx.linear_thread_index(), |t| {
            for c in t.bulk.older_than_mut(N as usize) {
                if !c.source_read {
                    move_data(c);
                    tell_completed(ctx, c, Sides::Shared);
                    c.source_read = true;
                }
            }
        })
    })
}

/// The calling thread's kernel body returned: its copies still in flight
/// complete now (the CPU entry `Kernel::run_host` calls this).
pub fn thread_returned() {
    with_current(|ctx| {
        let Some(copies) = ctx.block.async_copies() else {
            return;
        };
        let rest: Vec<PendingCopy> = copies.thread(ctx.linear_thread_index(), |t| {
            if t.cp_async.is_empty() && t.bulk.is_empty() {
                return Vec::new();
            }
            t.cp_async.all().chain(t.bulk.all()).collect()
        });
        perform_all(ctx, &rest);
    })
}

/// Checks a bulk copy's size and alignment (16 bytes each).
#[track_caller]
fn check_bulk(shared: SharedAccess, global: usize) {
    assert!(
        shared.size.is_multiple_of(16),
        "vigil: a bulk copy moves a multiple of 16 bytes, not {}",
        shared.size
    );
    check_aligned(shared.addr, 16, "bulk copy shared");
    check_aligned(global, 16, "bulk copy global");
}

/// The CPU-encoded tensor map at `map`, with `D` dimensions.
#[track_caller]
fn tensor_map<const D: usize>(map: *const u8) -> TiledMap {
    // SAFETY: a tensor map handle points to a map's 128 bytes in device
    // memory (its constructor's contract), 64-byte aligned.
    let bytes = unsafe { (map as *const TensorMapBytes).read() };
    let map = TiledMap::decode(&bytes).unwrap_or_else(|| {
        panic!("vigil: the tensor map at {map:p} was not built for the CPU backend")
    });
    assert_eq!(
        map.rank as usize, D,
        "vigil: a tensor map of rank {} used with {D} coordinates",
        map.rank
    );
    map
}

/// The shared range of a tensor copy: its alignment and size checked.
#[track_caller]
fn tensor_range(shared: SharedAccess, map: &TiledMap) -> SharedAccess {
    let align = map.swizzle.alignment();
    check_aligned(shared.addr, align, "tensor copy shared");
    SharedAccess {
        size: map.box_elems() * map.elem_bytes as usize,
        ..shared
    }
}

/// `cp.async.bulk.tensor` store of the box at `coords` from `shared`.
///
/// # Safety
/// `map` points to a tensor map's 128 bytes; `shared` starts inside its
/// array of the running block, with room for the box.
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx_async`
pub(crate) unsafe fn tensor_to_global<S, const D: usize>(
    shared: SharedAccess,
    map: *const u8,
    coords: [i32; MAX_RANK],
) {
    let map = tensor_map::<D>(map);
    let shared = tensor_range(shared, &map);
    bulk_store(shared, GlobalSide::Tensor { map, coords })
}

/// `cp.async.bulk` of `shared.size` bytes from `global`, completing on
/// the mbarrier at `bar`.
///
/// # Safety
/// `shared` is inside its array of the running block; `global` valid for
/// `shared.size` reads for the launch; `bar` an mbarrier of the block.
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx_async`
pub(crate) unsafe fn bulk_to_shared<S>(shared: SharedAccess, global: usize, bar: usize) {
    check_bulk(shared, global);
    let side = GlobalSide::Linear {
        addr: global,
        bytes: shared.size,
    };
    on_barrier(shared, side, bar)
}

/// `cp.async.bulk.tensor` load of the box at `coords` into `shared`,
/// completing on the mbarrier at `bar`.
///
/// # Safety
/// As [`tensor_to_global`], and `bar` an mbarrier of the block.
#[track_caller]
#[allow(clippy::extra_unused_type_parameters)] // one signature with `arch::ptx_async`
pub(crate) unsafe fn tensor_to_shared<S, const D: usize>(
    shared: SharedAccess,
    map: *const u8,
    coords: [i32; MAX_RANK],
    bar: usize,
) {
    let map = tensor_map::<D>(map);
    let shared = tensor_range(shared, &map);
    on_barrier(shared, GlobalSide::Tensor { map, coords }, bar)
}

/// A load completing on the mbarrier at `bar`.
#[track_caller]
fn on_barrier(shared: SharedAccess, global: GlobalSide, bar: usize) {
    let loc = Location::caller();
    with_copies(|ctx, copies| {
        let c = pending(ctx, copies, Direction::ToShared, shared, global, loc);
        copies.on_barriers.borrow_mut().push((bar, c));
    })
}

/// `fence.proxy.async.shared::cta`: nothing on the host, whose copies
/// are made by the threads themselves.
pub(crate) fn fence_proxy_async_shared() {}

/// The tensor-map proxy's acquire: nothing on the host.
///
/// # Safety
/// None needed; one signature with `arch::ptx_async`.
pub(crate) unsafe fn fence_tensormap_acquire(_map: *const u8) {}

/// `griddepcontrol.launch_dependents`: nothing on the host, which runs a
/// stream's launches one after the other.
pub(crate) fn launch_dependents() {}

/// `griddepcontrol.wait`: the launches before this one on its stream
/// have finished already on the host; the sanitizer (if installed) orders
/// the calling block after them from now on.
pub(crate) fn wait_for_prerequisite_grids() {
    with_current(|ctx| {
        if let Some(rt) = ctx.sanitizer {
            rt.grid_dependency_waited(ctx)
        }
    })
}

/// An mbarrier's state as the CPU backend keeps it in its 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BarrierState {
    /// Arrivals the current phase still waits for.
    pub(crate) pending: u32,
    /// Arrivals each phase waits for (0: not initialised).
    pub(crate) expected: u32,
    /// Transaction bytes the current phase still waits for (negative
    /// when copies completed before their bytes were expected).
    pub(crate) tx: i32,
    /// The current phase's parity.
    pub(crate) phase: u32,
}

/// Bits of each field of [`BarrierState`] in the word.
const FIELD_BITS: u32 = 21;
const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;

/// The largest arrival count and transaction count (PTX's 2^20 - 1).
pub(crate) const MAX_COUNT: u32 = (1 << 20) - 1;

impl BarrierState {
    fn unpack(w: u64) -> Self {
        let tx = ((w >> (2 * FIELD_BITS)) & FIELD_MASK) as u32;
        // Sign-extend the 21-bit transaction count.
        let tx = ((tx << (32 - FIELD_BITS)) as i32) >> (32 - FIELD_BITS);
        BarrierState {
            pending: (w & FIELD_MASK) as u32,
            expected: ((w >> FIELD_BITS) & FIELD_MASK) as u32,
            tx,
            phase: (w >> 63) as u32,
        }
    }

    fn pack(self) -> u64 {
        u64::from(self.pending)
            | (u64::from(self.expected) << FIELD_BITS)
            | ((u64::from(self.tx as u32) & FIELD_MASK) << (2 * FIELD_BITS))
            | (u64::from(self.phase & 1) << 63)
    }

    /// Completes the phase when nothing is owed any more.
    fn settle(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.phase ^= 1;
            self.pending = self.expected;
        }
    }

    /// Adds `bytes` to the transaction count (`complete_tx` subtracts).
    #[track_caller]
    fn add_tx(&mut self, bytes: i64) {
        let tx = i64::from(self.tx) + bytes;
        assert!(
            tx.unsigned_abs() <= u64::from(MAX_COUNT),
            "vigil: an mbarrier's transaction count left its range (|{tx}| > 2^20 - 1)"
        );
        self.tx = tx as i32;
    }
}

/// The mbarrier word at `bar`.
fn word(bar: usize) -> &'static AtomicU64 {
    // SAFETY: an mbarrier handle points to 8 aligned bytes of the running
    // block's shared memory (its constructor's contract), which outlive
    // the calls of the block's threads.
    unsafe { AtomicU64::from_ptr(bar as *mut u64) }
}

/// The initialised state of the mbarrier at `bar`.
#[track_caller]
fn state(bar: usize) -> BarrierState {
    let s = BarrierState::unpack(word(bar).load(MemOrder::Relaxed));
    assert!(
        s.expected != 0,
        "vigil: mbarrier at {bar:#x} used before its init"
    );
    s
}

fn set_state(bar: usize, s: BarrierState) {
    word(bar).store(s.pack(), MemOrder::Relaxed)
}

/// `mbarrier.init` with `count` arrivals per phase.
///
/// # Safety
/// `bar` is an mbarrier's 8 aligned bytes of the running block's shared
/// memory (as for every `mbarrier_*` function).
#[track_caller]
pub(crate) unsafe fn mbarrier_init(bar: usize, count: u32) {
    assert!(
        (1..=MAX_COUNT).contains(&count),
        "vigil: an mbarrier's arrival count is 1..=2^20 - 1, not {count}"
    );
    with_copies(|_, copies| drop(copies.take_on_barrier(bar)));
    set_state(
        bar,
        BarrierState {
            pending: count,
            expected: count,
            tx: 0,
            phase: 0,
        },
    )
}

/// `mbarrier.arrive`.
///
/// # Safety
/// As [`mbarrier_init`].
#[track_caller]
pub(crate) unsafe fn mbarrier_arrive(bar: usize) {
    // SAFETY: forwarded.
    unsafe { mbarrier_arrive_expect_tx(bar, 0) }
}

/// `mbarrier.arrive.expect_tx`: `tx` more bytes expected, then an arrival.
///
/// # Safety
/// As [`mbarrier_init`].
#[track_caller]
pub(crate) unsafe fn mbarrier_arrive_expect_tx(bar: usize, tx: u32) {
    let mut s = state(bar);
    assert!(
        s.pending > 0,
        "vigil: more arrivals at the mbarrier at {bar:#x} than its count ({})",
        s.expected
    );
    s.add_tx(i64::from(tx));
    s.pending -= 1;
    s.settle();
    set_state(bar, s)
}

/// `mbarrier.expect_tx` of `bytes`.
///
/// # Safety
/// As [`mbarrier_init`].
#[track_caller]
pub(crate) unsafe fn mbarrier_expect_tx(bar: usize, bytes: u32) {
    let mut s = state(bar);
    s.add_tx(i64::from(bytes));
    set_state(bar, s)
}

/// `mbarrier.try_wait.parity`: true once the phase of parity `parity`
/// has completed. A phase whose arrivals are all in completes here when
/// the copies owed to it, performed now, settle its transaction count.
///
/// # Safety
/// As [`mbarrier_init`].
#[track_caller]
pub(crate) unsafe fn mbarrier_try_wait_parity(bar: usize, parity: u32) -> bool {
    let loc = Location::caller();
    // A spin-wait: the executor lets the block's other threads run, and
    // sees a wait that never ends.
    poll(bar, 8, loc);
    let s = state(bar);
    if s.phase != parity & 1 {
        return true;
    }
    if s.pending != 0 {
        return false;
    }
    with_copies(|ctx, copies| {
        let owed = copies.take_on_barrier(bar);
        for c in &owed {
            perform(ctx, c);
        }
        let mut s = state(bar);
        for c in &owed {
            s.add_tx(-(c.shared.size as i64));
        }
        s.settle();
        set_state(bar, s);
        s.phase != parity & 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrier_states_survive_their_word() {
        for s in [
            BarrierState {
                pending: 3,
                expected: 256,
                tx: -4096,
                phase: 1,
            },
            BarrierState {
                pending: MAX_COUNT,
                expected: MAX_COUNT,
                tx: MAX_COUNT as i32,
                phase: 0,
            },
        ] {
            assert_eq!(BarrierState::unpack(s.pack()), s);
        }
    }

    #[test]
    fn a_phase_completes_when_arrivals_and_bytes_are_in() {
        let mut s = BarrierState {
            pending: 1,
            expected: 2,
            tx: 0,
            phase: 0,
        };
        s.add_tx(64);
        s.pending -= 1;
        s.settle();
        assert_eq!((s.phase, s.pending), (0, 0), "64 bytes still owed");
        s.add_tx(-64);
        s.settle();
        assert_eq!((s.phase, s.pending, s.tx), (1, 2, 0));
    }
}
