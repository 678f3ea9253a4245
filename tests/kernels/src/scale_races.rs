//! Everyday GPU patterns at scale (any number of blocks, one thread each),
//! correct or racy, for the scale-scenario suite
//! (`tests/tests/scale_scenarios.rs`): many blocks releasing into one
//! word, lagging consumers, mixed-width atomics, wide accesses, an
//! in-place stencil, coalesced tiles of 4-, 8- and 16-byte elements
//! (two warps a block), a global spin lock every block takes in turn, an
//! in-place matrix transpose on a 2-D grid, a chained scan (each block
//! waits for the one before it), and flags published one per thread (a
//! record of the sanitizer's pool each).
//!
//! As in [`crate::races`], every access a verdict names sits on its own
//! line ending in a `// @name` marker, and spin-waits are bounded.

use crate::races::{ordering, SPIN_LIMIT};
use vigil_device::prelude::*;

/// Polls `p` relaxed (device scope) until `done` holds for its value, or
/// panics after [`SPIN_LIMIT`] polls.
#[inline(always)]
#[track_caller]
fn spin_relaxed<S: Sanitizer>(p: GlobalPtrMut<u32, S>, done: impl Fn(u32) -> bool) {
    let mut polls = 0u32;
    while !done(p.atomic_load(Ordering::Relaxed, Scope::Device)) {
        polls += 1;
        if polls >= SPIN_LIMIT {
            panic!("scale scenario: the value never came");
        }
    }
}

/// The threadFenceReduction last-block pattern: block `b` writes
/// `partials[b]`, then either a device fence (`fence_code`, an ordering
/// code) and a relaxed increment of `counter[0]`, or (`fence_code` 0) an
/// acq_rel increment. The block that takes the last ticket acquires (an
/// acquire fence, or its acq_rel increment) and sums every partial into
/// `result[0]`. Race-free for every `fence_code` but 1 (an acquire fence
/// does not release).
#[kernel]
pub fn last_block_reduction<S: Sanitizer>(
    partials: GlobalSliceMut<u32, S>,
    counter: GlobalSliceMut<u32, S>,
    result: GlobalSliceMut<u32, S>,
    fence_code: u32,
) {
    let b = block_idx().x as usize;
    let n = grid_dim().x;
    partials.store(b, b as u32 + 1); // @reduce-partial
    let ticket = if fence_code == 0 {
        counter.at(0).atomic_add(1, Ordering::AcqRel, Scope::Device)
    } else {
        thread_fence(ordering(fence_code), Scope::Device);
        counter
            .at(0)
            .atomic_add(1, Ordering::Relaxed, Scope::Device)
    };
    if ticket == n - 1 {
        if fence_code != 0 {
            thread_fence(Ordering::Acquire, Scope::Device);
        }
        let mut sum = 0u32;
        for i in 0..n as usize {
            sum = sum.wrapping_add(partials.load(i)); // @reduce-read
        }
        result.store(0, sum);
    }
}

/// A grid barrier built from fences and relaxed atomics (every block must
/// be resident): block `b` writes `data[b]`, issues a device fence of
/// ordering code `fence_code`, increments `counter[0]` relaxed, spins
/// (relaxed) until every block arrived, issues an acquire fence, and reads
/// its right neighbour's element into `out[b]`. Race-free for release,
/// acq_rel and sc fences.
#[kernel]
pub fn fence_grid_barrier<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    counter: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    fence_code: u32,
) {
    let b = block_idx().x as usize;
    let n = grid_dim().x;
    data.store(b, b as u32 + 1); // @barrier-write
    thread_fence(ordering(fence_code), Scope::Device);
    counter
        .at(0)
        .atomic_add(1, Ordering::Relaxed, Scope::Device);
    spin_relaxed(counter.at(0), |v| v >= n);
    thread_fence(Ordering::Acquire, Scope::Device);
    let v = data.load((b + 1) % n as usize); // @barrier-read
    out.store(b, v);
}

