//! The race-scenario kernels: each is one case of the race-scenario suite
//! (`tests/tests/race_scenarios.rs`), racy or correctly synchronised.
//!
//! Every access the suite's verdicts name sits on its own line ending in a
//! `// @name` marker; the suite finds the expected source lines by marker,
//! so editing this file does not break it.
//!
//! Orderings and scopes come in as `u32` codes ([`ordering`], [`scope`]) so
//! that one kernel covers each hand-off pattern with every ordering.
//! Spin-waits are bounded ([`SPIN_LIMIT`]) and panic with a message instead
//! of hanging if the flag never comes.

use vigil_device::prelude::*;

/// Most polls of a flag before a spinning thread gives up (panics).
pub const SPIN_LIMIT: u32 = 1 << 26;

/// The [`Ordering`] of code `c`: 0 relaxed, 1 acquire, 2 release,
/// 3 acq_rel, 4 seq_cst.
#[inline(always)]
pub fn ordering(c: u32) -> Ordering {
    match c {
        1 => Ordering::Acquire,
        2 => Ordering::Release,
        3 => Ordering::AcqRel,
        4 => Ordering::SeqCst,
        _ => Ordering::Relaxed,
    }
}

/// The [`Scope`] of code `c`: 0 block, 1 device, 2 system.
#[inline(always)]
pub fn scope(c: u32) -> Scope {
    match c {
        0 => Scope::Block,
        2 => Scope::System,
        _ => Scope::Device,
    }
}

/// Polls `flag` with ordering code `order` and scope code `sc` until it is
/// not zero (or panics after [`SPIN_LIMIT`] polls).
#[inline(always)]
#[track_caller]
fn spin_until_set<S: Sanitizer>(flag: GlobalPtrMut<u32, S>, order: u32, sc: u32) {
    let mut polls = 0u32;
    while flag.atomic_load(ordering(order), scope(sc)) == 0 {
        polls += 1;
        if polls >= SPIN_LIMIT {
            panic!("race scenario: the flag was never set");
        }
    }
}

/// Block 0 writes `data[0]`, block 1 reads it (one thread each): a
/// read-after-write race between blocks.
#[kernel]
pub fn race_raw(data: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>) {
    if block_idx().x == 0 {
        data.store(0, 1); // @raw-write
    } else {
        let v = data.load(0); // @raw-read
        out.store(0, v);
    }
}

/// Block 0 reads `data[0]`, block 1 writes it: a write-after-read race.
#[kernel]
pub fn race_war(data: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>) {
    if block_idx().x == 0 {
        let v = data.load(0); // @war-read
        out.store(0, v);
    } else {
        data.store(0, 2); // @war-write
    }
}

/// Blocks 0 and 1 both write `data[0]`: a write-after-write race.
#[kernel]
pub fn race_waw(data: GlobalSliceMut<u32>) {
    if block_idx().x == 0 {
        data.store(0, 1); // @waw-first
    } else {
        data.store(0, 2); // @waw-second
    }
}

/// Each thread of the grid writes its own element: no race.
#[kernel]
pub fn disjoint_writes(data: GlobalSliceMut<u32>) {
    let i = global_index_x();
    if i < data.len() {
        data.store(i, i as u32);
    }
}

/// Block `b` writes byte `b` (blocks 0 to 3 share one 4-byte word): no
/// race, the shadow is exact to the byte.
#[kernel]
pub fn adjacent_bytes(data: GlobalSliceMut<u8>) {
    let b = block_idx().x as usize;
    data.store(b, b as u8 + 1);
}

/// Writes `v` to `data[0]` (one thread).
#[kernel]
pub fn write_one(data: GlobalSliceMut<u32>, v: u32) {
    data.store(0, v); // @write-one
}

/// Copies `data[0]` to `out[0]` (one thread).
#[kernel]
pub fn read_one(data: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>) {
    let v = data.load(0); // @read-one
    out.store(0, v);
}

/// Flag hand-off between two blocks of one thread: block 0 writes `data[0]`
/// and stores 1 to `flag[0]` with ordering code `store_order`; block 1
/// spins on the flag with `load_order` and reads `data[0]` into `out[0]`.
/// Both flag accesses use scope code `sc`. Race-free only for a release
/// store and an acquire load whose scopes cover both blocks (device or
/// system).
#[kernel]
pub fn flag_handoff(
    data: GlobalSliceMut<u32>,
    flag: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    store_order: u32,
    load_order: u32,
    sc: u32,
) {
    if block_idx().x == 0 {
        data.store(0, 42); // @handoff-write
        flag.at(0).atomic_store(1, ordering(store_order), scope(sc)); // @handoff-flag-store
    } else {
        spin_until_set(flag.at(0), load_order, sc); // @handoff-flag-load
        let v = data.load(0); // @handoff-read
        out.store(0, v);
    }
}

