//! Everyday GPU patterns at scale (any number of blocks, one thread each),
//! correct or racy, for the scale-scenario suite
//! (`tests/tests/scale_scenarios.rs`): many blocks releasing into one
//! word, lagging consumers, mixed-width atomics, wide accesses and an
//! in-place stencil.
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
        fence::<S>(ordering(fence_code), Scope::Device);
        counter
            .at(0)
            .atomic_add(1, Ordering::Relaxed, Scope::Device)
    };
    if ticket == n - 1 {
        if fence_code != 0 {
            fence::<S>(Ordering::Acquire, Scope::Device);
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
    fence::<S>(ordering(fence_code), Scope::Device);
    counter
        .at(0)
        .atomic_add(1, Ordering::Relaxed, Scope::Device);
    spin_relaxed(counter.at(0), |v| v >= n);
    fence::<S>(Ordering::Acquire, Scope::Device);
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
