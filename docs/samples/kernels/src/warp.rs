//! Writing kernels: warp collectives.

use vigil_device::prelude::*;

// ANCHOR: warp_sum
/// Adds up `x` into `total[0]`: each warp sums its 32 values with
/// shuffles, and its lane 0 adds the warp's sum with one atomic.
#[kernel]
pub fn warp_sum(x: GlobalSlice<u32>, total: GlobalPtrMut<u32>) {
    let i = global_index_x();
    let mut v = if i < x.len() { x.load(i) } else { 0 };
    let mut delta = 16;
    while delta > 0 {
        v += warp::shfl_down(warp::FULL_MASK, v, delta);
        delta /= 2;
    }
    if warp::lane_id() == 0 {
        total.atomic_add(v, Ordering::Relaxed, Scope::Device);
    }
}
// ANCHOR_END: warp_sum

// ANCHOR: count_even
/// Counts the even values of `x` into `count[0]`: one vote per warp,
/// one atomic per warp.
#[kernel]
pub fn count_even(x: GlobalSlice<u32>, count: GlobalPtrMut<u32>) {
    let i = global_index_x();
    let even = i < x.len() && x.load(i) % 2 == 0;
    let votes = warp::ballot(warp::FULL_MASK, even);
    if warp::lane_id() == 0 {
        count.atomic_add(votes.count_ones(), Ordering::Relaxed, Scope::Device);
    }
}
// ANCHOR_END: count_even
