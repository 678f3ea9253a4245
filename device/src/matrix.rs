//! Two-dimensional views of global memory: a row-major `rows` x `cols`
//! matrix whose rows lie `stride` elements apart.
//!
//! [`GlobalMatrix`] is a kernel parameter (`#[shape(rows, cols)] x:
//! GlobalMatrix<f32>`: the launch proves the buffer holds the matrix) and
//! the read view of a block's tile ([`BlockTiles`](crate::partition::BlockTiles));
//! [`GlobalMatrixMut`] is the view of a tile a block owns
//! ([`BlockTilesMut`](crate::partition::BlockTilesMut)). Both take
//! [`Point`]s: `matrix.point(row, col)` is the one check (the CUDA twin's
//! `if (row < rows && col < cols)`), after which every access at that
//! point or a neighbour ([`Point::left`] and friends) checks nothing.

use crate::bounded::Point;
use crate::global::{out_of_bounds, GlobalPtr, GlobalPtrMut};
use crate::sanitizer::{Plain, Sanitizer};
use core::marker::PhantomData;

/// The element offset of `p` in a view of `rows` x `cols` with rows
/// `stride` apart, or an out-of-bounds stop when `p` was checked against
/// a larger matrix (a comparison the compiler decides when the shapes are
/// the same values).
#[inline(always)]
#[track_caller]
fn offset(p: Point, rows: usize, cols: usize, stride: usize) -> usize {
    if p.rows() > rows || p.cols() > cols {
        out_of_bounds(p.row() * stride + p.col(), rows * stride)
    }
    p.row() * stride + p.col()
}

macro_rules! matrix_common {
    ($name:ident, $ptr:ty) => {
        impl<T, S> Clone for $name<T, S> {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T, S> Copy for $name<T, S> {}
        impl<T, S> core::fmt::Debug for $name<T, S> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("ptr", &self.ptr)
                    .field("rows", &self.rows)
                    .field("cols", &self.cols)
                    .field("stride", &self.stride)
                    .finish_non_exhaustive()
            }
        }

        impl<T: bytemuck::Pod, S: Sanitizer> $name<T, S> {
            /// A view of `rows` x `cols` elements at `ptr`, rows `stride`
            /// elements apart.
            ///
            /// # Safety
            /// `stride >= cols`, and for every `r < rows` and `c < cols`,
            /// element `r * stride + c` of `ptr` must be valid, aligned
            /// global memory for the whole launch (the same rules on
            /// writes and shared borrows as
            /// [`GlobalSlice::from_raw_parts`](crate::GlobalSlice::from_raw_parts)).
            #[inline(always)]
            pub const unsafe fn from_raw_parts(
                ptr: $ptr,
                rows: usize,
                cols: usize,
                stride: usize,
            ) -> Self {
                $name {
                    ptr,
                    rows,
                    cols,
                    stride,
                    _s: PhantomData,
                }
            }

            /// Rows.
            #[inline(always)]
            pub fn rows(&self) -> usize {
                self.rows
            }

            /// Columns.
            #[inline(always)]
            pub fn cols(&self) -> usize {
                self.cols
            }

            /// Elements from one row to the next.
            #[inline(always)]
            pub fn stride(&self) -> usize {
                self.stride
            }

            /// `(row, col)` as a [`Point`] of this matrix, when it is one:
            /// the one check.
            #[inline(always)]
            pub fn point(&self, row: usize, col: usize) -> Option<Point> {
                Point::checked(row, col, self.rows, self.cols)
            }

            /// Reads the element at `p`. No check when `p` was checked
            /// against this matrix's shape or a smaller one; otherwise the
            /// shapes are compared (panics, traps on the GPU, if `p`'s
            /// matrix is larger).
            #[inline(always)]
            #[track_caller]
            pub fn load_at(&self, p: Point) -> T {
                let i = offset(p, self.rows, self.cols, self.stride);
                // SAFETY: `p` is inside the matrix (the constructor's contract).
                unsafe { GlobalPtr::<T, S>::from_raw(self.ptr.add(i)).load() }
            }
        }
    };
}

/// A read-only `rows` x `cols` matrix in global memory, row-major, rows
/// `stride()` elements apart.
///
/// As a kernel parameter it needs its shape, from scalar parameters or
/// constants, which the launch proves the buffer holds (the buffer has at
/// least `rows * cols` elements, or the launch fails with
/// `Error::Argument`); it then views the buffer with `stride() == cols()`:
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// `out[r][c]` = the sum of `x[r][c]` and its left neighbour (0 in column 0).
/// #[kernel]
/// pub fn left_sum(
///     rows: usize,
///     cols: usize,
///     #[shape(rows, cols)] x: GlobalMatrix<f32>,
///     #[shape(rows, cols)] out: ThreadCellsMut<f32>,
/// ) {
///     if let Some((p, cell)) = out.own() {
///         let left = p.left().map_or(0.0, |l| x.load_at(l));
///         cell.store(x.load_at(p) + left);
///     }
/// }
/// ```
pub struct GlobalMatrix<T, S = Plain> {
    ptr: *const T,
    rows: usize,
    cols: usize,
    stride: usize,
    _s: PhantomData<S>,
}
matrix_common!(GlobalMatrix, *const T);

impl<T: bytemuck::Pod, S: Sanitizer> GlobalMatrix<T, S> {
    /// A handle to the element at `p`; checked as [`load_at`](Self::load_at).
    #[inline(always)]
    #[track_caller]
    pub fn ptr_at(&self, p: Point) -> GlobalPtr<T, S> {
        let i = offset(p, self.rows, self.cols, self.stride);
        // SAFETY: `p` is inside the matrix (the constructor's contract).
        unsafe { GlobalPtr::from_raw(self.ptr.add(i)) }
    }
}

/// A read-write `rows` x `cols` matrix in global memory: the tile a block
/// owns ([`BlockTilesMut::own`](crate::partition::BlockTilesMut::own)).
pub struct GlobalMatrixMut<T, S = Plain> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    stride: usize,
    _s: PhantomData<S>,
}
matrix_common!(GlobalMatrixMut, *mut T);

impl<T: bytemuck::Pod, S: Sanitizer> GlobalMatrixMut<T, S> {
    /// Writes the element at `p`; checked as [`load_at`](Self::load_at).
    #[inline(always)]
    #[track_caller]
    pub fn store_at(&self, p: Point, v: T) {
        self.ptr_at(p).store(v)
    }

    /// A handle to the element at `p`, for atomics; checked as
    /// [`load_at`](Self::load_at).
    #[inline(always)]
    #[track_caller]
    pub fn ptr_at(&self, p: Point) -> GlobalPtrMut<T, S> {
        let i = offset(p, self.rows, self.cols, self.stride);
        // SAFETY: `p` is inside the matrix (the constructor's contract).
        unsafe { GlobalPtrMut::from_raw(self.ptr.add(i)) }
    }

    /// A read-only view of the same elements.
    #[inline(always)]
    pub fn as_const(&self) -> GlobalMatrix<T, S> {
        GlobalMatrix {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            stride: self.stride,
            _s: PhantomData,
        }
    }
}