/// A consumer lagging behind its producers: every block but the last
/// writes `tiles[b]` and publishes it with a store of `flags[b]` of
/// ordering code `store_code` (device scope); the last block waits for
/// the first flag, then, in order, acquires every flag and reads every
/// tile, summing them into `out[0]`. Race-free for a release store.
#[kernel]
pub fn lagging_consumer(
    tiles: GlobalSliceMut<u32>,
    flags: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    store_code: u32,
) {
    let b = block_idx().x as usize;
    let producers = grid_dim().x as usize - 1;
    if b < producers {
        tiles.store(b, b as u32 + 1); // @lag-tile
        flags
            .at(b)
            .atomic_store(1, ordering(store_code), Scope::Device);
    } else {
        let mut sum = 0u32;
        for t in 0..producers {
            let mut polls = 0u32;
            while flags.at(t).atomic_load(Ordering::Acquire, Scope::Device) == 0 {
                polls += 1;
                if polls >= SPIN_LIMIT {
                    panic!("scale scenario: a producer never published");
                }
            }
            sum = sum.wrapping_add(tiles.load(t)); // @lag-read
        }
        out.store(0, sum);
    }
}

/// Even blocks add to the u64 `data[0]` (bytes 0..8), odd blocks to the
/// u32 at bytes 4..8 of it, all relaxed device-scope atomics: they overlap
/// without covering the same bytes, so they race (not morally strong).
/// With `same_width` set every block uses the u64: no race.
#[kernel]
pub fn mixed_width_atomics(data: GlobalSliceMut<u64>, same_width: u32) {
    if block_idx().x % 2 == 0 || same_width != 0 {
        data.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device); // @mixed-u64
    } else if let Some(halves) = data.cast::<u32>() {
        halves.at(1).atomic_add(1, Ordering::Relaxed, Scope::Device); // @mixed-u32
    }
}

/// Block `2k` writes element `4k + 2` of `data`; block `2k + 1` then
/// reads elements `4k..4k + 4` with one 16-byte load into `out`: a
/// read-after-write race whose first conflicting byte is element `4k + 2`.
#[kernel]
pub fn wide_access_second(data: GlobalSliceMut<u32>, out: GlobalSliceMut<u32>) {
    let b = block_idx().x as usize;
    let k = b / 2;
    if b % 2 == 0 {
        data.store(4 * k + 2, b as u32); // @wide-narrow-write
    } else if let Some(chunks) = data.cast::<[u32; 4]>() {
        let v = chunks.load(k); // @wide-read
        out.store(k, v[0] ^ v[1] ^ v[2] ^ v[3]);
    }
}

/// An in-place 3-point stencil, one element per block: block `b` reads its
/// left, own and right elements and writes its own. Racy: block `b + 1`
/// reads element `b` that block `b` writes (read-after-write, or
/// write-after-read the other way round), and writes element `b + 1` that
/// block `b` read as its right neighbour.
#[kernel]
pub fn in_place_stencil(x: GlobalSliceMut<u32>) {
    let b = block_idx().x as usize;
    let n = grid_dim().x as usize;
    let left = if b > 0 { x.load(b - 1) } else { 0 }; // @stencil-left
    let own = x.load(b); // @stencil-own
    let right = if b + 1 < n { x.load(b + 1) } else { 0 }; // @stencil-right
    x.store(b, left.wrapping_add(own).wrapping_add(right) / 3); // @stencil-write
}

/// Threads per block of [`coalesced_tiles()`]: two warps.
pub const TILE_THREADS: u32 = 64;

/// [`coalesced_tiles()`]'s `ops` bit: store the thread's element.
pub const TILE_WRITE: u32 = 1;

/// [`coalesced_tiles()`]'s `ops` bit: load an element, after the store.
pub const TILE_READ: u32 = 2;

/// An element of [`coalesced_tiles()`]: 4, 8 or 16 bytes, the widths of a
/// warp's coalesced loads and stores (`f32`, `f64`, `float4`).
pub trait TileElement: bytemuck::Pod {
    /// The element holding `v` (in every word).
    fn holding(v: u32) -> Self;
    /// Its first word.
    fn first_word(self) -> u32;
}

impl TileElement for u32 {
    #[inline(always)]
    fn holding(v: u32) -> Self {
        v
    }
    #[inline(always)]
    fn first_word(self) -> u32 {
        self
    }
}

impl TileElement for u64 {
    #[inline(always)]
    fn holding(v: u32) -> Self {
        (v as u64) << 32 | v as u64
    }
    #[inline(always)]
    fn first_word(self) -> u32 {
        self as u32
    }
}

impl TileElement for Vec4<u32> {
    #[inline(always)]
    fn holding(v: u32) -> Self {
        Vec4([v; 4])
    }
    #[inline(always)]
    fn first_word(self) -> u32 {
        self.0[0]
    }
}

