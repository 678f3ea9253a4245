//! Tensor maps built on the host: the descriptors a kernel's tensor
//! copies (`TensorMap::load_tile`, `TensorMapMut::store_tile`) read.
//!
//! [`DeviceTensorMap::tiled`] checks a [`TiledLayout`] against its buffer
//! (typed errors, [`TensorMapProblem`]), has the backend encode it (the
//! driver's `cuTensorMapEncodeTiled` on a GPU, the CPU backend's own
//! layout on the host) and copies the 128-byte descriptor into device
//! memory, where the kernel parameter points. The map borrows its buffer
//! for as long as it lives: shared for a map kernels only load from,
//! exclusive for [`DeviceTensorMapMut`], which kernels store through too.

use super::args::KernelArg;
use super::memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, RawView};
use super::stream::Stream;
use crate::error::{ArgProblem, Error, Result, TensorMapProblem};
use crate::launch_abi::params::ParamBuffer;
use crate::types::TensorElement;
use std::marker::PhantomData;
use vigil_device::async_copy::{TensorMap, TensorMapMut};
use vigil_device::Sanitizer;
use vigil_shared::tensor_map::{
    Swizzle, TiledMap, DESCRIPTION_OFFSET, MAX_BOX_DIM, MAX_RANK, TENSOR_MAP_ALIGN,
    TENSOR_MAP_WITH_DESCRIPTION,
};

/// The shape a tensor map gives a buffer and the box a copy moves:
/// `D` dimensions, innermost (contiguous) first.
///
/// ```
/// use vigil::{Swizzle, TiledLayout};
/// // A row-major 1000 x 512 matrix (512 columns), moved in 32 x 32 tiles
/// // laid out with the 128-byte swizzle.
/// let layout = TiledLayout::new([512, 1000], [32, 32]).swizzle(Swizzle::B128);
/// assert_eq!(layout.box_len(), 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledLayout<const D: usize> {
    dims: [u64; D],
    box_dims: [u32; D],
    strides: Option<[u64; D]>,
    swizzle: Swizzle,
}

impl<const D: usize> TiledLayout<D> {
    /// A dense tensor of `dims` elements (innermost first), moved in boxes
    /// of `box_dims` elements, laid out in shared memory as they are.
    pub fn new(dims: [u64; D], box_dims: [u32; D]) -> Self {
        TiledLayout {
            dims,
            box_dims,
            strides: None,
            swizzle: Swizzle::None,
        }
    }

    /// The same with the bytes between consecutive indices of each
    /// dimension (`strides[0]` is the element size: the innermost
    /// dimension is contiguous), e.g. a sub-matrix of a wider one.
    pub fn strides(self, strides: [u64; D]) -> Self {
        TiledLayout {
            strides: Some(strides),
            ..self
        }
    }

    /// The same with a box laid out in shared memory with `swizzle`.
    pub fn swizzle(self, swizzle: Swizzle) -> Self {
        TiledLayout { swizzle, ..self }
    }

    /// Elements in one box.
    pub fn box_len(&self) -> usize {
        self.box_dims.iter().map(|&b| b as usize).product()
    }

    /// The map over `bytes` bytes of elements of `elem` bytes at `base`,
    /// or what is wrong with it.
    fn check(&self, base: u64, bytes: u64, elem: u64) -> Result<TiledMap, TensorMapProblem> {
        const {
            assert!(
                D >= 1 && D <= MAX_RANK,
                "a tensor map has 1 to 5 dimensions"
            )
        };
        let mut strides = [0u64; MAX_RANK];
        let mut dense = elem;
        for d in 0..D {
            let value = self.dims[d];
            if value == 0 || value > 1 << 32 {
                return Err(TensorMapProblem::Dim { dim: d, value });
            }
            let b = self.box_dims[d];
            if b == 0 || b > MAX_BOX_DIM {
                return Err(TensorMapProblem::BoxDim { dim: d, value: b });
            }
            strides[d] = self.strides.map_or(dense, |s| s[d]);
            dense = strides[d].saturating_mul(value);
        }
        if strides[0] != elem {
            return Err(TensorMapProblem::InnerStride {
                stride: strides[0],
                elem,
            });
        }
        if let Some(dim) = (1..D).find(|&d| strides[d] % 16 != 0 || strides[d] >= 1 << 40) {
            return Err(TensorMapProblem::Stride {
                dim,
                stride: strides[dim],
            });
        }
        let row = u64::from(self.box_dims[0]) * elem;
        if row % 16 != 0 {
            return Err(TensorMapProblem::BoxRow { bytes: row });
        }
        if let Some(span) = self.swizzle.span() {
            if row > span as u64 {
                return Err(TensorMapProblem::SwizzleSpan {
                    bytes: row,
                    span: span as u64,
                });
            }
        }
        if base % 16 != 0 {
            return Err(TensorMapProblem::Misaligned { addr: base });
        }
        let needed = (0..D).fold(elem, |n, d| {
            n.saturating_add((self.dims[d] - 1).saturating_mul(strides[d]))
        });
        if needed > bytes {
            return Err(TensorMapProblem::TooLarge { needed, len: bytes });
        }
        let mut dims = [1u64; MAX_RANK];
        dims[..D].copy_from_slice(&self.dims);
        let mut box_dims = [1u32; MAX_RANK];
        box_dims[..D].copy_from_slice(&self.box_dims);
        Ok(TiledMap {
            base,
            rank: D as u32,
            elem_bytes: elem as u32,
            dims,
            strides,
            box_dims,
            swizzle: self.swizzle,
        })
    }
}

