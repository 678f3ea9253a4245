//! Tensor-map descriptors (`cuTensorMapEncodeTiled`).

use super::{check, DriverResult};
use crate::types::TensorElementType;
use cudarc::driver::sys;
use vigil_shared::tensor_map::{Swizzle, TensorMapBytes, TiledMap};

/// `cuTensorMapEncodeTiled`: the driver's descriptor of `map` (already
/// validated by the front end) over elements of `element`. Boxes are
/// traversed densely, with no interleave, L2 promotion to 128 bytes and
/// zero fill outside the tensor.
pub(crate) fn encode_tiled(
    map: &TiledMap,
    element: TensorElementType,
) -> DriverResult<TensorMapBytes> {
    use sys::CUtensorMapDataType as T;
    let data_type = match element {
        TensorElementType::U8 => T::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        TensorElementType::U16 => T::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        TensorElementType::U32 => T::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        TensorElementType::I32 => T::CU_TENSOR_MAP_DATA_TYPE_INT32,
        TensorElementType::U64 => T::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        TensorElementType::I64 => T::CU_TENSOR_MAP_DATA_TYPE_INT64,
        TensorElementType::F32 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        TensorElementType::F64 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    };
    let rank = map.rank as usize;
    let strides = &map.strides[1..rank.max(1)];
    let element_strides = [1u32; 5];
    let swizzle = match map.swizzle {
        Swizzle::None => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let mut out = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: `out` is a writable descriptor; the arrays hold `rank`
    // (dims, box, element strides) and `rank - 1` (strides) entries; the
    // base address is device memory of the current context (the front
    // end's buffer), which the driver only records.
    check("cuTensorMapEncodeTiled", || unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut out,
            data_type,
            map.rank,
            map.base as *mut std::ffi::c_void,
            map.dims.as_ptr(),
            strides.as_ptr(),
            map.box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    })?;
    Ok(TensorMapBytes(out.opaque))
}
