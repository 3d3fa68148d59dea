//! The CUDA backend's variants of the standard matmul and reduce-sum, for the autotuner.
//!
//! Both come from the kernel language (`cubert_runtime::kernel::standard`). Matmul variants
//! are its tiled kernel (`matmul`), named `b<BM>x<BN>k<BK>t<TM>x<TN>[v4]`: a cube computes
//! a `BM × BN` tile of the output through shared memory, `BK` steps of `k` per load, each
//! of its `(BN/TN) × (BM/TM)` units summing `TM × TN` outputs in registers (strided across
//! the tile, so shared-memory reads and global stores are contiguous per plane); with `v4`
//! the `rhs` tile is read in lines of 4 where `n` and the address allow. Variants
//! `d<BM>x<BN>k<BK>` are its double-buffered kernel (`matmul_double_buffered`): 8 × 8
//! outputs per unit, the next step's operands in registers while the cube multiplies
//! this one. The default is `d64x64k8`.
//!
//! Reduce-sum variants are the language's shared kernel (`reduce`): `b<THREADS>v<1|4>` (a
//! cube of THREADS units per row, reading lines of 4 with `v4`) and `w<WARPS>v<1|4>` (a
//! plane per row, WARPS planes per cube: for many short rows). The default is `b256v4`.

use crate::CudaRuntime;
use crate::kernel::CudaKernel;
use cubert_runtime::LaunchError;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::kernel::standard::{MatmulTiling, RowSplit, matmul_kernel, reduce_sum_kernel};
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::Priority;

/// A tile of `block` (rows, columns), `depth` deep, `unit` outputs per unit.
const fn tiled(block: (u32, u32), depth: u32, unit: (u32, u32), lines: bool) -> MatmulTiling {
    MatmulTiling::Tiled {
        block,
        depth,
        unit,
        lines,
    }
}

/// The tiling of the default matmul: the double-buffered kernel on 64 × 64 tiles 8 deep.
// On an H200 (2026-11-29, `bench tune`): faster than the previous default (the tiled
// kernel, `b64x64k16t4x4v4`) on every shape measured, 19.4 against 18.3 TFLOP/s at 1024³,
// 30.9 against 24.2 at 4096³, 5.1 against 4.9 at 4096×4096×64; `d128x128k8` leads from
// 2048³ up (36.6 at 4096³), and the tuner picks it there.
pub const DEFAULT_MATMUL: MatmulTiling = double_buffered((64, 64), 8);

/// A double-buffered tile of `block` (rows, columns), `depth` deep, 8 × 8 outputs per unit.
const fn double_buffered(block: (u32, u32), depth: u32) -> MatmulTiling {
    MatmulTiling::DoubleBuffered { block, depth }
}

/// (name, tiling, priority) of the matmul variants.
const MATMUL: [(&str, MatmulTiling, Priority); 12] = [
    ("d128x128k8", double_buffered((128, 128), 8), Priority::High),
    (
        "d128x128k16",
        double_buffered((128, 128), 16),
        Priority::High,
    ),
    ("d128x64k8", double_buffered((128, 64), 8), Priority::Normal),
    (
        "b64x64k16t4x4v4",
        tiled((64, 64), 16, (4, 4), true),
        Priority::Normal,
    ),
    (
        "b64x64k8t4x4",
        tiled((64, 64), 8, (4, 4), false),
        Priority::High,
    ),
    (
        "b128x128k8t8x8v4",
        tiled((128, 128), 8, (8, 8), true),
        Priority::High,
    ),
    (
        "b16x16k16t1x1",
        tiled((16, 16), 16, (1, 1), false),
        Priority::Normal,
    ),
    (
        "b128x64k8t8x4v4",
        tiled((128, 64), 8, (8, 4), true),
        Priority::Normal,
    ),
    (
        "b32x32k16t2x2",
        tiled((32, 32), 16, (2, 2), false),
        Priority::Normal,
    ),
    (
        "b128x128k16t8x8v4",
        tiled((128, 128), 16, (8, 8), true),
        Priority::Low,
    ),
    (
        "b64x128k8t4x8v4",
        tiled((64, 128), 8, (4, 8), true),
        Priority::Low,
    ),
    (
        "b32x64k8t2x4",
        tiled((32, 64), 8, (2, 4), false),
        Priority::Low,
    ),
];

/// Every matmul variant's name and tiling, the default first.
pub fn matmul_tilings() -> Vec<(&'static str, MatmulTiling)> {
    std::iter::once((StandardVariant::DEFAULT, DEFAULT_MATMUL))
        .chain(MATMUL.iter().map(|(name, tiling, _)| (*name, *tiling)))
        .collect()
}

/// The split of the default reduce-sum: a cube of 256 units per row, reading lines of 4.
pub const DEFAULT_REDUCE: RowSplit = RowSplit::Cube {
    units: 256,
    lines: true,
};

