//! Tensor maps: descriptors of a tiled view of a tensor, for the TMA copy engine on Hopper.
//!
//! Backends without TMA reject launches that carry tensor maps.

use crate::elem::ElemType;
use crate::handle::Binding;
use crate::shape::{Shape, Strides};

/// How a tensor map tiles its tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorMapFormat {
    /// Boxes of `tile_size` elements (outermost first).
    Tiled {
        /// Size of one box along each dimension.
        tile_size: Shape,
    },
}

/// Interleaving of the tensor in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TensorMapInterleave {
    /// Not interleaved.
    #[default]
    None,
    /// 16-byte interleave.
    B16,
    /// 32-byte interleave.
    B32,
}

/// Shared-memory swizzle applied by the copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TensorMapSwizzle {
    /// No swizzle.
    #[default]
    None,
    /// 32-byte swizzle.
    B32,
    /// 64-byte swizzle.
    B64,
    /// 128-byte swizzle.
    B128,
}

/// L2 promotion (prefetch) of the copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TensorMapPrefetch {
    /// None.
    #[default]
    None,
    /// 64 bytes.
    B64,
    /// 128 bytes.
    B128,
    /// 256 bytes.
    B256,
}

/// Value of elements outside the tensor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OobFill {
    /// Zero.
    #[default]
    Zero,
    /// NaN (floating types only).
    NaN,
}

/// Everything a backend needs to encode a tensor map.
#[derive(Debug, Clone)]
pub struct TensorMapMeta {
    /// Tiling.
    pub format: TensorMapFormat,
    /// Shape of the tensor, outermost first.
    pub shape: Shape,
    /// Strides of the tensor in elements, outermost first.
    pub strides: Strides,
    /// Element strides of the traversal (usually all 1).
    pub elem_stride: Strides,
    /// Interleave.
    pub interleave: TensorMapInterleave,
    /// Swizzle.
    pub swizzle: TensorMapSwizzle,
    /// Prefetch.
    pub prefetch: TensorMapPrefetch,
    /// Out-of-bounds fill.
    pub oob_fill: OobFill,
    /// Element type.
    pub elem: ElemType,
}

/// A tensor map bound to the memory it describes.
#[derive(Debug, Clone)]
pub struct TensorMapBinding {
    /// The tensor's memory.
    pub binding: Binding,
    /// The map.
    pub map: TensorMapMeta,
}

impl TensorMapBinding {
    /// A tensor map over `binding`.
    pub fn new(binding: Binding, map: TensorMapMeta) -> Self {
        Self { binding, map }
    }
}
