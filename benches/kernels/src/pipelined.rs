//! Kernels that feed shared memory with asynchronous copies: a tiled
//! SGEMM pipelined with `cp.async` ([`sgemm_async`](fn@sgemm_async)) and with tensor
//! copies completing on mbarriers ([`sgemm_tma`](fn@sgemm_tma)), and a transpose whose
//! tiles move in and out by tensor copies ([`transpose_tma`](fn@transpose_tma)).
//!
//! Both SGEMMs compute the same 64 x 64 tile of `c` per block of 16 x 16
//! threads, each thread a 4 x 4 grid of outputs 16 rows and columns apart
//! (so that a warp's shared-memory reads are broadcasts or consecutive
//! words), from `SGEMM_STAGES` stages of a 64 x 16 tile of `a` and a
//! 16 x 64 tile of `b` in flight.

use vigil_device::async_copy::{
    bulk_commit_group, bulk_wait_group_read, commit_group, fence_proxy_async_shared, wait_group,
    Swizzle,
};
use vigil_device::math;
use vigil_device::prelude::*;
use vigil_device::shared_mem::SharedArray;

/// Rows and columns of `c` per block of the pipelined SGEMMs.
pub const SGEMM_BLOCK: usize = 64;
/// Depth of a k-step of the pipelined SGEMMs.
pub const SGEMM_K: usize = 16;
/// Stages in flight in the pipelined SGEMMs.
pub const SGEMM_STAGES: usize = 3;
/// Threads per block side of the pipelined SGEMMs (16 x 16).
pub const SGEMM_THREADS: u32 = 16;

/// Elements of one stage of `a` (64 x 16) or `b` (16 x 64).
const STAGE: usize = SGEMM_BLOCK * SGEMM_K;
/// Outputs per thread along each side.
const PER: usize = SGEMM_BLOCK / SGEMM_THREADS as usize;

/// The thread's `(x, y)` in its block of `side` x `side` threads, reduced
/// modulo `side` (a no-op in such a block) so that the compiler can prove
/// every shared-memory index in bounds and drop the checks.
#[inline(always)]
fn thread_xy(side: u32) -> (usize, usize) {
    let t = thread_idx();
    ((t.x % side) as usize, (t.y % side) as usize)
}

/// Runs `$body` once for each listed value of `$i`, unrolled (CUDA C++'s
/// `#pragma unroll`; LLVM unrolls the 16 steps of a stage only twice).
macro_rules! unrolled {
    ($i:ident in [$($v:literal),*] $body:block) => {
        $({
            let $i: usize = $v;
            $body
        })*
    };
}

/// The stage after `stage` in the ring of `SGEMM_STAGES`.
#[inline(always)]
fn next_stage(stage: u32) -> u32 {
    if stage + 1 == SGEMM_STAGES as u32 {
        0
    } else {
        stage + 1
    }
}

/// The first element of `stage` in a tile's stages, clamped (a no-op)
/// so that LLVM sees it in range and drops the shared-memory checks.
#[inline(always)]
fn stage_offset(stage: u32) -> usize {
    stage.min(SGEMM_STAGES as u32 - 1) as usize * STAGE
}

/// The 4 x 4 outputs of thread `(tx, ty)`, accumulated over one stage:
/// rows `ty + 16 i` of the `a` stage at `sa`, columns `tx + 16 j` of the
/// `b` stage at `sb`.
#[inline(always)]
fn multiply_stage<S: Sanitizer>(
    a: SharedArray<f32, { SGEMM_STAGES * STAGE }, S>,
    b: SharedArray<f32, { SGEMM_STAGES * STAGE }, S>,
    (sa, sb): (usize, usize),
    (tx, ty): (usize, usize),
    acc: &mut [[f32; PER]; PER],
) {
    let t = SGEMM_THREADS as usize;
    const _: () = assert!(SGEMM_K == 16, "the unrolled steps below are SGEMM_K's");
    unrolled!(kk in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
        let av: [f32; PER] = core::array::from_fn(|i| a.load(sa + (ty + t * i) * SGEMM_K + kk));
        let bv: [f32; PER] = core::array::from_fn(|j| b.load(sb + kk * SGEMM_BLOCK + tx + t * j));
        for i in 0..PER {
            for j in 0..PER {
                acc[i][j] = math::fma(av[i], bv[j], acc[i][j]);
            }
        }
    });
}

