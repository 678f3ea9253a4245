//! The block-scenario kernels: races between threads of one block, in
//! shared memory and in global memory, each racy or correctly
//! synchronised (`tests/tests/block_scenarios.rs`).
//!
//! As in `races.rs`, every access a verdict names sits on its own line
//! ending in a `// @name` marker. A `u32` switch selects the racy or the
//! fixed variant, so both run the same code.

use crate::races::{ordering, scope, SPIN_LIMIT};
use vigil_device::prelude::*;
use vigil_device::shared_mem::SharedArray;

/// Threads per block of the shared-memory tree reduction.
pub const TREE_THREADS: u32 = 64;

/// Sums `x[0..64]` into `out[0]` by a tree reduction in shared memory, one
/// block of [`TREE_THREADS`] threads. With `skip_barrier == 1` the barrier
/// after the stride-16 round is left out: the stride-8 round reads partial
/// sums another thread is still writing.
#[kernel]
pub fn tree_reduce(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, skip_barrier: u32) {
    let sums = shared_array!(u32; 64);
    let t = thread_idx().x as usize;
    sums.store(t, x.load(t));
    sync_threads();
    let mut stride = 32;
    while stride > 0 {
        if t < stride {
            let v = sums.load(t).wrapping_add(sums.load(t + stride)); // @tree-read
            sums.store(t, v); // @tree-write
        }
        if !(skip_barrier == 1 && stride == 16) {
            sync_threads();
        }
        stride /= 2;
    }
    if t == 0 {
        out.store(0, sums.load(0));
    }
}

/// Side of the small transposed tile: one block of `TILE * TILE` threads.
pub const TILE: usize = 16;

/// Side of the large transposed tile (64 x 64 `f32`, 16 KiB: past a
/// `.shared` shadow, checked on the GPU through the window shadow).
pub const BIG_TILE: usize = 64;

/// Threads per block of [`big_tile_transpose_twice()`] (4 elements each).
pub const BIG_TILE_THREADS: usize = 1024;

/// Transposes two `TILE` x `TILE` matrices through one shared tile: `at`
/// gets `a`'s transpose, then `bt` gets `b`'s. With `reuse_barrier == 0`
/// the barrier before the tile is refilled is left out: threads overwrite
/// elements other threads are still reading.
#[kernel]
pub fn tile_transpose_twice(
    a: GlobalSlice<u32>,
    b: GlobalSlice<u32>,
    at: GlobalSliceMut<u32>,
    bt: GlobalSliceMut<u32>,
    reuse_barrier: u32,
) {
    let tile = shared_array!(u32; TILE * TILE);
    transpose_twice(tile, TILE, [a, b], [at, bt], reuse_barrier);
}

/// [`tile_transpose_twice()`] on `BIG_TILE` x `BIG_TILE` `f32` matrices,
/// one block of [`BIG_TILE_THREADS`] threads.
#[kernel]
pub fn big_tile_transpose_twice(
    a: GlobalSlice<f32>,
    b: GlobalSlice<f32>,
    at: GlobalSliceMut<f32>,
    bt: GlobalSliceMut<f32>,
    reuse_barrier: u32,
) {
    let tile = shared_array!(f32; BIG_TILE * BIG_TILE);
    transpose_twice(tile, BIG_TILE, [a, b], [at, bt], reuse_barrier);
}

/// The transposes' body: `side` x `side` matrices `from` through `tile`
/// into `to`, each thread a stride of the elements; the barrier before the
/// second fill only with `reuse_barrier == 1`.
#[inline(always)]
fn transpose_twice<S: Sanitizer, T: bytemuck::Pod, const N: usize>(
    tile: SharedArray<T, N, S>,
    side: usize,
    from: [GlobalSlice<T, S>; 2],
    to: [GlobalSliceMut<T, S>; 2],
    reuse_barrier: u32,
) {
    let (first, step) = (thread_idx().x as usize, block_dim().x as usize);
    let fill = |m: GlobalSlice<T, S>| {
        let mut i = first;
        while i < N {
            tile.store(i, m.load(i)); // @tile-fill
            i += step;
        }
    };
    let drain = |m: GlobalSliceMut<T, S>| {
        let mut i = first;
        while i < N {
            m.store(i, tile.load(i % side * side + i / side)); // @tile-read
            i += step;
        }
    };
    fill(from[0]);
    sync_threads();
    drain(to[0]);
    if reuse_barrier == 1 {
        sync_threads();
    }
    fill(from[1]);
    sync_threads();
    drain(to[1]);
}

