//! Per-block parts: a chunk of a buffer or a tile of a matrix per block,
//! read-only or owned.

use super::handle_traits;
use crate::arch::imp;
use crate::global::{GlobalSlice, GlobalSliceMut};
use crate::matrix::{GlobalMatrix, GlobalMatrixMut};
use crate::sanitizer::{Plain, Sanitizer};
use core::marker::PhantomData;
use vigil_shared::proofs::{tile_origin, TileOrder};

/// Where block `block_idx().x`'s chunk of `chunk` elements starts.
#[inline(always)]
fn chunk_start(chunk: usize) -> usize {
    imp::block_idx_x() as usize * chunk
}

macro_rules! block_chunks {
    ($(#[$doc:meta])* $name:ident, $ptr:ty, $view:ident) => {
        $(#[$doc])*
        pub struct $name<T, S = Plain> {
            ptr: $ptr,
            len: usize,
            chunk: usize,
            _s: PhantomData<S>,
        }
        handle_traits!($name { ptr, len, chunk });

        impl<T: bytemuck::Pod, S: Sanitizer> $name<T, S> {
            /// The buffer of `len` elements at `ptr` in chunks of `chunk`.
            ///
            /// # Safety
            /// `ptr` must be valid, aligned global memory for `len`
            /// elements for the whole launch, and every block's chunk must
            /// lie inside: `grid_dim().x * chunk <= len`.
            #[inline(always)]
            pub const unsafe fn from_raw_parts(ptr: $ptr, len: usize, chunk: usize) -> Self {
                $name {
                    ptr,
                    len,
                    chunk,
                    _s: PhantomData,
                }
            }

            /// Elements in the whole buffer.
            #[inline(always)]
            pub fn len(&self) -> usize {
                self.len
            }

            /// True when the buffer holds no element.
            #[inline(always)]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Elements per block.
            #[inline(always)]
            pub fn chunk(&self) -> usize {
                self.chunk
            }

            /// This block's chunk: `chunk()` elements from
            /// `block_idx().x * chunk()`, in bounds by the launch's proof
            /// (no check).
            #[inline(always)]
            pub fn own(&self) -> $view<T, S> {
                // SAFETY: the block's chunk lies inside the buffer (the
                // constructor's contract, which the launch proved).
                unsafe { $view::from_raw_parts(self.ptr.add(chunk_start(self.chunk)), self.chunk) }
            }
        }
    };
}

block_chunks!(
    /// A read-only buffer in chunks of `chunk` elements, one per block of
    /// a grid that extends in x only: block `b` reads elements
    /// `[b * chunk, (b + 1) * chunk)`. Declared with `#[chunk(n)]`; the
    /// launch proves every block's chunk lies inside
    /// (`grid.x * chunk <= len`).
    ///
    /// ```no_run
    /// use vigil_device::prelude::*;
    ///
    /// /// `sums[b]` = the sum of row `b` of a `rows` x `cols` matrix.
    /// #[kernel]
    /// pub fn row_sums(cols: usize, #[chunk(cols)] x: BlockChunks<f32>, #[chunk(1)] sums: BlockChunksMut<f32>) {
    ///     if thread_idx().x == 0 {
    ///         let (row, out) = (x.own(), sums.own());
    ///         let total = row.indices().fold(0.0, |acc, i| acc + row.load_at(i));
    ///         out.store(0, total);
    ///     }
    /// }
    /// ```
    BlockChunks,
    *const T,
    GlobalSlice
);

block_chunks!(
    /// A buffer split into chunks of `chunk` elements, one per block of a
    /// grid that extends in x only: block `b` owns elements
    /// `[b * chunk, (b + 1) * chunk)` (its threads share them). Declared
    /// with `#[chunk(n)]`; the launch proves the chunks are the buffer
    /// (`grid.x * chunk == len`, `grid.y` and `grid.z` 1).
    ///
    /// ```no_run
    /// use vigil_device::prelude::*;
    ///
    /// /// Each block writes its block number over its chunk.
    /// #[kernel]
    /// pub fn stamp(n: usize, #[chunk(n)] y: BlockChunksMut<u32>) {
    ///     let mine = y.own();
    ///     for i in mine.strided(thread_idx().x as usize, block_dim().x as usize) {
    ///         mine.store_at(i, block_idx().x);
    ///     }
    /// }
    /// ```
    BlockChunksMut,
    *mut T,
    GlobalSliceMut
);

macro_rules! block_tiles {
    ($(#[$doc:meta])* $name:ident, $ptr:ty, $view:ident) => {
        $(#[$doc])*
        pub struct $name<T, S = Plain> {
            ptr: $ptr,
            rows: usize,
            cols: usize,
            tile_rows: usize,
            tile_cols: usize,
            order: TileOrder,
            _s: PhantomData<S>,
        }
        handle_traits!($name { ptr, rows, cols, tile_rows, tile_cols, order });

        impl<T: bytemuck::Pod, S: Sanitizer> $name<T, S> {
            /// The `rows` x `cols` matrix at `ptr` in tiles of
            /// `tile_rows` x `tile_cols`, block `(x, y)` taking the tile
            /// `order` gives it.
            ///
            /// # Safety
            /// `ptr` must be valid, aligned global memory for `rows * cols`
            /// elements for the whole launch, the tiles must have rows and
            /// columns, and every block's tile must start inside the
            /// matrix (under `order`, `grid_dim()` has at most
            /// `rows.div_ceil(tile_rows)` blocks along the tile rows and
            /// `cols.div_ceil(tile_cols)` along the tile columns).
            #[inline(always)]
            pub const unsafe fn from_raw_parts(
                ptr: $ptr,
                rows: usize,
                cols: usize,
                tile_rows: usize,
                tile_cols: usize,
                order: TileOrder,
            ) -> Self {
                $name {
                    ptr,
                    rows,
                    cols,
                    tile_rows,
                    tile_cols,
                    order,
                    _s: PhantomData,
                }
            }

            /// Rows of the whole matrix.
            #[inline(always)]
            pub fn rows(&self) -> usize {
                self.rows
            }

            /// Columns of the whole matrix.
            #[inline(always)]
            pub fn cols(&self) -> usize {
                self.cols
            }

            /// This block's tile: `tile_rows` x `tile_cols`, cut at the
            /// matrix's last row and column, in bounds by the launch's
            /// proof (no check). Its points are tile-relative:
            /// `tile.point(r, c)` is row `r`, column `c` of the tile.
            #[inline(always)]
            pub fn own(&self) -> $view<T, S> {
                let (r0, c0) = tile_origin(
                    self.order,
                    imp::block_idx_x() as u64,
                    imp::block_idx_y() as u64,
                    self.tile_rows as u64,
                    self.tile_cols as u64,
                );
                let (r0, c0) = (r0 as usize, c0 as usize);
                let rows = (self.rows - r0).min(self.tile_rows);
                let cols = (self.cols - c0).min(self.tile_cols);
                // SAFETY: the tile starts inside the matrix (`r0 < rows`,
                // `c0 < cols`: the constructor's contract) and is cut at its
                // edges; rows stay `self.cols >= cols` apart.
                unsafe {
                    $view::from_raw_parts(self.ptr.add(r0 * self.cols + c0), rows, cols, self.cols)
                }
            }
        }
    };
}

block_tiles!(
    /// A read-only `rows` x `cols` row-major matrix in tiles, one per
    /// block of a grid that does not extend in z: block `(x, y)` reads
    /// tile row `y`, tile column `x` (`#[tile(tr, tc)]`), or tile row `x`,
    /// tile column `y` (`#[tile(tr, tc, transposed)]`). Declared with
    /// `#[shape(rows, cols)]` and a `#[tile]`; the launch proves the buffer
    /// holds the matrix and every block's tile starts inside it.
    BlockTiles,
    *const T,
    GlobalMatrix
);

block_tiles!(
    /// A `rows` x `cols` row-major matrix split into tiles, one per block
    /// of a grid that does not extend in z: block `(x, y)` owns tile row
    /// `y`, tile column `x` (`#[tile(tr, tc)]`), or tile row `x`, tile
    /// column `y` (`#[tile(tr, tc, transposed)]`); its threads share the
    /// tile. Declared with `#[shape(rows, cols)]` and a `#[tile]`; the
    /// launch proves the buffer holds the matrix and has exactly one
    /// block per tile.
    ///
    /// ```no_run
    /// use vigil_device::prelude::*;
    ///
    /// /// Each block fills its 16 x 16 tile with its block number.
    /// #[kernel]
    /// pub fn fill_tiles(rows: usize, cols: usize, #[shape(rows, cols)] #[tile(16, 16)] m: BlockTilesMut<u32>) {
    ///     let tile = m.own();
    ///     let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    ///     if let Some(p) = tile.point(ty, tx) {
    ///         tile.store_at(p, block_idx().x + block_idx().y * grid_dim().x);
    ///     }
    /// }
    /// ```
    BlockTilesMut,
    *mut T,
    GlobalMatrixMut
);
