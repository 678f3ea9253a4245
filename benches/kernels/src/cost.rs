//! Kernels that take a sanitized launch apart (`examples/sanitizer_cost.rs`):
//! the same grid as `copy` with no access, with loads only and with stores
//! only, and `copy` again as one grid-stride loop over a few blocks per SM,
//! so that what blocks cost and what each access costs show separately.

use vigil_device::prelude::*;

/// Touches nothing unless `flag` is set (the host never sets it): a
/// launch's blocks with their sanitizer entry and exit and no access.
#[kernel]
pub fn blocks_only(flag: u32, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if flag != 0 && i < y.len() {
        y.store(i, 0.0);
    }
}

/// Every thread loads `x[i]`; a thread stores only where the value is
/// negative (the host's inputs never are): one coalesced load per thread.
#[kernel]
pub fn loads_only(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < x.len() {
        let v = x.load(i);
        if v < 0.0 {
            y.store(i, v);
        }
    }
}

/// `y[i] = 1`: one coalesced store per thread.
#[kernel]
pub fn stores_only(y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, 1.0);
    }
}

/// `y[i] = x[i]` as one grid-stride loop: the accesses of `copy` made by
/// as many blocks as the launch has.
#[kernel]
pub fn copy_grid_stride(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let mut i = global_index_x();
    let step = grid_stride_x();
    while i < y.len() {
        y.store(i, x.load(i));
        i += step;
    }
}
