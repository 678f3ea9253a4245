//! What the race sanitizer is told about an asynchronous copy: the one
//! place that turns a copy into sanitizer accesses.
//!
//! For now a copy is a set of plain accesses made by the thread that
//! issued it: its source reads, then its destination writes, in units of
//! [`REPORT_UNIT`] bytes (the access sizes the GPU sanitizer's lean paths
//! take). The callers decide when: the CPU backend reports a copy when it
//! performs it, at its completion (a group wait, an mbarrier phase, the
//! thread's exit), in the name of the issuing thread; the GPU reports it
//! where the issuing thread issues it, since no thread runs at the
//! completion of a copy the hardware makes. An mbarrier wait is an
//! acquire for the block's checks, so either way the copy's shared writes
//! are ordered before the waiting threads' reads, and a copy's accesses
//! race only where plain accesses would.
//!
//! A model of the copy as an access in flight between its issue and its
//! completion replaces this module; nothing else needs to change.

use crate::sanitizer::SharedAccess;
use vigil_shared::AccessKind;

/// Which way a copy moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Global memory into shared memory (`cp.async`, bulk and tensor loads).
    ToShared,
    /// Shared memory into global memory (bulk and tensor stores).
    ToGlobal,
}

/// Bytes per reported access: the widest access a thread makes.
pub(crate) const REPORT_UNIT: usize = 16;

/// Calls `global` with each global access and `shared` with each shared
/// access a copy in `direction` made, when its global side was the
/// `(address, bytes)` ranges of `global_ranges` and its shared side the
/// range `shared_range` describes (its `size` bytes from `addr`, in its
/// array): first the source, then the destination.
#[inline]
pub(crate) fn copy_accesses(
    direction: Direction,
    global_ranges: &[(usize, usize)],
    shared_range: SharedAccess,
    mut global: impl FnMut(usize, usize, AccessKind),
    mut shared: impl FnMut(SharedAccess),
) {
    let (global_kind, shared_kind) = match direction {
        Direction::ToShared => (AccessKind::Read, AccessKind::Write),
        Direction::ToGlobal => (AccessKind::Write, AccessKind::Read),
    };
    let mut globals = || {
        for &(addr, bytes) in global_ranges {
            units(addr, bytes, |a, n| global(a, n, global_kind));
        }
    };
    let mut shareds = || {
        units(shared_range.addr, shared_range.size, |a, n| {
            shared(SharedAccess {
                addr: a,
                size: n,
                kind: shared_kind,
                ..shared_range
            })
        });
    };
    match direction {
        Direction::ToShared => {
            globals();
            shareds();
        }
        Direction::ToGlobal => {
            shareds();
            globals();
        }
    }
}

/// Splits `bytes` bytes at `addr` into pieces of at most [`REPORT_UNIT`]
/// bytes that do not cross a unit boundary.
#[inline]
fn units(addr: usize, bytes: usize, mut f: impl FnMut(usize, usize)) {
    let (mut at, end) = (addr, addr + bytes);
    while at < end {
        let next = ((at / REPORT_UNIT) + 1) * REPORT_UNIT;
        let n = next.min(end) - at;
        f(at, n);
        at += n;
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    fn range(addr: usize, size: usize) -> SharedAccess {
        SharedAccess {
            addr,
            size,
            kind: AccessKind::Read,
            array: 0x1000,
            array_bytes: 256,
            shadow: 0,
            site: None,
        }
    }

    #[test]
    fn a_load_reads_its_global_source_then_writes_its_shared_destination() {
        let mut seen = Vec::new();
        let log = std::cell::RefCell::new(&mut seen);
        copy_accesses(
            Direction::ToShared,
            &[(0x2008, 24)],
            range(0x1010, 24),
            |a, n, k| log.borrow_mut().push(("global", a, n, k)),
            |s| log.borrow_mut().push(("shared", s.addr, s.size, s.kind)),
        );
        assert_eq!(
            seen,
            [
                ("global", 0x2008, 8, AccessKind::Read),
                ("global", 0x2010, 16, AccessKind::Read),
                ("shared", 0x1010, 16, AccessKind::Write),
                ("shared", 0x1020, 8, AccessKind::Write),
            ]
        );
    }

    #[test]
    fn a_store_reads_shared_first_and_keeps_the_array() {
        let mut seen = Vec::new();
        let log = std::cell::RefCell::new(&mut seen);
        copy_accesses(
            Direction::ToGlobal,
            &[(0x3000, 16), (0x4000, 16)],
            range(0x1000, 32),
            |a, _, k| log.borrow_mut().push((a, k, 0)),
            |s| log.borrow_mut().push((s.addr, s.kind, s.array)),
        );
        assert_eq!(
            seen,
            [
                (0x1000, AccessKind::Read, 0x1000),
                (0x1010, AccessKind::Read, 0x1000),
                (0x3000, AccessKind::Write, 0),
                (0x4000, AccessKind::Write, 0),
            ]
        );
    }
}
