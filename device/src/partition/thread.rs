//! Per-thread partitions: one element, one cell or a grid-stride series
//! of elements per thread.

use super::handle_traits;
use crate::arch::imp;
use crate::bounded::{Idx, Indices, Point};
use crate::global::GlobalPtrMut;
use crate::index::{global_index_x, grid_stride_x};
use crate::sanitizer::{Plain, Sanitizer};
use core::marker::PhantomData;

/// A buffer split into one element per thread of a launch that extends in
/// x only: the thread whose `global_index_x()` is `i` owns element `i`.
/// The launch proves that no two threads share an element (`block.y`,
/// `block.z`, `grid.y`, `grid.z` are 1) and that they cover the buffer
/// (`grid.x * block.x >= len`).
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// `y[i] = x[i] * x[i]`.
/// #[kernel]
/// pub fn square(#[same_len(y)] x: GlobalSlice<f32>, y: ThreadElemsMut<f32>) {
///     if let Some((i, mine)) = y.own() {
///         let v = x.load_at(i);
///         mine.store(v * v);
///     }
/// }
/// ```
pub struct ThreadElemsMut<T, S = Plain> {
    ptr: *mut T,
    len: usize,
    _s: PhantomData<S>,
}
handle_traits!(ThreadElemsMut { ptr, len });

impl<T: bytemuck::Pod, S: Sanitizer> ThreadElemsMut<T, S> {
    /// The partition of `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid, aligned global memory for `len` elements for
    /// the whole launch. For the partition's promise (no two threads own
    /// one element), the launch must extend in x only.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        ThreadElemsMut {
            ptr,
            len,
            _s: PhantomData,
        }
    }

    /// Elements in the buffer.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This thread's element: its index (an [`Idx`] every view at least
    /// `len()` long takes unchecked) and a handle to it, or `None` for a
    /// thread past the end (the one check, the CUDA twin's `if (i < n)`).
    #[inline(always)]
    pub fn own(&self) -> Option<(Idx, GlobalPtrMut<T, S>)> {
        let i = Idx::checked(global_index_x(), self.len)?;
        // SAFETY: `i < len` (checked above); the buffer is valid for `len`.
        Some((i, unsafe { GlobalPtrMut::from_raw(self.ptr.add(i.get())) }))
    }
}

/// A `rows` x `cols` row-major matrix split into one cell per thread of a
/// launch that does not extend in z: the thread at
/// `(block.x * block_dim.x + thread.x, block.y * block_dim.y + thread.y)`
/// owns the cell at that column and row. Declared with
/// `#[shape(rows, cols)]`; the launch proves the buffer holds the matrix,
/// that no two threads share a cell (`block.z`, `grid.z` are 1) and that
/// the threads cover every row and column.
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// Each cell is the number of its row.
/// #[kernel]
/// pub fn row_numbers(rows: usize, cols: usize, #[shape(rows, cols)] m: ThreadCellsMut<u32>) {
///     if let Some((p, cell)) = m.own() {
///         cell.store(p.row() as u32);
///     }
/// }
/// ```
pub struct ThreadCellsMut<T, S = Plain> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    _s: PhantomData<S>,
}
handle_traits!(ThreadCellsMut { ptr, rows, cols });

impl<T: bytemuck::Pod, S: Sanitizer> ThreadCellsMut<T, S> {
    /// The partition of the `rows` x `cols` matrix at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid, aligned global memory for `rows * cols`
    /// elements for the whole launch. For the partition's promise, the
    /// launch must not extend in z.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, rows: usize, cols: usize) -> Self {
        ThreadCellsMut {
            ptr,
            rows,
            cols,
            _s: PhantomData,
        }
    }

    /// Rows of the matrix.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// This thread's cell: its [`Point`] (which every matrix view of at
    /// least this shape takes unchecked, e.g. to read the same cell and its
    /// neighbours of an input) and a handle to it, or `None` for a thread
    /// outside the matrix.
    #[inline(always)]
    pub fn own(&self) -> Option<(Point, GlobalPtrMut<T, S>)> {
        let col = imp::block_idx_x() as usize * imp::block_dim_x() as usize
            + imp::thread_idx_x() as usize;
        let row = imp::block_idx_y() as usize * imp::block_dim_y() as usize
            + imp::thread_idx_y() as usize;
        let p = Point::checked(row, col, self.rows, self.cols)?;
        // SAFETY: `row < rows` and `col < cols` (checked above): inside
        // the matrix.
        Some((p, unsafe {
            GlobalPtrMut::from_raw(self.ptr.add(row * self.cols + col))
        }))
    }
}

/// A buffer split among the threads of a launch that extends in x only by
/// a grid-stride loop: the thread whose `global_index_x()` is `g` owns
/// elements `g`, `g + s`, `g + 2 s`, ... with `s = grid_stride_x()`. The
/// launch proves that no two threads share an element; any grid covers
/// the buffer.
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// `y[i] = 2 * y[i]` with however many blocks the launch has.
/// #[kernel]
/// pub fn double(y: GridStrideMut<f32>) {
///     for (_, mine) in y.own() {
///         mine.store(2.0 * mine.load());
///     }
/// }
/// ```
pub struct GridStrideMut<T, S = Plain> {
    ptr: *mut T,
    len: usize,
    _s: PhantomData<S>,
}
handle_traits!(GridStrideMut { ptr, len });

impl<T: bytemuck::Pod, S: Sanitizer> GridStrideMut<T, S> {
    /// The partition of `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid, aligned global memory for `len` elements for
    /// the whole launch. For the partition's promise, the launch must
    /// extend in x only.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        GridStrideMut {
            ptr,
            len,
            _s: PhantomData,
        }
    }

    /// Elements in the buffer.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This thread's elements, in order: each index (an [`Idx`] every view
    /// at least `len()` long takes unchecked) and a handle to it.
    #[inline(always)]
    pub fn own(&self) -> impl Iterator<Item = (Idx, GlobalPtrMut<T, S>)> {
        let ptr = self.ptr;
        Indices::new(global_index_x(), grid_stride_x(), self.len).map(move |i| {
            // SAFETY: `i < len` (the indices stop there).
            (i, unsafe { GlobalPtrMut::from_raw(ptr.add(i.get())) })
        })
    }
}
