//! Launching the kernels: on the GPU if there is one, else on the CPU backend.

use vigil::{Context, DeviceBuffer, LaunchConfig, Module, Stream};

/// The PTX of `my-kernels`, built by `build.rs`.
pub const PTX: &str = vigil::include_ptx!("my-kernels");

/// `ln(1 + e^x)` of each element, computed by the `softplus` kernel on `ctx`.
pub fn softplus(ctx: &Context, xs: &[f32]) -> vigil::Result<Vec<f32>> {
    let stream = Stream::new(ctx)?;
    let kernel = Module::from_ptx(ctx, PTX)?.kernel::<my_kernels::softplus>()?;
    let x = DeviceBuffer::from_slice(&stream, xs)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, xs.len())?;
    stream.launch(
        &kernel,
        LaunchConfig::for_num_elems(xs.len(), 256),
        (&x, &mut y),
    )?;
    y.to_vec(&stream)
}
