//! The helper-scenario kernels (`tests/tests/helper_scenarios.rs`): the
//! barriers, fences, warp collectives and shared arrays sit in helper
//! functions that name no sanitizer type, as CUDA code keeps them in
//! `__device__` functions. The sanitizer must check them exactly as the
//! same code written inside a kernel's body (`block_races.rs`,
//! `races.rs`).
//!
//! As in `races.rs`, every access a verdict names sits on its own line
//! ending in a `// @name` marker.

use crate::races::SPIN_LIMIT;
use vigil_device::grid_dependency;
use vigil_device::prelude::*;
use vigil_device::shared_mem::SharedArray;

/// Threads per block of [`helper_tree_reduce()`].
pub const HELPER_TREE_THREADS: u32 = 64;

/// Thread `t`'s element, stored and then waited for at a barrier.
fn stage(sums: SharedArray<u32, 64>, t: usize, v: u32) {
    sums.store(t, v);
    sync_threads();
}

/// The tree reduction of `sums` into `sums[0]`, with the barrier after
/// the stride-16 round left out when `skip` is set.
fn reduce_tree(sums: SharedArray<u32, 64>, t: usize, skip: bool) {
    let mut stride = 32;
    while stride > 0 {
        if t < stride {
            let v = sums.load(t).wrapping_add(sums.load(t + stride)); // @helper-tree-read
            sums.store(t, v); // @helper-tree-write
        }
        if !(skip && stride == 16) {
            sync_threads();
        }
        stride /= 2;
    }
}

/// Sums `x[0..64]` into `out[0]` (one block of [`HELPER_TREE_THREADS`]),
/// every barrier in a helper. With `skip_barrier == 1` the stride-8 round
/// reads partial sums another thread is still writing.
#[kernel]
pub fn helper_tree_reduce(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, skip_barrier: u32) {
    let sums = shared_array!(u32; 64);
    let t = thread_idx().x as usize;
    stage(sums, t, x.load(t));
    reduce_tree(sums, t, skip_barrier == 1);
    if t == 0 {
        out.store(0, sums.load(0));
    }
}

/// The old form of [`reduce_tree`], generic over the sanitizer and
/// waiting with `sync_threads_in::<S>()`: still compiles, still checked.
#[allow(deprecated)]
fn reduce_tree_in<S: Sanitizer>(sums: SharedArray<u32, 64, S>, t: usize, skip: bool) {
    let mut stride = 32;
    while stride > 0 {
        if t < stride {
            let v = sums.load(t).wrapping_add(sums.load(t + stride)); // @legacy-tree-read
            sums.store(t, v); // @legacy-tree-write
        }
        if !(skip && stride == 16) {
            vigil_device::sync::sync_threads_in::<S>();
        }
        stride /= 2;
    }
}

/// [`helper_tree_reduce()`] written the old way: the kernel names its
/// sanitizer `S` and hands it to a generic helper.
#[kernel]
pub fn legacy_tree_reduce<S: Sanitizer>(
    x: GlobalSlice<u32, S>,
    out: GlobalSliceMut<u32, S>,
    skip_barrier: u32,
) {
    let sums = shared_array!(u32; 64);
    let t = thread_idx().x as usize;
    sums.store(t, x.load(t));
    sync_threads();
    reduce_tree_in(sums, t, skip_barrier == 1);
    if t == 0 {
        out.store(0, sums.load(0));
    }
}

/// Lane `lane` publishes `v` in a shared array of the helper's own and
/// reads its neighbour's, the two ordered by `sync_warp` when `sync` is
/// set.
fn neighbour_of(v: u32, lane: usize, sync: bool) -> u32 {
    let slots = shared_array!(u32; 32);
    slots.store(lane, v); // @helper-neighbour-write
    if sync {
        warp::sync_warp(warp::FULL_MASK);
    }
    slots.load((lane + 1) % 32) // @helper-neighbour-read
}

/// `out[lane] = x[(lane + 1) % 32]` (one warp) through a helper's shared
/// array: racy unless `sync == 1`.
#[kernel]
pub fn helper_neighbours(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, sync: u32) {
    let lane = warp::lane_id() as usize;
    out.store(lane, neighbour_of(x.load(lane), lane, sync == 1));
}

/// Writes `v` to `data`, then raises `flag` with a relaxed store, after a
/// release fence when `fence` is set.
fn publish(data: GlobalPtrMut<u32>, flag: GlobalPtrMut<u32>, v: u32, fence: bool) {
    data.store(v); // @helper-publish
    if fence {
        thread_fence(Ordering::Release, Scope::Device);
    }
    flag.atomic_store(1, Ordering::Relaxed, Scope::Device);
}

/// Waits for `flag` with relaxed loads, then (after an acquire fence when
/// `fence` is set) reads `data`.
fn consume(data: GlobalPtrMut<u32>, flag: GlobalPtrMut<u32>, fence: bool) -> u32 {
    let mut polls = 0;
    while flag.atomic_load(Ordering::Relaxed, Scope::Device) == 0 {
        polls += 1;
        assert!(polls < SPIN_LIMIT, "the flag was never raised");
    }
    if fence {
        thread_fence(Ordering::Acquire, Scope::Device);
    }
    data.load() // @helper-consume
}

