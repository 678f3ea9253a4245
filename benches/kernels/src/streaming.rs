//! One element per thread, no reuse: the bandwidth-bound kernels.

use vigil_device::math;
use vigil_device::prelude::*;

/// `y[i] = x[i]`, one element per thread.
#[kernel]
pub fn copy(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, x.load(i));
    }
}

/// Weight of the centre point of [`stencil5()`].
pub const STENCIL_CENTRE: f32 = 0.5;
/// Weight of each of the four neighbours of [`stencil5()`].
pub const STENCIL_NEIGHBOUR: f32 = 0.125;

/// A 2-D 5-point stencil on a `height` x `width` row-major grid: interior
/// points get `0.5 * centre + 0.125 * (left + right + up + down)`, border
/// points are copied. Launch with a 2-D grid covering `width` x `height`.
#[kernel]
pub fn stencil5(width: usize, height: usize, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let col = (block_idx().x * block_dim().x + thread_idx().x) as usize;
    let row = (block_idx().y * block_dim().y + thread_idx().y) as usize;
    if row < height && col < width {
        let i = row * width + col;
        let v = if row == 0 || col == 0 || row + 1 == height || col + 1 == width {
            x.load(i)
        } else {
            let around = x.load(i - 1) + x.load(i + 1) + x.load(i - width) + x.load(i + width);
            // One fused multiply-add, as nvcc contracts the twin's expression.
            math::fma(STENCIL_CENTRE, x.load(i), STENCIL_NEIGHBOUR * around)
        };
        y.store(i, v);
    }
}

/// Every thread below `n` adds 1 to `count[0]` with a relaxed
/// device-scope atomic: the most contended access pattern there is.
#[kernel]
pub fn counter(n: usize, count: GlobalSliceMut<u32>) {
    if global_index_x() < n {
        count.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}
