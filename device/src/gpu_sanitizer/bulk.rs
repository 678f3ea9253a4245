//! A CTA's bulk and tensor copies between their issue and their
//! completion (`vigil_shared::bulk_copies`, which says how each is
//! checked).
//!
//! The list lives at the start of the CTA's part of the queue area
//! (`QueueArea`, `CtaState::copies`), so only launches of kernels that
//! issue asynchronous copies keep one; the others pay the test of
//! `copies` only. A thread's bulk group number is in its `cp.async`
//! queue's header.
//!
//! Completing a copy checks it again as the completing thread's access:
//! the check is the caller's (`hooks`), passed in, so that this file
//! needs only the CTA's state.

use core::panic::Location;

use vigil_shared::bulk_copies::{BulkCopy, BulkList, Completion, LIST_WORDS};

use super::cta::{lane, CtaState};
use super::device_atomics::{DeviceAtomics, DeviceU64};
use crate::sanitizer::{BulkGlobal, SharedAccess};

/// How a completed copy is checked again: its global side, by the
/// calling thread, now.
pub(super) type Recheck = fn(&BulkCopy);

/// The CTA's list, when its launch keeps copies in flight.
#[inline(always)]
fn list() -> Option<BulkList<'static, DeviceAtomics>> {
    list_at(CtaState::current().copies)
}

/// The list at `at`, the CTA's `copies` (0: none).
#[inline(always)]
fn list_at(at: u64) -> Option<BulkList<'static, DeviceAtomics>> {
    if at == 0 {
        return None;
    }
    // SAFETY: a non-zero `copies` is the CTA's part of the runtime's live
    // queue area, whose first `LIST_WORDS` words are the CTA's list
    // (`QueueArea::cta_part`), zeroed when allocated and left empty by
    // the CTA before (each thread completes its copies as it returns:
    // `returned`); every access to them is atomic.
    let words = unsafe { core::slice::from_raw_parts(at as *const DeviceU64, LIST_WORDS) };
    Some(BulkList::new(words))
}

/// True when the CTA whose `copies` is `at` may have a bulk copy in
/// flight.
#[inline(always)]
pub(super) fn any_at(at: u64) -> bool {
    list_at(at).is_some_and(|l| l.any())
}

/// The bulk copy in flight that an access of `lo..hi` (shared memory
/// when `shared`, writing when `write`) races with, and the first byte
/// they share.
#[inline(always)]
pub(super) fn overlapping(shared: bool, write: bool, lo: u64, hi: u64) -> Option<(BulkCopy, u64)> {
    list()?.overlapping(shared, write, lo, hi)
}

/// The calling thread issued a bulk or tensor copy (its accesses checked
/// at the issue already): into shared memory, completing on the mbarrier
/// phase `phase`; out of it, in the thread's open bulk group.
#[inline(never)]
pub(super) fn issued(
    shared: SharedAccess,
    global: BulkGlobal,
    phase: u32,
    loc: &'static Location<'static>,
) {
    let st = CtaState::current();
    let Some(l) = list() else {
        return;
    };
    let completion = if shared.kind.writes() {
        Completion::Phase(phase as u16)
    } else {
        Completion::Group(st.copy_queue().map_or(0, |q| q.bulk_open()))
    };
    let (global, global_bytes, tensor) = match global {
        BulkGlobal::Range { addr, bytes } => (addr, bytes, None),
        BulkGlobal::Tensor { map, coords } => (map, 0, Some(coords)),
    };
    let copy = BulkCopy {
        completion,
        thread: lane().0,
        shared: shared.addr as u64,
        shared_bytes: shared.size as u32,
        global: global as u64,
        global_bytes: global_bytes as u32,
        location: loc as *const Location<'static> as u64,
        tensor,
    };
    if l.issue(&copy) {
        // The copy, in the async proxy, after the entry: its completion
        // on the mbarrier releases it to the waiters, who then find the
        // entry to complete.
        crate::arch::ptx_async::fence_proxy_async_global();
    } else {
        // Checked at its issue only.
        st.reporter().count_bounded();
    }
}

/// A wait of the calling thread returned for the mbarrier phase `phase`:
/// the copies completing on it complete.
#[inline(always)]
pub(super) fn phase_completed(phase: u32, recheck: Recheck) {
    if let Some(l) = list() {
        if l.any() {
            l.complete_phase(phase as u16, recheck);
        }
    }
}

/// `cp.async.bulk.commit_group` by the calling thread.
#[inline(always)]
pub(super) fn committed() {
    if let Some(mut q) = CtaState::current().copy_queue() {
        q.bulk_commit();
    }
}

/// `cp.async.bulk.wait_group newest` (`.read` when `read`) by the calling
/// thread.
#[inline(never)]
pub(super) fn waited(newest: u32, read: bool, recheck: Recheck) {
    let Some(open) = CtaState::current().copy_queue().map(|q| q.bulk_open()) else {
        return;
    };
    if let Some(l) = list() {
        if l.any() {
            l.complete_groups(lane().0, open, newest, read, recheck);
        }
    }
}

/// The calling thread returns: the copies it issued still in flight
/// complete (so the list is empty when the CTA's threads have returned).
#[inline(always)]
pub(super) fn returned(recheck: Recheck) {
    if let Some(l) = list() {
        if l.any() {
            l.complete_thread(lane().0, recheck);
        }
    }
}

/// Where `c` was issued.
#[inline(always)]
pub(super) fn location(c: &BulkCopy) -> &'static Location<'static> {
    // SAFETY: the address of the issuing site's `'static` `Location`
    // (`issued`).
    unsafe { &*(c.location as *const Location<'static>) }
}
