//! Typed kernel arguments: which host values may be passed for which device
//! parameter types, checked at compile time, and how they are packed.
//!
//! A `#[kernel]` declares its parameters as a tuple type `K::Params`, e.g.
//! `(f32, GlobalSlice<f32>, GlobalSliceMut<f32>)`. A launch takes a tuple of
//! host values implementing [`KernelArgs<K::Params>`]: element by element,
//! each must implement [`KernelArg`] for the parameter at its position:
//!
//! | parameter            | host argument                                                  |
//! |----------------------|----------------------------------------------------------------|
//! | scalar `u32`, `f32`… | the same scalar type                                           |
//! | `GlobalSlice<T>`     | `&DeviceBuffer<T>`, `DeviceSlice<T>`, `&DeviceSlice<T>`, and the mutable forms |
//! | `GlobalPtr<T>`       | the same (at least one element)                                |
//! | `GlobalSliceMut<T>`  | `&mut DeviceBuffer<T>`, `DeviceSliceMut<T>`, `&mut DeviceSliceMut<T>` |
//! | `GlobalPtrMut<T>`    | the same (at least one element)                                |
//!
//! Wrong arity or a wrong type is a compile error; what only a value can
//! tell (an empty buffer for a pointer, a buffer of another device) is an
//! [`Error::Argument`] before any driver call.

use super::memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceSlice, DeviceSliceMut, RawView};
use crate::error::{ArgProblem, Error, Result};
use crate::launch_abi::params::ParamBuffer;
use crate::types::DeviceId;
use bytemuck::Pod;
use std::marker::PhantomData;
use vigil_device::global::{GlobalPtr, GlobalPtrMut, GlobalSlice, GlobalSliceMut};
use vigil_device::{Kernel, KernelParam, Sanitizer};
use vigil_shared::params::{packed_size, ParamDesc, PtxType};

/// A host value that can be passed for a kernel parameter of type `P`.
///
/// # Safety
/// [`KernelArg::pack`] must push exactly the scalars `P::PARTS` lists
/// (launches check this), and every pointer it pushes must point to device
/// memory that is valid, for as long as the launched kernel runs, for the
/// accesses `P` permits (`len` elements for slices, one for pointers;
/// writable for the `Mut` forms, and not aliased by another argument's
/// mutable view).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "wrong argument type for this kernel parameter",
    note = "scalars pass as the same scalar type; `&DeviceBuffer<T>` / `DeviceSlice<T>` pass as \
            `GlobalSlice<T>` or `GlobalPtr<T>`; `&mut DeviceBuffer<T>` / `DeviceSliceMut<T>` also \
            as `GlobalSliceMut<T>` or `GlobalPtrMut<T>`"
)]
pub unsafe trait KernelArg<P> {
    /// Packs the value's scalars into `buf`.
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem>;
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {$(
        // SAFETY: one scalar, as the parameter type lowers; no pointers.
        unsafe impl KernelArg<$t> for $t {
            #[inline]
            fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
                buf.push(self);
                Ok(())
            }
        }
    )*};
}
scalar_arg!(u8, i8, u16, i16, u32, i32, u64, i64, usize, isize, f32, f64);

pub(crate) fn pack_slice(v: RawView, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
    buf.push_pointer_on(v.ptr, Some(v.device));
    buf.push(v.len as u64);
    Ok(())
}

fn pack_ptr(v: RawView, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
    if v.len == 0 {
        return Err(ArgProblem::EmptyForPointer);
    }
    buf.push_pointer_on(v.ptr, Some(v.device));
    Ok(())
}

/// A typed view packed by `pack` for a parameter the kernel writes
/// through (`writes`) or only reads: its bytes are noted
/// ([`ParamBuffer::note_view`]), and a read-only view's also as
/// read-only for the launch (the view borrows them, so no mutable view
/// of them is among the launch's arguments).
pub(crate) fn pack_view<T>(
    v: RawView,
    buf: &mut ParamBuffer,
    pack: fn(RawView, &mut ParamBuffer) -> Result<(), ArgProblem>,
    writes: bool,
) -> Result<(), ArgProblem> {
    let (addr, bytes) = (v.ptr, (v.len * std::mem::size_of::<T>()) as u64);
    pack(v, buf)?;
    buf.note_view(addr, bytes, writes);
    if !writes {
        buf.note_read_only(addr, bytes);
    }
    Ok(())
}