const fn per_cube(units: u32, lines: bool) -> RowSplit {
    RowSplit::Cube { units, lines }
}

const fn per_plane(planes: u32, lines: bool) -> RowSplit {
    RowSplit::Plane { planes, lines }
}

/// (name, split, priority) of the reduce-sum variants.
const REDUCE: [(&str, RowSplit, Priority); 7] = [
    ("w8v4", per_plane(8, true), Priority::High),
    ("b512v4", per_cube(512, true), Priority::High),
    ("b128v1", per_cube(128, false), Priority::Normal),
    ("w4v1", per_plane(4, false), Priority::Normal),
    ("b1024v4", per_cube(1024, true), Priority::Low),
    ("w4v4", per_plane(4, true), Priority::Low),
    ("b256v1", per_cube(256, false), Priority::Low),
];

/// The variants of `kernel`, the default first (matmul and reduce-sum have several; other
/// kernels only the default).
pub fn standard_variants(
    kernel: StandardKernel,
    _properties: &DeviceProperties,
) -> Vec<StandardVariant> {
    match kernel {
        StandardKernel::Matmul(_) => {
            std::iter::once(StandardVariant::default_with_tile(DEFAULT_MATMUL.tile()))
                .chain(MATMUL.iter().map(|(name, tiling, priority)| {
                    StandardVariant::new(*name, tiling.tile(), *priority)
                }))
                .collect()
        }
        StandardKernel::ReduceSum(_) => std::iter::once(StandardVariant::default_with_tile((1, 1)))
            .chain(REDUCE.iter().map(|(name, split, priority)| {
                StandardVariant::new(*name, (split.rows_per_cube(), 1), *priority)
            }))
            .collect(),
        _ => vec![StandardVariant::default_with_tile((1, 1))],
    }
}

fn unknown(kernel: StandardKernel, variant: &str) -> LaunchError {
    LaunchError::unknown(format!(
        "the cuda backend has no variant `{variant}` of `{kernel}`"
    ))
}

/// Variant `variant` of the matmul of `elem`, from the kernel language.
///
/// # Errors
/// An unknown variant, booleans, or the build error (NVRTC).
pub fn matmul_variant(elem: ElemType, variant: &str) -> Result<CudaKernel, LaunchError> {
    let kernel = StandardKernel::Matmul(elem);
    let (_, tiling) = matmul_tilings()
        .into_iter()
        .find(|(name, _)| *name == variant)
        .ok_or_else(|| unknown(kernel, variant))?;
    matmul_kernel::<CudaRuntime>(elem, variant, tiling)
}

/// Every reduce-sum variant's name and split, the default first.
pub fn reduce_sum_splits() -> Vec<(&'static str, RowSplit)> {
    std::iter::once((StandardVariant::DEFAULT, DEFAULT_REDUCE))
        .chain(REDUCE.iter().map(|(name, split, _)| (*name, *split)))
        .collect()
}

/// Variant `variant` of the reduce-sum of `elem`, from the kernel language.
///
/// # Errors
/// An unknown variant, booleans, or the build error (NVRTC).
pub fn reduce_sum_variant(elem: ElemType, variant: &str) -> Result<CudaKernel, LaunchError> {
    let kernel = StandardKernel::ReduceSum(elem);
    let (_, split) = reduce_sum_splits()
        .into_iter()
        .find(|(name, _)| *name == variant)
        .ok_or_else(|| unknown(kernel, variant))?;
    reduce_sum_kernel::<CudaRuntime>(elem, variant, split)
}

/// Variant `variant` of `kernel` (the default is the standard kernel), built once and
/// cached (`cubert_runtime::kernel::standard`'s cache, and the compiler's).
///
/// # Errors
/// An unknown variant, booleans, or the build error (NVRTC).
pub fn variant_kernel(kernel: StandardKernel, variant: &str) -> Result<CudaKernel, LaunchError> {
    match kernel {
        StandardKernel::ReduceSum(elem) => reduce_sum_variant(elem, variant),
        StandardKernel::Matmul(elem) => matmul_variant(elem, variant),
        other if variant == StandardVariant::DEFAULT => {
            cubert_runtime::kernel::standard::built_standard_kernel::<CudaRuntime>(other)
        }
        _ => Err(unknown(kernel, variant)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_unique_name_and_fits_a_block() {
        let tilings = matmul_tilings();
        let mut names: Vec<_> = tilings.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), tilings.len());
        for (name, tiling) in tilings {
            let units = tiling.cube_dim().num_elems();
            assert!(units <= 1024 && units % 32 == 0, "{name}");
            cubert_runtime::kernel::standard::matmul_definition(ElemType::F32, tiling, name)
                .unwrap();
        }
        let splits = reduce_sum_splits();
        let mut names: Vec<_> = splits.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), splits.len());
        for (name, split) in splits {
            let units = split.cube_dim().num_elems();
            assert!(units <= 1024 && units % 32 == 0, "{name}");
        }
    }
}
