//! Tensor maps for the TMA copy engine (`cuTensorMapEncodeTiled`).

use super::{Context as _, DriverFailure};
use cudarc::driver::sys::{
    self, CUdeviceptr, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill,
    CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};

/// What a tiled tensor map describes, in the driver's order: dimensions innermost first,
/// strides in bytes for every dimension but the innermost.
#[derive(Clone, Copy, Debug)]
pub struct Tiled<'a> {
    /// Element type.
    pub data_type: CUtensorMapDataType,
    /// Device address of the tensor's first element.
    pub address: CUdeviceptr,
    /// Size of each dimension, in elements (the rank is its length).
    pub dims: &'a [u64],
    /// Stride of each dimension but the innermost, in bytes (rank - 1 entries).
    pub strides: &'a [u64],
    /// Tile (box) size of each dimension, in elements (rank entries).
    pub boxes: &'a [u32],
    /// Traversal stride of each dimension, in elements (rank entries).
    pub element_strides: &'a [u32],
    /// Interleaving.
    pub interleave: CUtensorMapInterleave,
    /// Shared memory swizzle.
    pub swizzle: CUtensorMapSwizzle,
    /// L2 promotion (prefetch size).
    pub l2_promotion: CUtensorMapL2promotion,
    /// Fill of out-of-bounds elements.
    pub oob_fill: CUtensorMapFloatOOBfill,
}

/// Encodes a tiled tensor map (`cuTensorMapEncodeTiled`). The address isn't dereferenced:
/// the map is only valid while the tensor stays allocated.
///
/// # Errors
/// The driver's refusal (alignment, box limits), or `CUDA_ERROR_INVALID_VALUE` when the
/// arrays' lengths don't match the rank.
pub fn encode_tiled(tiled: &Tiled<'_>) -> Result<CUtensorMap, DriverFailure> {
    const OPERATION: &str = "cuTensorMapEncodeTiled";
    let rank = tiled.dims.len();
    if rank == 0
        || tiled.strides.len() + 1 != rank
        || tiled.boxes.len() != rank
        || tiled.element_strides.len() != rank
    {
        return Err(DriverFailure::invalid_value(OPERATION));
    }
    let rank = u32::try_from(rank).map_err(|_| DriverFailure::invalid_value(OPERATION))?;
    let mut map = CUtensorMap { opaque: [0; 16] };
    // SAFETY: valid out pointer; every array holds `rank` entries (`strides` rank - 1), as
    // the driver reads (checked above); the address is only stored in the map.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            tiled.data_type,
            rank,
            tiled.address as *mut std::ffi::c_void,
            tiled.dims.as_ptr(),
            tiled.strides.as_ptr(),
            tiled.boxes.as_ptr(),
            tiled.element_strides.as_ptr(),
            tiled.interleave,
            tiled.swizzle,
            tiled.l2_promotion,
            tiled.oob_fill,
        )
    }
    .during(OPERATION)?;
    Ok(map)
}