fn read_slice<T>(v: RawView, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
    pack_view::<T>(v, buf, pack_slice, false)
}

fn read_ptr<T>(v: RawView, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
    pack_view::<T>(v, buf, pack_ptr, false)
}

fn write_slice<T>(v: RawView, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
    pack_view::<T>(v, buf, pack_slice, true)
}

fn write_ptr<T>(v: RawView, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
    pack_view::<T>(v, buf, pack_ptr, true)
}

macro_rules! view_arg_impl {
    ([$($gen:tt)*] $arg:ty, $param:ident, $f:path) => {
        // SAFETY: the view borrows live device memory of `len` elements of
        // `T` (exclusively for the `Mut` parameter forms, which only
        // mutable views implement); packed as pointer (+ length).
        unsafe impl<$($gen)*, T: Pod, S: Sanitizer> KernelArg<$param<T, S>> for $arg {
            #[inline]
            fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
                $f(self.as_device_slice().raw_view(), buf)
            }
        }
    };
}

macro_rules! view_arg {
    ($($gen:tt $arg:ty => $($param:ident via $f:path),+;)*) => {
        $($(view_arg_impl!($gen $arg, $param, $f);)+)*
    };
}
view_arg! {
    ['a, A: AsDeviceSlice<T> + ?Sized] &'a A =>
        GlobalSlice via read_slice::<T>, GlobalPtr via read_ptr::<T>;
    ['a, A: AsDeviceSliceMut<T> + ?Sized] &'a mut A =>
        GlobalSlice via read_slice::<T>, GlobalPtr via read_ptr::<T>,
        GlobalSliceMut via write_slice::<T>, GlobalPtrMut via write_ptr::<T>;
    ['a] DeviceSlice<'a, T> =>
        GlobalSlice via read_slice::<T>, GlobalPtr via read_ptr::<T>;
    ['a] DeviceSliceMut<'a, T> =>
        GlobalSlice via read_slice::<T>, GlobalPtr via read_ptr::<T>,
        GlobalSliceMut via write_slice::<T>, GlobalPtrMut via write_ptr::<T>;
}

/// A tuple of host arguments for a kernel whose parameter tuple is `P`.
/// Implemented for tuples of arity 0 to 12 whose elements implement
/// [`KernelArg`] for the parameter at the same position.
#[diagnostic::on_unimplemented(
    message = "these arguments do not match the kernel's parameters `{P}`",
    label = "wrong number or types of kernel arguments",
    note = "pass a tuple with one argument per kernel parameter, in order (a 1-tuple is `(x,)`)"
)]
pub trait KernelArgs<P> {
    /// Number of arguments.
    const COUNT: usize;

    /// Packs every argument into `buf`; `params` names them in errors.
    fn pack_into(self, buf: &mut ParamBuffer, kernel: &str, params: &[ParamDesc]) -> Result<()>;
}

/// Packs one argument and checks that it packed what its parameter type
/// (and the kernel's declaration) lowers to.
fn pack_one<P: KernelParam, A: KernelArg<P>>(
    arg: A,
    index: usize,
    buf: &mut ParamBuffer,
    kernel: &str,
    params: &[ParamDesc],
) -> Result<()> {
    let desc = params.get(index);
    let err = |problem| Error::Argument {
        kernel: kernel.to_owned(),
        index,
        name: desc.map_or("?", |d| d.name).to_owned(),
        rust_type: desc.map_or("?", |d| d.rust_type).to_owned(),
        problem: Box::new(problem),
    };
    buf.begin_arg(index);
    let first = buf.slots().len();
    arg.pack(buf).map_err(err)?;
    let packed = &buf.slots()[first..];
    let declared = desc.map_or(P::PARTS, |d| d.parts);
    if declared != P::PARTS || !packed.iter().map(|s| s.ty).eq(P::PARTS.iter().copied()) {
        let got: Vec<PtxType> = packed.iter().map(|s| s.ty).collect();
        return Err(err(ArgProblem::Abi {
            expected: declared.to_vec(),
            got,
        }));
    }
    Ok(())
}

impl KernelArgs<()> for () {
    const COUNT: usize = 0;
    fn pack_into(self, _: &mut ParamBuffer, _: &str, _: &[ParamDesc]) -> Result<()> {
        Ok(())
    }
}

macro_rules! tuple_args {
    ($($idx:tt $P:ident $A:ident),+) => {
        impl<$($P: KernelParam, $A: KernelArg<$P>),+> KernelArgs<($($P,)+)> for ($($A,)+) {
            const COUNT: usize = [$($idx),+].len();
            fn pack_into(self, buf: &mut ParamBuffer, kernel: &str, params: &[ParamDesc]) -> Result<()> {
                $(pack_one::<$P, $A>(self.$idx, $idx, buf, kernel, params)?;)+
                Ok(())
            }
        }
    };
}
tuple_args!(0 P0 A0);
tuple_args!(0 P0 A0, 1 P1 A1);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8);
tuple_args!(0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8, 9 P9 A9);
tuple_args!(
    0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8, 9 P9 A9,
    10 P10 A10
);
tuple_args!(
    0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8, 9 P9 A9,
    10 P10 A10, 11 P11 A11
);

/// Packs typed arguments for kernel `K` into a new [`ParamBuffer`], checking
/// each against `K::PARAMS`. Needs no GPU: the CPU backend hands the same
/// bytes to `K::run_host`.
///
/// For a kernel `fn scale(a: f32, n: u64)`:
///
/// ```
/// # use vigil::{pack_args, Kernel, ParamDesc, PtxType};
/// # use vigil::device::Sanitizer;
/// # #[allow(non_camel_case_types)]
/// # struct scale {}
/// # impl Kernel for scale {
/// #     const NAME: &'static str = "scale";
/// #     const PARAMS: &'static [ParamDesc] = &[
/// #         ParamDesc { name: "a", rust_type: "f32", parts: &[PtxType::F32] },
/// #         ParamDesc { name: "n", rust_type: "u64", parts: &[PtxType::B64] },
/// #     ];
/// #     type Params = (f32, u64);
/// #     unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
/// # }
/// let buf = pack_args::<scale, _>((2.0, 10u64)).unwrap();
/// assert_eq!(buf.len(), 16); // f32 at 0, u64 at 8
/// assert_eq!(buf.read::<u64>(1), Some(10));
/// ```
///
/// A wrong type is a compile error:
///
/// ```compile_fail
/// # use vigil::{pack_args, Kernel, ParamDesc, PtxType};
/// # use vigil::device::Sanitizer;
/// # #[allow(non_camel_case_types)]
/// # struct scale {}
/// # impl Kernel for scale {
/// #     const NAME: &'static str = "scale";
/// #     const PARAMS: &'static [ParamDesc] = &[
/// #         ParamDesc { name: "a", rust_type: "f32", parts: &[PtxType::F32] },
/// #         ParamDesc { name: "n", rust_type: "u64", parts: &[PtxType::B64] },
/// #     ];
/// #     type Params = (f32, u64);
/// #     unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
/// # }
/// let buf = pack_args::<scale, _>((2.0, 10u32));
/// ```
///
/// and so is a wrong number of arguments:
///
/// ```compile_fail
/// # use vigil::{pack_args, Kernel, ParamDesc, PtxType};
/// # use vigil::device::Sanitizer;
/// # #[allow(non_camel_case_types)]
/// # struct scale {}
/// # impl Kernel for scale {
/// #     const NAME: &'static str = "scale";
/// #     const PARAMS: &'static [ParamDesc] = &[
/// #         ParamDesc { name: "a", rust_type: "f32", parts: &[PtxType::F32] },
/// #         ParamDesc { name: "n", rust_type: "u64", parts: &[PtxType::B64] },
/// #     ];
/// #     type Params = (f32, u64);
/// #     unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
/// # }
/// let buf = pack_args::<scale, _>((2.0,));
/// ```
pub fn pack_args<K: Kernel, A: KernelArgs<K::Params>>(args: A) -> Result<ParamBuffer> {
    if K::PARAMS.len() != A::COUNT {
        return Err(Error::ArgumentCount {
            kernel: K::NAME.to_owned(),
            what: "argument",
            given: A::COUNT,
            expected: K::PARAMS.len(),
        });
    }
    let scalars = K::PARAMS.iter().map(|p| p.parts.len()).sum();
    let mut buf = ParamBuffer::with_capacity(packed_size(K::PARAMS), scalars);
    args.pack_into(&mut buf, K::NAME, K::PARAMS)?;
    Ok(buf)
}

/// A device memory view with its element type erased, for untyped launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErasedView<'a> {
    device: DeviceId,
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a ()>,
}

