//! Indices proven in bounds once, then trusted by every access.
//!
//! `slice.load(i)` checks `i < len` at every access: on the GPU a 64-bit
//! compare and a branch per access, which is what keeps a checked
//! stencil or softmax behind its CUDA C++ twin. An [`Idx`] is minted by a
//! check the kernel makes anyway (`slice.index(i)` is the twin's
//! `if (i < n)`, a loop's condition is the check of every index the loop
//! yields), and carries the length it was checked against. A view trusts
//! it when that length is at most its own ([`GlobalSlice::load_at`]): one
//! comparison of two lengths, which the compiler decides when both are
//! the same value (one view's `index`, or two views the launch proved
//! equally long with `#[same_len]`) and otherwise hoists out of loops.
//!
//! [`Point`] is the two-dimensional form, minted by a matrix view
//! (`matrix.point(row, col)`) or a partition that owns a cell, and trusted
//! by every view whose rows and columns are at least its own.
//!
//! ```no_run
//! use vigil_device::prelude::*;
//!
//! /// `y[i] = a * x[i] + y[i]`: one check per thread, as in CUDA C++.
//! #[kernel]
//! pub fn axpy(a: f32, #[same_len(y)] x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
//!     if let Some(i) = y.index(global_index_x()) {
//!         y.store_at(i, a * x.load_at(i) + y.load_at(i));
//!     }
//! }
//! ```

use crate::global::{out_of_bounds, GlobalPtr, GlobalPtrMut, GlobalSlice, GlobalSliceMut};
use crate::sanitizer::Sanitizer;

/// An index checked against a length: `index() < bound()`. Only views
/// mint one ([`GlobalSlice::index`], the [`Indices`] of a loop, a
/// partition's part), so holding one is the proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Idx {
    i: usize,
    bound: usize,
}

impl Idx {
    /// The index.
    #[inline(always)]
    pub const fn get(self) -> usize {
        self.i
    }

    /// The length it was checked against: every view at least this long
    /// accepts it without a check.
    #[inline(always)]
    pub const fn bound(self) -> usize {
        self.bound
    }

    /// `i` under `bound`, when it is.
    #[inline(always)]
    pub(crate) const fn checked(i: usize, bound: usize) -> Option<Idx> {
        if i < bound {
            Some(Idx { i, bound })
        } else {
            None
        }
    }
}

/// The indices `start, start + step, ...` below a view's length, each an
/// [`Idx`]: the loop's condition is the only check. A step of 0 counts as
/// 1.
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// Each block scales its row of `cols` elements; its threads take
/// /// every `block_dim().x`-th element of it.
/// #[kernel]
/// pub fn scale_rows(cols: usize, a: f32, #[chunk(cols)] rows: BlockChunksMut<f32>) {
///     let row = rows.own();
///     for i in row.strided(thread_idx().x as usize, block_dim().x as usize) {
///         row.store_at(i, a * row.load_at(i));
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Indices {
    next: usize,
    step: usize,
    bound: usize,
}

impl Indices {
    #[inline(always)]
    pub(crate) fn new(start: usize, step: usize, bound: usize) -> Indices {
        Indices {
            next: start,
            step: if step == 0 { 1 } else { step },
            bound,
        }
    }
}

impl Iterator for Indices {
    type Item = Idx;

    #[inline(always)]
    fn next(&mut self) -> Option<Idx> {
        let idx = Idx::checked(self.next, self.bound)?;
        // Wrapping: past `usize::MAX` the loop would restart below the
        // bound, which is still in bounds.
        self.next = self.next.wrapping_add(self.step);
        Some(idx)
    }
}

/// A cell of a matrix: `row < rows()` and `col < cols()`. Minted by a
/// matrix view ([`GlobalMatrix::point`](crate::matrix::GlobalMatrix::point))
/// or a partition that owns a cell; every matrix view with at least as
/// many rows and columns accepts it without a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Point {
    row: usize,
    col: usize,
    rows: usize,
    cols: usize,
}

impl Point {
    /// `(row, col)` in a `rows` x `cols` matrix, when it is inside.
    #[inline(always)]
    pub(crate) const fn checked(row: usize, col: usize, rows: usize, cols: usize) -> Option<Point> {
        if row < rows && col < cols {
            Some(Point {
                row,
                col,
                rows,
                cols,
            })
        } else {
            None
        }
    }

    /// The row.
    #[inline(always)]
    pub const fn row(self) -> usize {
        self.row
    }

    /// The column.
    #[inline(always)]
    pub const fn col(self) -> usize {
        self.col
    }

    /// The rows of the matrix it was checked against.
    #[inline(always)]
    pub const fn rows(self) -> usize {
        self.rows
    }