/// Coalesced tiles, the access shape of every streaming kernel: `data`
/// viewed as `width`-byte elements (4: `u32`, 8: `u64`, 16: `Vec4<u32>`),
/// thread `t` of block `b` owns element `i = b * stride + t`. With
/// [`TILE_WRITE`] in `ops` it stores `i + 1` there (in every word); with
/// [`TILE_READ`] it then loads element `i + read_shift` and stores its
/// first word to `out[b * TILE_THREADS + t]`.
///
/// With `stride` [`TILE_THREADS`] the tiles are disjoint; a smaller stride
/// (a tile-size bug) makes neighbouring blocks' tiles overlap, whole lines
/// of them (half a tile) or one element (one less); a `read_shift` of a
/// tile reads the next block's tile.
#[kernel]
pub fn coalesced_tiles(
    data: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    width: u32,
    stride: u32,
    ops: u32,
    read_shift: u32,
) {
    let tile = (stride, ops, read_shift);
    match width {
        8 => {
            if let Some(wide) = data.cast::<u64>() {
                tile_access(wide, out, tile);
            }
        }
        16 => {
            if let Some(quad) = data.cast::<Vec4<u32>>() {
                tile_access(quad, out, tile);
            }
        }
        _ => tile_access(data, out, tile),
    }
}

/// One thread's part of [`coalesced_tiles()`], for elements of `T`;
/// `(stride, ops, read_shift)` as there.
#[inline(always)]
fn tile_access<T: TileElement, S: Sanitizer>(
    data: GlobalSliceMut<T, S>,
    out: GlobalSliceMut<u32, S>,
    (stride, ops, read_shift): (u32, u32, u32),
) {
    let (b, t) = (block_idx().x as usize, thread_idx().x as usize);
    let i = b * stride as usize + t;
    if ops & TILE_WRITE != 0 {
        data.store(i, T::holding(i as u32 + 1)); // @tile-write
    }
    if ops & TILE_READ != 0 {
        let v = data.load(i + read_shift as usize); // @tile-read
        out.store(b * TILE_THREADS as usize + t, v.first_word());
    }
}

/// Threads per block of [`locked_update()`]: two warps.
pub const LOCK_THREADS: u32 = 64;

/// A global spin lock around a block-wide critical section, the CUDA
/// pattern of `if (tid == 0) lock(); __syncthreads(); ...;
/// __syncthreads(); if (tid == 0) unlock();`. Thread 0 of each block takes
/// `lock[0]` with a compare-exchange of ordering code `take`; after a
/// barrier every thread `t` adds 1 to `data[t]`; after another barrier
/// thread 0 gives the lock back with a store of ordering code `give`. With
/// `fences` set, thread 0 also issues a device fence (acq_rel) after taking
/// the lock and before giving it back (`__threadfence()`).
///
/// Race-free when the take acquires and the give releases, by their
/// orderings or by the fences; the barriers carry the order to the other
/// threads of the block.
#[kernel]
pub fn locked_update<S: Sanitizer>(
    lock: GlobalSliceMut<u32, S>,
    data: GlobalSliceMut<u32, S>,
    take: u32,
    give: u32,
    fences: u32,
) {
    let t = thread_idx().x as usize;
    let lock = lock.at(0);
    if t == 0 {
        let mut polls = 0u32;
        while lock
            .atomic_compare_exchange(0, 1, ordering(take), Scope::Device)
            .is_err()
        {
            polls += 1;
            if polls >= SPIN_LIMIT {
                panic!("scale scenario: the lock was never free");
            }
        }
        if fences != 0 {
            thread_fence(Ordering::AcqRel, Scope::Device);
        }
    }
    sync_threads();
    let v = data.load(t); // @locked-read
    data.store(t, v + 1); // @locked-write
    sync_threads();
    if t == 0 {
        if fences != 0 {
            thread_fence(Ordering::AcqRel, Scope::Device);
        }
        lock.atomic_store(0, ordering(give), Scope::Device);
    }
}

