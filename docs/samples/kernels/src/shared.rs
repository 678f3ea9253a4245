//! Writing kernels: shared memory and barriers.

use vigil_device::prelude::*;

// ANCHOR: block_sum
/// Threads per block of `block_sum` (its shared array's length).
pub const BLOCK: usize = 256;

/// `sums[b]` = the sum of block `b`'s part of `x` (blocks of [`BLOCK`]
/// threads): a tree reduction in shared memory.
#[kernel]
pub fn block_sum(x: GlobalSlice<f32>, sums: GlobalSliceMut<f32>) {
    let partial = shared_array!(f32; BLOCK);
    let t = thread_idx().x as usize;
    let i = global_index_x();
    partial.store(t, if i < x.len() { x.load(i) } else { 0.0 });
    sync_threads();
    let mut half = BLOCK / 2;
    while half > 0 {
        if t < half {
            partial.store(t, partial.load(t) + partial.load(t + half));
        }
        sync_threads(); // this step's writes before the next step's reads
        half /= 2;
    }
    if t == 0 {
        sums.store(block_idx().x as usize, partial.load(0));
    }
}
// ANCHOR_END: block_sum

// ANCHOR: reverse_blocks
/// Reverses each block's part of `data` in place, through the launch's
/// dynamic shared memory (`LaunchConfig::with_shared_mem`: one `u32` per
/// thread).
#[kernel]
pub fn reverse_blocks(data: GlobalSliceMut<u32>) {
    let tile = dynamic_shared_array!(u32);
    let t = thread_idx().x as usize;
    let n = block_dim().x as usize;
    let i = block_idx().x as usize * n + t;
    tile.store(t, data.load(i));
    sync_threads();
    data.store(i, tile.load(n - 1 - t));
}
// ANCHOR_END: reverse_blocks

// ANCHOR: helper
use vigil_device::shared_mem::SharedArray;

/// Thread `t` stores `v`, then reads its right neighbour's value: an
/// ordinary function, which the sanitizer checks as the kernel's body.
fn exchange(tile: SharedArray<u32, 64>, t: usize, v: u32) -> u32 {
    tile.store(t, v);
    sync_threads();
    tile.load((t + 1) % 64)
}

/// `out[t] = x[(t + 1) % 64]`, for one block of 64 threads.
#[kernel]
pub fn rotate(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>) {
    let tile = shared_array!(u32; 64);
    let t = thread_idx().x as usize;
    out.store(t, exchange(tile, t, x.load(t)));
}
// ANCHOR_END: helper
