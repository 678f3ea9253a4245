//! Asynchronous copies: `cp.async` stages, tensor copies on an mbarrier,
//! and a dependent launch.

use vigil_device::async_copy::{commit_group, fence_proxy_async_shared, wait_group};
use vigil_device::grid_dependency;
use vigil_device::prelude::*;

// ANCHOR: staged_scale
/// Elements per tile of `staged_scale` (blocks of 256 threads, 4 each).
pub const TILE: usize = 1024;

/// `y = a * x` for `x.len()` a multiple of [`TILE`]: each block streams
/// its tiles through two shared-memory stages, the next tile's copy in
/// flight while the current one is used.
#[kernel]
pub fn staged_scale(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let stages = shared_array!(f32; 2 * TILE);
    let t = thread_idx().x as usize;
    let (first, step) = (block_idx().x as usize, grid_dim().x as usize);
    let tiles = x.len() / TILE;
    // The copy of this block's `k`-th tile, one group per tile (an empty
    // group past the last, so that the waits below count the same).
    let fetch = |k: usize| {
        let tile = first + k * step;
        if tile < tiles {
            stages.copy_async::<16>((k % 2) * TILE + 4 * t, x, tile * TILE + 4 * t);
        }
        commit_group();
    };
    fetch(0);
    let mut k = 0;
    while first + k * step < tiles {
        fetch(k + 1); // the next tile streams in...
        wait_group::<1>(); // ...while this thread's part of tile `k` is here
        let base = (first + k * step) * TILE;
        for e in 0..4 {
            // Each thread reads what it copied itself: its own wait is
            // enough (another thread's part would need a `sync_threads`).
            let i = 4 * t + e;
            y.store(base + i, a * stages.load((k % 2) * TILE + i));
        }
        k += 1;
    }
}
// ANCHOR_END: staged_scale

// ANCHOR: tile_sums
/// Block `(bx, by)` writes the sum of the 32 x 32 tile of `x` at
/// `(32 bx, 32 by)` to `out[by * gridDim.x + bx]`: thread 0 loads the tile
/// with one tensor copy completing on an mbarrier, every thread waits for
/// the barrier's phase 0, then each warp's lanes add up a column each.
#[kernel]
pub fn tile_sums(x: TensorMap<f32, 2>, out: GlobalSliceMut<f32>) {
    let tile = shared_array!(f32; 32 * 32; align 128);
    let column_sums = shared_array!(f32; 32);
    let bars = mbarriers!(1);
    let loaded = bars.get(0);
    let (bx, by) = (block_idx().x, block_idx().y);
    let t = thread_idx().x as usize;
    if t == 0 {
        loaded.init(1);
        fence_proxy_async_shared(); // the init, before the copy completes on it
        loaded.arrive_expect_tx(x.box_bytes());
        x.load_tile(&tile, 0, [32 * bx as i32, 32 * by as i32], loaded);
    }
    sync_threads(); // the init, before anyone waits
    loaded.wait_parity(0);
    if t < 32 {
        column_sums.store(t, (0..32).map(|r| tile.load(32 * r + t)).sum());
    }
    sync_threads();
    if t == 0 {
        let sum = (0..32).map(|c| column_sums.load(c)).sum();
        out.store((by * grid_dim().x + bx) as usize, sum);
    }
}
// ANCHOR_END: tile_sums

// ANCHOR: dependent
/// `y = x + 1`; lets the launch after it start early.
#[kernel]
pub fn plus_one(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    grid_dependency::launch_dependents();
    let i = global_index_x();
    if i < y.len() {
        y.store(i, x.load(i) + 1.0);
    }
}

/// `z = 2 y`, where `y` is `plus_one`'s output: it may start before
/// `plus_one` ends, and waits for it before reading `y`.
#[kernel]
pub fn twice(y: GlobalSlice<f32>, z: GlobalSliceMut<f32>) {
    let i = global_index_x();
    grid_dependency::wait();
    if i < z.len() {
        z.store(i, 2.0 * y.load(i));
    }
}
// ANCHOR_END: dependent