/// `len` elements at device address `ptr` of `stream`'s device.
fn raw_view(stream: &Stream, ptr: u64, len: usize) -> RawView {
    RawView {
        device: stream.context().device(),
        ptr,
        len,
    }
}

/// The descriptor in device memory and the box's size: what both kinds of
/// map pass to a kernel.
struct Descriptor {
    buffer: DeviceBuffer<u64>,
    box_len: usize,
    /// The tensor's memory: (first byte, bytes).
    data: (u64, u64),
}

impl Descriptor {
    /// Encodes `layout` over `view` (elements of `T`) on `stream`'s
    /// device and copies it there.
    #[track_caller]
    fn build<T: TensorElement, const D: usize>(
        stream: &Stream,
        view: RawView,
        layout: &TiledLayout<D>,
    ) -> Result<Self> {
        let ctx = stream.context();
        if view.device != ctx.device() {
            return Err(Error::WrongDevice {
                op: "DeviceTensorMap::tiled",
                expected: ctx.device(),
                found: view.device,
            });
        }
        let elem = std::mem::size_of::<T>() as u64;
        let map = layout
            .check(view.ptr, view.len as u64 * elem, elem)
            .map_err(Error::TensorMap)?;
        let bytes = ctx.backend().encode_tensor_map(&map, T::TYPE)?;
        // The descriptor, then the description a sanitized kernel reads.
        let mut words = [0u64; TENSOR_MAP_WITH_DESCRIPTION / 8];
        let (descriptor, description) = words.split_at_mut(DESCRIPTION_OFFSET / 8);
        descriptor.copy_from_slice(&bytes.0);
        description.copy_from_slice(&map.encode().0);
        let buffer = DeviceBuffer::from_slice(stream, &words)?;
        debug_assert_eq!(buffer.size_bytes(), TENSOR_MAP_WITH_DESCRIPTION);
        if buffer.device_ptr() % TENSOR_MAP_ALIGN as u64 != 0 {
            return Err(Error::TensorMap(TensorMapProblem::Misaligned {
                addr: buffer.device_ptr(),
            }));
        }
        Ok(Descriptor {
            buffer,
            box_len: layout.box_len(),
            data: (view.ptr, view.len as u64 * elem),
        })
    }

    /// Packs the map's address and the box's element count.
    fn pack(&self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        buf.push_pointer_on(
            self.buffer.device_ptr(),
            Some(self.buffer.context().device()),
        );
        buf.push(self.box_len as u64);
        Ok(())
    }
}

/// A tensor map over a buffer that kernels load boxes from: pass `&map`
/// for a `TensorMap<T, D>` kernel parameter.
///
/// ```
/// # fn main() -> vigil::Result<()> {
/// use vigil::{Context, DeviceBuffer, DeviceTensorMap, Stream, TiledLayout};
/// let ctx = Context::cpu()?;
/// let stream = Stream::new(&ctx)?;
/// let x = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1000 * 512)?;
/// let map = DeviceTensorMap::tiled(&stream, &x, TiledLayout::new([512, 1000], [32, 32]))?;
/// assert_eq!(map.box_bytes(), 4096);
/// # Ok(()) }
/// ```
pub struct DeviceTensorMap<'a, T, const D: usize> {
    descriptor: Descriptor,
    layout: TiledLayout<D>,
    _data: PhantomData<&'a [T]>,
}

/// A tensor map over a buffer that kernels load boxes from and store
/// boxes to: pass `&mut map` for a `TensorMapMut<T, D>` parameter (or
/// `&map` for a `TensorMap<T, D>` one).
pub struct DeviceTensorMapMut<'a, T, const D: usize> {
    descriptor: Descriptor,
    layout: TiledLayout<D>,
    _data: PhantomData<&'a mut [T]>,
}

