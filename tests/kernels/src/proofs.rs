//! Kernels whose views declare layouts a launch proves: partitions that
//! give each thread or block its own part, matrices, shared lengths and a
//! declared block shape. The partition kernels write who owned each
//! element, so a test can compare with the host's model of the mapping
//! (`vigil_shared::proofs`). Every kernel here is
//! `#[kernel(no_runtime_checks)]`: the build fails if one keeps a check.

use vigil_device::prelude::*;

/// Each thread writes `global_index_x() + 1` into its element.
#[kernel(no_runtime_checks)]
pub fn thread_elems_owner(y: ThreadElemsMut<u32>) {
    if let Some((i, mine)) = y.own() {
        mine.store(i.get() as u32 + 1);
    }
}

/// The owner mark of the thread at global `(x, y)`.
pub const fn cell_mark(x: usize, y: usize) -> u32 {
    ((y << 16) | x) as u32 + 1
}

/// Each thread writes [`cell_mark`] of its global `(x, y)` into its cell.
#[kernel(no_runtime_checks)]
pub fn thread_cells_owner(rows: usize, cols: usize, #[shape(rows, cols)] y: ThreadCellsMut<u32>) {
    if let Some((p, mine)) = y.own() {
        mine.store(cell_mark(p.col(), p.row()));
    }
}

/// Each thread writes `global_index_x() + 1` into each of its elements.
#[kernel(no_runtime_checks)]
pub fn grid_stride_owner(y: GridStrideMut<u32>) {
    let me = global_index_x() as u32 + 1;
    for (_, mine) in y.own() {
        mine.store(me);
    }
}

/// The threads of block `b` write `b + 1` over its chunk, each every
/// `block_dim().x`-th element.
#[kernel(no_runtime_checks)]
pub fn block_chunks_owner(n: usize, #[chunk(n)] y: BlockChunksMut<u32>) {
    let chunk = y.own();
    for i in chunk.strided(thread_idx().x as usize, block_dim().x as usize) {
        chunk.store_at(i, block_idx().x + 1);
    }
}

/// Rows of the tiles of [`fn@block_tiles_owner`] and friends.
pub const TILE_ROWS: usize = 4;
/// Columns of the tiles of [`fn@block_tiles_owner`] and friends.
pub const TILE_COLS: usize = 8;

/// The threads of a block write [`cell_mark`] of its block coordinates
/// over its tile (`TILE_ROWS` x `TILE_COLS`, block `(x, y)` taking tile
/// row `y`).
#[kernel(no_runtime_checks)]
pub fn block_tiles_owner(
    rows: usize,
    cols: usize,
    #[shape(rows, cols)]
    #[tile(TILE_ROWS, TILE_COLS)]
    y: BlockTilesMut<u32>,
) {
    fill_tile(y.own());
}

/// [`fn@block_tiles_owner`] with block `(x, y)` taking tile row `x`.
#[kernel(no_runtime_checks)]
pub fn block_tiles_transposed_owner(
    rows: usize,
    cols: usize,
    #[shape(rows, cols)]
    #[tile(TILE_ROWS, TILE_COLS, transposed)]
    y: BlockTilesMut<u32>,
) {
    fill_tile(y.own());
}

#[inline(always)]
fn fill_tile<S: Sanitizer>(tile: GlobalMatrixMut<u32, S>) {
    let mark = cell_mark(block_idx().x as usize, block_idx().y as usize);
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let (bx, by) = (block_dim().x as usize, block_dim().y as usize);
    let mut r = ty;
    while r < tile.rows() {
        let mut c = tx;
        while c < tile.cols() {
            if let Some(p) = tile.point(r, c) {
                tile.store_at(p, mark);
            }
            c += bx;
        }
        r += by;
    }
}

/// `sums[b]` = the wrapping sum of row `b` of a `rows` x `cols` matrix
/// (a read-only chunk per block, one element of `sums` per block).
#[kernel(no_runtime_checks)]
pub fn row_sums(
    cols: usize,
    #[chunk(cols)] x: BlockChunks<u32>,
    #[chunk(1)] sums: BlockChunksMut<u32>,
) {
    if thread_idx().x == 0 {
        let (row, out) = (x.own(), sums.own());
        let total = row
            .indices()
            .fold(0u32, |acc, i| acc.wrapping_add(row.load_at(i)));
        for i in out.indices() {
            out.store_at(i, total);
        }
    }
}

