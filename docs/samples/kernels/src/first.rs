//! Getting started: the first kernel.

// ANCHOR: axpy
use vigil_device::prelude::*;

/// `y[i] = a * x[i] + y[i]`, one element per thread.
#[kernel]
pub fn axpy(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, a * x.load(i) + y.load(i));
    }
}
// ANCHOR_END: axpy
