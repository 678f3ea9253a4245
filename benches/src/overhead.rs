//! Host cost of a launch: Vigil's typed [`Stream::launch`] (argument
//! packing and checks, then `cuLaunchKernel`) against a raw
//! `cuLaunchKernel` of the same function with pre-packed arguments, and a
//! sanitized launch when the context runs one.

use crate::error::Result;
use crate::kernels::{raw_launch, VigilKernels};
use crate::timing::host_us;
use vigil::{pack_args, Context, DeviceBuffer, LaunchConfig, LaunchVariant, Stream};
use vigil_bench_kernels::streaming::copy;

/// Elements the launched `copy` moves: one block, so the GPU side is tiny.
const ELEMENTS: usize = 256;
/// Launches per timed batch (the queue is drained between batches, so
/// enqueueing never waits for the GPU).
const PER_BATCH: usize = 200;
/// Timed batches; the median is reported.
const BATCHES: usize = 25;
/// Sanitized launches are timed in fewer, smaller batches: their kernels
/// run in the parent (outside the children's limits), so they are kept
/// few, and a batch must still fit the launch queue.
const SANITIZED_BATCHES: (usize, usize) = (10, 50);

/// Host microseconds per launch call.
#[derive(Clone, Copy, Debug)]
pub struct LaunchOverhead {
    /// `Stream::launch` on a plain context.
    pub typed_us: f64,
    /// `cuLaunchKernel` with pre-packed parameters.
    pub raw_us: f64,
}

/// Times typed and raw launches of `copy` on `ctx`.
pub fn launch_overhead(ctx: &Context, kernels: &VigilKernels) -> Result<LaunchOverhead> {
    let stream = Stream::new(ctx)?;
    let x = DeviceBuffer::<f32>::alloc_zeroed(&stream, ELEMENTS)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, ELEMENTS)?;
    let cfg = LaunchConfig::for_num_elems(ELEMENTS, 256);
    let typed_us = typed_launch_us(&stream, kernels, &x, &mut y, (BATCHES, PER_BATCH))?;
    let packed = pack_args::<copy, _>((&x, &mut y))?;
    let f = kernels.copy.function().raw();
    ctx.bind()?;
    let raw_us = host_us(
        BATCHES,
        PER_BATCH,
        // SAFETY: `copy`'s own function and its arguments packed by
        // `pack_args` from live buffers of this context.
        || unsafe { raw_launch(f, cfg, &stream, &packed) },
        || Ok(stream.synchronize()?),
    )?;
    Ok(LaunchOverhead { typed_us, raw_us })
}

/// Host microseconds per typed launch of `copy` on `stream` (plain or
/// sanitized, as its context decides), the median of `(batches, per_batch)`.
pub fn typed_launch_us(
    stream: &Stream,
    kernels: &VigilKernels,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    (batches, per_batch): (usize, usize),
) -> Result<f64> {
    let cfg = LaunchConfig::for_num_elems(x.len(), 256);
    host_us(
        batches,
        per_batch,
        || Ok(stream.launch(&kernels.copy, cfg, (x, &mut *y))?),
        || Ok(stream.synchronize()?),
    )
}

/// Host microseconds per sanitized typed launch of `copy`, or `None` when
/// `ctx` does not run sanitized GPU launches.
pub fn sanitized_launch_us(ctx: &Context, kernels: &VigilKernels) -> Result<Option<f64>> {
    if ctx.launch_variant() != LaunchVariant::Sanitized {
        return Ok(None);
    }
    let stream = Stream::new(ctx)?;
    let x = DeviceBuffer::<f32>::alloc_zeroed(&stream, ELEMENTS)?;
    let mut y = DeviceBuffer::<f32>::alloc_zeroed(&stream, ELEMENTS)?;
    let us = typed_launch_us(&stream, kernels, &x, &mut y, SANITIZED_BATCHES)?;
    ctx.synchronize()?;
    Ok(Some(us))
}