/// What both kinds of map answer, and their one constructor.
macro_rules! map_queries {
    ($name:ident) => {
        impl<'a, T: TensorElement, const D: usize> $name<'a, T, D> {
            /// A map of `layout` over `view`, built on `stream`'s device.
            #[track_caller]
            fn from_view(stream: &Stream, view: RawView, layout: TiledLayout<D>) -> Result<Self> {
                Ok($name {
                    descriptor: Descriptor::build::<T, D>(stream, view, &layout)?,
                    layout,
                    _data: PhantomData,
                })
            }
        }

        impl<T, const D: usize> $name<'_, T, D> {
            /// The layout it was built with.
            pub fn layout(&self) -> &TiledLayout<D> {
                &self.layout
            }

            /// Elements in one box.
            pub fn box_len(&self) -> usize {
                self.descriptor.box_len
            }

            /// Bytes in one box (what a load of it adds to its
            /// mbarrier's transaction count).
            pub fn box_bytes(&self) -> usize {
                self.descriptor.box_len * std::mem::size_of::<T>()
            }

            /// The device address of the descriptor.
            pub fn device_ptr(&self) -> u64 {
                self.descriptor.buffer.device_ptr()
            }
        }

        impl<T, const D: usize> std::fmt::Debug for $name<'_, T, D> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("descriptor", &self.device_ptr())
                    .field("layout", &self.layout)
                    .finish()
            }
        }

        // SAFETY: packs the descriptor's address and the box's element
        // count, as `TensorMap`'s `PARTS` say; the map borrows its data
        // for its lifetime, so both stay valid while it can be passed.
        // Passed by shared borrow, the map keeps every mutable view of its
        // data out of the launch: the data is read-only for it.
        unsafe impl<T: bytemuck::Pod, const D: usize, S: Sanitizer> KernelArg<TensorMap<T, D, S>>
            for &$name<'_, T, D>
        {
            fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
                self.descriptor.pack(buf)?;
                let (addr, bytes) = self.descriptor.data;
                buf.note_read_only(addr, bytes);
                Ok(())
            }
        }
    };
}
map_queries!(DeviceTensorMap);
map_queries!(DeviceTensorMapMut);

impl<'a, T: TensorElement, const D: usize> DeviceTensorMap<'a, T, D> {
    /// A map of `layout` over `data`, built on `stream`'s device.
    ///
    /// # Errors
    /// [`Error::TensorMap`] when the layout does not fit the buffer or the
    /// hardware's rules (the problem says which); [`Error::WrongDevice`]
    /// for a buffer of another device; the driver's refusal as
    /// [`Error::Driver`].
    #[track_caller]
    pub fn tiled(
        stream: &Stream,
        data: &'a (impl AsDeviceSlice<T> + ?Sized),
        layout: TiledLayout<D>,
    ) -> Result<Self> {
        Self::from_view(stream, data.as_device_slice().raw_view(), layout)
    }
}

impl<T: TensorElement, const D: usize> DeviceTensorMap<'static, T, D> {
    /// A map of `layout` over the `len` elements of `T` at device address
    /// `ptr` of `stream`'s device, borrowing nothing: for memory whose
    /// lifetime the caller tracks (a map kept across launches beside its
    /// buffer).
    ///
    /// # Safety
    /// The `len` elements at `ptr` must be device memory of `stream`'s
    /// device, allocated whenever a launch that passes the map runs, and
    /// not written by such a launch through another argument.
    ///
    /// # Errors
    /// As [`DeviceTensorMap::tiled`].
    #[track_caller]
    pub unsafe fn tiled_raw(
        stream: &Stream,
        ptr: u64,
        len: usize,
        layout: TiledLayout<D>,
    ) -> Result<Self> {
        Self::from_view(stream, raw_view(stream, ptr, len), layout)
    }
}

impl<'a, T: TensorElement, const D: usize> DeviceTensorMapMut<'a, T, D> {
    /// A map of `layout` over `data`, which kernels may write through it;
    /// built on `stream`'s device.
    ///
    /// # Errors
    /// As [`DeviceTensorMap::tiled`].
    #[track_caller]
    pub fn tiled(
        stream: &Stream,
        data: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        layout: TiledLayout<D>,
    ) -> Result<Self> {
        Self::from_view(stream, data.as_device_slice_mut().raw_view(), layout)
    }
}