/// Warp 0 produces `2 * x[lane]` into shared memory, warp 1 consumes it
/// into `out[lane]` (one block of 64 threads). With `barrier == 0` nothing
/// orders the consumer's reads after the producer's writes.
#[kernel]
pub fn warp_handoff(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, barrier: u32) {
    let buf = shared_array!(u32; 32);
    let t = thread_idx().x as usize;
    if t < 32 {
        buf.store(t, 2 * x.load(t)); // @handoff-produce
    }
    if barrier == 1 {
        sync_threads();
    }
    if t >= 32 {
        out.store(t - 32, buf.load(t - 32)); // @handoff-consume
    }
}

/// Warp-synchronous neighbour exchange (one warp): each lane publishes
/// `x[lane]` in shared memory and reads its neighbour's, `out[lane] =
/// x[(lane + 1) % 32]`. Only a warp collective between the two orders
/// them: `mode` 0 has none (racy), 1 a vote over the full warp (correct),
/// 2 a vote per half-warp (racy where a neighbour is in the other half),
/// 3 `sync_warp` over the full warp (correct).
#[kernel]
pub fn warp_neighbours(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, mode: u32) {
    let slots = shared_array!(u32; 32);
    let lane = warp::lane_id() as usize;
    slots.store(lane, x.load(lane)); // @neighbour-write
    let half = if lane < 16 { 0x0000_ffff } else { 0xffff_0000 };
    match mode {
        1 => {
            warp::ballot(warp::FULL_MASK, true);
        }
        2 => {
            warp::ballot(half, true);
        }
        3 => warp::sync_warp(warp::FULL_MASK),
        _ => {}
    }
    out.store(lane, slots.load((lane + 1) % 32)); // @neighbour-read
}

/// Counts `x[i] % 8` into a shared histogram with shared atomics (one
/// block), then thread `b` copies bin `b` to `bins[b]`. The bins are
/// zeroed first, a barrier before the atomics (shared memory starts with
/// what an earlier kernel left). With `plain_reset == 1`, thread 0 also
/// clears bin 0 with a plain store in the atomics' barrier interval: a
/// race with the other threads' atomics.
#[kernel]
pub fn shared_histogram(x: GlobalSlice<u32>, bins: GlobalSliceMut<u32>, plain_reset: u32) {
    let hist = shared_array!(u32; 8);
    let t = thread_idx().x as usize;
    if t < 8 {
        hist.store(t, 0);
    }
    sync_threads();
    if t < x.len() {
        hist.atomic_add((x.load(t) % 8) as usize, 1); // @hist-add
    }
    if plain_reset == 1 && t == 0 {
        hist.store(0, 0); // @hist-reset
    }
    sync_threads();
    if t < 8 {
        bins.store(t, hist.load(t));
    }
}

/// A shared flag that thread 0 sets to `initial` before a barrier. After
/// it every thread tries to swap the flag from 0 to its index + 1 with a
/// compare-exchange and stores what it found to `out[t]`, and thread 1
/// also reads the flag with a plain load into `out[threads]`. With
/// `initial` 1 every exchange fails, an atomic read: no race. With 0 one
/// exchange swaps, an atomic write in the plain load's barrier interval:
/// a race.
#[kernel]
pub fn shared_flag(out: GlobalSliceMut<u32>, initial: u32) {
    let flag = shared_array!(u32; 1);
    let t = thread_idx().x as usize;
    if t == 0 {
        flag.store(0, initial);
    }
    sync_threads();
    let swap = flag.atomic_compare_exchange(0, 0, t as u32 + 1); // @flag-cas
    out.store(t, swap.unwrap_or_else(|found| found));
    if t == 1 {
        out.store(block_dim().x as usize, flag.load(0)); // @flag-load
    }
}

