//! What the race sanitizer is told about an asynchronous copy: the one
//! place that turns a copy into sanitizer accesses.
//!
//! A copy is a set of accesses ([`CopyAccess`]): its source reads, then
//! its destination writes, in units of [`REPORT_UNIT`] bytes (the access
//! sizes the GPU sanitizer's lean paths take). The callers decide when
//! and as what: the CPU backend tells its runtime of each access twice,
//! at the issue (checked as the issuing thread's, then in flight) and at
//! the completion a thread waits for (from then on that thread's); the
//! GPU reports them where the issuing thread issues it, as that thread's
//! plain accesses, since no thread runs at the completion of a copy the
//! hardware makes.

use crate::sanitizer::SharedAccess;
use vigil_shared::tensor_map::{TiledMap, MAX_RANK};
use vigil_shared::AccessKind;

/// Where a copy's global side is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GlobalSide {
    /// `bytes` contiguous bytes at `addr` (for a load, the rest of the
    /// shared range is zero-filled).
    Linear {
        /// First byte.
        addr: usize,
        /// Bytes read or written.
        bytes: usize,
    },
    /// The box of a tensor map at `coords`.
    Tensor {
        /// The map, as Vigil describes it.
        map: TiledMap,
        /// The box's first element, innermost first.
        coords: [i32; MAX_RANK],
    },
}

impl GlobalSide {
    /// Calls `f` with each contiguous range the copy reads or writes, as
    /// (address, bytes), in the order it moves them (a tensor copy's rows
    /// inside the tensor).
    #[inline]
    pub(crate) fn for_each_range(&self, mut f: impl FnMut(usize, usize)) {
        match *self {
            GlobalSide::Linear { addr, bytes } => {
                if bytes > 0 {
                    f(addr, bytes)
                }
            }
            GlobalSide::Tensor { map, coords } => {
                let eb = map.elem_bytes as usize;
                map.for_each_row(coords, |row| {
                    if row.end > row.first {
                        let start = (row.global as usize).wrapping_add(row.first * eb);
                        f(start, (row.end - row.first) * eb)
                    }
                })
            }
        }
    }
}

/// One access of an asynchronous copy, as the sanitizer hears of it (at
/// most 16 bytes, the widest access a thread makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyAccess {
    /// `size` bytes of global memory at `addr`: read by a load into
    /// shared memory, written by a store out of it.
    Global {
        /// First byte.
        addr: usize,
        /// Bytes.
        size: usize,
        /// [`AccessKind::Read`] or [`AccessKind::Write`].
        kind: AccessKind,
    },
    /// Its shared side (written by a load, read by a store).
    Shared(SharedAccess),
}

/// Which way a copy moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Global memory into shared memory (`cp.async`, bulk and tensor loads).
    ToShared,
    /// Shared memory into global memory (bulk and tensor stores).
    ToGlobal,
}

impl Direction {
    /// What a copy this way does to global memory and to shared memory.
    #[inline]
    pub(crate) fn kinds(self) -> (AccessKind, AccessKind) {
        match self {
            Direction::ToShared => (AccessKind::Read, AccessKind::Write),
            Direction::ToGlobal => (AccessKind::Write, AccessKind::Read),
        }
    }

    /// Calls `global` and `shared` (each given `with`) source first: the
    /// global side first for a load, the shared side first for a store.
    #[inline]
    pub(crate) fn in_order<W: ?Sized>(
        self,
        with: &mut W,
        global: impl FnOnce(&mut W),
        shared: impl FnOnce(&mut W),
    ) {
        match self {
            Direction::ToShared => {
                global(with);
                shared(with);
            }
            Direction::ToGlobal => {
                shared(with);
                global(with);
            }
        }
    }
}

/// Bytes per reported access: the widest access a thread makes.
pub(crate) const REPORT_UNIT: usize = 16;

/// Calls `each` with every access a copy in `direction` made, when its
/// global side was `global` and its shared side the range `shared_range`
/// describes (its `size` bytes from `addr`, in its array): first the
/// source, then the destination.
#[inline]
pub(crate) fn copy_accesses(
    direction: Direction,
    global: &GlobalSide,
    shared_range: SharedAccess,
    mut each: impl FnMut(CopyAccess),
) {
    let (global_kind, shared_kind) = direction.kinds();
    direction.in_order(
        &mut each,
        |each| {
            global.for_each_range(|addr, bytes| {
                units(addr, bytes, |addr, size| {
                    each(CopyAccess::Global {
                        addr,
                        size,
                        kind: global_kind,
                    })
                })
            })
        },
        |each| shared_units(shared_range, shared_kind, |a| each(CopyAccess::Shared(a))),
    );
}

/// Calls `each` with the accesses of kind `kind` a copy's shared side
/// `range` makes, in units of at most [`REPORT_UNIT`] bytes.
#[inline]
pub(crate) fn shared_units(
    range: SharedAccess,
    kind: AccessKind,
    mut each: impl FnMut(SharedAccess),
) {
    units(range.addr, range.size, |addr, size| {
        each(SharedAccess {
            addr,
            size,
            kind,
            ..range
        })
    });
}

/// Splits `bytes` bytes at `addr` into pieces of at most [`REPORT_UNIT`]
/// bytes that do not cross a unit boundary.
#[inline]
pub(crate) fn units(addr: usize, bytes: usize, mut f: impl FnMut(usize, usize)) {
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
            &GlobalSide::Linear {
                addr: 0x2008,
                bytes: 24,
            },
            range(0x1010, 24),
            |access| match access {
                CopyAccess::Global { addr, size, kind } => {
                    log.borrow_mut().push(("global", addr, size, kind))
                }
                CopyAccess::Shared(s) => log.borrow_mut().push(("shared", s.addr, s.size, s.kind)),
            },
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

    /// A 4 x 2 tensor of `u32` at 0x3000 whose rows are 4,096 bytes
    /// apart, its one box the whole tensor.
    fn two_rows_4096_apart() -> TiledMap {
        TiledMap {
            base: 0x3000,
            rank: 2,
            elem_bytes: 4,
            dims: [4, 2, 1, 1, 1],
            strides: [4, 0x1000, 0, 0, 0],
            box_dims: [4, 2, 1, 1, 1],
            swizzle: vigil_shared::tensor_map::Swizzle::None,
        }
    }

    #[test]
    fn a_store_reads_shared_first_and_keeps_the_array() {
        let mut seen = Vec::new();
        let log = std::cell::RefCell::new(&mut seen);
        copy_accesses(
            Direction::ToGlobal,
            &GlobalSide::Tensor {
                map: two_rows_4096_apart(),
                coords: [0; MAX_RANK],
            },
            range(0x1000, 32),
            |access| match access {
                CopyAccess::Global { addr, kind, .. } => log.borrow_mut().push((addr, kind, 0)),
                CopyAccess::Shared(s) => log.borrow_mut().push((s.addr, s.kind, s.array)),
            },
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