/// Writes thread `(tx, ty)`'s outputs of the block at `(row0, col0)` of
/// the `m` x `n` matrix `c`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn store_outputs<S: Sanitizer>(
    c: GlobalSliceMut<f32, S>,
    (m, n): (usize, usize),
    (row0, col0): (usize, usize),
    (tx, ty): (usize, usize),
    acc: &[[f32; PER]; PER],
) {
    let t = SGEMM_THREADS as usize;
    for (i, row) in acc.iter().enumerate() {
        let r = row0 + ty + t * i;
        for (j, &v) in row.iter().enumerate() {
            let col = col0 + tx + t * j;
            if r < m && col < n {
                c.store(r * n + col, v);
            }
        }
    }
}

/// `c = a * b` for row-major `a` (`m` x `k`), `b` (`k` x `n`) and `c`
/// (`m` x `n`), `k` and `n` multiples of 4: each thread copies one
/// 16-byte piece of the `a` tile and one of the `b` tile per stage with
/// `cp.async` (zero-filled past the edges), one commit group per stage,
/// `wait_group::<{ SGEMM_STAGES - 2 }>` before each stage is used. Blocks
/// of 16 x 16 threads, a grid of `ceil(n / 64)` x `ceil(m / 64)`.
#[kernel]
pub fn sgemm_async(
    m: usize,
    n: usize,
    k: usize,
    a: GlobalSlice<f32>,
    b: GlobalSlice<f32>,
    c: GlobalSliceMut<f32>,
) {
    let ta = shared_array!(f32; SGEMM_STAGES * STAGE; align 128);
    let tb = shared_array!(f32; SGEMM_STAGES * STAGE; align 128);
    let (tx, ty) = thread_xy(SGEMM_THREADS);
    let l = ty * SGEMM_THREADS as usize + tx;
    let row0 = block_idx().y as usize * SGEMM_BLOCK;
    let col0 = block_idx().x as usize * SGEMM_BLOCK;
    // This thread's piece of each tile: a row of `a` and 4 of its 16
    // columns; a row of `b` and 4 of its 64 columns.
    let (ar, ac) = (l / 4, 4 * (l % 4));
    let (br, bc) = (l / 16, 4 * (l % 16));
    let steps = k.div_ceil(SGEMM_K);
    let load = |step: usize, stage: u32| {
        if step < steps {
            let (s, k0) = (stage_offset(stage), step * SGEMM_K);
            let valid = if row0 + ar < m {
                k.saturating_sub(k0 + ac).min(4)
            } else {
                0
            };
            ta.copy_async_zfill::<16>(s + ar * SGEMM_K + ac, a, (row0 + ar) * k + k0 + ac, valid);
            let valid = if k0 + br < k {
                n.saturating_sub(col0 + bc).min(4)
            } else {
                0
            };
            tb.copy_async_zfill::<16>(
                s + br * SGEMM_BLOCK + bc,
                b,
                (k0 + br) * n + col0 + bc,
                valid,
            );
        }
        commit_group();
    };
    for step in 0..SGEMM_STAGES - 1 {
        load(step, step as u32);
    }
    let mut acc = [[0.0f32; PER]; PER];
    // `step % SGEMM_STAGES` and `(step + SGEMM_STAGES - 1) %
    // SGEMM_STAGES` as counters: from `%` on the step, LLVM divides by 3
    // in 64 bits on every step and strength-reduces the stage addresses
    // into 64-bit induction variables, which hide their alignment from
    // ptxas: it then reads the tiles 4 bytes at a time, not 16.
    let (mut stage, mut ahead) = (0, SGEMM_STAGES as u32 - 1);
    for step in 0..steps {
        wait_group::<{ SGEMM_STAGES as u32 - 2 }>();
        // Everyone's pieces of this stage are in, and everyone is done
        // with the stage the next load overwrites.
        sync_threads();
        load(step + SGEMM_STAGES - 1, ahead);
        let s = stage_offset(stage);
        multiply_stage(ta, tb, (s, s), (tx, ty), &mut acc);
        (stage, ahead) = (next_stage(stage), stage);
    }
    store_outputs(c, (m, n), (row0, col0), (tx, ty), &acc);
}