/// Threads below 16 call one `sync_threads`; with `mode` 0 the others
/// return without a barrier, with 1 they call another `sync_threads`.
/// Either way the threads of the block diverge at a barrier.
#[kernel]
pub fn divergent_barrier(out: GlobalSliceMut<u32>, mode: u32) {
    let t = thread_idx().x as usize;
    if t < 16 {
        sync_threads(); // @divergent-low
    } else if mode == 1 {
        sync_threads(); // @divergent-high
    }
    out.store(t, 1);
}

/// Threads of a block (of 256) that return early, before a
/// `sync_threads` the others wait at or after every barrier: with `mode`
/// 0 the upper four warps return before the barrier the lower four wait
/// at; with 1 every odd thread returns between two barriers (the first
/// one passed by all); with 3 one thread (200) returns before the
/// barrier, with 4 the threads from 100 on (part of a warp and the
/// warps after it); with any other the upper warps return after the one barrier
/// every thread reaches, which is not divergent. Each thread that gets
/// to the end sets `out[t]`.
#[kernel]
pub fn early_exits(out: GlobalSliceMut<u32>, mode: u32) {
    let t = thread_idx().x as usize;
    match mode {
        0 => {
            if t >= 128 {
                return;
            }
            sync_threads(); // @exit-upper-warps
        }
        1 => {
            sync_threads();
            if t % 2 == 1 {
                return;
            }
            sync_threads(); // @exit-odd-threads
        }
        3 => {
            if t == 200 {
                return;
            }
            sync_threads(); // @exit-one-thread
        }
        4 => {
            if t >= 100 {
                return;
            }
            sync_threads(); // @exit-mid-warp
        }
        _ => {
            sync_threads();
            if t >= 128 {
                return;
            }
        }
    }
    out.store(t, 1);
}

/// Each thread of one block writes `data[t]`, then reads its neighbour's
/// element `data[(t + 1) % n]` into `out[t]`. With `barrier == 0` nothing
/// orders the neighbour's write before the read.
#[kernel]
pub fn global_neighbours(data: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>, barrier: u32) {
    let t = thread_idx().x as usize;
    let n = block_dim().x as usize;
    data.store(t, t as u32 + 1); // @global-write
    if barrier == 1 {
        sync_threads();
    }
    out.store(t, data.load((t + 1) % n)); // @global-read
}

/// [`global_neighbours()`] beside read-only reads: every thread first
/// reads `table` (its own word, a neighbour's, and a scattered one, so
/// that whole lines, shifted runs and single words are all read) and
/// stores the sum in `data[t]`, then reads its neighbour's `data`. Passed
/// `&`-borrowed, `table` is read-only for the launch; `data` may be the
/// other half of the same buffer.
#[kernel]
pub fn read_only_beside_neighbours(
    table: GlobalSlice<u32>,
    data: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    barrier: u32,
) {
    let t = thread_idx().x as usize;
    let n = block_dim().x as usize;
    let seen = table
        .load(t)
        .wrapping_add(table.load((t + 1) % n))
        .wrapping_add(table.load(t * 7 % n)); // @ro-table-read
    data.store(t, seen); // @ro-write
    if barrier == 1 {
        sync_threads();
    }
    out.store(t, data.load((t + 1) % n)); // @ro-neighbour-read
}

/// Threads per block of [`line_runs()`]: two warps, one 128-byte line of
/// `data` each (`data` holds `4 *` this many words, for modes 4 and 5).
pub const LINE_RUN_THREADS: u32 = 64;

/// Whole-line runs: the lanes of a warp touching one 128-byte line of
/// global memory in lane order, which the GPU's same-block table keeps as
/// one line entry until another access splits it. Each thread writes
/// `data[t]` (mode 3: the first warp writes the whole array as 8-byte
/// elements, two words a lane), then reads one word into `out[t]`:
/// - mode 0: its own word, then writes it again (no race);
/// - mode 1: the other warp's word `(t + 32) % 64`, with no barrier;
/// - mode 2: the same after a barrier (no race);
/// - mode 3: `data[t]`, which lane `t / 2` of the first warp wrote.
///
/// Modes 4 and 5: the first warp writes `data[..128]` as 16-byte
/// elements (four words a lane, four lines), lane `l` the value `l + 1`;
/// then each thread reads `data[t]`, which lane `t / 4` wrote, without a
/// barrier (mode 4) and after one (mode 5).
#[kernel]
pub fn line_runs(data: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>, mode: u32) {
    let t = thread_idx().x as usize;
    if mode == 3 {
        if let Some(wide) = data.cast::<u64>() {
            if t < 32 {
                wide.store(t, t as u64); // @wide-write
            }
        }
    } else if mode >= 4 {
        if let Some(quad) = data.cast::<[u32; 4]>() {
            if t < 32 {
                quad.store(t, [t as u32 + 1; 4]); // @quad-write
            }
        }
    } else {
        data.store(t, t as u32 + 1); // @run-write
    }
    if mode == 2 || mode == 5 {
        sync_threads();
    }
    let src = if mode == 1 || mode == 2 {
        (t + 32) % 64
    } else {
        t
    };
    let v = data.load(src); // @run-read
    out.store(t, v);
    if mode == 0 {
        data.store(t, v + 1); // @run-rewrite
    }
}

