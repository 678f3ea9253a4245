//! Asynchronous copies between global and shared memory, the mbarriers
//! they complete on, and tensor copies (Hopper's TMA).
//!
//! Three kinds of copy, as in CUDA:
//!
//! - **`cp.async`** (sm_80+): a thread copies 4, 8 or 16 bytes from a
//!   global slice into a shared array
//!   ([`SharedArray::copy_async`](crate::shared_mem::SharedArray::copy_async)),
//!   closes its copies into a group with [`commit_group`] and waits for
//!   all but the newest `N` groups with [`wait_group`] (or all with
//!   [`wait_all`]). A wait covers the calling thread's own copies only:
//!   a [`sync_threads`](crate::sync_threads) after it shows them to the
//!   rest of the block.
//! - **Bulk copies** (sm_90+): one thread moves a whole range. Into
//!   shared memory
//!   ([`copy_bulk_from`](crate::shared_mem::SharedArray::copy_bulk_from))
//!   the copy completes on an [`Mbarrier`], counting its bytes against
//!   the barrier's expected transaction bytes
//!   ([`Mbarrier::arrive_expect_tx`]); every thread that waits on the
//!   barrier's phase then sees the data. Out to global memory
//!   ([`copy_bulk_to`](crate::shared_mem::SharedArray::copy_bulk_to)) it
//!   joins the thread's bulk group ([`bulk_commit_group`],
//!   [`bulk_wait_group`], [`bulk_wait_group_read`]).
//! - **Tensor copies** (sm_90+): a box of a 1- to 5-dimensional tensor,
//!   described by a tensor map built on the host ([`TensorMap`],
//!   [`TensorMapMut`]), moves like a bulk copy; elements outside the
//!   tensor read as zero and are not written.
//!
//! The copy methods of a [`SharedArray`] are also those of the dynamic
//! shared memory's [`SharedSlice`] and of a shared stack's [`SharedTile`]
//! (a tile is aligned to 16 bytes: enough for `cp.async` and bulk
//! copies; a tensor copy checks its 128- or 1,024-byte alignment).
//!
//! Shared memory written by a kernel's threads and then read by a bulk or
//! tensor store needs [`fence_proxy_async_shared`] (and a barrier) in
//! between, as in CUDA.
//!
//! The CPU backend runs all of it: see the guide's chapter on
//! asynchronous copies for when its copies move their data.

mod mbarrier;
mod tensor;

pub use mbarrier::{Mbarrier, Mbarriers};
pub use tensor::{TensorMap, TensorMapMut, INNER_COORDINATE_ALIGN};
pub use vigil_shared::tensor_map::Swizzle;

use crate::arch::async_imp;
use crate::global::{out_of_bounds, GlobalSlice, GlobalSliceMut};
use crate::hooks::Active;
use crate::sanitizer::Sanitizer;
use crate::shared_mem::{Elements, SharedArray, SharedSlice};
use crate::shared_stack::SharedTile;
use core::mem::size_of;
use vigil_shared::AccessKind;

/// Elements of `T` in a `cp.async` of `BYTES` bytes, or a compile error
/// when `BYTES` is not 4, 8 or 16 or not a whole number of `T`s.
const fn chunk_elems<T, const BYTES: usize>() -> usize {
    assert!(
        BYTES == 4 || BYTES == 8 || BYTES == 16,
        "cp.async copies 4, 8 or 16 bytes"
    );
    assert!(
        size_of::<T>() > 0 && BYTES.is_multiple_of(size_of::<T>()),
        "cp.async copies whole elements"
    );
    BYTES / size_of::<T>()
}

/// Checks `j..j + count` against a global slice of `len` elements.
#[inline(always)]
#[track_caller]
fn check_global_range(j: usize, count: usize, len: usize) {
    if count > len || j > len - count {
        out_of_bounds(j.saturating_add(count), len)
    }
}

/// `cp.async` of elements `j..j + BYTES / size_of::<T>()` of `src` into
/// `dst`'s elements from `i`, reading only the first `valid` of them.
#[inline(always)]
#[track_caller]
fn copy_async<T: bytemuck::Pod, S: Sanitizer, const BYTES: usize>(
    dst: Elements<T, S>,
    i: usize,
    src: GlobalSlice<T, S>,
    j: usize,
    valid: Option<usize>,
) {
    let n = const { chunk_elems::<T, BYTES>() };
    let shared = dst.span(i, n, AccessKind::Write);
    match valid {
        None => {
            check_global_range(j, n, src.len());
            let global = src.as_ptr().wrapping_add(j) as usize;
            // SAFETY: both ranges are in bounds (checked above); the
            // alignment is the caller's (a misaligned copy faults).
            unsafe { async_imp::cp_async::<Active, BYTES>(shared, global) }
        }
        Some(valid) => {
            let valid = valid.min(n);
            // With nothing to read, any address of the slice will do.
            let at = if valid == 0 { 0 } else { j };
            check_global_range(at, valid, src.len());
            let global = src.as_ptr().wrapping_add(at) as usize;
            let bytes = valid * size_of::<T>();
            // SAFETY: as above, for the `valid` elements read.
            unsafe { async_imp::cp_async_zfill::<Active, BYTES>(shared, global, bytes) }
        }
    }
}

