//! Kernels that exercise every asynchronous-copy operation: `cp.async` of
//! each size with commit groups and zero-fill, bulk copies both ways with
//! mbarriers and bulk groups, mbarrier phases, tensor copies of rank 2
//! and 3 (with swizzle and out-of-bounds boxes), and programmatic
//! dependent launch; and kernels whose waits never complete.

use vigil_device::async_copy::{
    bulk_commit_group, bulk_wait_group, bulk_wait_group_read, commit_group,
    fence_proxy_async_shared, wait_all, wait_group, Swizzle,
};
use vigil_device::grid_dependency;
use vigil_device::prelude::*;

/// `y` = `x[0..448]` reversed within `[0, 64)`, `[64, 192)` and
/// `[192, 448)`, moved through shared memory by `cp.async` of 4, 8 and 16
/// bytes (one block of 64 threads).
#[kernel]
pub fn cp_async_sizes(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>) {
    let s4 = shared_array!(u32; 64);
    let s8 = shared_array!(u32; 128);
    let s16 = shared_array!(u32; 256);
    let t = thread_idx().x as usize;
    s4.copy_async::<4>(t, x, t);
    s8.copy_async::<8>(2 * t, x, 64 + 2 * t);
    s16.copy_async::<16>(4 * t, x, 192 + 4 * t);
    commit_group();
    wait_group::<0>();
    sync_threads();
    y.store(t, s4.load(63 - t));
    for k in 0..2 {
        y.store(64 + 2 * t + k, s8.load(127 - 2 * t - k));
    }
    for k in 0..4 {
        y.store(192 + 4 * t + k, s16.load(255 - 4 * t - k));
    }
}

/// Threads per block of [`cp_async_pipeline`].
pub const PIPE_THREADS: u32 = 128;
/// Stages of [`cp_async_pipeline`].
pub const PIPE_STAGES: usize = 3;
/// Elements per stage of [`cp_async_pipeline`] (16 bytes per thread).
pub const PIPE_TILE: usize = 4 * PIPE_THREADS as usize;

/// For each tile of `PIPE_TILE` elements of `x` (the last one padded with
/// zeros), `out[tile + j] = 3 * x[tile + PIPE_TILE - 1 - j]`: tiles stream
/// through a `PIPE_STAGES`-deep `cp.async` pipeline (one group per tile,
/// `wait_group::<PIPE_STAGES - 1>`), the tail zero-filled. `out` holds
/// every tile whole. Blocks of `PIPE_THREADS`, any grid.
#[kernel]
pub fn cp_async_pipeline(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
    let stages = shared_array!(f32; PIPE_STAGES * PIPE_TILE);
    let t = thread_idx().x as usize;
    let n = x.len();
    let (first, step) = (block_idx().x as usize, grid_dim().x as usize);
    let tiles = n.div_ceil(PIPE_TILE);
    let count = if first < tiles {
        (tiles - first).div_ceil(step)
    } else {
        0
    };
    // Issues the block's `k`-th tile (an empty group past the last).
    let issue = |k: usize| {
        if k < count {
            let at = (first + k * step) * PIPE_TILE + 4 * t;
            let valid = n.saturating_sub(at).min(4);
            stages.copy_async_zfill::<16>((k % PIPE_STAGES) * PIPE_TILE + 4 * t, x, at, valid);
        }
        commit_group();
    };
    for k in 0..PIPE_STAGES - 1 {
        issue(k);
    }
    for k in 0..count {
        issue(k + PIPE_STAGES - 1);
        wait_group::<{ PIPE_STAGES as u32 - 1 }>();
        sync_threads();
        let (stage, base) = ((k % PIPE_STAGES) * PIPE_TILE, (first + k * step) * PIPE_TILE);
        for e in 0..4 {
            let j = 4 * t + e;
            out.store(base + j, 3.0 * stages.load(stage + PIPE_TILE - 1 - j));
        }
        // Everyone has read the stage before the next issue overwrites it.
        sync_threads();
    }
    wait_all();
}

/// Threads per block of [`bulk_pipeline`].
pub const BULK_THREADS: u32 = 256;
/// Stages of [`bulk_pipeline`].
pub const BULK_STAGES: usize = 2;
/// Elements per tile of [`bulk_pipeline`].
pub const BULK_TILE: usize = 1024;

