//! Races through asynchronous copies, each kernel in a racy form and its
//! fixed twin (picked by `mode`): a copy's accesses take place somewhere
//! between its issue and the completion a thread waits for, so an access
//! to its destination (or a write to its source) before that completion
//! races with it, even by the thread that issued it, and a barrier does
//! not order it. The `// @marker` comments name the lines the reports
//! must point at.

use vigil_device::async_copy::Mbarrier;
use vigil_device::async_copy::{
    bulk_commit_group, bulk_wait_group, bulk_wait_group_read, commit_group,
    fence_proxy_async_shared, wait_all, wait_group,
};
use vigil_device::grid_dependency;
use vigil_device::prelude::*;
use vigil_device::shared_mem::SharedArray;

/// Threads per block of these kernels.
pub const ASYNC_RACE_THREADS: u32 = 64;
/// Elements of a tile: 16 bytes per thread.
pub const ASYNC_RACE_TILE: usize = 4 * ASYNC_RACE_THREADS as usize;
const TILE: usize = ASYNC_RACE_TILE;

/// Thread 0 initialises `bar` for one arrival a phase and shows it to the
/// copy unit; a barrier shows it to the block (a helper, so it names the
/// kernel's sanitizer `S` for its barrier).
fn ready_for_one_arrival<S: Sanitizer>(bar: Mbarrier<S>) {
    if thread_idx().x == 0 {
        bar.init(1);
        fence_proxy_async_shared();
    }
    sync_threads();
}

/// Thread 0 loads `x[from..][..TILE]` into `tile` with a bulk copy that
/// completes on `bar`, its arrival expecting the copy's bytes (reports
/// name the caller's line).
#[track_caller]
fn thread_0_loads<S: Sanitizer>(
    tile: &SharedArray<u32, TILE, S>,
    x: GlobalSlice<u32, S>,
    from: usize,
    bar: Mbarrier<S>,
) {
    if thread_idx().x == 0 {
        bar.arrive_expect_tx((4 * TILE) as u32);
        tile.copy_bulk_from(0, x, from, TILE, bar);
    }
}

/// Raises `flag` with a release at device scope.
fn raise<S: Sanitizer>(flag: GlobalSliceMut<u32, S>) {
    flag.at(0).atomic_store(1, Ordering::Release, Scope::Device);
}

/// Thread 0 waits for `flag` with an acquire at device scope, and a
/// barrier shows what it acquired to the block.
fn wait_for<S: Sanitizer>(flag: GlobalSliceMut<u32, S>) {
    if thread_idx().x == 0 {
        while flag.at(0).atomic_load(Ordering::Acquire, Scope::Device) == 0 {}
    }
    sync_threads();
}

/// Every thread writes `1 + i` to its 16 bytes of `tile`, which a fence
/// and a barrier then show to the copy unit (for a bulk or tensor store).
fn fill_for_a_store<S: Sanitizer>(tile: &SharedArray<u32, TILE, S>) {
    let t = thread_idx().x as usize;
    for k in 0..4 {
        tile.store(4 * t + k, (4 * t + k) as u32 + 1);
    }
    fence_proxy_async_shared();
    sync_threads();
}

/// Each thread copies its 16 bytes of `x` into a tile with `cp.async`,
/// and `y[t]` gets one element of the tile. `mode` 0: a neighbour's
/// chunk after the wait and a barrier; 1: its own chunk before its wait
/// (a race with its own copy); 2: a neighbour's chunk after a barrier but
/// before the neighbour waited (a race); 3: its own chunk after its own
/// wait, no barrier (race-free: a wait covers the thread's own copies);
/// 4: a neighbour's chunk with neither a wait nor a barrier (a race).
#[kernel]
pub fn cp_async_early_read(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE);
    let t = thread_idx().x as usize;
    let next = (4 * t + 4) % TILE;
    tile.copy_async::<16>(4 * t, x, 4 * t); // @cp-issue
    commit_group();
    let v = match mode {
        1 => {
            let v = tile.load(4 * t); // @cp-own-early
            wait_group::<0>();
            v
        }
        2 => {
            sync_threads();
            let v = tile.load(next); // @cp-other-early
            wait_group::<0>();
            v
        }
        3 => {
            wait_group::<0>();
            tile.load(4 * t)
        }
        4 => {
            let v = tile.load(next); // @cp-other-unsynced
            wait_group::<0>();
            v
        }
        _ => {
            wait_group::<0>();
            sync_threads();
            tile.load(next)
        }
    };
    y.store(t, v);
}

