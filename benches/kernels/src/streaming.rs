//! One element per thread, no reuse: the bandwidth-bound kernels.

use vigil_device::math;
use vigil_device::prelude::*;

/// `y[i] = x[i]`, one element per thread: `y` split into one element per
/// thread, `x` proven as long as `y` by the launch.
#[kernel(no_runtime_checks)]
pub fn copy(#[same_len(y)] x: GlobalSlice<f32>, y: ThreadElemsMut<f32>) {
    if let Some((i, mine)) = y.own() {
        mine.store(x.load_at(i));
    }
}

/// Weight of the centre point of [`stencil5()`].
pub const STENCIL_CENTRE: f32 = 0.5;
/// Weight of each of the four neighbours of [`stencil5()`].
pub const STENCIL_NEIGHBOUR: f32 = 0.125;

/// A 2-D 5-point stencil on a `height` x `width` row-major grid: interior
/// points get `0.5 * centre + 0.125 * (left + right + up + down)`, border
/// points are copied. Launch with a 2-D grid covering `width` x `height`
/// (one thread per cell of `y`, which the launch proves); `x` is the
/// same matrix, so the cell's point and its neighbours index it unchecked.
#[kernel(no_runtime_checks)]
pub fn stencil5(
    width: usize,
    height: usize,
    #[shape(height, width)] x: GlobalMatrix<f32>,
    #[shape(height, width)] y: ThreadCellsMut<f32>,
) {
    if let Some((p, out)) = y.own() {
        let v = match p.neighbours() {
            Some([left, right, up, down]) => {
                let around = x.load_at(left) + x.load_at(right) + x.load_at(up) + x.load_at(down);
                // One fused multiply-add, as nvcc contracts the twin's expression.
                math::fma(STENCIL_CENTRE, x.load_at(p), STENCIL_NEIGHBOUR * around)
            }
            None => x.load_at(p),
        };
        out.store(v);
    }
}

/// Every thread below `n` adds 1 to `count[0]` with a relaxed
/// device-scope atomic: the most contended access pattern there is (its
/// one index check, a constant against the buffer's length, is noise
/// beside the atomic's contention).
#[kernel]
pub fn counter(n: usize, count: GlobalSliceMut<u32>) {
    if global_index_x() < n {
        count.at(0).atomic_add(1, Ordering::Relaxed, Scope::Device);
    }
}