/// Elements of `large_tile`'s shared array: 8 KiB, more than the 4,668
/// bytes whose shadow fits beside it in a GPU block's shared memory.
pub const LARGE: usize = 2048;

/// Threads per block of `large_tile`.
pub const LARGE_THREADS: usize = 256;

/// `fill_then_read_neighbour` through an 8 KiB shared array, one block
/// of [`LARGE_THREADS`] threads.
#[kernel]
pub fn large_tile(out: GlobalSliceMut<u32>, barrier: u32) {
    let tile = shared_array!(u32; LARGE);
    fill_then_read_neighbour(tile, out, barrier);
}

/// Each thread stores its stride of `tile` (elements `t`, `t + threads`,
/// ..., each its own index; `N` a multiple of the block's threads), then
/// copies into `out[t]` the element its neighbour `t + 1` stored last:
/// `N - threads + (t + 1) % threads`. With `barrier == 0` nothing orders
/// the neighbour's store before the load.
#[inline(always)]
fn fill_then_read_neighbour<S: Sanitizer, const N: usize>(
    tile: SharedArray<u32, N, S>,
    out: GlobalSliceMut<u32, S>,
    barrier: u32,
) {
    let (t, threads) = (thread_idx().x as usize, block_dim().x as usize);
    let mut k = t;
    while k < N {
        tile.store(k, k as u32); // @stride-write
        k += threads;
    }
    if barrier == 1 {
        sync_threads();
    }
    out.store(t, tile.load(N - threads + (t + 1) % threads)); // @stride-read
}

/// Each thread writes its own `per` words of `out` (no two threads share
/// one): with 1,024 threads, one barrier interval touches `1024 * per`
/// words, one same-block table entry each on the GPU.
#[kernel]
pub fn many_words(per: usize, out: GlobalSliceMut<u32>) {
    let t = thread_idx().x as usize;
    let mut k = 0;
    while k < per {
        out.store(t * per + k, k as u32);
        k += 1;
    }
}

/// Each warp of the block writes its own `per` 128-byte lines of `out`,
/// each line whole in one access of its lanes (lane `l` word `l`): with
/// 1,024 threads, one barrier interval touches `32 * per` lines, one
/// same-block table entry each on the GPU.
#[kernel]
pub fn many_lines(per: usize, out: GlobalSliceMut<u32>) {
    let t = thread_idx().x as usize;
    let (warp, lane) = (t / 32, t % 32);
    let mut k = 0;
    while k < per {
        out.store((warp * per + k) * 32 + lane, k as u32);
        k += 1;
    }
}

/// The sum of the `per` lines of `many_lines`'s layout the calling
/// thread's warp reads (lane `l` word `l` of each), through `load`.
#[inline(always)]
fn sum_own_lines(per: usize, load: impl Fn(usize) -> u32) -> u32 {
    let t = thread_idx().x as usize;
    let (warp, lane) = (t / 32, t % 32);
    let mut sum = 0u32;
    let mut k = 0;
    while k < per {
        sum = sum.wrapping_add(load((warp * per + k) * 32 + lane));
        k += 1;
    }
    sum
}

/// Each warp reads its own `per` whole lines of `data` (the layout of
/// [`many_lines()`]), and each thread stores its sum in `out[thread]`.
/// `data` is read-only for the launch: the GPU sanitizer's same-block
/// table is not needed for it.
#[kernel]
pub fn read_many_lines(per: usize, data: GlobalSlice<u32>, out: GlobalSliceMut<u32>) {
    out.store(
        thread_idx().x as usize,
        sum_own_lines(per, |i| data.load(i)),
    );
}