/// Each thread copies its 16 bytes of `x` into a tile with `cp.async`
/// and writes the tile's first element of its chunk again before its
/// wait: `mode` 0 with a plain store of 7 (a race with its own copy's
/// write), 1 with a second `cp.async` of the chunk (two copies in flight
/// to the same bytes), 2 with the plain store after the wait (race-free).
/// `y[t]` gets that element.
#[kernel]
pub fn cp_async_destination_written(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE);
    let t = thread_idx().x as usize;
    tile.copy_async::<16>(4 * t, x, 4 * t); // @cp-first-copy
    match mode {
        0 => tile.store(4 * t, 7),                   // @cp-early-store
        1 => tile.copy_async::<16>(4 * t, x, 4 * t), // @cp-second-copy
        _ => {}
    }
    wait_all();
    if mode == 2 {
        tile.store(4 * t, 7);
    }
    y.store(t, tile.load(4 * t));
}

/// Two `cp.async` groups per thread (the first and second tile of `x`),
/// then a wait and a barrier, and `y[t]` gets an element of a neighbour's
/// chunk. `mode` 0: of the first tile after `wait_group::<1>` (race-free:
/// only the newer group may still be in flight); 1: of the second tile
/// after `wait_group::<1>` (a race: the wrong group count); 2: of the
/// second tile after `wait_group::<0>` (race-free).
#[kernel]
pub fn cp_async_group_count(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tiles = shared_array!(u32; 2 * TILE);
    let t = thread_idx().x as usize;
    tiles.copy_async::<16>(4 * t, x, 4 * t); // @group-first
    commit_group();
    tiles.copy_async::<16>(TILE + 4 * t, x, TILE + 4 * t); // @group-second
    commit_group();
    if mode == 2 {
        wait_group::<0>();
    } else {
        wait_group::<1>();
    }
    sync_threads();
    let at = if mode == 0 { 0 } else { TILE };
    let v = tiles.load(at + (4 * t + 4) % TILE); // @group-read
    wait_all();
    y.store(t, v);
}

/// Each thread copies its 16 bytes of `x` into a tile with `cp.async` and
/// then overwrites the first of them in `x`: before its wait (`mode` 1, a
/// race with the copy's read) or after it (0, race-free). `y[t]` gets the
/// copied value.
#[kernel]
pub fn cp_async_source_overwrite(x: GlobalSliceMut<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE);
    let t = thread_idx().x as usize;
    tile.copy_async::<16>(4 * t, x.as_const(), 4 * t); // @src-issue
    commit_group();
    if mode == 1 {
        x.store(4 * t, 7); // @src-overwrite
    }
    wait_group::<0>();
    if mode == 0 {
        x.store(4 * t, 7);
    }
    y.store(t, tile.load(4 * t));
}

/// Each thread copies its 16 bytes of `x` into a tile with `cp.async`
/// and, after a barrier, writes the first element of its neighbour's
/// source chunk in `x`: before the neighbour's wait (`mode` 1, a race
/// with the neighbour's copy, which may not have read it yet) or after a
/// wait and the barrier (0, race-free). `y[t]` gets the thread's own
/// copied value.
#[kernel]
pub fn cp_async_source_written_by_another(
    x: GlobalSliceMut<u32>,
    y: GlobalSliceMut<u32>,
    mode: u32,
) {
    let tile = shared_array!(u32; TILE);
    let t = thread_idx().x as usize;
    let next = (4 * t + 4) % TILE;
    tile.copy_async::<16>(4 * t, x.as_const(), 4 * t); // @src-other-issue
    commit_group();
    if mode == 0 {
        wait_group::<0>();
    }
    sync_threads();
    x.store(next, 7); // @src-other-write
    wait_group::<0>();
    y.store(t, tile.load(4 * t));
}