impl ErasedView<'_> {
    fn raw(&self) -> RawView {
        RawView {
            device: self.device,
            ptr: self.ptr,
            len: self.len,
        }
    }

    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One argument of an untyped launch
/// ([`Stream::launch_dynamic`](crate::Stream::launch_dynamic)).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum KernelArgValue<'a> {
    /// `.u8`/`.s8`/`.b8`.
    U8(u8),
    /// `.s8`.
    I8(i8),
    /// `.u16`.
    U16(u16),
    /// `.s16`.
    I16(i16),
    /// `.u32`.
    U32(u32),
    /// `.s32`.
    I32(i32),
    /// `.u64`.
    U64(u64),
    /// `.s64`.
    I64(i64),
    /// `.f32`.
    F32(f32),
    /// `.f64`.
    F64(f64),
    /// A slice: pointer then `u64` length (as `GlobalSlice`).
    Slice(ErasedView<'a>),
    /// A pointer to the first element (as `GlobalPtr`; needs one element).
    Ptr(ErasedView<'a>),
}

macro_rules! value_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for KernelArgValue<'_> {
            fn from(x: $t) -> Self {
                KernelArgValue::$v(x)
            }
        }
    )*};
}
value_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64);

fn erase<'a>(v: RawView) -> ErasedView<'a> {
    ErasedView {
        device: v.device,
        ptr: v.ptr,
        len: v.len,
        _borrow: PhantomData,
    }
}

