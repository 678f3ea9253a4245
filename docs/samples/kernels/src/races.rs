//! The sanitizer chapters' kernels: races to find, and their fixes.

use vigil_device::prelude::*;

// ANCHOR: count_positive
/// Counts the positive values of `x` into `count`: racy. `count + 1` is
/// a plain read and a plain write, so threads running at once overwrite
/// each other's updates.
#[kernel]
pub fn count_positive_racy(x: GlobalSlice<i32>, count: GlobalPtrMut<u32>) {
    let i = global_index_x();
    if i < x.len() && x.load(i) > 0 {
        count.store(count.load() + 1);
    }
}

/// The fix: one atomic add per positive value.
#[kernel]
pub fn count_positive(x: GlobalSlice<i32>, count: GlobalPtrMut<u32>) {
    let i = global_index_x();
    if i < x.len() && x.load(i) > 0 {
        count.atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}
// ANCHOR_END: count_positive

// ANCHOR: rotate_racy
/// `out[i] = x[i + 1]` (wrapping within the block) through shared
/// memory, with the barrier missing: thread `t` may read slot `t + 1`
/// before thread `t + 1` wrote it.
#[kernel]
pub fn rotate_racy(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>) {
    let tile = shared_array!(u32; 64);
    let t = thread_idx().x as usize;
    tile.store(t, x.load(t));
    // sync_threads() belongs here
    out.store(t, tile.load((t + 1) % 64));
}
// ANCHOR_END: rotate_racy
