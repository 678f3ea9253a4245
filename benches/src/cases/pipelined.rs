//! Cases of the kernels fed by asynchronous copies: `sgemm_async`
//! (`cp.async` stages), `sgemm_tma` (tensor copies on mbarriers) and
//! `transpose_tma` (tensor copies in and out), each against the same
//! host reference as its plain counterpart.
//!
//! A tensor map costs a driver call and a copy to the device: the cases
//! build their maps at a stream's first launch and keep them for its
//! later ones, so that a timed launch is the kernel alone, as it is for a
//! CUDA program that builds its maps once.

use super::tiles::{sgemm_case, sgemm_launch, transpose_case};
use super::{Case, LaunchFn, Scale};
use crate::data::{BufferList, DevData};
use crate::error::Result;
use crate::kernels::{Impl, RawArg};
use std::cell::RefCell;
use vigil::{
    DeviceTensorMap, DeviceTensorMapMut, LaunchConfig, Stream, StreamId, Swizzle, TiledLayout,
};
use vigil_bench_kernels::pipelined::{SGEMM_BLOCK, SGEMM_K, SGEMM_THREADS, TMA_ROWS, TMA_TILE};
use vigil_tests::Rng;

/// The stream and the buffer addresses a case's maps were built for.
type MapKey = (StreamId, Vec<u64>);

/// Maps of type `M` built for one stream and one set of buffers, rebuilt
/// when either changes.
struct Cached<M> {
    slot: RefCell<Option<(MapKey, M)>>,
}

impl<M> Cached<M> {
    fn new() -> Self {
        Cached {
            slot: RefCell::new(None),
        }
    }

    /// Runs `f` with the maps for `stream` and the buffers at `addrs`,
    /// built by `build` when there are none yet.
    fn with<R>(
        &self,
        stream: &Stream,
        addrs: Vec<u64>,
        build: impl FnOnce() -> Result<M>,
        f: impl FnOnce(&mut M) -> Result<R>,
    ) -> Result<R> {
        let key = (stream.id(), addrs);
        let mut slot = self.slot.borrow_mut();
        if slot.as_ref().is_none_or(|(k, _)| *k != key) {
            *slot = Some((key, build()?));
        }
        let (_, maps) = slot.as_mut().expect("built above");
        f(maps)
    }
}

/// A read-only map of `layout` over `buf` for as long as `buf`'s address
/// keeps its shape (the cache's key).
fn read_map<const D: usize>(
    stream: &Stream,
    buf: &DevData,
    layout: TiledLayout<D>,
) -> Result<DeviceTensorMap<'static, f32, D>> {
    // SAFETY: a case's maps are used only in launches on the buffers at
    // the addresses of their cache key, which are then allocated, of this
    // shape, and not written by those launches.
    Ok(unsafe { DeviceTensorMap::tiled_raw(stream, buf.device_ptr(), buf.len(), layout)? })
}

/// The launch of the pipelined SGEMMs for `m` x `n` x `k`.
fn sgemm_config(m: usize, n: usize) -> LaunchConfig {
    LaunchConfig::new(
        (
            (n as u32).div_ceil(SGEMM_BLOCK as u32),
            (m as u32).div_ceil(SGEMM_BLOCK as u32),
        ),
        (SGEMM_THREADS, SGEMM_THREADS),
    )
}

/// The SGEMM problem sizes (`k` and `n` multiples of 4, as the 16-byte
/// copies need; the smoke size leaves partial tiles on every side).
fn sgemm_sizes(scale: Scale) -> (usize, usize, usize) {
    scale.pick((2048, 2048, 2048), (40, 72, 52))
}

/// `c = a * b` for 2048 x 2048 matrices through a 3-stage `cp.async`
/// pipeline.
pub fn sgemm_async(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let (m, n, k) = sgemm_sizes(scale);
    let cfg = sgemm_config(m, n);
    let launch = sgemm_launch(|k| &k.sgemm_async, "sgemm_async", (m, n, k), cfg);
    sgemm_case("sgemm_async", scale, (m, n, k), rng, launch)
}

/// The maps of [`sgemm_tma`]: `a` as `[k, m]` in `[16, 64]` boxes, `b` as
/// `[n, k]` in `[64, 16]` boxes.
struct SgemmMaps {
    a: DeviceTensorMap<'static, f32, 2>,
    b: DeviceTensorMap<'static, f32, 2>,
}