/// An in-place transpose of the `n` x `n` row-major matrix `m` on a 2-D
/// grid, thread `(x, y)` for element `(x, y)` (column `x`, row `y`):
/// - `swap` 0, the naive way: every thread copies `m[y][x]` into
///   `m[x][y]`. Racy: thread `(y, x)` writes what thread `(x, y)` reads,
///   in another block or (on the diagonal tiles) the same one;
/// - `swap` 1: the threads below the diagonal swap their element with its
///   mirror image. Race-free, each pair is one thread's.
#[kernel]
pub fn transpose_in_place(m: GlobalSliceMut<u32>, n: u32, swap: u32) {
    let (b, d, t) = (block_idx(), block_dim(), thread_idx());
    let (x, y) = ((b.x * d.x + t.x) as usize, (b.y * d.y + t.y) as usize);
    let n = n as usize;
    if x >= n || y >= n {
        return;
    }
    if swap == 0 {
        let v = m.load(y * n + x); // @naive-read
        m.store(x * n + y, v); // @naive-write
    } else if x < y {
        let (low, high) = (m.load(y * n + x), m.load(x * n + y)); // @swap-read
        m.store(y * n + x, high); // @swap-write-low
        m.store(x * n + y, low); // @swap-write-high
    }
}

/// A chained scan, the single-pass prefix sum's hand-off (one thread a
/// block): each block takes a ticket, its place `p` in the chain (so a
/// place's predecessors have all started, whatever order the GPU runs
/// blocks in); place 0 writes `first[0]`; place `p > 0` waits for
/// `flags[p - 1]` (acquire) and reads `prefix[p - 1]`; each place writes
/// `prefix[p] = prefix[p - 1] + p + 1` and publishes `flags[p]` with a
/// store of ordering code `publish`, then reads `first[0]` and stores both
/// into `out[2p..2p + 2]`.
///
/// Race-free for a release store: `first[0]` reaches the last place only
/// through every hand-off of the chain, one block after another.
#[kernel]
pub fn chained_scan(
    ticket: GlobalSliceMut<u32>,
    flags: GlobalSliceMut<u32>,
    prefix: GlobalSliceMut<u32>,
    first: GlobalSliceMut<u32>,
    out: GlobalSliceMut<u32>,
    publish: u32,
) {
    let place = ticket.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device) as usize;
    let before = if place == 0 {
        first.store(0, 7); // @chain-first-write
        0
    } else {
        let mut polls = 0u32;
        while flags
            .at(place - 1)
            .atomic_load(Ordering::Acquire, Scope::Device)
            == 0
        {
            polls += 1;
            if polls >= SPIN_LIMIT {
                panic!("scale scenario: the place before never published");
            }
        }
        prefix.load(place - 1) // @chain-read
    };
    let sum = before + place as u32 + 1;
    prefix.store(place, sum); // @chain-write
    flags
        .at(place)
        .atomic_store(1, ordering(publish), Scope::Device);
    out.store(2 * place, sum);
    out.store(2 * place + 1, first.load(0)); // @chain-first-read
}

/// Every thread publishes its own flag with a release store (device
/// scope): race-free, but each flag word keeps a release head, so each
/// takes a record of the sanitizer's pool for as long as its memory lives
/// (a buffer of these is the quickest way to fill the pool).
#[kernel]
pub fn publish_each(flags: GlobalSliceMut<u32>) {
    let i = (block_idx().x * block_dim().x + thread_idx().x) as usize;
    if i < flags.len() {
        flags
            .at(i)
            .atomic_store(1, Ordering::Release, Scope::Device);
    }
}

/// Every block reads all of `data` (its threads striding over it, the
/// lanes of each pair swapped; `data` has an even length) and stores each
/// thread's sum in `sums[block * threads + thread]`: every word is read
/// by every block, unordered, so each needs a record of the sanitizer's
/// pool. On both backends: the reads go through a writable view, and no
/// warp reads a whole line in lane order (a GPU keeps the readers of a
/// whole line, or a launch's reads through read-only views, in the
/// line's header without any record).
#[kernel]
pub fn every_block_reads_all(data: GlobalSliceMut<u32>, sums: GlobalSliceMut<u32>) {
    let (t, step) = (thread_idx().x as usize, block_dim().x as usize);
    let mut sum = 0u32;
    let mut i = t;
    while i < data.len() {
        sum = sum.wrapping_add(data.load(i ^ 1));
        i += step;
    }
    sums.store(block_idx().x as usize * step + t, sum);
}

/// Block `b` stores `v` in `data[b]` (one thread a block): launched twice
/// with the same grid on two streams, the same block of each launch
/// writes the same element.
#[kernel]
pub fn write_own_element(data: GlobalSliceMut<u32>, v: u32) {
    data.store(block_idx().x as usize, v); // @own-element
}
