//! Partitions: kernel parameters that give each thread or block of the
//! launch its own part of a buffer.
//!
//! A `GlobalSliceMut` lets every thread write anywhere; whether two of
//! them write the same element is the race sanitizer's question. A
//! partition answers it before the kernel runs: the kernel declares how
//! the buffer is split among the launch's threads or blocks, each gets
//! write access to its own part only (`own()`), and the launch proves from
//! its grid and block that the parts lie inside the buffer, never overlap
//! and cover it, or fails with `Error::Argument` naming the parameter and
//! the geometry (`vigil_shared::proofs::check`). The proof also removes
//! the bounds checks: a part is in bounds by construction.
//!
//! | parameter | each ... owns | the launch needs |
//! | --- | --- | --- |
//! | [`ThreadElemsMut<T>`] | thread: element `global_index_x()` | x only; `grid.x * block.x >= len` |
//! | [`ThreadCellsMut<T>`] `#[shape(r, c)]` | thread: cell (global y, global x) | no z; the grid covers `r` x `c` |
//! | [`GridStrideMut<T>`] | thread: `g, g + grid_stride_x(), ...` | x only |
//! | [`BlockChunksMut<T>`] `#[chunk(n)]` | block `b`: elements `[b n, (b + 1) n)` | x only; `grid.x * n == len` |
//! | [`BlockTilesMut<T>`] `#[shape(r, c)] #[tile(tr, tc)]` | block: one `tr` x `tc` tile | no z; one block per tile |
//!
//! [`BlockChunks`] and [`BlockTiles`] are the read-only forms: each block
//! reads its own chunk or tile, which need only lie inside the buffer.
//! Sizes name scalar parameters of the kernel or are constants; a tile is
//! `#[tile(tr, tc, transposed)]` when block `(x, y)` takes tile row `x`
//! (the output of a transpose).
//!
//! Threads of one block share their block's chunk or tile: races among
//! them are the sanitizer's (or split the part further, e.g. with
//! [`GlobalSliceMut::strided`](crate::GlobalSliceMut::strided)).
//!
//! A layout the parameter's type needs, or one it cannot take, is a
//! compile error that says which attributes the type takes:
//!
//! ```compile_fail
//! use vigil_device::prelude::*;
//!
//! #[kernel]
//! pub fn cells(y: ThreadCellsMut<u32>) {} // needs #[shape(rows, cols)]
//! ```
//!
//! ```compile_fail
//! use vigil_device::prelude::*;
//!
//! #[kernel]
//! pub fn elems(n: usize, #[chunk(n)] y: ThreadElemsMut<u32>) {} // takes no layout
//! ```
//!
//! A size names an unsigned integer parameter or is a constant:
//!
//! ```compile_fail
//! use vigil_device::prelude::*;
//!
//! #[kernel]
//! pub fn rows(n: f32, #[chunk(n)] y: BlockChunksMut<u32>) {}
//! ```
//!
//! and `#[same_len]` names another view with a length of its own:
//!
//! ```compile_fail
//! use vigil_device::prelude::*;
//!
//! #[kernel]
//! pub fn copy(n: usize, #[same_len(n)] x: GlobalSlice<u32>, y: ThreadElemsMut<u32>) {}
//! ```

mod block;
mod thread;

pub use block::{BlockChunks, BlockChunksMut, BlockTiles, BlockTilesMut};
pub use thread::{GridStrideMut, ThreadCellsMut, ThreadElemsMut};

/// `Clone`, `Copy` and `Debug` for a partition handle (by hand: `T` and
/// `S` need not be any of them).
macro_rules! handle_traits {
    ($name:ident { $($field:ident),* }) => {
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
                    $(.field(stringify!($field), &self.$field))*
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use handle_traits;