/// [`read_many_lines()`] through a writable view of `data`: the same
/// reads, which the same-block table must then follow.
#[kernel]
pub fn read_many_lines_of_writable(
    per: usize,
    data: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
) {
    out.store(
        thread_idx().x as usize,
        sum_own_lines(per, |i| data.load(i)),
    );
}

/// Each thread writes its own elements of `out` through a grid-stride
/// partition (`out[i] = i`): in a launch of one block of 1,024 threads,
/// each warp writes one whole line a step, `out.len() / 32` lines in one
/// barrier interval, and only each element's owner touches it: the GPU
/// sanitizer trusts the partition and leaves the same-block table out
/// (unless `VIGIL_TRUST_TYPES=0`).
#[kernel]
pub fn many_owned_lines(out: GridStrideMut<u32>) {
    for (i, mine) in out.own() {
        mine.store(i.get() as u32);
    }
}

/// Threads per block of [`dynamic_reduce()`].
pub const REDUCE_THREADS: u32 = 256;

/// Sums each block's `REDUCE_THREADS` elements of `x` into `out[block]`
/// by a tree reduction in dynamic shared memory (one `u32` per thread:
/// launch with `REDUCE_THREADS * 4` bytes of it). With `skip_barrier == 1`
/// the barrier after the stride-64 round is left out: the stride-32 round
/// reads partial sums another warp is still writing.
#[kernel]
pub fn dynamic_reduce(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>, skip_barrier: u32) {
    let sums = dynamic_shared_array!(u32);
    let t = thread_idx().x as usize;
    let i = block_idx().x as usize * block_dim().x as usize + t;
    sums.store(t, if i < x.len() { x.load(i) } else { 0 });
    sync_threads();
    let mut stride = block_dim().x as usize / 2;
    while stride > 0 {
        if t < stride {
            let v = sums.load(t).wrapping_add(sums.load(t + stride)); // @dyn-read
            sums.store(t, v); // @dyn-write
        }
        if !(skip_barrier == 1 && stride == 64) {
            sync_threads();
        }
        stride /= 2;
    }
    if t == 0 {
        out.store(block_idx().x as usize, sums.load(0));
    }
}

/// `u32`s of [`near_limit()`]'s shared array: 45,056 bytes, 4 KiB below
/// the 48 KiB static limit, within which the 2,472 bytes a sanitized
/// entry adds keep it.
pub const NEAR_LIMIT: usize = 11_264;

/// Threads per block of [`near_limit()`].
pub const NEAR_LIMIT_THREADS: usize = 512;

/// `fill_then_read_neighbour` through a shared array near the static
/// limit, one block of [`NEAR_LIMIT_THREADS`] threads.
#[kernel]
pub fn near_limit(out: GlobalSliceMut<u32>, barrier: u32) {
    let big = shared_array!(u32; NEAR_LIMIT);
    fill_then_read_neighbour(big, out, barrier);
}

/// Threads per block of the same-block handoff kernels below: three
/// warps. The writer is thread 32 (warp 1), the reader thread 0 (warp 0),
/// a third party thread 64 (warp 2); the others only pass.
pub const HANDOFF_THREADS: u32 = 96;

/// What [`same_block_flag()`] writes to `data[0]`.
pub const FLAG_PAYLOAD: u32 = 9;

/// Polls `flag` with `order` at `sc` until it is not zero (or panics
/// after [`SPIN_LIMIT`] polls).
#[inline(always)]
#[track_caller]
fn wait_for<S: Sanitizer>(flag: GlobalPtrMut<u32, S>, order: Ordering, sc: Scope) {
    let mut polls = 0u32;
    while flag.atomic_load(order, sc) == 0 {
        polls += 1;
        if polls >= SPIN_LIMIT {
            panic!("block scenario: the flag was never set");
        }
    }
}