/// A chain through a middle block (one thread per block): block 0 writes
/// `data[0]` and release-stores `flags[0]`; block 1 waits for `flags[0]`
/// with ordering code `mid_load` and stores `flags[1]` with `mid_store`;
/// block 2 acquires `flags[1]` and reads `data[0]`. Race-free only when
/// the middle block acquires and releases.
#[kernel]
pub fn transitive_chain(
    data: GlobalSliceMut<u32>,
    flags: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    mid_load: u32,
    mid_store: u32,
) {
    match block_idx().x {
        0 => {
            data.store(0, 7); // @chain-write
            flags
                .at(0)
                .atomic_store(1, Ordering::Release, Scope::Device);
        }
        1 => {
            spin_until_set(flags.at(0), mid_load, 1);
            flags
                .at(1)
                .atomic_store(1, ordering(mid_store), Scope::Device);
        }
        _ => {
            spin_until_set(flags.at(1), 1, 1);
            let v = data.load(0); // @chain-read
            out.store(0, v);
        }
    }
}

/// Every thread of every block bumps `counter[0]` with a relaxed
/// device-scope atomic add: no race (atomics of a common scope).
#[kernel]
pub fn atomic_counter(counter: GlobalSliceMut<u32>) {
    counter
        .at(0)
        .atomic_add(1, Ordering::Relaxed, Scope::Device);
}

/// Block 0 adds to `data[0]` atomically, block 1 writes it plainly: an
/// atomic/non-atomic race.
#[kernel]
pub fn atomic_plain_mix(data: GlobalSliceMut<u32>) {
    if block_idx().x == 0 {
        data.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device); // @mix-atomic
    } else {
        data.store(0, 5); // @mix-plain
    }
}

/// The fence pattern of the PTX memory model (one thread per block):
/// block 0 writes `data[0]`, then (if `fences != 0`) a release fence, then
/// a relaxed store of the flag; block 1 polls the flag relaxed, then (if
/// `fences != 0`) an acquire fence, then reads `data[0]`. Race-free with
/// the fences, racy without.
#[kernel]
pub fn fenced_relaxed<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    flag: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    fences: u32,
) {
    if block_idx().x == 0 {
        data.store(0, 9); // @fence-write
        if fences != 0 {
            thread_fence(Ordering::Release, Scope::Device);
        }
        flag.at(0).atomic_store(1, Ordering::Relaxed, Scope::Device);
    } else {
        spin_until_set(flag.at(0), 0, 1);
        if fences != 0 {
            thread_fence(Ordering::Acquire, Scope::Device);
        }
        let v = data.load(0); // @fence-read
        out.store(0, v);
    }
}

/// A persistent two-block kernel (any block size): block 0's threads each
/// write `data[t]`, meet at a barrier, and thread 0 stores the flag with
/// ordering code `store_order`; in block 1, thread 0 spins on the flag with
/// `load_order` (while block 0 may still be running on another virtual SM),
/// the block meets at a barrier, and every thread reads `data[t]` into
/// `out[t]`.
#[kernel]
pub fn persistent_spin(
    data: GlobalSliceMut<u32>,
    flag: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    store_order: u32,
    load_order: u32,
) {
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        data.store(t, t as u32 + 1); // @persist-write
        sync_threads();
        if t == 0 {
            flag.at(0)
                .atomic_store(1, ordering(store_order), Scope::Device);
        }
    } else {
        if t == 0 {
            spin_until_set(flag.at(0), load_order, 1);
        }
        sync_threads();
        let v = data.load(t); // @persist-read
        out.store(t, v);
    }
}

/// Every thread of every block writes `per_thread` consecutive elements
/// of `data` starting at `thread * per_thread`: blocks write the same
/// elements, one write-after-write race per element and extra block.
#[kernel]
pub fn many_races(data: GlobalSliceMut<u32>, per_thread: u32) {
    let start = thread_idx().x as usize * per_thread as usize;
    let mut i = start;
    while i < start + per_thread as usize && i < data.len() {
        data.store(i, block_idx().x); // @many-write
        i += 1;
    }
}

/// The demo's racy kernel: counts the positive values of `data` into
/// `count[0]` with a plain read and a plain write, so blocks running at
/// the same time lose each other's increments.
#[kernel]
pub fn count_positive_racy(data: GlobalSlice<i32>, count: GlobalSliceMut<u32>) {
    let i = global_index_x();
    if i < data.len() && data.load(i) > 0 {
        let c = count.load(0); // @demo-racy-read
        count.store(0, c + 1); // @demo-racy-write
    }
}