/// `y = 2 * x + 1` through shared memory: thread 0 loads each tile with a
/// bulk copy completing on the stage's mbarrier (`arrive_expect_tx` on
/// even tiles, `expect_tx` + `arrive` on odd ones), every thread waits on
/// the stage's phase, writes its results to a staging tile, and thread 0
/// stores that with a bulk copy in a bulk group. `x.len()` must be a
/// multiple of 4. Blocks of `BULK_THREADS`, any grid.
#[kernel]
pub fn bulk_pipeline(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let stages = shared_array!(f32; BULK_STAGES * BULK_TILE; align 128);
    let staged = shared_array!(f32; BULK_TILE; align 128);
    let full = mbarriers!(BULK_STAGES);
    let t = thread_idx().x as usize;
    let n = x.len();
    let (first, step) = (block_idx().x as usize, grid_dim().x as usize);
    let tiles = n.div_ceil(BULK_TILE);
    let count = if first < tiles {
        (tiles - first).div_ceil(step)
    } else {
        0
    };
    let tile = |k: usize| {
        let base = (first + k * step) * BULK_TILE;
        (base, (n - base).min(BULK_TILE))
    };
    let produce = |k: usize| {
        if k < count {
            let s = k % BULK_STAGES;
            let bar = full.get(s);
            let (base, len) = tile(k);
            let bytes = 4 * len as u32;
            if k % 2 == 0 {
                bar.arrive_expect_tx(bytes);
                stages.copy_bulk_from(s * BULK_TILE, x, base, len, bar);
            } else {
                bar.expect_tx(bytes);
                stages.copy_bulk_from(s * BULK_TILE, x, base, len, bar);
                bar.arrive();
            }
        }
    };
    if t == 0 {
        for s in 0..BULK_STAGES {
            full.get(s).init(1);
        }
        fence_proxy_async_shared();
    }
    sync_threads();
    if t == 0 {
        for k in 0..BULK_STAGES {
            produce(k);
        }
    }
    for k in 0..count {
        let s = k % BULK_STAGES;
        full.get(s).wait_parity(((k / BULK_STAGES) & 1) as u32);
        let (base, len) = tile(k);
        let mut j = t;
        while j < len {
            staged.store(j, 2.0 * stages.load(s * BULK_TILE + j) + 1.0);
            j += BULK_THREADS as usize;
        }
        fence_proxy_async_shared();
        sync_threads();
        if t == 0 {
            staged.copy_bulk_to(0, y, base, len);
            bulk_commit_group();
            // Everyone has read stage `s`: it takes the tile after next.
            produce(k + BULK_STAGES);
            bulk_wait_group_read::<0>();
        }
        // The staging tile has been read before anyone writes it again.
        sync_threads();
    }
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

/// Rounds of [`mbarrier_rounds`].
pub const MB_ROUNDS: usize = 5;

/// Each thread of block `b` stores `1000 * round + t` in its slot, arrives
/// at an mbarrier counting the whole block, waits for the round's phase
/// and adds its neighbour's slot: `out[2 * (b * n + t)]` is the sum over
/// `MB_ROUNDS` rounds of `1000 * round + (t + 1) % n`, and
/// `out[2 * (b * n + t) + 1]` is 1 when a wait for the last completed
/// phase's parity returns at once. At most 256 threads per block.
#[kernel]
pub fn mbarrier_rounds(out: GlobalSliceMut<u32>) {
    let slots = shared_array!(u32; 256);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let (t, n) = (thread_idx().x as usize, block_dim().x as usize);
    if t == 0 {
        bar.init(n as u32);
    }
    sync_threads();
    let mut acc = 0u32;
    for round in 0..MB_ROUNDS {
        slots.store(t, (1000 * round + t) as u32);
        bar.arrive();
        bar.wait_parity((round & 1) as u32);
        acc = acc.wrapping_add(slots.load((t + 1) % n));
        sync_threads();
    }
    let at = 2 * (block_idx().x as usize * n + t);
    out.store(at, acc);
    let done = bar.try_wait_parity(((MB_ROUNDS - 1) & 1) as u32);
    out.store(at + 1, u32::from(done));
}

/// Side of the boxes of [`tma_tile_roundtrip`].
pub const TMA_BOX: usize = 32;

/// Block `(bx, by)` loads the 32 x 32 box at `(32 bx, 32 by)` of `src`
/// into shared memory (laid out with the swizzle numbered `swizzle`, as
/// both maps are), and stores to the same box of `dst` the value
/// `2 v + 1000 r + c` for the element `v` at row `r`, column `c` of the
/// box (elements outside `src` read as 0, outside `dst` are not written).
/// Blocks of 32 x 8 threads.
#[kernel]
pub fn tma_tile_roundtrip(src: TensorMap<f32, 2>, dst: TensorMapMut<f32, 2>, swizzle: u32) {
    let tile = shared_array!(f32; TMA_BOX * TMA_BOX; align 1024);
    let result = shared_array!(f32; TMA_BOX * TMA_BOX; align 1024);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let layout = Swizzle::from_u8(swizzle as u8).unwrap_or_default();
    let (tx, ty) = (thread_idx().x as usize, thread_idx().y as usize);
    let first = tx == 0 && ty == 0;
    let at = [
        (TMA_BOX as u32 * block_idx().x) as i32,
        (TMA_BOX as u32 * block_idx().y) as i32,
    ];
    if first {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(src.box_bytes());
        src.load_tile(&tile, 0, at, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    let mut r = ty;
    while r < TMA_BOX {
        let i = layout.apply(4 * (r * TMA_BOX + tx)) / 4;
        result.store(i, 2.0 * tile.load(i) + (1000 * r + tx) as f32);
        r += 8;
    }
    fence_proxy_async_shared();
    sync_threads();
    if first {
        dst.store_tile(&result, 0, at);
        bulk_commit_group();
        bulk_wait_group::<0>();
    }
}

/// The box of [`tma_box_3d`], innermost first.
pub const BOX_3D: [u32; 3] = [4, 3, 2];

/// Block `(bx, by, bz)` loads the box of `src` whose first element is at
/// `(4 bx - 2, 3 by, 2 bz - 1)` and writes its 24 elements, in box order,
/// to `out[24 * linear_block..]`. Blocks of 32 threads.
#[kernel]
pub fn tma_box_3d(src: TensorMap<u32, 3>, out: GlobalSliceMut<u32>) {
    let boxed = shared_array!(u32; 24; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    let (b, g) = (block_idx(), grid_dim());
    if t == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(src.box_bytes());
        let at = [
            4 * b.x as i32 - 2,
            3 * b.y as i32,
            2 * b.z as i32 - 1,
        ];
        src.load_tile(&boxed, 0, at, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    let linear = ((b.z * g.y + b.y) * g.x + b.x) as usize;
    if t < 24 {
        out.store(24 * linear + t, boxed.load(t));
    }
}

/// `y[i] = x[i] + 1`, letting its dependent launch start early.
#[kernel]
pub fn pdl_primary(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    grid_dependency::launch_dependents();
    let i = global_index_x();
    if i < y.len() {
        y.store(i, x.load(i) + 1.0);
    }
}

/// `z[i] = 2 * y[i]` where `y` is the primary's output: waits for it.
#[kernel]
pub fn pdl_dependent(y: GlobalSlice<f32>, z: GlobalSliceMut<f32>) {
    let i = global_index_x();
    grid_dependency::wait();
    if i < z.len() {
        z.store(i, 2.0 * y.load(i));
    }
}

/// Waits on an mbarrier that expects one arrival more than the block
/// makes: the phase never completes.
#[kernel]
pub fn mbarrier_missing_arrival(out: GlobalSliceMut<u32>) {
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    if thread_idx().x == 0 {
        bar.init(block_dim().x + 1);
    }
    sync_threads();
    bar.arrive();
    bar.wait_parity(0);
    out.store(thread_idx().x as usize, 1);
}

/// Waits on an mbarrier that expects 64 transaction bytes while the bulk
/// copy completing on it delivers 32: the phase never completes.
#[kernel]
pub fn mbarrier_missing_bytes(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
    let tile = shared_array!(f32; 16; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    if thread_idx().x == 0 {
        bar.init(1);
        fence_proxy_async_shared();
        bar.arrive_expect_tx(64);
        tile.copy_bulk_from(0, x, 0, 8, bar);
    }
    sync_threads();
    bar.wait_parity(0);
    out.store(thread_idx().x as usize, tile.load(0));
}