/// Each thread copies its 16 bytes of `x` into a tile with `cp.async` and,
/// after a barrier, reads its neighbour's chunk into `y[t]`: `mode` 0 with
/// a `wait_all` before the barrier (race-free), 1 with no wait at all (a
/// copy not waited for completes when its thread returns: the read races
/// with the neighbour's copy).
#[kernel]
pub fn cp_async_never_waited(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE);
    let t = thread_idx().x as usize;
    tile.copy_async::<16>(4 * t, x, 4 * t); // @unwaited-issue
    commit_group();
    if mode == 0 {
        wait_all();
    }
    sync_threads();
    y.store(t, tile.load((4 * t + 4) % TILE)); // @unwaited-read
}

/// Copies of 4 bytes each thread issues in `cp_async_many_in_flight`,
/// more than the GPU sanitizer keeps in flight for a thread (8).
pub const MANY_IN_FLIGHT: usize = 12;

/// Each thread copies its [`MANY_IN_FLIGHT`] words of `x` into a tile,
/// one `cp.async` each, in one group. `mode` 0: a `wait_all` and a
/// barrier, then `y[t]` gets the neighbour's last word (race-free); 1:
/// the thread reads its own last word before its wait (a race with its
/// newest copy); 2: its own first word before the wait (a race with its
/// oldest copy, which the GPU sanitizer completed early when its queue
/// overflowed: a race it does not report).
#[kernel]
pub fn cp_async_many_in_flight(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    const WORDS: usize = MANY_IN_FLIGHT * ASYNC_RACE_THREADS as usize;
    let tile = shared_array!(u32; WORDS);
    let t = thread_idx().x as usize;
    let mine = MANY_IN_FLIGHT * t;
    for k in 0..MANY_IN_FLIGHT {
        tile.copy_async::<4>(mine + k, x, mine + k); // @many-issue
    }
    commit_group();
    let v = match mode {
        1 => tile.load(mine + MANY_IN_FLIGHT - 1), // @many-newest-early
        2 => tile.load(mine),                      // @many-oldest-early
        _ => 0,
    };
    wait_all();
    sync_threads();
    let next = (mine + MANY_IN_FLIGHT) % WORDS;
    y.store(
        t,
        if mode == 0 {
            tile.load(next + MANY_IN_FLIGHT - 1)
        } else {
            v
        },
    );
}

/// Thread 0 loads the first tile of `x` with a bulk copy completing on an
/// mbarrier; after a barrier, thread 1 overwrites `x[0]`: before anyone
/// waits on the barrier's phase (`mode` 1, a barrier between the write
/// and the waits: a race with the copy's read) or after its own wait (0,
/// race-free). `y[t]` gets element `t` of the tile.
#[kernel]
pub fn bulk_source_overwrite(x: GlobalSliceMut<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    ready_for_one_arrival(bar);
    thread_0_loads(&tile, x.as_const(), 0, bar); // @bulk-issue
    sync_threads();
    if mode == 1 {
        if t == 1 {
            x.store(0, 7); // @bulk-overwrite
        }
        sync_threads();
    }
    bar.wait_parity(0);
    if mode == 0 && t == 1 {
        x.store(0, 7);
    }
    y.store(t, tile.load(t));
}

/// Thread 0 loads the first tile of `x` with a bulk copy completing on an
/// mbarrier, and every thread reads element `t` of the tile into `y[t]`:
/// after waiting on the barrier's phase (`mode` 0, race-free) or before
/// (1, a race with the copy's write: no wait and no barrier between).
#[kernel]
pub fn bulk_load_read(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    ready_for_one_arrival(bar);
    thread_0_loads(&tile, x, 0, bar); // @bulk-load-issue
    let early = if mode == 1 {
        tile.load(t) // @bulk-load-early-read
    } else {
        0
    };
    bar.wait_parity(0);
    y.store(t, if mode == 1 { early } else { tile.load(t) });
}

