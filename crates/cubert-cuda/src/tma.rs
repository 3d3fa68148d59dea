//! Tensor maps for the TMA copy engine (Hopper): `TensorMapMeta` encoded with
//! `cuTensorMapEncodeTiled` and passed to the kernel as a `__grid_constant__` parameter.
//!
//! The runtime's shapes and strides are outermost first and in elements; the driver wants
//! them innermost first, with strides in bytes for every dimension but the innermost. The
//! driver checks alignment (16-byte address and strides) and box limits; its refusal is
//! returned as a launch error naming those rules.

use crate::driver::{self, tensor_map::Tiled};
use cubert_runtime::LaunchError;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::{
    OobFill, TensorMapFormat, TensorMapInterleave, TensorMapMeta, TensorMapPrefetch,
    TensorMapSwizzle,
};
use cudarc::driver::sys::{
    CUdeviceptr, CUtensorMap, CUtensorMapDataType as DataType, CUtensorMapFloatOOBfill,
    CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};

fn data_type(elem: ElemType) -> Result<DataType, LaunchError> {
    Ok(match elem {
        // Tensor maps move bytes: booleans and the 8-bit floats as bytes.
        ElemType::U8 | ElemType::Bool | ElemType::E4M3 | ElemType::E5M2 => {
            DataType::CU_TENSOR_MAP_DATA_TYPE_UINT8
        }
        ElemType::U16 => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        ElemType::U32 => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        ElemType::I32 => DataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
        ElemType::U64 => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        ElemType::I64 => DataType::CU_TENSOR_MAP_DATA_TYPE_INT64,
        ElemType::F16 => DataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        ElemType::F32 => DataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        ElemType::F64 => DataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        ElemType::BF16 => DataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        ElemType::I8 | ElemType::I16 => {
            return Err(LaunchError::unknown(format!(
                "tensor maps have no {elem} element type"
            )));
        }
    })
}

/// Encodes a tiled tensor map of the tensor at device address `ptr`.
///
/// # Errors
/// [`LaunchError`] if the description is out of range or the driver refuses it.
pub fn encode_tensor_map(
    ptr: CUdeviceptr,
    meta: &TensorMapMeta,
) -> Result<CUtensorMap, LaunchError> {
    let TensorMapFormat::Tiled { tile_size } = &meta.format;
    let rank = meta.shape.len();
    if !(1..=5).contains(&rank) || meta.strides.len() != rank || tile_size.len() != rank {
        return Err(LaunchError::unknown(format!(
            "a tensor map needs rank 1 to 5 with as many strides and tile sizes (shape {:?}, strides {:?}, tile {:?})",
            meta.shape.as_slice(),
            meta.strides.as_slice(),
            tile_size.as_slice()
        )));
    }
    let elem_size = meta.elem.size() as u64;
    let dims: Vec<u64> = meta.shape.iter().rev().map(|&d| d as u64).collect();
    let strides: Vec<u64> = meta
        .strides
        .iter()
        .rev()
        .skip(1)
        .map(|&s| s as u64 * elem_size)
        .collect();
    let boxes: Vec<u32> = tile_size.iter().rev().map(|&b| b as u32).collect();
    let element_strides: Vec<u32> = if meta.elem_stride.len() == rank {
        meta.elem_stride.iter().rev().map(|&s| s as u32).collect()
    } else {
        vec![1; rank]
    };
    let interleave = match meta.interleave {
        TensorMapInterleave::None => CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
        TensorMapInterleave::B16 => CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_16B,
        TensorMapInterleave::B32 => CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_32B,
    };
    let swizzle = match meta.swizzle {
        TensorMapSwizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        TensorMapSwizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        TensorMapSwizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        TensorMapSwizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let prefetch = match meta.prefetch {
        TensorMapPrefetch::None => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
        TensorMapPrefetch::B64 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        TensorMapPrefetch::B128 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        TensorMapPrefetch::B256 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    };
    let oob = match meta.oob_fill {
        OobFill::Zero => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        OobFill::NaN => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    };
    driver::tensor_map::encode_tiled(&Tiled {
        data_type: data_type(meta.elem)?,
        address: ptr,
        dims: &dims,
        strides: &strides,
        boxes: &boxes,
        element_strides: &element_strides,
        interleave,
        swizzle,
        l2_promotion: prefetch,
        oob_fill: oob,
    })
    .map_err(|failure| {
        LaunchError::unknown(format!(
            "cuTensorMapEncodeTiled refused the tensor map ({}): the address must be 16-byte \
             aligned, strides multiples of 16 bytes, tile sides at most 256 elements",
            driver::describe(failure.error)
        ))
    })
}