/// `c = a * b` for 2048 x 2048 matrices through 3 stages of tensor copies
/// completing on mbarriers.
pub fn sgemm_tma(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    let (m, n, k) = sgemm_sizes(scale);
    let cfg = sgemm_config(m, n);
    let (bk, bb) = (SGEMM_K as u32, SGEMM_BLOCK as u32);
    let maps = Cached::new();
    let launch: LaunchFn = Box::new(move |imp, s, ins, outs| {
        let build = || {
            Ok(SgemmMaps {
                a: read_map(s, &ins[0], TiledLayout::new([k as u64, m as u64], [bk, bb]))?,
                b: read_map(s, &ins[1], TiledLayout::new([n as u64, k as u64], [bb, bk]))?,
            })
        };
        let addrs = vec![ins[0].device_ptr(), ins[1].device_ptr()];
        maps.with(s, addrs, build, |maps: &mut SgemmMaps| match imp {
            Impl::Vigil(kf) => Ok(s.launch(
                &kf.sgemm_tma,
                cfg,
                (m, n, k, &maps.a, &maps.b, outs.f32_mut(0)?),
            )?),
            Impl::Twin(t) => {
                let scalars = [
                    RawArg::U64(m as u64),
                    RawArg::U64(n as u64),
                    RawArg::U64(k as u64),
                    RawArg::Ptr(maps.a.device_ptr()),
                    RawArg::U64(maps.a.box_len() as u64),
                    RawArg::Ptr(maps.b.device_ptr()),
                    RawArg::U64(maps.b.box_len() as u64),
                ];
                // SAFETY: twins.cu declares `sgemm_tma` with the sizes,
                // each map's address and box size, then `c`, like the
                // Vigil kernel; the maps cover the live input buffers.
                unsafe { t.launch("sgemm_tma", cfg, s, &scalars, &[], outs) }
            }
        })
    });
    sgemm_case("sgemm_tma", scale, (m, n, k), rng, launch)
}

/// The maps of [`transpose_tma`]: `x` as `[width, height]`, `y` as
/// `[height, width]`, both in 32 x 32 boxes with the 128-byte swizzle.
struct TransposeMaps {
    x: DeviceTensorMap<'static, f32, 2>,
    y: DeviceTensorMapMut<'static, f32, 2>,
}

/// Transpose of an 8192 x 8192 matrix whose tiles move by tensor copies.
pub fn transpose_tma(scale: Scale, _sms: u32, rng: &mut Rng) -> Case {
    // Rows of 16-byte multiples, as tensor maps need; ragged edges at smoke.
    let (w, h) = scale.pick((8192, 8192), (68, 36));
    let cfg = LaunchConfig::new(
        ((w as u32).div_ceil(TMA_TILE), (h as u32).div_ceil(TMA_TILE)),
        (TMA_TILE, TMA_ROWS),
    );
    let layout = move |cols: usize, rows: usize| {
        TiledLayout::new([cols as u64, rows as u64], [TMA_TILE; 2]).swizzle(Swizzle::B128)
    };
    let maps = Cached::new();
    let launch: LaunchFn = Box::new(move |imp, s, ins, outs| {
        let build = || {
            let out = &outs[0];
            Ok(TransposeMaps {
                x: read_map(s, &ins[0], layout(w, h))?,
                // SAFETY: as for `read_map`; the launches that pass
                // this map pass no other view of the output.
                y: unsafe {
                    DeviceTensorMapMut::tiled_raw(s, out.device_ptr(), out.len(), layout(h, w))?
                },
            })
        };
        let addrs = vec![ins[0].device_ptr(), outs[0].device_ptr()];
        maps.with(s, addrs, build, |maps: &mut TransposeMaps| match imp {
            Impl::Vigil(kf) => Ok(s.launch(&kf.transpose_tma, cfg, (&maps.x, &mut maps.y))?),
            Impl::Twin(t) => {
                let scalars = [
                    RawArg::Ptr(maps.x.device_ptr()),
                    RawArg::U64(maps.x.box_len() as u64),
                    RawArg::Ptr(maps.y.device_ptr()),
                    RawArg::U64(maps.y.box_len() as u64),
                ];
                // SAFETY: twins.cu declares `transpose_tma` with each
                // map's address and box size, like the Vigil kernel;
                // the maps cover the live buffers.
                unsafe { t.launch("transpose_tma", cfg, s, &scalars, &[], &[]) }
            }
        })
    });
    transpose_case("transpose_tma", (w, h), rng, launch)
}
