//! The hooks between kernel code and the race sanitizer.
//!
//! Kernel code names no sanitizer: every global and shared access,
//! atomic, fence, barrier and warp collective of the kernel API calls the
//! hooks of [`Active`](crate::hooks::Active), which the build decides, the way compiler-based
//! sanitizers instrument everything they compile:
//!
//! - the plain PTX build: [`Plain`], whose hooks are empty and inline
//!   away, so a plain entry compiles to the PTX a hand-written kernel
//!   would;
//! - the sanitized PTX build (`vigil_build` compiles each kernel crate a
//!   second time with `--cfg vigil_sanitized`, for the `name__vigil`
//!   entries): the GPU sanitizer's hooks, in a kernel's body and in every
//!   helper it calls, generic or not;
//! - the host (the CPU backend): [`Checked`], which checks exactly when
//!   the executor installed a sanitizer runtime for the calling thread.
//!
//! Each hook takes the caller's source location (`#[track_caller]`). The
//! sanitizer type parameter that handles and the `_in` forms still carry
//! (`GlobalSlice<T, S>`, `sync_threads_in::<S>()`) plays no part: it is
//! kept so that kernels written with it compile.

use core::panic::Location;
use vigil_shared::race::atomic::{AtomicOp, AtomicOpKind};
use vigil_shared::{AccessKind, Ordering, Scope};

/// One atomic operation as the sanitizer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicAccess {
    /// Address of the first byte.
    pub addr: usize,
    /// Size in bytes (4 or 8).
    pub size: usize,
    /// `AtomicRead`, `AtomicWrite` or `AtomicRmw` (what it does if it succeeds).
    pub kind: AccessKind,
    /// The ordering the operation was issued with (after normalisation:
    /// loads are relaxed or acquire, stores relaxed or release).
    pub ordering: Ordering,
    /// The scope the operation was issued with.
    pub scope: Scope,
    /// A compare-exchange: a read-modify-write that may not write.
    pub compare: bool,
}

impl AtomicAccess {
    /// The engine's description of this operation. A compare-exchange
    /// that says it did not write is an atomic read with the failure
    /// ordering (acquire if the operation acquires), one that wrote is a
    /// read-modify-write; every other read-modify-write (an add, an
    /// exchange) always writes.
    #[inline(always)]
    pub fn engine_op(&self) -> AtomicOp {
        let kind = match self.kind {
            AccessKind::AtomicRead | AccessKind::Read => AtomicOpKind::Load,
            AccessKind::AtomicWrite | AccessKind::Write => AtomicOpKind::Store,
            AccessKind::AtomicRmw if self.compare => AtomicOpKind::CompareExchange,
            AccessKind::AtomicRmw => AtomicOpKind::Rmw,
        };
        let failure_ordering = if self.ordering.acquires() {
            Ordering::Acquire
        } else {
            Ordering::Relaxed
        };
        AtomicOp {
            kind,
            ordering: self.ordering,
            failure_ordering,
            scope: self.scope,
        }
    }
}

/// One access to block-shared memory as the sanitizer sees it: the bytes,
/// what the access does, and the shared array they belong to (its first
/// byte and size), so that a report can name the array and the offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedAccess {
    /// Address of the first byte (a generic address).
    pub addr: usize,
    /// Size in bytes; 0 on the GPU for the declaration of an array (or a
    /// dynamic shared view) without a `.shared` shadow, which the
    /// sanitizer checks its device-memory shadow covers.
    pub size: usize,
    /// `Read`, `Write` or, for a shared atomic, `AtomicRmw` (block scope;
    /// `AtomicRead` for a compare-exchange that failed); a volatile load
    /// or store is `AtomicRead` or `AtomicWrite` (a relaxed atomic).
    pub kind: AccessKind,
    /// First byte of the shared array the access falls in.
    pub array: usize,
    /// Size of that array in bytes.
    pub array_bytes: usize,
    /// The array's shadow in a sanitized GPU entry (its layout is
    /// `vigil_shared::block::ShadowLayout`), 0 elsewhere.
    pub shadow: usize,
    /// Where the shared view the access goes through was allocated: the
    /// `shared_array!` or `dynamic_shared_array!` expansion, or the
    /// [`SharedStack::push`](crate::shared_stack::SharedStack::push) of a
    /// tile (`None`: unknown). Two views over the same bytes (a tile
    /// pushed where a popped one was) share the bytes' shadow, and a race
    /// between their accesses names both views by it.
    pub site: Option<&'static Location<'static>>,
}