/// Two rounds of a bulk load of a tile of `x` by thread 0 on one
/// mbarrier of two arrivals a phase (thread 0's, expecting the copy's
/// bytes, and thread 1's); each round every thread waits on the round's
/// phase and adds element `t` of the tile to `y[t]`. `mode` 0 waits on
/// the round's parity (race-free); 1 waits on parity 0 both times, so the
/// second wait returns at once, for the phase already over (a race with
/// the second load, waited for properly after the rounds). In the racy
/// form thread 1 makes the second round's arrival only after its reads:
/// had the phase completed first, the next one (of parity 0 again) would
/// be current and the wrong wait would wait for it for ever, as it may on
/// a GPU.
#[kernel]
pub fn mbarrier_wrong_phase(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    if t == 0 {
        bar.init(2);
        fence_proxy_async_shared();
    }
    sync_threads();
    let mut sum = 0u32;
    for round in 0..2usize {
        thread_0_loads(&tile, x, round * TILE, bar); // @phase-issue
        let late = mode == 1 && round == 1;
        if t == 1 && !late {
            bar.arrive();
        }
        let parity = if mode == 1 { 0 } else { round & 1 };
        bar.wait_parity(parity as u32);
        sum = sum.wrapping_add(tile.load(t)); // @phase-read
        sync_threads();
        if t == 1 && late {
            bar.arrive();
        }
    }
    if mode == 1 {
        bar.wait_parity(1);
    }
    y.store(t, sum);
}

/// Block 0 fills a tile with `1 + i`, and its thread 0 stores it to
/// `y[0..TILE]` with a bulk copy and raises `flag` with a release; block
/// 1 waits for the flag with an acquire, and `out[t] = y[4 t]`. `mode` 0
/// waits for the bulk group before the release (race-free); 1 releases
/// first and waits after (a race: the release does not cover a copy still
/// in flight). Two blocks.
#[kernel]
pub fn bulk_store_read_back(
    y: GlobalSliceMut<u32>,
    flag: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    mode: u32,
) {
    let tile = shared_array!(u32; TILE; align 128);
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        fill_for_a_store(&tile);
        if t == 0 {
            tile.copy_bulk_to(0, y, 0, TILE); // @store-issue
            bulk_commit_group();
            if mode == 0 {
                bulk_wait_group::<0>();
            }
            raise(flag);
            bulk_wait_group::<0>();
        }
    } else {
        wait_for(flag);
        out.store(t, y.load(4 * t)); // @store-read-back
    }
}

