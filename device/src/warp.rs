//! Warp collectives over a full 32-lane warp: shuffles and votes.
//!
//! Every lane named in `mask` must execute the same call (CUDA's `*_sync`
//! rule). Shuffles move 32-bit values; 64-bit values move as two halves.

use crate::arch::imp;
use crate::hooks::Active;

/// Lanes per warp.
pub const WARP_SIZE: u32 = 32;

/// The mask naming every lane of a warp.
pub const FULL_MASK: u32 = u32::MAX;

/// This thread's lane within its warp (0..32).
#[inline(always)]
pub fn lane_id() -> u32 {
    imp::lane_id()
}

/// A value that can travel through a shuffle (4 or 8 bytes).
pub trait ShuffleValue: bytemuck::Pod {}
impl ShuffleValue for u32 {}
impl ShuffleValue for i32 {}
impl ShuffleValue for f32 {}
impl ShuffleValue for u64 {}
impl ShuffleValue for i64 {}
impl ShuffleValue for f64 {}

#[inline(always)]
fn shuffle<T: ShuffleValue>(v: T, f: impl Fn(u32) -> u32) -> T {
    // The size test is a constant per `T`, so only one arm survives.
    if core::mem::size_of::<T>() == 4 {
        let [x]: [u32; 1] = bytemuck::cast(v);
        bytemuck::cast([f(x)])
    } else {
        let [lo, hi]: [u32; 2] = bytemuck::cast(v);
        bytemuck::cast([f(lo), f(hi)])
    }
}

/// The value `v` of lane `src_lane` (`__shfl_sync`).
#[inline(always)]
pub fn shfl<T: ShuffleValue>(mask: u32, v: T, src_lane: u32) -> T {
    let mask = joining(mask);
    shuffle(v, |x| imp::shfl_idx(mask, x, src_lane, 31))
}

/// The value of lane `lane_id() - delta`, or the caller's own below lane 0 (`__shfl_up_sync`).
#[inline(always)]
pub fn shfl_up<T: ShuffleValue>(mask: u32, v: T, delta: u32) -> T {
    let mask = joining(mask);
    shuffle(v, |x| imp::shfl_up(mask, x, delta, 0))
}

/// The value of lane `lane_id() + delta`, or the caller's own past lane 31 (`__shfl_down_sync`).
#[inline(always)]
pub fn shfl_down<T: ShuffleValue>(mask: u32, v: T, delta: u32) -> T {
    let mask = joining(mask);
    shuffle(v, |x| imp::shfl_down(mask, x, delta, 31))
}

/// The value of lane `lane_id() ^ lane_mask` (`__shfl_xor_sync`).
#[inline(always)]
pub fn shfl_xor<T: ShuffleValue>(mask: u32, v: T, lane_mask: u32) -> T {
    let mask = joining(mask);
    shuffle(v, |x| imp::shfl_xor(mask, x, lane_mask, 31))
}

/// A bit per lane of `mask`, set where `pred` is true (`__ballot_sync`).
#[inline(always)]
pub fn ballot(mask: u32, pred: bool) -> u32 {
    imp::vote_ballot(joining(mask), pred)
}

/// True when `pred` holds on any lane of `mask` (`__any_sync`).
#[inline(always)]
pub fn any(mask: u32, pred: bool) -> bool {
    imp::vote_any(joining(mask), pred)
}

/// Waits until every lane of `mask` has reached it, and orders the memory
/// accesses those lanes made before it with the ones they make after it
/// (`__syncwarp(mask)`; every lane of `mask` must call it, as in CUDA).
/// The sanitizer orders exactly the lanes of `mask`.
///
/// ```no_run
/// use vigil_device::prelude::*;
///
/// /// `out[lane] = x[(lane + 1) % 32]` through shared memory, one warp.
/// #[kernel]
/// pub fn rotate(x: GlobalSlice<u32>, out: GlobalSliceMut<u32>) {
///     let slots = shared_array!(u32; 32);
///     let lane = warp::lane_id() as usize;
///     slots.store(lane, x.load(lane));
///     warp::sync_warp(warp::FULL_MASK); // the neighbour's store is done
///     out.store(lane, slots.load((lane + 1) % 32));
/// }
/// ```
#[inline(always)]
pub fn sync_warp(mask: u32) {
    imp::sync_warp(joining(mask))
}

/// True when `pred` holds on every lane of `mask` (`__all_sync`).
#[inline(always)]
pub fn all(mask: u32, pred: bool) -> bool {
    imp::vote_all(joining(mask), pred)
}

/// Tells the sanitizer that the calling lane is about to join a warp
/// collective over `mask` (nothing on the CPU backend, whose executor sees
/// collectives itself): `mask`, for the collective.
#[inline(always)]
fn joining(mask: u32) -> u32 {
    imp::warp_joining::<Active>(mask);
    mask
}