impl<'a> KernelArgValue<'a> {
    /// A read-only slice argument (pointer + length).
    pub fn slice<T: Pod>(s: &'a impl AsDeviceSlice<T>) -> Self {
        KernelArgValue::Slice(erase(s.as_device_slice().raw_view()))
    }

    /// A writable slice argument (pointer + length).
    pub fn slice_mut<T: Pod>(s: &'a mut impl AsDeviceSliceMut<T>) -> Self {
        KernelArgValue::Slice(erase(s.as_device_slice_mut().raw_view()))
    }

    /// A read-only pointer argument.
    pub fn ptr<T: Pod>(s: &'a impl AsDeviceSlice<T>) -> Self {
        KernelArgValue::Ptr(erase(s.as_device_slice().raw_view()))
    }

    /// A writable pointer argument.
    pub fn ptr_mut<T: Pod>(s: &'a mut impl AsDeviceSliceMut<T>) -> Self {
        KernelArgValue::Ptr(erase(s.as_device_slice_mut().raw_view()))
    }

    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        use KernelArgValue::*;
        match self {
            U8(x) => buf.push(x),
            I8(x) => buf.push(x),
            U16(x) => buf.push(x),
            I16(x) => buf.push(x),
            U32(x) => buf.push(x),
            I32(x) => buf.push(x),
            U64(x) => buf.push(x),
            I64(x) => buf.push(x),
            F32(x) => buf.push(x),
            F64(x) => buf.push(x),
            Slice(v) => return pack_slice(v.raw(), buf),
            Ptr(v) => return pack_ptr(v.raw(), buf),
        };
        Ok(())
    }

    fn type_name(&self) -> &'static str {
        use KernelArgValue::*;
        match self {
            U8(_) => "u8",
            I8(_) => "i8",
            U16(_) => "u16",
            I16(_) => "i16",
            U32(_) => "u32",
            I32(_) => "i32",
            U64(_) => "u64",
            I64(_) => "i64",
            F32(_) => "f32",
            F64(_) => "f64",
            Slice(_) => "slice",
            Ptr(_) => "pointer",
        }
    }
}

