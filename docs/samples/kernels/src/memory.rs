//! Writing kernels: global memory.

use vigil_device::prelude::*;

// ANCHOR: scale
/// Multiplies every element by `factor`. A grid-stride loop: any grid
/// covers any length.
#[kernel]
pub fn scale(factor: f32, data: GlobalSliceMut<f32>) {
    let mut i = global_index_x();
    while i < data.len() {
        data.store(i, factor * data.load(i));
        i += grid_stride_x();
    }
}
// ANCHOR_END: scale

// ANCHOR: add_vec4
/// `out = x + y`, four elements per thread in one 16-byte load or store
/// each. The buffers' lengths must be multiples of 4 (else `cast` is
/// `None` and the kernel does nothing).
#[kernel]
pub fn add_vec4(x: GlobalSlice<f32>, y: GlobalSlice<f32>, out: GlobalSliceMut<f32>) {
    let (Some(x), Some(y), Some(out)) = (
        x.cast::<Vec4<f32>>(),
        y.cast::<Vec4<f32>>(),
        out.cast::<Vec4<f32>>(),
    ) else {
        return;
    };
    let i = global_index_x();
    if i < out.len() {
        let (a, b) = (x.load(i).0, y.load(i).0);
        out.store(
            i,
            Vec4([a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]),
        );
    }
}
// ANCHOR_END: add_vec4

// ANCHOR: first_index
/// Writes to `found[0]` the smallest index `i` with `x[i] == target`
/// (`found[0]` starts at `u32::MAX`).
#[kernel]
pub fn first_index(x: GlobalSlice<u32>, target: u32, found: GlobalPtrMut<u32>) {
    let i = global_index_x();
    if i < x.len() && x.load(i) == target {
        found.atomic_min(i as u32, Ordering::Relaxed, Scope::Device);
    }
}
// ANCHOR_END: first_index
