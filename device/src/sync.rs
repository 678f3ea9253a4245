//! Barriers and fences.

use crate::arch::imp;
use crate::hooks::Active;
use crate::sanitizer::Sanitizer;
use vigil_shared::{Ordering, Scope};

/// Waits until every thread of the block has reached this barrier, and makes
/// the block's shared- and global-memory writes before it visible to the
/// block's reads after it (`__syncthreads`, `bar.sync 0`).
///
/// Every thread of the block must reach the same barrier, as in CUDA. A
/// barrier that only some threads reach, or that threads reach from
/// different calls, is an error naming this call's location
/// (`#[track_caller]`) and the threads that were elsewhere: on the CPU
/// backend always, on the GPU in a sanitized context (the sanitized
/// barrier is `barrier.sync`, which tolerates a diverged warp).
///
/// The sanitizer sees every call, in a kernel's body or in a helper it
/// calls:
///
/// ```no_run
/// use vigil_device::prelude::*;
/// use vigil_device::shared_mem::SharedArray;
///
/// /// Thread `t` stores `v`, then reads its neighbour's value.
/// fn exchange(a: SharedArray<u32, 64>, t: usize, v: u32) -> u32 {
///     a.store(t, v);
///     sync_threads();
///     a.load((t + 1) % 64)
/// }
/// ```
#[inline(always)]
#[track_caller]
pub fn sync_threads() {
    imp::sync_threads_for::<Active>(core::panic::Location::caller())
}

/// [`sync_threads`]: the sanitizer type plays no part any more (the build
/// decides what is checked: [`crate::sanitizer`]).
#[deprecated(note = "call `sync_threads()`: the sanitizer sees it wherever it is called")]
#[inline(always)]
#[track_caller]
pub fn sync_threads_in<S: Sanitizer>() {
    sync_threads()
}

/// A memory fence of the given ordering and scope, as CUDA C++'s
/// `cuda::atomic_thread_fence(order, scope)` (`fence.acq_rel.gpu`,
/// `fence.sc.sys`, ...). `Relaxed` is a no-op; `Acquire`, `Release` and
/// `AcqRel` emit `fence.acq_rel`; `SeqCst` emits `fence.sc`.
///
/// The sanitizer follows it as the PTX memory model says: a release
/// fence followed by a relaxed atomic store publishes like a release
/// store, and relaxed reads followed by an acquire fence acquire what
/// they read.
///
/// ```no_run
/// use vigil_device::prelude::*;
/// use vigil_device::sync::thread_fence;
///
/// /// Publishes `v` in `data`, then raises `flag`.
/// fn publish(data: GlobalPtrMut<u32>, flag: GlobalPtrMut<u32>, v: u32) {
///     data.store(v);
///     thread_fence(Ordering::Release, Scope::Device);
///     flag.atomic_store(1, Ordering::Relaxed, Scope::Device);
/// }
/// ```
#[inline(always)]
#[track_caller]
pub fn thread_fence(ordering: Ordering, scope: Scope) {
    Active::fence(ordering, scope, core::panic::Location::caller());
    imp::fence(ordering, scope);
}

/// [`thread_fence`]: the sanitizer type plays no part any more (the build
/// decides what is checked: [`crate::sanitizer`]).
#[deprecated(
    note = "call `thread_fence(ordering, scope)`: the sanitizer sees it wherever it is called"
)]
#[inline(always)]
#[track_caller]
pub fn fence<S: Sanitizer>(ordering: Ordering, scope: Scope) {
    thread_fence(ordering, scope)
}
