//! A thread's `cp.async` copies between their issue and their completion
//! (`vigil_shared::copies_in_flight`, which says how each is checked).
//!
//! The queues live in device memory the host allocates for launches of
//! kernels that issue asynchronous copies (`QueueArea`): the CTA's state
//! keeps its first thread's (`CtaState::copies`, found at entry from the
//! CTA's region). A launch of any other kernel keeps none (`copies` is 0)
//! and pays nothing but that test.
//!
//! Completing a copy checks it again as the completing thread's accesses:
//! the check is the caller's (`hooks`), passed in, so that this file
//! needs only the CTA's state.

use crate::sanitizer::SharedAccess;
use core::panic::Location;
use vigil_shared::copies_in_flight::InFlightCopy;

use super::cta::CtaState;

/// How a completed copy is checked again: its source read and its
/// destination written by the calling thread, now.
pub(super) type Recheck = fn(&InFlightCopy);

/// The calling thread issued `copy` (its accesses checked at the issue
/// already): it stays in flight until its group is waited for. When the
/// queue is full its oldest copy completes now (`recheck`).
#[inline(always)]
pub(super) fn issued(copy: InFlightCopy, recheck: Recheck) {
    // The queue's borrow ends before the check, which reads the queue.
    let evicted = CtaState::current()
        .copy_queue()
        .and_then(|mut q| q.push(copy));
    if let Some(old) = evicted {
        recheck(&old);
    }
}

/// True when the calling thread has `cp.async` copies in flight or its
/// CTA may have bulk copies in flight (`super::bulk`): one look at the
/// CTA's state, and for a launch that keeps no copies nothing more.
#[inline(always)]
pub(super) fn any() -> bool {
    let st = CtaState::current();
    st.copies != 0
        && (st.copy_queue().is_some_and(|q| !q.is_empty()) || super::bulk::any_at(st.copies))
}

/// `cp.async.commit_group` by the calling thread.
#[inline(always)]
pub(super) fn committed() {
    if let Some(mut q) = CtaState::current().copy_queue() {
        q.commit();
    }
}

/// `cp.async.wait_group newest` by the calling thread: every committed
/// group but the newest `newest` completes, oldest first.
#[inline(always)]
pub(super) fn waited(newest: u32, recheck: Recheck) {
    while let Some(c) = next(|q| q.complete_next(newest)) {
        recheck(&c);
    }
}

/// The calling thread returns: its copies in flight complete.
#[inline(always)]
pub(super) fn returned(recheck: Recheck) {
    while let Some(c) = next(|q| q.pop_front()) {
        recheck(&c);
    }
}

/// The copy `take` removes from the calling thread's queue, the queue's
/// borrow ended before the caller checks it (the check reads the queue).
#[inline(always)]
fn next(
    take: impl FnOnce(&mut vigil_shared::copies_in_flight::CopyQueue<'static>) -> Option<InFlightCopy>,
) -> Option<InFlightCopy> {
    take(&mut CtaState::current().copy_queue()?)
}

/// The copy of `BYTES` bytes into `shared` from `global_bytes` bytes at
/// `global`, issued at `loc`, as its queue keeps it.
#[inline(always)]
pub(super) fn copy_of(
    shared: SharedAccess,
    global: usize,
    global_bytes: usize,
    loc: &'static Location<'static>,
) -> InFlightCopy {
    InFlightCopy {
        shared: shared.addr as u64,
        shared_bytes: shared.size as u32,
        array: shared.array as u64,
        array_bytes: shared.array_bytes as u32,
        shadow: shared.shadow as u64,
        site: shared
            .site
            .map_or(0, |l| l as *const Location<'static> as u64),
        global: global as u64,
        global_bytes: global_bytes as u32,
        location: loc as *const Location<'static> as u64,
    }
}

/// The destination of `c` as a shared access (a write).
#[inline(always)]
pub(super) fn destination(c: &InFlightCopy) -> SharedAccess {
    SharedAccess {
        addr: c.shared as usize,
        size: c.shared_bytes as usize,
        kind: vigil_shared::AccessKind::Write,
        array: c.array as usize,
        array_bytes: c.array_bytes as usize,
        shadow: c.shadow as usize,
        // SAFETY: `site` is 0 or the address of a `'static` `Location`
        // (`copy_of`).
        site: (c.site != 0).then(|| unsafe { &*(c.site as *const Location<'static>) }),
    }
}

/// Where `c` was issued.
#[inline(always)]
pub(super) fn location(c: &InFlightCopy) -> &'static Location<'static> {
    // SAFETY: the address of the issuing site's `'static` `Location`
    // (`copy_of`).
    unsafe { &*(c.location as *const Location<'static>) }
}