/// A flag between two warps of one block in global memory: thread 32
/// writes [`FLAG_PAYLOAD`] to `data[0]`, issues a release fence at scope
/// code `sc` if bit 0 of `fences` is set, and stores 1 to `flag[0]` with
/// ordering code `store_order`; thread 0 polls the flag with
/// `load_order`, issues an acquire fence at `sc` if bit 1 of `fences` is
/// set, and reads `data[0]` into `out[0]`. Ordered only when a release
/// (the store's or the fence's) meets an acquire (the load's or the
/// fence's).
#[kernel]
pub fn same_block_flag<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    flag: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    store_order: u32,
    load_order: u32,
    sc: u32,
    fences: u32,
) {
    let t = thread_idx().x;
    if t == 32 {
        data.store(0, FLAG_PAYLOAD); // @bflag-write
        if fences & 1 != 0 {
            thread_fence(Ordering::Release, scope(sc));
        }
        flag.at(0).atomic_store(1, ordering(store_order), scope(sc));
    } else if t == 0 {
        wait_for(flag.at(0), ordering(load_order), scope(sc));
        if fences & 2 != 0 {
            thread_fence(Ordering::Acquire, scope(sc));
        }
        let v = data.load(0); // @bflag-read
        out.store(0, v);
    }
}

/// How [`same_block_lock()`] takes its lock: a relaxed compare-exchange
/// followed by an acquire-release fence.
pub const LOCK_CAS_THEN_FENCE: u32 = 0;
/// An acquiring compare-exchange.
pub const LOCK_ACQUIRE_CAS: u32 = 1;

/// How [`same_block_lock()`] releases its lock: a release fence and a
/// relaxed exchange.
pub const UNLOCK_FENCE_EXCHANGE: u32 = 0;
/// An acquire-release fence and a relaxed store.
pub const UNLOCK_ACQ_REL_FENCE_STORE: u32 = 1;
/// A release store.
pub const UNLOCK_RELEASE_STORE: u32 = 2;
/// A relaxed store and no fence: nothing releases the critical section.
pub const UNLOCK_RELAXED_STORE: u32 = 3;

/// A spin lock in global memory between two warps of one block: threads
/// 0 and 32 each take `lock[0]` (`lock_mode`: [`LOCK_CAS_THEN_FENCE`] or
/// [`LOCK_ACQUIRE_CAS`], at scope code `sc`), add 1 to `data[0]` with a
/// plain load and store, and release it (`unlock_mode`: one of the
/// `UNLOCK_` constants). `data[0]` ends at 2; the second holder's critical
/// section is ordered after the first's unless the unlock releases
/// nothing.
#[kernel]
pub fn same_block_lock<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    lock: GlobalSliceMut<u32, S>,
    lock_mode: u32,
    unlock_mode: u32,
    sc: u32,
) {
    let t = thread_idx().x;
    if t != 0 && t != 32 {
        return;
    }
    let (word, sc) = (lock.at(0), scope(sc));
    let taking = if lock_mode == LOCK_ACQUIRE_CAS {
        Ordering::Acquire
    } else {
        Ordering::Relaxed
    };
    let mut polls = 0u32;
    while word.atomic_compare_exchange(0, 1, taking, sc).is_err() {
        polls += 1;
        if polls >= SPIN_LIMIT {
            panic!("block scenario: the lock was never free");
        }
    }
    if lock_mode == LOCK_CAS_THEN_FENCE {
        thread_fence(Ordering::AcqRel, sc);
    }
    let c = data.load(0); // @lock-read
    data.store(0, c + 1); // @lock-write
    match unlock_mode {
        UNLOCK_FENCE_EXCHANGE => {
            thread_fence(Ordering::Release, sc);
            word.atomic_exchange(0, Ordering::Relaxed, sc);
        }
        UNLOCK_ACQ_REL_FENCE_STORE => {
            thread_fence(Ordering::AcqRel, sc);
            word.atomic_store(0, Ordering::Relaxed, sc);
        }
        UNLOCK_RELEASE_STORE => word.atomic_store(0, Ordering::Release, sc),
        _ => word.atomic_store(0, Ordering::Relaxed, sc),
    }
}