impl<T: TensorElement, const D: usize> DeviceTensorMapMut<'static, T, D> {
    /// [`DeviceTensorMap::tiled_raw`] for a map kernels may write through.
    ///
    /// # Safety
    /// As [`DeviceTensorMap::tiled_raw`], and no other argument of a launch
    /// that passes the map may reach the memory.
    ///
    /// # Errors
    /// As [`DeviceTensorMap::tiled`].
    #[track_caller]
    pub unsafe fn tiled_raw(
        stream: &Stream,
        ptr: u64,
        len: usize,
        layout: TiledLayout<D>,
    ) -> Result<Self> {
        Self::from_view(stream, raw_view(stream, ptr, len), layout)
    }
}

// SAFETY: as for `TensorMap` parameters; the exclusive borrow of the map
// (which borrows its data exclusively) keeps a launch from writing the
// data through two arguments.
unsafe impl<T: bytemuck::Pod, const D: usize, S: Sanitizer> KernelArg<TensorMapMut<T, D, S>>
    for &mut DeviceTensorMapMut<'_, T, D>
{
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        self.descriptor.pack(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map passed for a load-only parameter makes its tensor read-only
    /// for the launch; one passed for a writable parameter does not.
    #[test]
    fn a_map_loaded_from_is_read_only_for_its_launch() {
        use vigil_device::sanitizer::Plain;
        let ctx = crate::Context::builder().cpu().build().unwrap();
        let s = Stream::new(&ctx).unwrap();
        let mut x = DeviceBuffer::<f32>::alloc_zeroed(&s, 64 * 32).unwrap();
        let xp = x.device_ptr();
        let layout = TiledLayout::new([64, 32], [32, 8]);
        let mut buf = ParamBuffer::default();
        let map = DeviceTensorMap::tiled(&s, &x, layout).unwrap();
        KernelArg::<TensorMap<f32, 2, Plain>>::pack(&map, &mut buf).unwrap();
        assert!(buf.read_only_ranges().covers(xp, 4 * 64 * 32));
        drop(map);
        let mut buf = ParamBuffer::default();
        let mut map = DeviceTensorMapMut::tiled(&s, &mut x, layout).unwrap();
        KernelArg::<TensorMapMut<f32, 2, Plain>>::pack(&mut map, &mut buf).unwrap();
        assert!(!buf.read_only_ranges().covers(xp, 4));
    }

    fn problem<const D: usize>(l: TiledLayout<D>, bytes: u64) -> Option<TensorMapProblem> {
        l.check(0x1000, bytes, 4).err()
    }

    #[test]
    fn layouts_the_hardware_refuses_are_named() {
        let ok = TiledLayout::new([64, 32], [32, 8]);
        assert_eq!(problem(ok, 64 * 32 * 4), None);
        assert_eq!(
            problem(ok, 64 * 32 * 4 - 4),
            Some(TensorMapProblem::TooLarge {
                needed: 64 * 32 * 4,
                len: 64 * 32 * 4 - 4
            })
        );
        assert_eq!(
            problem(TiledLayout::new([64, 32], [2, 8]), 1 << 20),
            Some(TensorMapProblem::BoxRow { bytes: 8 })
        );
        assert_eq!(
            problem(TiledLayout::new([64, 32], [32, 257]), 1 << 20),
            Some(TensorMapProblem::BoxDim { dim: 1, value: 257 })
        );
        assert_eq!(
            problem(TiledLayout::new([0, 32], [32, 8]), 1 << 20),
            Some(TensorMapProblem::Dim { dim: 0, value: 0 })
        );
        assert_eq!(
            problem(
                TiledLayout::new([64, 32], [64, 8]).swizzle(Swizzle::B128),
                1 << 20
            ),
            Some(TensorMapProblem::SwizzleSpan {
                bytes: 256,
                span: 128
            })
        );
        assert_eq!(
            problem(ok.strides([4, 100]), 1 << 20),
            Some(TensorMapProblem::Stride {
                dim: 1,
                stride: 100
            })
        );
        assert_eq!(
            problem(ok.strides([8, 512]), 1 << 20),
            Some(TensorMapProblem::InnerStride { stride: 8, elem: 4 })
        );
        assert_eq!(
            TiledLayout::new([64], [32]).check(0x1004, 1 << 20, 4).err(),
            Some(TensorMapProblem::Misaligned { addr: 0x1004 })
        );
    }

    #[test]
    fn a_strided_layout_spans_to_its_last_element() {
        // 16 rows of 8 elements, each row 256 bytes apart.
        let l = TiledLayout::new([8, 16], [8, 4]).strides([4, 256]);
        let map = l.check(0x1000, 15 * 256 + 32, 4).expect("fits exactly");
        assert_eq!(map.strides[..2], [4, 256]);
        assert_eq!(map.box_elems(), 32);
        assert!(l.check(0x1000, 15 * 256 + 28, 4).is_err());
    }
}