/// `y[r][c] = a * x[r][c]`, one row per block, its threads taking every
/// `block_dim().x`-th column: a loop whose only check is its condition.
#[kernel(no_runtime_checks)]
pub fn scale_rows(
    cols: usize,
    a: f32,
    #[chunk(cols)] x: BlockChunks<f32>,
    #[chunk(cols)] y: BlockChunksMut<f32>,
) {
    let (x, y) = (x.own(), y.own());
    for c in y.strided(thread_idx().x as usize, block_dim().x as usize) {
        y.store_at(c, a * x.load_at(c));
    }
}

/// [`scale_rows`] written by hand over raw pointers, as a CUDA C++
/// programmer would: the plain entry of `scale_rows` must be the same
/// instructions (`tests/tests/ptx_codegen.rs`).
///
/// # Safety
/// `x` and `y` hold `gridDim.x * cols` elements.
#[cfg(target_arch = "nvptx64")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn scale_rows_handwritten(
    cols: usize,
    a: f32,
    x: *const f32,
    _x_len: usize,
    y: *mut f32,
    _y_len: usize,
) {
    use core::arch::nvptx::*;
    let base = _block_idx_x() as usize * cols;
    let mut c = _thread_idx_x() as usize;
    while c < cols {
        *y.add(base + c) = a * *x.add(base + c);
        c += _block_dim_x() as usize;
    }
}

/// `out[r][c]` = the sum of the four neighbours of `x[r][c]`, or `x[r][c]`
/// itself on the border: a matrix read at a partition's points and their
/// neighbours.
#[kernel(no_runtime_checks)]
pub fn neighbour_sum(
    rows: usize,
    cols: usize,
    #[shape(rows, cols)] x: GlobalMatrix<f32>,
    #[shape(rows, cols)] out: ThreadCellsMut<f32>,
) {
    if let Some((p, mine)) = out.own() {
        let v = match p.neighbours() {
            Some([l, r, u, d]) => x.load_at(l) + x.load_at(r) + x.load_at(u) + x.load_at(d),
            None => x.load_at(p),
        };
        mine.store(v);
    }
}

/// `y[i] = x[i]`: two views of one length, one of them a partition.
#[kernel(no_runtime_checks)]
pub fn copy_elems(#[same_len(y)] x: GlobalSlice<u32>, y: ThreadElemsMut<u32>) {
    if let Some((i, mine)) = y.own() {
        mine.store(x.load_at(i));
    }
}

/// [`fn@copy_elems`] with `x` read at an index checked against `y` only:
/// one check per thread stays (`x` may be shorter). The codegen test's
/// evidence that it sees a check where there is one.
#[kernel]
pub fn copy_checked(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, x.load(i));
    }
}

/// Side of the tiles of [`fn@transpose_tiles`].
pub const TRANSPOSE_TILE: usize = 16;
/// Rows of threads per block of [`fn@transpose_tiles`].
pub const TRANSPOSE_ROWS: usize = 4;

/// `y = x^T` for a `rows` x `cols` matrix `x`, through a shared tile: the
/// input in natural tiles, the output in transposed ones, and a declared
/// block shape that proves the shared tile's indices.
#[kernel(block = (TRANSPOSE_TILE, TRANSPOSE_ROWS), no_runtime_checks)]
pub fn transpose_tiles(
    rows: usize,
    cols: usize,
    #[shape(rows, cols)]
    #[tile(TRANSPOSE_TILE, TRANSPOSE_TILE)]
    x: BlockTiles<f32>,
    #[shape(cols, rows)]
    #[tile(TRANSPOSE_TILE, TRANSPOSE_TILE, transposed)]
    y: BlockTilesMut<f32>,
) {
    let tile = shared_array!(f32; TRANSPOSE_TILE * (TRANSPOSE_TILE + 1));
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let (input, output) = (x.own(), y.own());
    let mut j = ty;
    while j < TRANSPOSE_TILE {
        if let Some(p) = input.point(j, tx) {
            tile.store(j * (TRANSPOSE_TILE + 1) + tx, input.load_at(p));
        }
        j += TRANSPOSE_ROWS;
    }
    sync_threads();
    let mut j = ty;
    while j < TRANSPOSE_TILE {
        if let Some(p) = output.point(j, tx) {
            output.store_at(p, tile.load(tx * (TRANSPOSE_TILE + 1) + j));
        }
        j += TRANSPOSE_ROWS;
    }
}