/// Packs untyped arguments in order (checked against the PTX signature at
/// launch).
pub fn pack_values(kernel: &str, args: &[KernelArgValue<'_>]) -> Result<ParamBuffer> {
    let mut buf = ParamBuffer::with_capacity(args.len() * 16, args.len() * 2);
    for (index, a) in args.iter().enumerate() {
        buf.begin_arg(index);
        a.pack(&mut buf).map_err(|problem| Error::Argument {
            kernel: kernel.to_owned(),
            index,
            name: "?".to_owned(),
            rust_type: a.type_name().to_owned(),
            problem: Box::new(problem),
        })?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::symmetric::SymmetricGroup;
    use crate::{Context, DeviceBuffer, Stream};
    use vigil_shared::params::ParamDesc;
    use vigil_shared::read_only::ReadOnlyRanges;

    /// A kernel `fn k(x: GlobalSlice<f32>, y: GlobalSliceMut<f32>, c: GlobalPtr<u32>)`.
    #[allow(non_camel_case_types)]
    struct k {}
    impl Kernel for k {
        const NAME: &'static str = "k";
        const PARAMS: &'static [ParamDesc] = &[
            ParamDesc {
                name: "x",
                rust_type: "GlobalSlice<f32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
            ParamDesc {
                name: "y",
                rust_type: "GlobalSliceMut<f32>",
                parts: &[PtxType::Ptr, PtxType::B64],
            },
            ParamDesc {
                name: "c",
                rust_type: "GlobalPtr<u32>",
                parts: &[PtxType::Ptr],
            },
        ];
        type Params = (GlobalSlice<f32>, GlobalSliceMut<f32>, GlobalPtr<u32>);
        unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
    }

    fn range(ptr: u64, bytes: u64) -> [u64; 2] {
        [ptr, ptr + bytes]
    }

    #[test]
    fn shared_views_for_read_only_parameters_are_read_only_ranges() {
        let ctx = Context::builder().cpu().build().unwrap();
        let s = Stream::new(&ctx).unwrap();
        let x = DeviceBuffer::<f32>::alloc_zeroed(&s, 100).unwrap();
        let mut y = DeviceBuffer::<f32>::alloc_zeroed(&s, 1000).unwrap();
        let mut c = DeviceBuffer::<u32>::alloc_zeroed(&s, 3).unwrap();
        let (xp, yp, cp) = (x.device_ptr(), y.device_ptr(), c.device_ptr());

        // The written buffer is never read-only; both read views are,
        // largest first.
        let buf = pack_args::<k, _>((&x, &mut y, &c)).unwrap();
        assert_eq!(
            buf.read_only_ranges().ranges,
            [range(xp, 400), range(cp, 12)]
        );
        // An exclusive borrow passed for a read-only parameter is one too.
        let buf = pack_args::<k, _>((x.slice(10..20).unwrap(), &mut y, &mut c)).unwrap();
        assert_eq!(
            buf.read_only_ranges().ranges,
            [range(xp + 40, 40), range(cp, 12)]
        );
        assert!(!buf.read_only_ranges().covers(yp, 4));
    }

    #[test]
    fn untyped_arguments_and_peer_slices_give_no_read_only_range() {
        let ctx = Context::builder().cpu().build().unwrap();
        let s = Stream::new(&ctx).unwrap();
        let x = DeviceBuffer::<f32>::alloc_zeroed(&s, 100).unwrap();
        // An untyped slice may be passed for a writable parameter.
        let buf = pack_values("k", &[KernelArgValue::slice(&x), KernelArgValue::U64(1)]).unwrap();
        assert_eq!(buf.read_only_ranges(), ReadOnlyRanges::NONE);

        // A peer's slice is shared yet writable: the launch's other read
        // views may be the same buffer.
        let group = SymmetricGroup::cpu(1, Context::builder()).unwrap();
        let sym = group.alloc::<f32>(64).unwrap();
        let mut c = DeviceBuffer::<u32>::alloc_zeroed(&s, 1).unwrap();
        let buf = pack_args::<k, _>((sym.buffer(0).unwrap(), sym.peer(0, 0).unwrap(), &mut c));
        assert_eq!(buf.unwrap().read_only_ranges(), ReadOnlyRanges::NONE);
    }
}
