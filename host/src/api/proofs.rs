//! What a typed launch proves before it runs: the block shape a kernel is
//! written for (`#[kernel(block = ..)]`) and the layout each of its view
//! parameters declares (`#[same_len]`, `#[shape]`, the partitions), from
//! the packed arguments and the launch's grid and block
//! ([`vigil_shared::proofs::check`]). A kernel indexes those views without
//! the checks the proofs make redundant, so a launch that cannot prove
//! them is refused: [`Error::Argument`] with [`ArgProblem::Layout`] or
//! [`ArgProblem::LengthMismatch`], or [`Error::LaunchConfig`] with
//! [`LaunchConfigError::BlockShape`].
//!
//! Each proof is recorded on the packed arguments
//! ([`ParamBuffer::proven_views`]): a partition whose bytes no other
//! argument of the launch reaches is *exclusive*, each thread's or block's
//! part its own; one that another argument aliases (a peer's slice, a
//! `Peers`) keeps only its bounds proof.
//!
//! Here too: which host values a layout parameter accepts, the same as
//! the slice parameter of the same access (`&buf` for the read-only
//! `GlobalMatrix`, `BlockChunks`, `BlockTiles`; `&mut buf` for those and
//! the partitions).

use super::args::{pack_args, pack_slice, pack_view, KernelArg, KernelArgs};
use super::memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceSlice, DeviceSliceMut};
use crate::error::{ArgProblem, Error, Result};
use crate::launch_abi::params::{PackedView, ParamBuffer, ProvenView};
use crate::types::{Dim3, LaunchConfig, LaunchConfigError};
use bytemuck::Pod;
use vigil_device::matrix::GlobalMatrix;
use vigil_device::partition::{
    BlockChunks, BlockChunksMut, BlockTiles, BlockTilesMut, GridStrideMut, ThreadCellsMut,
    ThreadElemsMut,
};
use vigil_device::{Kernel, Sanitizer};
use vigil_shared::params::ParamDesc;
use vigil_shared::proofs::{check, Extent, Geometry, Layout, ParamLayout};

/// A kernel parameter type with a declared layout (a matrix, chunks,
/// tiles, a partition): what the host passes for it.
pub trait LayoutParam {
    /// The element type.
    type Elem: Pod;
    /// True when the kernel writes through it (a partition).
    const WRITES: bool;
}

/// The [`LayoutParam`]s the kernel only reads, which a shared borrow may
/// be passed for.
pub trait ReadLayoutParam: LayoutParam {}

macro_rules! layout_params {
    ($writes:literal: $($name:ident),*) => {$(
        impl<T: Pod, S: Sanitizer> LayoutParam for $name<T, S> {
            type Elem = T;
            const WRITES: bool = $writes;
        }
    )*};
}
layout_params!(false: GlobalMatrix, BlockChunks, BlockTiles);
layout_params!(true: ThreadElemsMut, ThreadCellsMut, GridStrideMut, BlockChunksMut, BlockTilesMut);
impl<T: Pod, S: Sanitizer> ReadLayoutParam for GlobalMatrix<T, S> {}
impl<T: Pod, S: Sanitizer> ReadLayoutParam for BlockChunks<T, S> {}
impl<T: Pod, S: Sanitizer> ReadLayoutParam for BlockTiles<T, S> {}

fn pack_layout<P: LayoutParam>(
    v: super::memory::RawView,
    buf: &mut ParamBuffer,
) -> Result<(), ArgProblem> {
    pack_view::<P::Elem>(v, buf, pack_slice, P::WRITES)
}

// SAFETY: a shared borrow of live device memory of `len` elements, packed
// as pointer and length (the PARTS of every layout parameter), for a
// parameter the kernel only reads.
unsafe impl<A, P> KernelArg<P> for &A
where
    P: ReadLayoutParam,
    A: AsDeviceSlice<P::Elem> + ?Sized,
{
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        pack_layout::<P>(self.as_device_slice().raw_view(), buf)
    }
}