/// Every thread fills its 16 bytes of a tile with `1 + i`, thread 0
/// stores the tile to `y` with a bulk copy, and every thread then zeroes
/// the first of its elements: after `bulk_wait_group_read` and a barrier
/// (`mode` 0, race-free) or with the store still reading the tile (1, a
/// race).
#[kernel]
pub fn bulk_store_source_overwrite(y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let t = thread_idx().x as usize;
    fill_for_a_store(&tile);
    if t == 0 {
        tile.copy_bulk_to(0, y, 0, TILE); // @bulk-store-issue
        bulk_commit_group();
    }
    if mode == 0 {
        if t == 0 {
            bulk_wait_group_read::<0>();
        }
        sync_threads();
    }
    tile.store(4 * t, 0); // @bulk-store-overwrite
    sync_threads();
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

/// Thread 0 loads the first tile of `x` with a bulk copy completing on an
/// mbarrier, then a barrier; the block's threads use the tile, and `y[t]`
/// gets element `t` of it. `mode` 0: thread 0 alone waits, then a barrier
/// shows the tile to the rest (race-free); 1: every thread reads its
/// element before waiting (a race: the barrier does not complete the
/// copy); 2: thread 1 stores to the tile, a barrier before anyone waits
/// (a race with the copy's write); 3: every thread waits, then reads
/// (race-free).
#[kernel]
pub fn bulk_load_by_the_block(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    ready_for_one_arrival(bar);
    thread_0_loads(&tile, x, 0, bar); // @block-load-issue
    sync_threads();
    match mode {
        0 => {
            if t == 0 {
                bar.wait_parity(0);
            }
            sync_threads();
        }
        1 => {
            let early = tile.load(t); // @block-load-early-read
            bar.wait_parity(0);
            y.store(t, early);
            return;
        }
        2 => {
            if t == 1 {
                tile.store(0, 7); // @block-load-early-store
            }
            sync_threads();
            bar.wait_parity(0);
            sync_threads();
        }
        _ => bar.wait_parity(0),
    }
    y.store(t, tile.load(t));
}

/// Every thread fills its 16 bytes of a tile with `1 + i`, thread 0
/// stores the tile to `y` with a bulk copy, and after a barrier every
/// thread reads `out[t] = y[4 t]`. `mode` 0: thread 0 waits for the bulk
/// group before the barrier (race-free); 1: it waits only for the copy's
/// read of the tile (`.read`: a race, the write to `y` may be in flight);
/// 2: it does not wait (a race).
#[kernel]
pub fn bulk_store_read_by_the_block(y: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let t = thread_idx().x as usize;
    fill_for_a_store(&tile);
    if t == 0 {
        tile.copy_bulk_to(0, y, 0, TILE); // @block-store-issue
        bulk_commit_group();
        match mode {
            0 => bulk_wait_group::<0>(),
            1 => bulk_wait_group_read::<0>(),
            _ => {}
        }
    }
    sync_threads();
    out.store(t, y.load(4 * t)); // @block-store-read
    sync_threads();
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

/// Block 0 fills a tile with `1 + i`, and its thread 0 stores the two
/// halves to `y` with two bulk copies in two bulk groups, waits for all
/// but the newest group and raises `flag` with a release; block 1 waits
/// for the flag with an acquire, and `out[t]` gets every other element of
/// the first half of `y` (`mode` 0: race-free, that group was waited for)
/// or of the second half (1: a race with the store still in flight). Two
/// blocks.
#[kernel]
pub fn bulk_store_group_count(
    y: GlobalSliceMut<u32>,
    flag: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    mode: u32,
) {
    let tile = shared_array!(u32; TILE; align 128);
    let t = thread_idx().x as usize;
    const HALF: usize = TILE / 2;
    if block_idx().x == 0 {
        fill_for_a_store(&tile);
        if t == 0 {
            tile.copy_bulk_to(0, y, 0, HALF); // @group-store-first
            bulk_commit_group();
            tile.copy_bulk_to(HALF, y, HALF, HALF); // @group-store-second
            bulk_commit_group();
            bulk_wait_group::<1>();
            raise(flag);
            bulk_wait_group::<0>();
        }
    } else {
        wait_for(flag);
        let half = if mode == 0 { 0 } else { HALF };
        out.store(t, y.load(half + 2 * t)); // @group-read-back
    }
}

/// Stores a tile of `1 + i` to the `TILE`-element box at element 0 of the
/// 1-dimensional tensor `dst` with a tensor copy, one block.
#[kernel]
pub fn tensor_store_tile(dst: TensorMapMut<u32, 1>) {
    let tile = shared_array!(u32; TILE; align 128);
    let t = thread_idx().x as usize;
    fill_for_a_store(&tile);
    if t == 0 {
        dst.store_tile(&tile, 0, [0]); // @tensor-store
        bulk_commit_group();
        bulk_wait_group::<0>();
    }
}

/// `out[0] = data[at]`, one thread.
#[kernel]
pub fn plain_load_at(data: GlobalSlice<u32>, out: GlobalSliceMut<u32>, at: u32) {
    if thread_idx().x == 0 {
        out.store(0, data.load(at as usize)); // @tensor-plain-load
    }
}

/// Loads the `TILE`-element box at element 0 of the 1-dimensional
/// tensor `src` with a tensor copy and writes it to `y`, one block.
#[kernel]
pub fn tensor_load_tile(src: TensorMap<u32, 1>, y: GlobalSliceMut<u32>) {
    let tile = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    ready_for_one_arrival(bar);
    if t == 0 {
        bar.arrive_expect_tx(src.box_bytes());
        src.load_tile(&tile, 0, [0], bar); // @tensor-load
    }
    sync_threads();
    bar.wait_parity(0);
    for k in 0..4 {
        y.store(4 * t + k, tile.load(4 * t + k));
    }
}

/// Thread 0 loads the `TILE`-element box at element 0 of the
/// 1-dimensional tensor `src` with a tensor copy, then a barrier, and
/// `y[t]` gets element `t` of the tile: read after the phase's wait
/// (`mode` 0, race-free) or before it (1: a race, the barrier does not
/// complete the copy).
#[kernel]
pub fn tensor_load_read(src: TensorMap<u32, 1>, y: GlobalSliceMut<u32>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(1);
    let bar = bars.get(0);
    let t = thread_idx().x as usize;
    ready_for_one_arrival(bar);
    if t == 0 {
        bar.arrive_expect_tx(src.box_bytes());
        src.load_tile(&tile, 0, [0], bar); // @tensor-read-issue
    }
    sync_threads();
    let early = if mode == 1 {
        tile.load(t) // @tensor-early-read
    } else {
        0
    };
    bar.wait_parity(0);
    y.store(t, if mode == 1 { early } else { tile.load(t) });
}

/// Every thread fills its 16 bytes of a tile with `1 + i`, thread 0
/// stores the tile to the box at element 0 of `dst` with a tensor copy,
/// and after a barrier every thread zeroes the first of its elements:
/// after thread 0's `bulk_wait_group_read` (`mode` 0, race-free) or with
/// the store still reading the tile (1, a race).
#[kernel]
pub fn tensor_store_source_overwrite(dst: TensorMapMut<u32, 1>, mode: u32) {
    let tile = shared_array!(u32; TILE; align 128);
    let t = thread_idx().x as usize;
    fill_for_a_store(&tile);
    if t == 0 {
        dst.store_tile(&tile, 0, [0]); // @tensor-store-issue
        bulk_commit_group();
        if mode == 0 {
            bulk_wait_group_read::<0>();
        }
    }
    sync_threads();
    tile.store(4 * t, 0); // @tensor-store-overwrite
    sync_threads();
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

/// A two-stage pipeline: thread 0 loads the first two tiles of `x` into
/// two stages, each completing on its own mbarrier; every thread waits
/// for stage 0 and reads element `t` of both stages into `y[t]` (their
/// sum): after waiting for stage 1 too (`mode` 0, race-free) or without
/// (1: a race with the second load).
#[kernel]
pub fn pipeline_stage_read(x: GlobalSlice<u32>, y: GlobalSliceMut<u32>, mode: u32) {
    let first = shared_array!(u32; TILE; align 128);
    let second = shared_array!(u32; TILE; align 128);
    let bars = mbarriers!(2);
    let t = thread_idx().x as usize;
    if t == 0 {
        bars.get(0).init(1);
        bars.get(1).init(1);
        fence_proxy_async_shared();
    }
    sync_threads();
    thread_0_loads(&first, x, 0, bars.get(0));
    thread_0_loads(&second, x, TILE, bars.get(1)); // @stage-issue
    bars.get(0).wait_parity(0);
    if mode == 0 {
        bars.get(1).wait_parity(0);
    }
    let v = first.load(t).wrapping_add(second.load(t)); // @stage-read
    sync_threads();
    if mode == 1 {
        bars.get(1).wait_parity(0);
    }
    y.store(t, v);
}

/// `data[at] = 9`, one thread.
#[kernel]
pub fn plain_store_at(data: GlobalSliceMut<u32>, at: u32) {
    if thread_idx().x == 0 {
        data.store(at as usize, 9); // @tensor-plain-store
    }
}

/// `y[i] = i + 1`, letting a dependent launch start early.
#[kernel]
pub fn pdl_writer(y: GlobalSliceMut<u32>) {
    grid_dependency::launch_dependents();
    let i = global_index_x();
    if i < y.len() {
        y.store(i, i as u32 + 1); // @pdl-write
    }
}

/// `z[i] = y[i]`, `y` being the launch before's output: read before
/// `grid_dependency::wait()` (`mode` 1: in a programmatic dependent
/// launch, a race with that launch's write) or after it (0).
#[kernel]
pub fn pdl_reader(y: GlobalSlice<u32>, z: GlobalSliceMut<u32>, mode: u32) {
    let i = global_index_x();
    let inside = i < y.len() && i < z.len();
    let early = if mode == 1 && inside {
        y.load(i) // @pdl-early-read
    } else {
        0
    };
    grid_dependency::wait();
    if inside {
        let v = if mode == 1 { early } else { y.load(i) };
        z.store(i, v);
    }
}