/// The bytes of `count` elements of `T`, checked to be a whole number of
/// 16-byte units and to fit a bulk copy's 32-bit size.
#[inline(always)]
#[track_caller]
fn bulk_bytes<T>(count: usize) -> usize {
    let bytes = count * size_of::<T>();
    assert!(
        bytes.is_multiple_of(16) && bytes <= u32::MAX as usize,
        "a bulk copy moves a multiple of 16 bytes"
    );
    bytes
}

/// The copy methods of a shared-memory handle with an `elements()`
/// method ([`SharedArray`], [`SharedSlice`], [`SharedTile`]).
macro_rules! copy_methods {
    () => {
        /// Starts copying `BYTES / size_of::<T>()` elements (`BYTES` is 4,
        /// 8 or 16) from `src[j..]` into elements `i..` of this buffer
        /// (`cp.async`; 16 bytes bypass L1). The data is there once the
        /// calling thread has committed the copy into a group
        /// ([`commit_group`](crate::async_copy::commit_group)) and waited
        /// for it ([`wait_group`](crate::async_copy::wait_group)); other
        /// threads see it after a barrier that follows the wait.
        ///
        /// Both addresses must be aligned to `BYTES` (the GPU faults, the
        /// CPU backend panics). Panics (traps on the GPU) when a range
        /// runs past its end.
        ///
        /// ```no_run
        /// use vigil_device::prelude::*;
        /// use vigil_device::async_copy::{commit_group, wait_group};
        ///
        /// /// Each block doubles its 256 elements of `x` through shared memory.
        /// #[kernel]
        /// pub fn double(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
        ///     let tile = shared_array!(f32; 256);
        ///     let (t, base) = (thread_idx().x as usize, block_idx().x as usize * 256);
        ///     if t < 64 {
        ///         tile.copy_async::<16>(4 * t, x, base + 4 * t);
        ///     }
        ///     commit_group();
        ///     wait_group::<0>();
        ///     sync_threads();
        ///     y.store(base + t, 2.0 * tile.load(t));
        /// }
        /// ```
        #[inline(always)]
        #[track_caller]
        pub fn copy_async<const BYTES: usize>(&self, i: usize, src: GlobalSlice<T, S>, j: usize) {
            copy_async::<T, S, BYTES>(self.elements(), i, src, j, None)
        }

        /// [`copy_async`](Self::copy_async) reading only the first `valid`
        /// elements of the chunk at `src[j..]` and zero-filling the rest
        /// (`cp.async`'s source size): the edge of a tile. With `valid` 0
        /// nothing is read (`j` may then be past the end).
        #[inline(always)]
        #[track_caller]
        pub fn copy_async_zfill<const BYTES: usize>(
            &self,
            i: usize,
            src: GlobalSlice<T, S>,
            j: usize,
            valid: usize,
        ) {
            copy_async::<T, S, BYTES>(self.elements(), i, src, j, Some(valid))
        }

        /// Starts a bulk copy of `count` elements from `src[j..]` into
        /// elements `i..` of this buffer, completing on `bar`: the copy
        /// counts its bytes (`count * size_of::<T>()`, a multiple of 16)
        /// against the barrier's transaction count, so whoever arrives
        /// with [`Mbarrier::arrive_expect_tx`](crate::async_copy::Mbarrier::arrive_expect_tx)
        /// must include them (`cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`).
        /// Both addresses must be 16-byte aligned. Panics (traps on the
        /// GPU) when a range runs past its end or the size is not a
        /// multiple of 16 bytes.
        #[inline(always)]
        #[track_caller]
        pub fn copy_bulk_from(
            &self,
            i: usize,
            src: GlobalSlice<T, S>,
            j: usize,
            count: usize,
            bar: crate::async_copy::Mbarrier<S>,
        ) {
            let bytes = bulk_bytes::<T>(count);
            let shared = self.elements().span(i, count, AccessKind::Write);
            check_global_range(j, count, src.len());
            let global = src.as_ptr().wrapping_add(j) as usize;
            debug_assert_eq!(shared.size, bytes);
            // SAFETY: both ranges are in bounds (checked above); `bar` is
            // an mbarrier of the block (its handle's invariant).
            unsafe { async_imp::bulk_to_shared::<Active>(shared, global, bar.address()) }
        }

        /// Starts a bulk copy of elements `i..i + count` of this buffer to
        /// `dst[j..]` in the calling thread's open bulk group
        /// (`cp.async.bulk.global.shared::cta.bulk_group`): commit it
        /// with [`bulk_commit_group`](crate::async_copy::bulk_commit_group), and wait
        /// with [`bulk_wait_group_read`](crate::async_copy::bulk_wait_group_read)
        /// before overwriting the source, with
        /// [`bulk_wait_group`](crate::async_copy::bulk_wait_group) before
        /// the data must be in global memory. Writes of the block's
        /// threads to the source need
        /// [`fence_proxy_async_shared`](crate::async_copy::fence_proxy_async_shared)
        /// and a barrier before the copy. Sizes and alignment as for
        /// [`copy_bulk_from`](Self::copy_bulk_from).
        #[inline(always)]
        #[track_caller]
        pub fn copy_bulk_to(&self, i: usize, dst: GlobalSliceMut<T, S>, j: usize, count: usize) {
            let _ = bulk_bytes::<T>(count);
            let shared = self.elements().span(i, count, AccessKind::Read);
            check_global_range(j, count, dst.len());
            let global = dst.as_ptr().wrapping_add(j) as usize;
            // SAFETY: both ranges are in bounds (checked above).
            unsafe { async_imp::bulk_to_global::<Active>(shared, global) }
        }
    };
}

impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> SharedArray<T, N, S> {
    copy_methods!();
}

impl<T: bytemuck::Pod, S: Sanitizer> SharedSlice<T, S> {
    copy_methods!();
}

impl<T: bytemuck::Pod, const N: usize, S: Sanitizer> SharedTile<T, N, S> {
    copy_methods!();
}

/// Closes the calling thread's `cp.async` copies issued since its last
/// commit into a group (`cp.async.commit_group`; an empty group is
/// allowed, so every thread can commit on every step of a pipeline).
#[inline(always)]
#[track_caller]
pub fn commit_group() {
    async_imp::commit_group();
    Active::copy_group_committed()
}

/// Waits until all but the newest `N` of the calling thread's committed
/// `cp.async` groups have completed (`cp.async.wait_group N`): with a
/// pipeline `S` stages deep, `wait_group::<{ S - 2 }>()` waits for the
/// oldest stage in flight. The calling thread sees the data afterwards;
/// other threads after a barrier.
#[inline(always)]
#[track_caller]
pub fn wait_group<const N: u32>() {
    async_imp::wait_group::<N>();
    Active::copy_groups_waited(N)
}

/// Commits the calling thread's open `cp.async` copies and waits for all
/// of them (`cp.async.wait_all`).
#[inline(always)]
#[track_caller]
pub fn wait_all() {
    async_imp::wait_all();
    Active::copy_group_committed();
    Active::copy_groups_waited(0)
}

/// Closes the calling thread's bulk and tensor stores issued since its
/// last bulk commit into a bulk group (`cp.async.bulk.commit_group`).
#[inline(always)]
#[track_caller]
pub fn bulk_commit_group() {
    async_imp::bulk_commit_group();
    Active::bulk_group_committed()
}

/// Waits until all but the newest `N` of the calling thread's bulk
/// groups have completed, their writes visible
/// (`cp.async.bulk.wait_group N`).
#[inline(always)]
#[track_caller]
pub fn bulk_wait_group<const N: u32>() {
    async_imp::bulk_wait_group::<N>();
    Active::bulk_groups_waited(N, false)
}

/// Waits until all but the newest `N` of the calling thread's bulk
/// groups have read their shared-memory sources, which may then be
/// overwritten (`cp.async.bulk.wait_group.read N`).
#[inline(always)]
#[track_caller]
pub fn bulk_wait_group_read<const N: u32>() {
    async_imp::bulk_wait_group_read::<N>();
    Active::bulk_groups_waited(N, true)
}

/// Orders the calling thread's earlier shared-memory accesses before the
/// bulk and tensor copies issued after it, and makes an mbarrier's
/// `init` visible to the copies that complete on it
/// (`fence.proxy.async.shared::cta`): the copies run in the async proxy,
/// which plain accesses do not order with by themselves.
#[inline(always)]
pub fn fence_proxy_async_shared() {
    async_imp::fence_proxy_async_shared()
}
