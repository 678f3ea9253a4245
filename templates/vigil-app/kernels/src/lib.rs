//! The kernels. This crate builds twice: to PTX (no `std`) and for the host.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

use vigil_device::math;
use vigil_device::prelude::*;

/// `y[i] = ln(1 + e^x[i])`.
#[kernel]
pub fn softplus(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, softplus_of(x.load(i)));
    }
}

/// `ln(1 + e^v)`, written so that large `v` does not overflow. Helpers
/// like this one need nothing for the sanitizer: every access, barrier and
/// fence they make is checked as the kernel's own.
fn softplus_of(v: f32) -> f32 {
    math::max(v, 0.0) + math::ln(1.0 + math::exp(-math::abs(v)))
}