    /// The columns of the matrix it was checked against.
    #[inline(always)]
    pub const fn cols(self) -> usize {
        self.cols
    }

    /// The cell to the left, unless this one is in column 0.
    #[inline(always)]
    pub const fn left(self) -> Option<Point> {
        if self.col > 0 {
            Some(Point {
                col: self.col - 1,
                ..self
            })
        } else {
            None
        }
    }

    /// The cell to the right, unless this one is in the last column.
    #[inline(always)]
    pub const fn right(self) -> Option<Point> {
        if self.col + 1 < self.cols {
            Some(Point {
                col: self.col + 1,
                ..self
            })
        } else {
            None
        }
    }

    /// The cell above (row - 1), unless this one is in row 0.
    #[inline(always)]
    pub const fn up(self) -> Option<Point> {
        if self.row > 0 {
            Some(Point {
                row: self.row - 1,
                ..self
            })
        } else {
            None
        }
    }

    /// The cell below (row + 1), unless this one is in the last row.
    #[inline(always)]
    pub const fn down(self) -> Option<Point> {
        if self.row + 1 < self.rows {
            Some(Point {
                row: self.row + 1,
                ..self
            })
        } else {
            None
        }
    }

    /// The four neighbours `[left, right, up, down]` of an inner cell;
    /// `None` on the matrix's border.
    #[inline(always)]
    pub const fn neighbours(self) -> Option<[Point; 4]> {
        match (self.left(), self.right(), self.up(), self.down()) {
            (Some(l), Some(r), Some(u), Some(d)) => Some([l, r, u, d]),
            _ => None,
        }
    }
}

/// `i` as an index of a view of `len` elements: its own when `i` was
/// checked against at most `len`, else an out-of-bounds stop.
#[inline(always)]
#[track_caller]
pub(crate) fn trust(i: Idx, len: usize) -> usize {
    if i.bound > len {
        out_of_bounds(i.i, len)
    }
    i.i
}

/// Where the index and proof methods of both slice handles live.
macro_rules! slice_indices {
    ($name:ident) => {
        impl<T: bytemuck::Pod, S: Sanitizer> $name<T, S> {
            /// `i` as an [`Idx`] of this slice, when `i < len()`: the one
            /// check, after which [`load_at`](Self::load_at) and the
            /// other `_at` methods check nothing.
            #[inline(always)]
            pub fn index(&self, i: usize) -> Option<Idx> {
                Idx::checked(i, self.len())
            }

            /// Every index of the slice, in order.
            #[inline(always)]
            pub fn indices(&self) -> Indices {
                Indices::new(0, 1, self.len())
            }

            /// The indices `start, start + step, ...` below `len()`: the
            /// loop of a thread that takes every `step`-th element.
            #[inline(always)]
            pub fn strided(&self, start: usize, step: usize) -> Indices {
                Indices::new(start, step, self.len())
            }
        }
    };
}
slice_indices!(GlobalSlice);
slice_indices!(GlobalSliceMut);

impl<T: bytemuck::Pod, S: Sanitizer> GlobalSlice<T, S> {
    /// Reads element `i`. No check when `i` was checked against this
    /// slice or one at most as long; otherwise the lengths are compared
    /// (panics, traps on the GPU, if `i.bound() > len()`).
    #[inline(always)]
    #[track_caller]
    pub fn load_at(&self, i: Idx) -> T {
        self.ptr_at(i).load()
    }

    /// A handle to element `i`, checked as [`load_at`](Self::load_at).
    #[inline(always)]
    #[track_caller]
    pub fn ptr_at(&self, i: Idx) -> GlobalPtr<T, S> {
        let i = trust(i, self.len());
        // SAFETY: `i < len()` (proven by the index and its bound).
        unsafe { GlobalPtr::from_raw(self.as_ptr().add(i)) }
    }
}

impl<T: bytemuck::Pod, S: Sanitizer> GlobalSliceMut<T, S> {
    /// Reads element `i`; see [`GlobalSlice::load_at`].
    #[inline(always)]
    #[track_caller]
    pub fn load_at(&self, i: Idx) -> T {
        self.ptr_at(i).load()
    }

    /// Writes element `i`; checked as [`GlobalSlice::load_at`].
    #[inline(always)]
    #[track_caller]
    pub fn store_at(&self, i: Idx, v: T) {
        self.ptr_at(i).store(v)
    }

    /// A handle to element `i`, for atomics; checked as
    /// [`GlobalSlice::load_at`].
    #[inline(always)]
    #[track_caller]
    pub fn ptr_at(&self, i: Idx) -> GlobalPtrMut<T, S> {
        let i = trust(i, self.len());
        // SAFETY: `i < len()` (proven by the index and its bound).
        unsafe { GlobalPtrMut::from_raw(self.as_ptr().add(i)) }
    }
}