/// The demo's fixed kernel: the same count with one relaxed device-scope
/// atomic add per positive value.
#[kernel]
pub fn count_positive_fixed(data: GlobalSlice<i32>, count: GlobalSliceMut<u32>) {
    let i = global_index_x();
    if i < data.len() && data.load(i) > 0 {
        count.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}

/// Every block writes the element of the SM it runs on (one thread each):
/// a race here is between CTAs that shared an SM (GPU sanitizer slots).
#[kernel]
pub fn same_sm_writes(data: GlobalSliceMut<u32>) {
    // Thread 0 alone: the block's other threads writing the same word
    // would be a race inside the block, not the one this kernel is for.
    if thread_idx().x == 0 {
        let sm = sm_id() as usize % data.len();
        data.store(sm, block_idx().x); // @same-sm-write
    }
}

/// Writes `data[i]` without checking `i` first: an index past the end
/// panics, which traps the kernel on a GPU.
#[kernel]
pub fn write_at(data: GlobalSliceMut<u32>, i: u32) {
    data.store(i as usize, 1);
}

/// `data[i] = v` for every element, over a grid-stride loop.
#[kernel]
pub fn fill_all(data: GlobalSliceMut<u32>, v: u32) {
    let mut i = global_index_x();
    while i < data.len() {
        data.store(i, v); // @fill-all
        i += grid_stride_x();
    }
}

/// `out[i] = data[i] + 1` for every element of `out`, over a grid-stride
/// loop.
#[kernel]
pub fn add_one(data: GlobalSlice<u32>, out: GlobalSliceMut<u32>) {
    let mut i = global_index_x();
    while i < out.len() {
        let v = data.load(i); // @add-one-read
        out.store(i, v + 1);
        i += grid_stride_x();
    }
}

/// A volatile flag, as CUDA code polls one: the writer writes `data[0]`,
/// then (if `fences != 0`) issues a release fence (`__threadfence()` is
/// one), then stores 1 to `flag[0]` with a volatile store; the reader
/// polls the flag with volatile loads, then (if `fences != 0`) issues an
/// acquire fence, then reads `data[0]` into `out[0]`. Writer and reader
/// are thread 0 of blocks 0 and 1 or, with `same_block` set, threads 32
/// and 0 of block 0 (two warps). Volatile accesses are relaxed atomics at
/// system scope: they never race with each other and order nothing, so
/// without the fences the payload races, and only the payload.
#[kernel]
pub fn volatile_flag<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    flag: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    fences: u32,
    same_block: u32,
) {
    let (b, t) = (block_idx().x, thread_idx().x);
    let (writer, reader) = if same_block != 0 {
        (b == 0 && t == 32, b == 0 && t == 0)
    } else {
        (b == 0 && t == 0, b == 1 && t == 0)
    };
    if writer {
        data.store(0, 9); // @volatile-payload-write
        if fences != 0 {
            thread_fence(Ordering::Release, Scope::Device);
        }
        flag.store_volatile(0, 1);
    } else if reader {
        let mut polls = 0u32;
        while flag.load_volatile(0) == 0 {
            polls += 1;
            if polls >= SPIN_LIMIT {
                panic!("race scenario: the volatile flag was never set");
            }
        }
        if fences != 0 {
            thread_fence(Ordering::Acquire, Scope::Device);
        }
        let v = data.load(0); // @volatile-payload-read
        out.store(0, v);
    }
}

/// Block 0 writes `flag[0]` (`mode` 0: a volatile store, 1: a plain store,
/// 2: a relaxed atomic add at device scope); block 1 reads it with a
/// volatile load into `out[0]` (one thread each). Only the plain store
/// races with the volatile load (an atomic/non-atomic mix).
#[kernel]
pub fn volatile_beside(flag: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>, mode: u32) {
    if block_idx().x == 0 {
        match mode {
            0 => flag.store_volatile(0, 1),
            1 => flag.store(0, 1), // @beside-plain-store
            _ => {
                flag.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device);
            }
        }
    } else {
        let v = flag.load_volatile(0); // @beside-volatile-load
        out.store(0, v);
    }
}

/// Each thread writes `v` to its own element of `data`, a partition the
/// launch proves disjoint among the launch's threads. Two launches of it
/// on unordered streams still race with each other.
#[kernel]
pub fn fill_own(data: ThreadElemsMut<u32>, v: u32) {
    if let Some((_, mine)) = data.own() {
        mine.store(v); // @fill-own
    }
}
