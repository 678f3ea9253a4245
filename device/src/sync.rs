//! Barriers and fences.

use crate::arch::imp;
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
/// Inside a `#[kernel]` body this call is
/// [`sync_threads_in::<S>()`](sync_threads_in) with the kernel's sanitizer,
/// which the GPU sanitizer sees; a helper function outside a kernel body
/// that waits at a barrier calls that with its kernel's `S`.
#[inline(always)]
#[track_caller]
pub fn sync_threads() {
    imp::sync_threads_at(core::panic::Location::caller())
}

/// [`sync_threads`] in a kernel checked by `S`: the sanitizer sees the
/// arrival (on the GPU, the block's barrier count that orders its
/// threads' accesses) before the thread waits.
///
/// ```no_run
/// use vigil_device::prelude::*;
/// use vigil_device::shared_mem::SharedArray;
///
/// /// Thread `t` stores `v`, then reads its neighbour's value.
/// fn exchange<S: Sanitizer>(a: SharedArray<u32, 64, S>, t: usize, v: u32) -> u32 {
///     a.store(t, v);
///     vigil_device::sync::sync_threads_in::<S>();
///     a.load((t + 1) % 64)
/// }
/// ```
#[inline(always)]
#[track_caller]
pub fn sync_threads_in<S: Sanitizer>() {
    imp::sync_threads_for::<S>(core::panic::Location::caller())
}

/// A memory fence of the given ordering and scope (`fence.acq_rel.gpu`,
/// `fence.sc.sys`, ...). `Relaxed` is a no-op; `Acquire`, `Release` and
/// `AcqRel` emit `fence.acq_rel`; `SeqCst` emits `fence.sc`.
///
/// The fence is generic over the kernel's sanitizer so that the sanitized
/// variant sees it: a release fence followed by a relaxed atomic store
/// publishes like a release store, as the PTX memory model says. Inside a
/// `#[kernel]`, name the sanitizer parameter (`fn k<S: Sanitizer>(...)`) and
/// call `fence::<S>(...)`.
#[inline(always)]
#[track_caller]
pub fn fence<S: Sanitizer>(ordering: Ordering, scope: Scope) {
    S::fence(ordering, scope, core::panic::Location::caller());
    imp::fence(ordering, scope);
}
