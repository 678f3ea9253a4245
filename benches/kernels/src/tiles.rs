//! Kernels that stage tiles of a matrix in shared memory.

use vigil_device::math;
use vigil_device::prelude::*;

/// Side of the square tiles of [`transpose()`].
pub const TILE: u32 = 32;
/// Side of the square tiles of [`sgemm()`] (16 x 16 threads per block:
/// at 32 x 32 the kernel's registers would not fit 1,024 threads).
pub const SGEMM_TILE: u32 = 16;
/// Rows of threads per block of [`transpose()`] (each thread moves
/// `TILE / TRANSPOSE_ROWS` elements).
pub const TRANSPOSE_ROWS: u32 = 8;

const T: usize = TILE as usize;
const S: usize = SGEMM_TILE as usize;

/// `y = x^T` for a `height` x `width` row-major `x` (so `y` is `width` x
/// `height`), through a padded shared-memory tile so that both the loads
/// and the stores are coalesced. Launch with blocks of `TILE` x
/// `TRANSPOSE_ROWS` threads (declared, so the shared tile's indices need
/// no check) and a grid of `ceil(width / TILE)` x `ceil(height / TILE)`
/// blocks: block `(x, y)` reads tile row `y`, column `x` of `x` and owns
/// tile row `x`, column `y` of `y`, which the launch proves.
#[kernel(block = (TILE, TRANSPOSE_ROWS), no_runtime_checks)]
pub fn transpose(
    width: usize,
    height: usize,
    #[shape(height, width)]
    #[tile(T, T)]
    x: BlockTiles<f32>,
    #[shape(width, height)]
    #[tile(T, T, transposed)]
    y: BlockTilesMut<f32>,
) {
    // One column of padding keeps a warp's column reads off a single bank.
    let tile = shared_array!(f32; T * (T + 1));
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let rows = block_dim().y as usize;
    let (input, output) = (x.own(), y.own());
    let mut j = ty;
    while j < T {
        if let Some(p) = input.point(j, tx) {
            tile.store(j * (T + 1) + tx, input.load_at(p));
        }
        j += rows;
    }
    sync_threads();
    j = ty;
    while j < T {
        if let Some(p) = output.point(j, tx) {
            output.store_at(p, tile.load(tx * (T + 1) + j));
        }
        j += rows;
    }
}

/// `c = a * b` for row-major `a` (`m` x `k`), `b` (`k` x `n`) and `c`
/// (`m` x `n`): each block computes a `SGEMM_TILE` x `SGEMM_TILE` tile of `c`
/// (which it owns) from `SGEMM_TILE` x `SGEMM_TILE` tiles of `a` and `b`
/// staged in shared memory, one output per thread. Launch with blocks of
/// `SGEMM_TILE` x `SGEMM_TILE` threads and a grid of `ceil(n / SGEMM_TILE)`
/// x `ceil(m / SGEMM_TILE)` blocks.
#[kernel(block = (SGEMM_TILE, SGEMM_TILE), no_runtime_checks)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    #[shape(m, k)] a: GlobalMatrix<f32>,
    #[shape(k, n)] b: GlobalMatrix<f32>,
    #[shape(m, n)]
    #[tile(S, S)]
    c: BlockTilesMut<f32>,
) {
    let ta = shared_array!(f32; S * S);
    let tb = shared_array!(f32; S * S);
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let row = block_idx().y as usize * S + ty;
    let col = block_idx().x as usize * S + tx;
    let mut acc = 0.0f32;
    let mut t = 0;
    while t < k {
        let av = a.point(row, t + tx).map_or(0.0, |p| a.load_at(p));
        let bv = b.point(t + ty, col).map_or(0.0, |p| b.load_at(p));
        ta.store(ty * S + tx, av);
        tb.store(ty * S + tx, bv);
        sync_threads();
        let mut kk = 0;
        while kk < S {
            // A fused multiply-add, as nvcc contracts `acc += a * b`.
            acc = math::fma(ta.load(ty * S + kk), tb.load(kk * S + tx), acc);
            kk += 1;
        }
        sync_threads();
        t += S;
    }
    let out = c.own();
    if let Some(p) = out.point(ty, tx) {
        out.store_at(p, acc);
    }
}
