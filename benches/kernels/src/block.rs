//! Block-cooperative kernels: warp shuffles, shared memory and barriers.

use vigil_device::math;
use vigil_device::prelude::*;
use vigil_device::shared_mem::SharedArray;

/// Threads per block of [`scan()`]: each block scans its own 1,024 elements.
pub const SCAN_BLOCK: u32 = 1024;

/// Inclusive prefix sum of `x` within each block of [`SCAN_BLOCK`]
/// elements (wrapping `u32` addition): `y[i] = x[b] + ... + x[i]` where `b`
/// is the first index of `i`'s block. Launch with `SCAN_BLOCK` threads per
/// block (declared) and a grid covering `x` (one element of `y` per
/// thread, `x` as long as `y`: the launch proves both).
#[kernel(block = SCAN_BLOCK, no_runtime_checks)]
pub fn scan(#[same_len(y)] x: GlobalSlice<u32>, y: ThreadElemsMut<u32>) {
    let warp_totals = shared_array!(u32; 32);
    let mine = y.own();
    let t = thread_idx().x;
    let lane = warp::lane_id();
    let mut v = mine.map_or(0, |(i, _)| x.load_at(i));
    v = warp_inclusive_scan(v, lane);
    if lane == 31 {
        warp_totals.store((t / 32) as usize, v);
    }
    sync_threads();
    if t < 32 {
        let warps = block_dim().x.div_ceil(32);
        let total = if t < warps {
            warp_totals.load(t as usize)
        } else {
            0
        };
        warp_totals.store(t as usize, warp_inclusive_scan(total, lane));
    }
    sync_threads();
    if t >= 32 {
        v = v.wrapping_add(warp_totals.load((t / 32 - 1) as usize));
    }
    if let Some((_, out)) = mine {
        out.store(v);
    }
}

#[inline(always)]
fn warp_inclusive_scan(mut v: u32, lane: u32) -> u32 {
    let mut delta = 1;
    while delta < 32 {
        let below = warp::shfl_up(warp::FULL_MASK, v, delta);
        if lane >= delta {
            v = v.wrapping_add(below);
        }
        delta *= 2;
    }
    v
}

/// Threads per block of [`softmax()`] (one block per row).
pub const SOFTMAX_BLOCK: u32 = 256;

/// Row softmax of a `rows` x `cols` row-major matrix, one block per row:
/// `y[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r)`.
/// Launch with `rows` blocks of [`SOFTMAX_BLOCK`] threads (declared): each
/// block reads its row of `x` and owns its row of `y`, which the launch
/// proves, so the row loops' conditions are their only checks.
#[kernel(block = SOFTMAX_BLOCK, no_runtime_checks)]
pub fn softmax(
    cols: usize,
    #[chunk(cols)] x: BlockChunks<f32>,
    #[chunk(cols)] y: BlockChunksMut<f32>,
) {
    let partials = shared_array!(f32; 32);
    let (x, y) = (x.own(), y.own());
    let (t, threads) = (thread_idx().x as usize, block_dim().x as usize);
    let mut m = f32::NEG_INFINITY;
    for c in x.strided(t, threads) {
        m = math::max(m, x.load_at(c));
    }
    let m = block_reduce(m, partials, math::max);
    let mut sum = 0.0f32;
    for c in x.strided(t, threads) {
        sum += math::exp(x.load_at(c) - m);
    }
    let inv = 1.0 / block_reduce(sum, partials, |a, b| a + b);
    for c in y.strided(t, threads) {
        y.store_at(c, math::exp(x.load_at(c) - m) * inv);
    }
}

/// Reduces `v` over the block with `op` (shuffles within warps, then warp
/// 0 over the warps' results) and returns the result to every thread.
/// `partials` is free again when it returns. Generic over the kernel's
/// sanitizer, whose barriers it waits at.
#[inline(always)]
fn block_reduce<S: Sanitizer>(
    v: f32,
    partials: SharedArray<f32, 32, S>,
    op: impl Fn(f32, f32) -> f32,
) -> f32 {
    let warp_reduce = |mut v: f32| {
        let mut offset = 16;
        while offset > 0 {
            v = op(v, warp::shfl_xor(warp::FULL_MASK, v, offset));
            offset /= 2;
        }
        v
    };
    let t = thread_idx().x;
    let v = warp_reduce(v);
    if warp::lane_id() == 0 {
        partials.store((t / 32) as usize, v);
    }
    sync_threads();
    let warps = block_dim().x.div_ceil(32);
    // Every warp folds the warps' partials itself: no second barrier round.
    let mut all = partials.load(0);
    let mut w = 1;
    while w < warps {
        all = op(all, partials.load(w as usize));
        w += 1;
    }
    sync_threads();
    all
}