// The GPU's same-block records keep a view's number in the low 3 bits of
// a `Location`'s address (`vigil_shared::block::BlockRecord::with_view`).
const _: () = assert!(core::mem::align_of::<Location<'static>>() >= 8);

/// The global side of a bulk or tensor copy, as
/// [`Sanitizer::bulk_in_flight`] hears of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkGlobal {
    /// `bytes` bytes at `addr` (a bulk copy).
    Range {
        /// First byte.
        addr: usize,
        /// Bytes read or written.
        bytes: usize,
    },
    /// The box at `coords` (innermost first) of the tensor the map at
    /// `map` describes, its description beside it (a tensor copy).
    Tensor {
        /// The tensor map's address.
        map: usize,
        /// The box's coordinates.
        coords: [i32; vigil_shared::tensor_map::MAX_RANK],
    },
}

/// The race sanitizer's view of a kernel's memory operations.
///
/// Implementations are zero-sized markers whose state, if any, is found from
/// the executing thread (a per-SM thread state on the GPU, a thread-local
/// on the CPU), so handles carrying `S` cost nothing.
pub trait Sanitizer: Copy + Default + Send + Sync + 'static {
    /// True when the hooks do anything.
    const ENABLED: bool;

    /// A plain (non-atomic) load or store of `size` bytes at `addr`,
    /// checked against every other thread: the GPU's runtime checks it
    /// against other blocks through its engine and against the calling
    /// thread's own block through the same-block table, in one call.
    fn access(addr: usize, size: usize, kind: AccessKind, loc: &'static Location<'static>);

    /// An atomic operation: `op` performs it and returns its result and
    /// whether it wrote (a failed compare-exchange did not). The sanitizer
    /// may hold the shadow cell's lock around `op` so that what the atomic
    /// read and what the shadow says it read agree.
    fn atomic<R>(
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: impl FnOnce() -> (R, bool),
    ) -> R;

    /// A fence of the given ordering and scope.
    fn fence(ordering: Ordering, scope: Scope, loc: &'static Location<'static>);

    /// An access to block-shared memory (a plain load or store, or a
    /// block-scope atomic). Races inside a block are checked against the
    /// block's barrier intervals, not the global clocks. Default: nothing
    /// (so [`Plain`] and a runtime without block checks stay as they are).
    ///
    /// On the host the platform layer calls [`Checked`]'s whenever a
    /// runtime is installed; on the GPU a `SharedArray<T, N, S>` or
    /// `SharedSlice<T, S>` calls `S`'s (a `#[kernel]` body's
    /// `shared_array!` and `dynamic_shared_array!` carry the kernel's
    /// `S`), and the declaration of one without a `.shared` shadow is an
    /// access of size 0.
    #[inline(always)]
    fn shared_access(access: SharedAccess, loc: &'static Location<'static>) {
        let _ = (access, loc);
    }

    /// The calling thread arrives at `sync_threads` (at `loc`): its
    /// accesses before it are ordered before every access of the block
    /// after it. Default: nothing. On the GPU it is called through
    /// [`sync_threads_in`](crate::sync::sync_threads_in), which a
    /// `#[kernel]` body's `sync_threads()` is, and a checking sanitizer's
    /// hook is the barrier itself: it waits there too, and checks that
    /// every thread of the block came from the same call.
    #[inline(always)]
    fn barrier(loc: &'static Location<'static>) {
        let _ = loc;
    }

    /// The calling thread is about to join a warp collective (shuffle,
    /// vote or `sync_warp`) over the lanes of `mask`: once it completes,
    /// their accesses before it are ordered before their accesses after
    /// it. Default: nothing (the CPU backend's executor tells its runtime
    /// itself). On the GPU a `#[kernel]` body's collectives call it.
    #[inline(always)]
    fn warp_sync(mask: u32) {
        let _ = mask;
    }

    /// A global atomic already checked by [`atomic`](Sanitizer::atomic),
    /// now against the other threads of the calling thread's block (`kind`
    /// is what it did: an atomic that did not write is `AtomicRead`).
    /// Default: nothing (the CPU backend's runtime checks these inside
    /// `atomic`; the GPU's engine sees a block as one thread, so its
    /// runtime checks them here, once the operation's outcome is known).
    #[inline(always)]
    fn block_global_access(
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        let _ = (addr, size, kind, loc);
    }

    /// The calling thread acquired what its block's threads released in a
    /// way the sanitizer does not follow word by word (an mbarrier phase
    /// completing): for the checks inside the block, every access the
    /// block made so far is ordered before the thread's later ones.
    /// `phase` names what was acquired, the same for every thread that
    /// acquires it (an mbarrier's address and the phase's parity), so
    /// that the block's threads waiting for one phase start one new
    /// epoch, not one each. Acquiring atomics and fences need no call:
    /// their hooks learn which of the block's releases they read.
    /// Default: nothing.
    #[inline(always)]
    fn block_acquire(phase: u32) {
        let _ = phase;
    }

    /// The calling thread is about to arrive on (or initialise) the
    /// mbarrier whose phases [`block_acquire`](Sanitizer::block_acquire)
    /// names `barrier | parity << 15`: a later wait for either parity of
    /// it is for a phase its block has not acquired yet. Default: nothing.
    #[inline(always)]
    fn mbarrier_arrival(barrier: u32) {
        let _ = barrier;
    }

    /// `bytes` bytes of global memory at `addr` that the calling thread
    /// alone reads or writes (`kind`) at once: a tensor copy's row.
    /// Checked against other blocks, launches and the host; the GPU
    /// checks each whole 128-byte line as one access (not against the
    /// calling thread's own block). Default: plain accesses of at most 16
    /// bytes, as the copy's other accesses.
    #[inline(always)]
    fn copy_range_alone(
        addr: usize,
        bytes: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        crate::arch::copy_accesses::units(addr, bytes, |at, n| Self::access(at, n, kind, loc));
    }

    /// The calling thread waited for the kernels its launch depends on
    /// (`griddepcontrol.wait`): its block is ordered after them from now
    /// on. Default: nothing (the CPU backend's runtime hears of every
    /// wait from its platform layer, in every function).
    #[inline(always)]
    fn grid_dependency_wait() {}

    /// The calling thread issued a `cp.async` of `shared.size` bytes into
    /// `shared` from `global_bytes` bytes at `global` (its accesses
    /// already told through [`access`](Sanitizer::access) and
    /// [`shared_access`](Sanitizer::shared_access)): the copy is in
    /// flight until a wait of the thread completes its group. Default:
    /// nothing (the CPU backend's runtime hears of every copy from its
    /// platform layer).
    #[inline(always)]
    fn copy_in_flight(
        shared: SharedAccess,
        global: usize,
        global_bytes: usize,
        loc: &'static Location<'static>,
    ) {
        let _ = (shared, global, global_bytes, loc);
    }

    /// The calling thread committed its open `cp.async` copies into a
    /// group (`cp.async.commit_group`). Default: nothing.
    #[inline(always)]
    fn copy_group_committed() {}

    /// The calling thread waited for all but its newest `newest`
    /// committed `cp.async` groups (`cp.async.wait_group`; `wait_all` is
    /// a commit and a wait for all): their copies completed. Default:
    /// nothing.
    #[inline(always)]
    fn copy_groups_waited(newest: u32) {
        let _ = newest;
    }

    /// The calling thread issued a bulk or tensor copy between `shared`
    /// and `global`, its accesses already told where it was issued: it
    /// is in flight until its completion. A copy into shared memory
    /// (`shared.kind` a write) completes on the mbarrier phase `phase`
    /// names (as [`block_acquire`](Sanitizer::block_acquire) does): a
    /// wait that returns for that phase completes it. A copy out of
    /// shared memory joins the calling thread's open bulk group. Default:
    /// nothing (the CPU backend's runtime hears of every copy from its
    /// platform layer).
    #[inline(always)]
    fn bulk_in_flight(
        shared: SharedAccess,
        global: BulkGlobal,
        phase: u32,
        loc: &'static Location<'static>,
    ) {
        let _ = (shared, global, phase, loc);
    }

    /// The calling thread committed its open bulk stores into a bulk
    /// group (`cp.async.bulk.commit_group`). Default: nothing.
    #[inline(always)]
    fn bulk_group_committed() {}

    /// The calling thread waited for all but its newest `newest` bulk
    /// groups (`cp.async.bulk.wait_group`): their stores completed; with
    /// `read` (`.read`), only their reads of shared memory did. Default:
    /// nothing.
    #[inline(always)]
    fn bulk_groups_waited(newest: u32, read: bool) {
        let _ = (newest, read);
    }

    /// The calling thread declared a shared array of `array_bytes` bytes
    /// that `S` cannot check: its accesses go unchecked, and the
    /// sanitizer says so in its reports. Default: nothing (the CPU
    /// backend checks every array). The device crate does not call it:
    /// the GPU sanitizer decides at the declaration (a `shared_access` of
    /// size 0) whether its device-memory shadow covers the array.
    #[inline(always)]
    fn shared_unchecked(array_bytes: usize) {
        let _ = array_bytes;
    }
}

