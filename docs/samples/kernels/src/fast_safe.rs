//! Writing kernels: safe indexing without checks per access.

use vigil_device::math;
use vigil_device::prelude::*;

// ANCHOR: checked
/// `y[i] = a * x[i] + y[i]`, indexed by `usize`: `x.load(i)` checks `i`
/// against `x`'s length on every access (`y`'s check is the `if`).
#[kernel]
pub fn axpy_checked(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, a * x.load(i) + y.load(i));
    }
}
// ANCHOR_END: checked

// ANCHOR: axpy
/// The same, checked once: `y` gives each thread its element (or none),
/// and the launch proves `x` exactly as long as `y`, so `x` takes `y`'s
/// index unchecked. The build fails if a check is left.
#[kernel(no_runtime_checks)]
pub fn axpy_proven(a: f32, #[same_len(y)] x: GlobalSlice<f32>, y: ThreadElemsMut<f32>) {
    if let Some((i, mine)) = y.own() {
        mine.store(a * x.load_at(i) + mine.load());
    }
}
// ANCHOR_END: axpy

// ANCHOR: blur
/// A 3-point blur along rows: each cell of `out` gets the mean of `x`'s
/// cell and its left and right neighbours (itself on the border). `x` and
/// `out` are the same `rows` x `cols` matrix, so the cell's point and its
/// neighbours index `x` unchecked.
#[kernel(no_runtime_checks)]
pub fn blur_rows(
    rows: usize,
    cols: usize,
    #[shape(rows, cols)] x: GlobalMatrix<f32>,
    #[shape(rows, cols)] out: ThreadCellsMut<f32>,
) {
    if let Some((p, cell)) = out.own() {
        let v = match (p.left(), p.right()) {
            (Some(l), Some(r)) => (x.load_at(l) + x.load_at(p) + x.load_at(r)) / 3.0,
            _ => x.load_at(p),
        };
        cell.store(v);
    }
}
// ANCHOR_END: blur

// ANCHOR: normalize
/// Divides each row of a `rows` x `cols` matrix by its largest element,
/// one block per row: the block reads its row of `x` and owns its row of
/// `y`; its threads take every `block_dim().x`-th column, and each loop's
/// condition is the only check.
#[kernel(no_runtime_checks)]
pub fn normalize_rows(
    cols: usize,
    #[chunk(cols)] x: BlockChunks<f32>,
    #[chunk(cols)] y: BlockChunksMut<f32>,
) {
    let (x, y) = (x.own(), y.own());
    let (t, threads) = (thread_idx().x as usize, block_dim().x as usize);
    // Every thread scans the row for the maximum: no shared memory needed.
    let top = x
        .indices()
        .fold(f32::NEG_INFINITY, |m, i| math::max(m, x.load_at(i)));
    for i in y.strided(t, threads) {
        y.store_at(i, x.load_at(i) / top);
    }
}
// ANCHOR_END: normalize

// ANCHOR: transpose
/// Side of the tiles of [`transpose()`].
pub const TILE: usize = 32;
/// Rows of threads per block of [`transpose()`].
pub const ROWS: usize = 8;

/// `y = x^T` through a shared tile. Block `(bx, by)` reads tile
/// `(by, bx)` of `x` and owns tile `(bx, by)` of `y` (a transposed
/// tiling); the declared block shape proves `thread_idx().x < TILE`, so
/// the shared tile's indices need no check either.
#[kernel(block = (TILE, ROWS), no_runtime_checks)]
pub fn transpose(
    rows: usize,
    cols: usize,
    #[shape(rows, cols)]
    #[tile(TILE, TILE)]
    x: BlockTiles<f32>,
    #[shape(cols, rows)]
    #[tile(TILE, TILE, transposed)]
    y: BlockTilesMut<f32>,
) {
    let tile = shared_array!(f32; TILE * (TILE + 1));
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let (input, output) = (x.own(), y.own());
    for j in (ty..TILE).step_by(ROWS) {
        if let Some(p) = input.point(j, tx) {
            tile.store(j * (TILE + 1) + tx, input.load_at(p));
        }
    }
    sync_threads();
    for j in (ty..TILE).step_by(ROWS) {
        if let Some(p) = output.point(j, tx) {
            output.store_at(p, tile.load(tx * (TILE + 1) + j));
        }
    }
}
// ANCHOR_END: transpose