// SAFETY: an exclusive borrow of live device memory of `len` elements,
// packed as pointer and length.
unsafe impl<A, P> KernelArg<P> for &mut A
where
    P: LayoutParam,
    A: AsDeviceSliceMut<P::Elem> + ?Sized,
{
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        pack_layout::<P>(self.as_device_slice().raw_view(), buf)
    }
}

// SAFETY: as `&A` above.
unsafe impl<'a, P: ReadLayoutParam> KernelArg<P> for DeviceSlice<'a, P::Elem> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        pack_layout::<P>(self.raw_view(), buf)
    }
}

// SAFETY: as `&mut A` above.
unsafe impl<'a, P: LayoutParam> KernelArg<P> for DeviceSliceMut<'a, P::Elem> {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        pack_layout::<P>(self.raw_view(), buf)
    }
}

/// Packs typed arguments for kernel `K` as [`Stream::launch`] does, and
/// proves the kernel's declared block shape and view layouts for a
/// launch of `config`, recording each proof
/// ([`ParamBuffer::proven_views`]). Needs no GPU.
///
/// A partition whose buffer another argument also reaches is still
/// proven in bounds, but not exclusive:
///
/// ```
/// use vigil::{pack_proven_args, Context, DeviceBuffer, LaunchConfig, Stream};
/// use vigil::device::prelude::*;
///
/// # #[allow(dead_code)]
/// #[kernel]
/// fn copy(#[same_len(y)] x: GlobalSlice<u32>, y: ThreadElemsMut<u32>) {
///     if let Some((i, mine)) = y.own() {
///         mine.store(x.load_at(i));
///     }
/// }
///
/// let ctx = Context::cpu()?;
/// let stream = Stream::new(&ctx)?;
/// let x = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1000)?;
/// let mut y = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1000)?;
/// let buf = pack_proven_args::<copy, _>(&LaunchConfig::for_num_elems(1000, 256), (&x, &mut y))?;
/// let proven = buf.proven_views();
/// assert_eq!(proven.len(), 2); // `x`'s length and `y`'s partition
/// assert!(proven[1].exclusive);
///
/// // Two rows of blocks would give each element two owners: refused.
/// let tall = LaunchConfig::new((4, 2), 256);
/// assert!(pack_proven_args::<copy, _>(&tall, (&x, &mut y)).is_err());
/// # Ok::<(), vigil::Error>(())
/// ```
///
/// [`Stream::launch`]: crate::Stream::launch
pub fn pack_proven_args<K: Kernel, A: KernelArgs<K::Params>>(
    config: &LaunchConfig,
    args: A,
) -> Result<ParamBuffer> {
    let mut buf = pack_args::<K, A>(args)?;
    prove::<K>(&mut buf, config)?;
    Ok(buf)
}

/// Proves kernel `K`'s block shape and declared layouts for a launch of
/// `config` with the arguments in `buf`, and records each proof there.
fn prove<K: Kernel>(buf: &mut ParamBuffer, config: &LaunchConfig) -> Result<()> {
    if let Some([x, y, z]) = K::BLOCK_SHAPE {
        let declared = Dim3::new(x, y, z);
        if config.block != declared {
            return Err(Error::LaunchConfig {
                kernel: K::NAME.to_owned(),
                problem: LaunchConfigError::BlockShape {
                    declared,
                    given: config.block,
                },
            });
        }
    }
    for declared in K::LAYOUTS {
        let proven = prove_one(buf, config, declared, K::PARAMS)
            .map_err(|problem| argument_error::<K>(declared.param as usize, problem))?;
        buf.note_proven(proven);
    }
    Ok(())
}

fn argument_error<K: Kernel>(index: usize, problem: ArgProblem) -> Error {
    let desc = K::PARAMS.get(index);
    Error::Argument {
        kernel: K::NAME.to_owned(),
        index,
        name: desc.map_or("?", |d| d.name).to_owned(),
        rust_type: desc.map_or("?", |d| d.rust_type).to_owned(),
        problem: Box::new(problem),
    }
}

