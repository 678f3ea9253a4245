//! The device-global kernels (`tests/tests/global_scenarios.rs`), written
//! the way CUDA programs keep flags, locks and counters in `__device__`
//! variables: a flag polled with volatile loads, a spin lock, a histogram,
//! and a value the host sets. Every access a verdict names sits on its own
//! line ending in a `// @name` marker.

use crate::races::SPIN_LIMIT;
use vigil_device::prelude::*;

device_global! {
    /// The value [`global_flag()`]'s producer publishes.
    pub static PAYLOAD: u32 = 0;
    /// Raised once `PAYLOAD` is written.
    pub static READY: u32 = 0;
    /// [`global_lock()`]'s lock: 0 free, 1 held.
    pub static LOCK: u32 = 0;
    /// What the lock protects: one increment per block.
    pub static TOTAL: u32 = 0;
    /// A value the host may set; the kernels start from 7.
    pub static SEED: u32 = 7;
    /// [`global_histogram()`]'s bins.
    pub static BINS: [u32; 8] = [0; 8];
}

/// Two blocks of one thread: block 0 writes `SEED + 35` to `PAYLOAD`, then
/// (after a release fence when bit 0 of `fences` is set) raises `READY`
/// with a volatile store; block 1 polls `READY` with volatile loads, then
/// (after an acquire fence when bit 1 is set) copies `PAYLOAD` to `out[0]`.
/// Race-free with both fences.
#[kernel]
pub fn global_flag(out: GlobalSliceMut<u32>, fences: u32) {
    if block_idx().x == 0 {
        let v = SEED.ptr().load() + 35;
        PAYLOAD.ptr().store(v); // @global-payload-write
        if fences & 1 != 0 {
            thread_fence(Ordering::Release, Scope::Device);
        }
        READY.ptr().store_volatile(1);
    } else {
        let mut polls = 0;
        while READY.ptr().load_volatile() == 0 {
            polls += 1;
            assert!(polls < SPIN_LIMIT, "READY was never raised");
        }
        if fences & 2 != 0 {
            thread_fence(Ordering::Acquire, Scope::Device);
        }
        out.store(0, PAYLOAD.ptr().load()); // @global-payload-read
    }
}

/// Thread 0 of every block takes `LOCK` (an acquiring compare-exchange),
/// adds one to `TOTAL`, and releases the lock: with a release store when
/// `release == 1`, with a relaxed store (which orders nothing) otherwise.
#[kernel]
pub fn global_lock(release: u32) {
    if thread_idx().x != 0 {
        return;
    }
    let lock = LOCK.ptr();
    let mut polls = 0;
    while lock
        .atomic_compare_exchange(0, 1, Ordering::Acquire, Scope::Device)
        .is_err()
    {
        polls += 1;
        assert!(polls < SPIN_LIMIT, "the lock was never released");
    }
    let total = TOTAL.ptr();
    let v = total.load(); // @global-total-read
    total.store(v + 1); // @global-total-write
    let unlock = if release == 1 {
        Ordering::Release
    } else {
        Ordering::Relaxed
    };
    lock.atomic_store(0, unlock, Scope::Device);
}

/// Counts `x[i] % 8` into `BINS` with device-scope atomics.
#[kernel]
pub fn global_histogram(x: GlobalSlice<u32>) {
    let i = global_index_x();
    if i < x.len() {
        let bin = (x.load(i) % 8) as usize;
        BINS.slice()
            .at(bin)
            .atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}

/// `out[0] = SEED` (one thread).
#[kernel]
pub fn read_seed(out: GlobalSliceMut<u32>) {
    out.store(0, SEED.ptr().load());
}
