//! Writing kernels: math.

use vigil_device::prelude::*;

// ANCHOR: gelu
use vigil_device::math;

/// The GELU activation, tanh form:
/// `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.
#[kernel]
pub fn gelu(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        let v = x.load(i);
        let inner = 0.797_884_6 * math::fma(0.044_715 * v, v * v, v);
        y.store(i, 0.5 * v * (1.0 + math::tanh(inner)));
    }
}
// ANCHOR_END: gelu
