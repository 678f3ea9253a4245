//! The element types a tensor map can describe.

/// An element type of a tensor map (the driver's
/// `CU_TENSOR_MAP_DATA_TYPE_*`), named by [`TensorElement::TYPE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TensorElementType {
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

/// A type a tensor map can hold: `u8`, `u16`, `u32`, `i32`, `u64`, `i64`,
/// `f32`, `f64` (sealed).
pub trait TensorElement: bytemuck::Pod + sealed::Sealed {
    /// Its tensor-map element type.
    const TYPE: TensorElementType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! elements {
    ($($t:ty => $v:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl TensorElement for $t {
            const TYPE: TensorElementType = TensorElementType::$v;
        }
    )*};
}
elements!(u8 => U8, u16 => U16, u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32, f64 => F64);