/// No sanitizer: every hook is empty. The plain entry point uses this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plain;

impl Sanitizer for Plain {
    const ENABLED: bool = false;

    #[inline(always)]
    fn access(_: usize, _: usize, _: AccessKind, _: &'static Location<'static>) {}

    #[inline(always)]
    fn atomic<R>(
        _: AtomicAccess,
        _: &'static Location<'static>,
        op: impl FnOnce() -> (R, bool),
    ) -> R {
        op().0
    }

    #[inline(always)]
    fn fence(_: Ordering, _: Scope, _: &'static Location<'static>) {}
}

/// The sanitized variant on the CPU backend: every hook goes to the
/// sanitizer runtime the executor installed for the calling thread
/// (see `host_runtime::SanitizerRuntime`).
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked;

#[cfg(not(target_arch = "nvptx64"))]
impl Sanitizer for Checked {
    const ENABLED: bool = true;

    #[inline]
    fn access(addr: usize, size: usize, kind: AccessKind, loc: &'static Location<'static>) {
        crate::arch::host::with_sanitizer(|rt, t| rt.access(t, addr, size, kind, loc));
    }

    #[inline]
    fn atomic<R>(
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: impl FnOnce() -> (R, bool),
    ) -> R {
        let mut op = Some(op);
        let mut out = None;
        // The kernel API polled before this hook (`arch::host::poll`):
        // the runtime may hold a shadow lock around `op`, so no other GPU
        // thread may run inside it.
        crate::arch::host::with_sanitizer(|rt, t| {
            rt.atomic(t, access, loc, &mut || {
                let (r, wrote) = (op.take().expect("atomic op runs once"))();
                out = Some(r);
                wrote
            })
        });
        match out {
            Some(r) => r,
            // No runtime installed: run the operation unobserved.
            None => (op.take().expect("atomic op runs once"))().0,
        }
    }

    #[inline]
    fn fence(ordering: Ordering, scope: Scope, loc: &'static Location<'static>) {
        crate::arch::host::with_sanitizer(|rt, t| rt.fence(t, ordering, scope, loc));
    }

    #[inline]
    fn shared_access(access: SharedAccess, loc: &'static Location<'static>) {
        crate::arch::host::with_sanitizer(|rt, t| rt.shared_access(t, access, loc));
    }

    #[inline]
    fn barrier(loc: &'static Location<'static>) {
        crate::arch::host::with_sanitizer(|rt, t| rt.barrier(t, loc));
    }

    #[inline]
    fn block_acquire(_phase: u32) {
        crate::arch::host::with_sanitizer(|rt, t| rt.acquire_everything(t));
    }
}