/// An acquire that reads another thread's release orders nothing of a
/// third: thread 64 release-stores `flags[0]`; thread 0 acquires it, then
/// sets `flags[1]` (relaxed); thread 32 waits for `flags[1]` (relaxed),
/// writes `data[0]` and sets `flags[2]` (relaxed); thread 0 waits for
/// `flags[2]` (relaxed) and reads `data[0]` into `out[0]`. Nothing
/// releases thread 32's write to thread 0: a race.
#[kernel]
pub fn same_block_unrelated_acquire(
    data: GlobalSliceMut<u32>,
    flags: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
) {
    let t = thread_idx().x;
    if t == 64 {
        flags
            .at(0)
            .atomic_store(1, Ordering::Release, Scope::Device);
    } else if t == 0 {
        wait_for(flags.at(0), Ordering::Acquire, Scope::Device);
        flags
            .at(1)
            .atomic_store(1, Ordering::Relaxed, Scope::Device);
        wait_for(flags.at(2), Ordering::Relaxed, Scope::Device);
        let v = data.load(0); // @unrelated-read
        out.store(0, v);
    } else if t == 32 {
        wait_for(flags.at(1), Ordering::Relaxed, Scope::Device);
        data.store(0, FLAG_PAYLOAD); // @unrelated-write
        flags
            .at(2)
            .atomic_store(1, Ordering::Relaxed, Scope::Device);
    }
}

/// A release passed on: thread 0 writes `data[0]` and release-stores
/// `flags[0]`; thread 32 acquires it and release-stores `flags[1]`;
/// thread 64 acquires that and reads `data[0]` into `out[0]`. Race-free.
#[kernel]
pub fn same_block_transitive(
    data: GlobalSliceMut<u32>,
    flags: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
) {
    let t = thread_idx().x;
    if t == 0 {
        data.store(0, FLAG_PAYLOAD); // @trans-write
        flags
            .at(0)
            .atomic_store(1, Ordering::Release, Scope::Device);
    } else if t == 32 {
        wait_for(flags.at(0), Ordering::Acquire, Scope::Device);
        flags
            .at(1)
            .atomic_store(1, Ordering::Release, Scope::Device);
    } else if t == 64 {
        wait_for(flags.at(1), Ordering::Acquire, Scope::Device);
        let v = data.load(0); // @trans-read
        out.store(0, v);
    }
}

/// One lane acquires for its warp: thread 32 writes `data[i] = i + 1`
/// for the 32 words and release-stores `flag[0]`; lane 0 of warp 0
/// acquires it, then warp 0 meets at `sync_warp` and each of its lanes
/// reads `data[lane]` into `out[lane]`. Race-free.
#[kernel]
pub fn same_block_lane_handoff(
    data: GlobalSliceMut<u32>,
    flag: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
) {
    let t = thread_idx().x as usize;
    if t == 32 {
        let mut i = 0;
        while i < 32 {
            data.store(i, i as u32 + 1); // @lane-write
            i += 1;
        }
        flag.at(0).atomic_store(1, Ordering::Release, Scope::Block);
    } else if t < 32 {
        if t == 0 {
            wait_for(flag.at(0), Ordering::Acquire, Scope::Block);
        }
        warp::sync_warp(warp::FULL_MASK);
        let v = data.load(t); // @lane-read
        out.store(t, v);
    }
}

/// A shared flag ordering global data: thread 32 writes `data[0]`,
/// issues a block-scope release fence if bit 0 of `fences` is set and
/// stores 1 to a shared flag with a volatile store; thread 0 polls the
/// flag with volatile loads, issues a block-scope acquire fence if bit 1
/// of `fences` is set, and reads `data[0]` into `out[0]`. Ordered only
/// with both fences.
#[kernel]
pub fn same_block_shared_flag<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    fences: u32,
) {
    let flag = shared_array!(u32; 1);
    let t = thread_idx().x;
    if t == 0 {
        flag.store(0, 0);
    }
    sync_threads();
    if t == 32 {
        data.store(0, FLAG_PAYLOAD); // @sflag-write
        if fences & 1 != 0 {
            thread_fence(Ordering::Release, Scope::Block);
        }
        flag.store_volatile(0, 1);
    } else if t == 0 {
        let mut polls = 0u32;
        while flag.load_volatile(0) == 0 {
            polls += 1;
            if polls >= SPIN_LIMIT {
                panic!("block scenario: the shared flag was never set");
            }
        }
        if fences & 2 != 0 {
            thread_fence(Ordering::Acquire, Scope::Block);
        }
        let v = data.load(0); // @sflag-read
        out.store(0, v);
    }
}