/// The PTX model's fence pattern between two blocks (one thread each),
/// both sides in helpers: block 0 publishes 9 in `data[0]`, block 1 reads
/// it into `out[0]`. Race-free when `fences == 3` (both fences); bit 0
/// alone is the writer's fence, bit 1 alone the reader's.
#[kernel]
pub fn helper_fenced_flag(
    data: GlobalSliceMut<u32>,
    flag: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    fences: u32,
) {
    if block_idx().x == 0 {
        publish(data.at(0), flag.at(0), 9, fences & 1 != 0);
    } else {
        out.store(0, consume(data.at(0), flag.at(0), fences & 2 != 0));
    }
}

/// Waits for the kernels this launch depends on, then reads `y[i]`.
fn wait_then_load(y: GlobalSlice<u32>, i: usize) -> u32 {
    grid_dependency::wait();
    y.load(i)
}

/// `y[i]`, read without waiting for the launch before.
fn load_early(y: GlobalSlice<u32>, i: usize) -> u32 {
    y.load(i) // @helper-pdl-early-read
}

/// `z[i] = y[i]`, `y` being the launch before's output (the async-races
/// suite's `pdl_writer`), every read and the wait in helpers: read after
/// the wait (`mode` 0) or before it (1: in a programmatic dependent
/// launch, a race with that launch's write).
#[kernel]
pub fn helper_pdl_reader(y: GlobalSlice<u32>, z: GlobalSliceMut<u32>, mode: u32) {
    let i = global_index_x();
    if i < y.len() && i < z.len() {
        let v = if mode == 1 {
            let v = load_early(y, i);
            grid_dependency::wait();
            v
        } else {
            wait_then_load(y, i)
        };
        z.store(i, v);
    } else {
        grid_dependency::wait();
    }
}

/// The sum of every thread's `v` over the block (blocks of a power-of-two
/// size), through the launch's dynamic shared memory, viewed and reduced
/// in a helper; the barrier after the stride-64 round is left out when
/// `skip` is set.
fn block_sum(t: usize, v: u32, skip: bool) -> u32 {
    let sums = dynamic_shared_array!(u32);
    sums.store(t, v);
    sync_threads();
    let mut stride = block_dim().x as usize / 2;
    while stride > 0 {
        if t < stride {
            let v = sums.load(t).wrapping_add(sums.load(t + stride)); // @helper-dyn-read
            sums.store(t, v); // @helper-dyn-write
        }
        if !(skip && stride == 64) {
            sync_threads();
        }
        stride /= 2;
    }
    sums.load(0)
}

/// `out[b]` = the sum of block `b`'s elements of `x`, through
/// `block_sum`; racy with `skip_barrier == 1`.
#[kernel]
pub fn helper_dynamic_reduce(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, skip_barrier: u32) {
    let t = thread_idx().x as usize;
    let i = block_idx().x as usize * block_dim().x as usize + t;
    let v = if i < x.len() { x.load(i) } else { 0 };
    let sum = block_sum(t, v, skip_barrier == 1);
    if t == 0 {
        out.store(block_idx().x as usize, sum);
    }
}

/// Bytes of [`helper_stack_phases()`]'s stack: two 1 KiB tiles.
pub const HELPER_STACK: usize = 2048;

/// The first phase on `smem`: each thread stages `x[t]` and `t`, then
/// reads its mirror's pair and pops both tiles (waiting for every
/// thread when `synced`, not otherwise): `x[255 - t] + (255 - t)`.
fn first_phase(
    smem: &mut SharedStack<HELPER_STACK>,
    x: GlobalSlice<f32>,
    t: usize,
    synced: bool,
) -> f32 {
    let sums = smem.push::<f32, 256>();
    let counts = smem.push::<u32, 256>();
    sums.store(t, x.load(t));
    counts.store(t, t as u32);
    sync_threads();
    let (s, c) = (sums.load(255 - t), counts.load(255 - t)); // @helper-phase-read
    if synced {
        smem.pop_synced((counts, sums));
    } else {
        smem.pop_unsynced((counts, sums));
    }
    s + c as f32
}

/// The second phase: a tile on the first phase's bytes, each thread's
/// `v` read back by its mirror.
fn second_phase(smem: &mut SharedStack<HELPER_STACK>, v: f32, t: usize) -> f32 {
    let spread = smem.push::<f32, 256>();
    spread.store(t, v); // @helper-spread-write
    sync_threads();
    spread.load(255 - t)
}

/// `out[t] = x[t] + t` (one block of 256 threads) through two phases of
/// a shared-memory stack, each in a helper that takes the stack by its
/// plain type; the first pops its tiles without waiting when
/// `unsynced == 1`, so the second's stores race with its reads.
#[kernel]
pub fn helper_stack_phases(x: GlobalSlice<f32>, out: GlobalSliceMut<f32>, unsynced: u32) {
    let mut smem = shared_stack!(HELPER_STACK);
    let t = thread_idx().x as usize;
    let v = first_phase(&mut smem, x, t, unsynced != 1);
    out.store(t, second_phase(&mut smem, v, t));
}
