//! The kernels behind the README's examples.

use vigil_device::prelude::*;

/// `y = a * x + y`, one element per thread: `y` is split into one
/// element per thread, and the launch proves `x` as long as `y`, so the
/// only check is whether a thread has an element (any 1-D grid that
/// covers `y` works; threads past the end do nothing).
#[kernel(no_runtime_checks)]
pub fn axpy(a: f32, #[same_len(y)] x: GlobalSlice<f32>, y: ThreadElemsMut<f32>) {
    if let Some((i, mine)) = y.own() {
        mine.store(a * x.load_at(i) + mine.load());
    }
}

/// Threads per block `reduce_sum` is written for (one partial per warp fits one shared array).
pub const REDUCE_BLOCK: u32 = 1024;

/// Sums `x` into one partial per block: `partials[blockIdx.x]` (one
/// element per block: the launch proves `partials` has as many as the
/// grid has blocks). Each thread sums a grid-stride share, warps reduce
/// with shuffles, the block's warp sums meet in shared memory. Run it
/// again on the partials with one block to get the total. Needs
/// `blockDim.x` a multiple of 32 and at most 1024.
#[kernel(no_runtime_checks)]
pub fn reduce_sum(x: GlobalSlice<f32>, #[chunk(1)] partials: BlockChunksMut<f32>) {
    let warp_sums = shared_array!(f32; 32);
    let mut acc = 0.0f32;
    for i in x.strided(global_index_x(), grid_stride_x()) {
        acc += x.load_at(i);
    }
    acc = warp_reduce(acc);
    let t = thread_idx().x;
    let lane = warp::lane_id();
    if lane == 0 {
        warp_sums.store((t / 32) as usize, acc);
    }
    sync_threads();
    if t < 32 {
        let warps = block_dim().x.div_ceil(32);
        let v = if t < warps {
            warp_sums.load(t as usize)
        } else {
            0.0
        };
        let total = warp_reduce(v);
        if t == 0 {
            let mine = partials.own();
            for i in mine.indices() {
                mine.store_at(i, total);
            }
        }
    }
}

#[inline(always)]
fn warp_reduce(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        v += warp::shfl_down(warp::FULL_MASK, v, offset);
        offset /= 2;
    }
    v
}

/// Counts `data[i] % bins.len()` into `bins` with relaxed device-scope atomics.
#[kernel]
pub fn histogram(data: GlobalSlice<u32>, bins: GlobalSliceMut<u32>) {
    let n = bins.len() as u32;
    for i in data.strided(global_index_x(), grid_stride_x()) {
        let b = data.load_at(i) % n;
        bins.at(b as usize)
            .atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}

/// The hand-written equivalent of `axpy`, for checking that `#[kernel]`'s
/// plain entry point costs nothing: same parameters, the one check a CUDA
/// C++ programmer writes (`i < y_len`; `x` as long as `y`, which the
/// typed launch proves), so their PTX bodies must match.
///
/// # Safety
/// `x` and `y` must be valid device pointers to `y_len` elements.
#[cfg(target_arch = "nvptx64")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn axpy_handwritten(
    a: f32,
    x: *const f32,
    _x_len: usize,
    y: *mut f32,
    y_len: usize,
) {
    use core::arch::nvptx::*;
    let i = _block_idx_x() as usize * _block_dim_x() as usize + _thread_idx_x() as usize;
    if i < y_len {
        *y.add(i) = a * *x.add(i) + *y.add(i);
    }
}