/// [`sgemm_async`](fn@sgemm_async) with its tiles moved by tensor copies: thread 0 loads
/// a stage's two boxes (`a`'s 16 x 64, `b`'s 64 x 16, zero past the
/// edges) completing on the stage's mbarrier with their bytes expected,
/// every thread waits on the stage's phase, and a barrier after each
/// stage frees it for the load `SGEMM_STAGES` steps ahead. `a` maps
/// `[k, m]` in boxes of `[16, 64]`, `b` maps `[n, k]` in boxes of
/// `[64, 16]`. Same launch as [`sgemm_async`](fn@sgemm_async).
#[kernel]
pub fn sgemm_tma(
    m: usize,
    n: usize,
    k: usize,
    a: TensorMap<f32, 2>,
    b: TensorMap<f32, 2>,
    c: GlobalSliceMut<f32>,
) {
    let ta = shared_array!(f32; SGEMM_STAGES * STAGE; align 128);
    let tb = shared_array!(f32; SGEMM_STAGES * STAGE; align 128);
    let full = mbarriers!(SGEMM_STAGES);
    let (tx, ty) = thread_xy(SGEMM_THREADS);
    let producer = tx == 0 && ty == 0;
    let row0 = block_idx().y as usize * SGEMM_BLOCK;
    let col0 = block_idx().x as usize * SGEMM_BLOCK;
    let steps = k.div_ceil(SGEMM_K);
    let bytes = a.box_bytes() + b.box_bytes();
    let load = |step: usize| {
        if step < steps {
            let s = step % SGEMM_STAGES;
            let bar = full.get(s);
            let k0 = (step * SGEMM_K) as i32;
            bar.arrive_expect_tx(bytes);
            a.load_tile(&ta, s * STAGE, [k0, row0 as i32], bar);
            b.load_tile(&tb, s * STAGE, [col0 as i32, k0], bar);
        }
    };
    if producer {
        for s in 0..SGEMM_STAGES {
            full.get(s).init(1);
        }
        fence_proxy_async_shared();
        for step in 0..SGEMM_STAGES {
            load(step);
        }
    }
    sync_threads();
    let mut acc = [[0.0f32; PER]; PER];
    for step in 0..steps {
        let s = step % SGEMM_STAGES;
        full.get(s).wait_parity(((step / SGEMM_STAGES) & 1) as u32);
        multiply_stage(ta, tb, (s * STAGE, s * STAGE), (tx, ty), &mut acc);
        // Everyone is done with stage `s`: it takes the step after next.
        sync_threads();
        if producer {
            load(step + SGEMM_STAGES);
        }
    }
    store_outputs(c, (m, n), (row0, col0), (tx, ty), &acc);
}

/// Side of the tiles of [`transpose_tma`](fn@transpose_tma).
pub const TMA_TILE: u32 = 32;
/// Rows of threads per block of [`transpose_tma`](fn@transpose_tma).
pub const TMA_ROWS: u32 = 8;

/// `y = x^T` for a `height` x `width` row-major `x`: block `(bx, by)`
/// loads the 32 x 32 box of `x` at `(32 bx, 32 by)` (`x` maps `[width,
/// height]` in 32 x 32 boxes with the 128-byte swizzle) into shared
/// memory, its threads write the transposed tile to a second buffer (both
/// swizzled, so that a warp's column reads spread over the banks), and
/// thread 0 stores it as the box at `(32 by, 32 bx)` of `y` (`[height,
/// width]`, same boxes and swizzle); edges are clipped by the maps.
/// Blocks of `TMA_TILE` x `TMA_ROWS` threads, a grid of `ceil(width / 32)`
/// x `ceil(height / 32)`.
#[kernel]
pub fn transpose_tma(x: TensorMap<f32, 2>, y: TensorMapMut<f32, 2>) {
    const T: usize = TMA_TILE as usize;
    // The loaded tile, then the transposed one: one array, which the GPU
    // sanitizer checks through its device-memory shadow (two of 4 KiB
    // would each get a `.shared` shadow, together past 48 KiB).
    let tiles = shared_array!(f32; 2 * T * T; align 1024);
    let out = T * T;
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let (tx, ty) = (thread_xy(TMA_TILE).0, thread_idx().y as usize);
    let first = tx == 0 && ty == 0;
    let (bx, by) = (
        (TMA_TILE * block_idx().x) as i32,
        (TMA_TILE * block_idx().y) as i32,
    );
    if first {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(x.box_bytes());
        x.load_tile(&tiles, 0, [bx, by], bar);
    }
    sync_threads();
    bar.wait_parity(0);
    // Row `r` of the output tile is column `r` of the input tile.
    let at = |row: usize, col: usize| Swizzle::B128.apply(4 * (row * T + col)) / 4;
    let mut r = ty;
    while r < T {
        tiles.store(out + at(r, tx), tiles.load(at(tx, r)));
        r += TMA_ROWS as usize;
    }
    fence_proxy_async_shared();
    sync_threads();
    if first {
        y.store_tile(&tiles, out, [by, bx]);
        bulk_commit_group();
        bulk_wait_group_read::<0>();
    }
}
