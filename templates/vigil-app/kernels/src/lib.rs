//! The kernels. This crate builds twice: to PTX (no `std`) and for the host.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

use vigil_device::math;
use vigil_device::prelude::*;

/// `y[i] = ln(1 + e^x[i])`, written so that large `x` does not overflow.
#[kernel]
pub fn softplus(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        let v = x.load(i);
        y.store(
            i,
            math::max(v, 0.0) + math::ln(1.0 + math::exp(-math::abs(v))),
        );
    }
}