fn prove_one(
    buf: &ParamBuffer,
    config: &LaunchConfig,
    declared: &ParamLayout,
    params: &[ParamDesc],
) -> Result<ProvenView, ArgProblem> {
    let arg = declared.param as usize;
    let len = buf
        .arg_len(arg)
        .ok_or(ArgProblem::LayoutParam { param: arg })?;
    let layout = declared.layout.try_map(|e| match e {
        Extent::Const(v) => Ok(v),
        Extent::Param(p) => buf
            .arg_scalar(p as usize)
            .ok_or(ArgProblem::LayoutParam { param: p as usize }),
        Extent::LenOf(p) => buf
            .arg_len(p as usize)
            .ok_or(ArgProblem::LayoutParam { param: p as usize }),
    })?;
    let geometry = Geometry {
        grid: [config.grid.x, config.grid.y, config.grid.z],
        block: [config.block.x, config.block.y, config.block.z],
    };
    check(layout, len, declared.writes, geometry).map_err(|problem| {
        match (problem, declared.layout) {
            (
                vigil_shared::proofs::ProofProblem::LengthMismatch { len, expected },
                Layout::SameLen {
                    len: Extent::LenOf(other),
                },
            ) => ArgProblem::LengthMismatch {
                other: params
                    .get(other as usize)
                    .map_or("?", |d| d.name)
                    .to_owned(),
                len,
                other_len: expected,
            },
            _ => ArgProblem::Layout {
                problem,
                grid: config.grid,
                block: config.block,
            },
        }
    })?;
    let view = buf
        .views()
        .iter()
        .find(|v| v.arg == arg)
        .copied()
        .unwrap_or(PackedView {
            arg,
            addr: 0,
            bytes: 0,
            writes: declared.writes,
        });
    let partition = declared.writes && layout.has_parts();
    let aliased = buf
        .views()
        .iter()
        .any(|v| v.arg != arg && v.overlaps(&view));
    Ok(ProvenView {
        arg,
        layout,
        writes: declared.writes,
        view,
        exclusive: partition && !aliased,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, DeviceBuffer, Stream};
    use vigil_shared::params::PtxType;

    /// `fn k(n: usize, y: ThreadElemsMut<u32>)` whose descriptor declares
    /// `y`'s chunk as parameter 5, which it does not have (a `Kernel`
    /// written by hand that disagrees with its parameters).
    #[allow(non_camel_case_types)]
    struct k {}
    impl Kernel for k {
        const NAME: &'static str = "k";
        const PARAMS: &'static [ParamDesc] = &[
            ParamDesc {
                name: "n",
                rust_type: "usize",
                parts: &[PtxType::B64],
            },
            ParamDesc {
                name: "y",
                rust_type: "BlockChunksMut<u32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
        ];
        type Params = (usize, BlockChunksMut<u32>);
        const LAYOUTS: &'static [ParamLayout] = &[ParamLayout {
            param: 1,
            layout: Layout::BlockChunks {
                chunk: Extent::Param(5),
            },
            writes: true,
        }];
        const BLOCK_SHAPE: Option<[u32; 3]> = Some([64, 1, 1]);
        unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
    }

    #[test]
    fn a_descriptor_naming_a_missing_size_is_an_argument_error() {
        let ctx = Context::builder().cpu().build().unwrap();
        let s = Stream::new(&ctx).unwrap();
        let mut y = DeviceBuffer::<u32>::alloc_zeroed(&s, 4).unwrap();
        let e = pack_proven_args::<k, _>(&LaunchConfig::new(4, 64), (1usize, &mut y)).unwrap_err();
        assert_eq!(
            e,
            Error::Argument {
                kernel: "k".into(),
                index: 1,
                name: "y".into(),
                rust_type: "BlockChunksMut<u32>".into(),
                problem: Box::new(ArgProblem::LayoutParam { param: 5 }),
            }
        );
        // The block shape is checked first, whatever the layouts.
        let e = pack_proven_args::<k, _>(&LaunchConfig::new(4, 32), (1usize, &mut y)).unwrap_err();
        assert!(matches!(
            e,
            Error::LaunchConfig {
                problem: LaunchConfigError::BlockShape { .. },
                ..
            }
        ));
    }

    /// `fn owners(x: GlobalSlice<f32>, y: ThreadElemsMut<f32>,
    /// z: BlockChunksMut<f32>)`, `z` in chunks of 64.
    #[allow(non_camel_case_types)]
    struct owners {}
    impl Kernel for owners {
        const NAME: &'static str = "owners";
        const PARAMS: &'static [ParamDesc] = &[
            ParamDesc {
                name: "x",
                rust_type: "GlobalSlice<f32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
            ParamDesc {
                name: "y",
                rust_type: "ThreadElemsMut<f32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
            ParamDesc {
                name: "z",
                rust_type: "BlockChunksMut<f32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
        ];
        type Params = (
            vigil_device::GlobalSlice<f32>,
            ThreadElemsMut<f32>,
            BlockChunksMut<f32>,
        );
        const LAYOUTS: &'static [ParamLayout] = &[
            ParamLayout {
                param: 1,
                layout: Layout::ThreadElems,
                writes: true,
            },
            ParamLayout {
                param: 2,
                layout: Layout::BlockChunks {
                    chunk: Extent::Const(64),
                },
                writes: true,
            },
        ];
        unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
    }

    #[test]
    fn a_proven_per_thread_partition_is_owned_once_trusted() {
        let ctx = Context::builder().cpu().build().unwrap();
        let s = Stream::new(&ctx).unwrap();
        let x = DeviceBuffer::<f32>::alloc_zeroed(&s, 256).unwrap();
        let mut y = DeviceBuffer::<f32>::alloc_zeroed(&s, 256).unwrap();
        let mut z = DeviceBuffer::<f32>::alloc_zeroed(&s, 256).unwrap();
        let (xp, yp, zp) = (x.device_ptr(), y.device_ptr(), z.device_ptr());
        let config = LaunchConfig::new(4, 64);
        let mut buf = pack_proven_args::<owners, _>(&config, (&x, &mut y, &mut z)).unwrap();
        // Not trusted: only the read view is named, as read-only.
        let r = buf.read_only_ranges();
        assert!(r.covers(xp, 1024) && !r.owned_covers(yp, 4));
        buf.trust_partitions(true);
        let r = buf.read_only_ranges();
        // Each of `y`'s elements has one owning thread; `z`'s chunks are
        // shared by their block's threads, so they are not owned.
        assert!(r.owned_covers(yp, 1024) && !r.covers(yp, 4));
        assert!(!r.owned_covers(zp, 4) && !r.covers(zp, 4));
        assert!(r.covers(xp, 1024) && !r.owned_covers(xp, 4));
    }

    #[test]
    fn a_launch_whose_arguments_may_alias_owns_nothing() {
        use crate::api::symmetric::SymmetricGroup;
        let group = SymmetricGroup::cpu(1, Context::builder()).unwrap();
        let sym = group.alloc::<f32>(256).unwrap();
        let ctx = group.context(0).unwrap();
        let s = Stream::new(ctx).unwrap();
        let mut y = DeviceBuffer::<f32>::alloc_zeroed(&s, 256).unwrap();
        let mut z = DeviceBuffer::<f32>::alloc_zeroed(&s, 256).unwrap();
        let yp = y.device_ptr();
        // A peer's slice may view any buffer of the launch, `y` included:
        // `y`'s partition is then not the launch's only way to its bytes.
        let config = LaunchConfig::new(4, 64);
        let x = sym.peer(0, 0).unwrap();
        let mut buf = pack_proven_args::<owners, _>(&config, (x, &mut y, &mut z)).unwrap();
        buf.trust_partitions(true);
        assert!(!buf.read_only_ranges().owned_covers(yp, 4));
    }
}
