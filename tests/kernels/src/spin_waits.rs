//! Spin-waits as CUDA programs write them, for the spin-wait tests
//! (`tests/tests/spin_waits.rs`): one thread waits for a flag that a
//! thread of another warp of its block, or of another block, sets. The
//! waiter polls by exchange, add of 0, compare-exchange, volatile load, or
//! relaxed load then fence, the idioms of `while (atomicExch(&flag, 0) ==
//! 0) {}` and friends. The setter writes a payload and publishes it so
//! that every pattern is race-free; the waiter reads the payload back.
//!
//! As in [`crate::races`], spin-waits are bounded ([`SPIN_LIMIT`]) and
//! panic instead of hanging a GPU; on the CPU backend a flag nobody sets
//! ends in the livelock error long before.

use crate::races::SPIN_LIMIT;
use vigil_device::prelude::*;

/// [`spin_handoff()`]'s `pattern`: `while (atomicExch(&flag, 0) == 0) {}`
/// (acquire), which takes the flag back to 0.
pub const EXCHANGE: u32 = 0;
/// `while (atomicAdd(&flag, 0) == 0) {}` (acquire).
pub const ADD_ZERO: u32 = 1;
/// `while (atomicCAS(&flag, 1, 0) != 1) {}` (acquire), a lock's take.
pub const COMPARE_EXCHANGE: u32 = 2;
/// `while (*(volatile unsigned *)&flag == 0) {}` then an acquire fence;
/// the setter publishes with a release fence (`__threadfence()` is one)
/// and a volatile store.
pub const VOLATILE: u32 = 3;
/// A relaxed load (`ld.relaxed.gpu`) in the loop, then an acquire fence;
/// the setter publishes with a release fence and a relaxed store.
pub const RELAXED_THEN_FENCE: u32 = 4;

/// Every pattern, with its name.
pub const PATTERNS: [(u32, &str); 5] = [
    (EXCHANGE, "exchange"),
    (ADD_ZERO, "add of 0"),
    (COMPARE_EXCHANGE, "compare-exchange"),
    (VOLATILE, "volatile load"),
    (RELAXED_THEN_FENCE, "relaxed load then fence"),
];

/// [`spin_handoff()`]'s `setter` when no thread sets the flag.
pub const NOBODY: u32 = u32::MAX;

/// The payload the setter publishes.
pub const PAYLOAD: u32 = 42;

/// Thread 0 of block 0 waits for `flag[0]`, polling it by `pattern`, then
/// reads `data[0]` into `out[0]`. The thread whose linear grid index
/// (`block * blockDim + thread`) is `setter` writes [`PAYLOAD`] to
/// `data[0]` and publishes it: a release store of the flag, or for
/// [`VOLATILE`] and [`RELAXED_THEN_FENCE`] a release fence and a volatile
/// or relaxed store. With `setter` 32 it is the second warp of block 0,
/// with `blockDim` block 1, with [`NOBODY`] nobody.
#[kernel]
pub fn spin_handoff<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    flag: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    pattern: u32,
    setter: u32,
) {
    let me = block_idx().x * block_dim().x + thread_idx().x;
    let flag = flag.at(0);
    if me == setter {
        data.store(0, PAYLOAD);
        match pattern {
            VOLATILE => {
                thread_fence(Ordering::Release, Scope::Device);
                flag.store_volatile(1);
            }
            RELAXED_THEN_FENCE => {
                thread_fence(Ordering::Release, Scope::Device);
                flag.atomic_store(1, Ordering::Relaxed, Scope::Device);
            }
            _ => flag.atomic_store(1, Ordering::Release, Scope::Device),
        }
    } else if me == 0 {
        wait_for(flag, pattern);
        out.store(0, data.load(0));
    }
}

/// Polls `flag` by `pattern` until it is set (see [`spin_handoff()`]),
/// or panics after [`SPIN_LIMIT`] polls.
#[inline(always)]
#[track_caller]
fn wait_for<S: Sanitizer>(flag: GlobalPtrMut<u32, S>, pattern: u32) {
    let (acquire, device) = (Ordering::Acquire, Scope::Device);
    let mut polls = 0u32;
    loop {
        let set = match pattern {
            EXCHANGE => flag.atomic_exchange(0, acquire, device) != 0,
            ADD_ZERO => flag.atomic_add(0, acquire, device) != 0,
            COMPARE_EXCHANGE => flag.atomic_compare_exchange(1, 0, acquire, device).is_ok(),
            VOLATILE => flag.load_volatile() != 0,
            _ => flag.atomic_load(Ordering::Relaxed, device) != 0,
        };
        if set {
            break;
        }
        polls += 1;
        if polls >= SPIN_LIMIT {
            panic!("spin-wait: the flag was never set");
        }
    }
    if pattern == VOLATILE || pattern == RELAXED_THEN_FENCE {
        thread_fence(Ordering::Acquire, Scope::Device);
    }
}

/// Thread 0 of a block waits for thread 32 (the second warp) through a
/// block-shared flag polled with volatile loads (`volatile __shared__`):
/// thread 32 writes [`PAYLOAD`] to `data[0]`, issues a block fence and
/// stores the flag volatile; thread 0 polls it, issues a block fence and
/// reads `data[0]` into `out[0]`. Race-free; with `setter` 0 (any value
/// but 32) nobody sets the flag.
#[kernel]
pub fn shared_volatile_handoff<S: Sanitizer>(
    data: GlobalSliceMut<u32, S>,
    out: GlobalSliceMut<u32, S>,
    setter: u32,
) {
    let flag = shared_array!(u32; 1);
    let t = thread_idx().x;
    if t == 0 {
        flag.store(0, 0);
    }
    sync_threads();
    if t == setter && t != 0 {
        data.store(0, PAYLOAD);
        thread_fence(Ordering::Release, Scope::Block);
        flag.store_volatile(0, 1);
    } else if t == 0 {
        let mut polls = 0u32;
        while flag.load_volatile(0) == 0 {
            polls += 1;
            if polls >= SPIN_LIMIT {
                panic!("spin-wait: the shared flag was never set");
            }
        }
        thread_fence(Ordering::Acquire, Scope::Block);
        out.store(0, data.load(0));
    }
}
