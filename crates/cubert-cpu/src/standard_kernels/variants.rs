//! The CPU backend's variants of the standard matmul and reduce-sum, for the autotuner.
//!
//! Both come from the kernel language (`cubert_runtime::kernel::standard`). Matmul variants
//! are its unit-per-block kernel (`matmul`: each unit computes blocks of 4 rows × 8
//! columns), named `t<rows>x<cols>` after the output tile of a cube (a cube's units run one
//! after another on one worker thread, so a tile's operands stay in cache while it is
//! computed). Reduce-sum variants are its unit-per-row kernel (`reduce`), named
//! `l<partial sums>r<rows per cube>`: 8 or 32 partial sums, and rows (units) per cube
//! (fewer rows per cube spread few rows over more threads). The default variant is the
//! standard kernel itself. Priorities put a few likely winners first (`minimal` tries only
//! those).
//!
//! Built variants are cached like the standard kernels.

use crate::CpuRuntime;
use crate::kernel::CpuKernel;
use cubert_runtime::LaunchError;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::kernel::standard::{MatmulTiling, RowSplit, matmul_kernel, reduce_sum_kernel};
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::Priority;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The tiling of the default matmul: cubes of 8 × 4 units, a 32 × 32 output tile.
pub const DEFAULT_MATMUL: MatmulTiling = tile(32, 32);

/// A cube covering `rows × cols` of the output (multiples of 4 and 8).
const fn tile(rows: u32, cols: u32) -> MatmulTiling {
    MatmulTiling::Unit {
        rows: rows / 4,
        cols: cols / 8,
    }
}

/// (name, tiling, priority) of the matmul variants.
const MATMUL: [(&str, MatmulTiling, Priority); 7] = [
    ("t32x64", tile(32, 64), Priority::High),
    ("t64x64", tile(64, 64), Priority::High),
    ("t16x32", tile(16, 32), Priority::Normal),
    ("t64x128", tile(64, 128), Priority::Normal),
    ("t16x64", tile(16, 64), Priority::Normal),
    ("t128x128", tile(128, 128), Priority::Low),
    ("t8x32", tile(8, 32), Priority::Low),
];

/// The split of the default reduce-sum: a unit per row with 32 partial sums, one row per
/// cube (the default kernel of every backend sums one row per cube).
pub const DEFAULT_REDUCE: RowSplit = RowSplit::Unit {
    units: 1,
    wide: true,
};

/// (name, split, priority) of the reduce-sum variants: `l<partial sums>r<rows per cube>`.
const REDUCE: [(&str, RowSplit, Priority); 4] = [
    ("l32r16", unit_split(16, true), Priority::High),
    ("l8r1", unit_split(1, false), Priority::High),
    ("l8r16", unit_split(16, false), Priority::Normal),
    ("l32r64", unit_split(64, true), Priority::Low),
];

const fn unit_split(units: u32, wide: bool) -> RowSplit {
    RowSplit::Unit { units, wide }
}

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
        "the {} backend has no variant `{variant}` of `{kernel}`",
        crate::device::BACKEND_NAME
    ))
}

/// Variant `variant` of the matmul of `elem`, from the kernel language.
///
/// # Errors
/// An unknown variant, booleans, or the language's build error.
pub fn matmul_variant(elem: ElemType, variant: &str) -> Result<CpuKernel, LaunchError> {
    let kernel = StandardKernel::Matmul(elem);
    let tiling = if variant == StandardVariant::DEFAULT {
        DEFAULT_MATMUL
    } else {
        let (_, tiling, _) = MATMUL
            .iter()
            .find(|(name, ..)| *name == variant)
            .ok_or_else(|| unknown(kernel, variant))?;
        *tiling
    };
    matmul_kernel::<CpuRuntime>(elem, variant, tiling)
}

/// Variant `variant` of the reduce-sum of `elem`, from the kernel language.
///
/// # Errors
/// An unknown variant, booleans, or the language's build error.
pub fn reduce_sum_variant(elem: ElemType, variant: &str) -> Result<CpuKernel, LaunchError> {
    let kernel = StandardKernel::ReduceSum(elem);
    let split = if variant == StandardVariant::DEFAULT {
        DEFAULT_REDUCE
    } else {
        let (_, split, _) = REDUCE
            .iter()
            .find(|(name, ..)| *name == variant)
            .ok_or_else(|| unknown(kernel, variant))?;
        *split
    };
    reduce_sum_kernel::<CpuRuntime>(elem, variant, split)
}

fn build(kernel: StandardKernel, variant: &str) -> Result<CpuKernel, LaunchError> {
    match kernel {
        StandardKernel::Matmul(elem) => matmul_variant(elem, variant),
        StandardKernel::ReduceSum(elem) => reduce_sum_variant(elem, variant),
        other if variant == StandardVariant::DEFAULT => {
            cubert_runtime::kernel::standard::built_standard_kernel::<CpuRuntime>(other)
        }
        _ => Err(unknown(kernel, variant)),
    }
}

/// Variant `variant` of `kernel`, built once and cached.
///
/// # Errors
/// [`LaunchError`] for an unknown variant or element types without arithmetic (booleans).
pub fn variant_kernel(kernel: StandardKernel, variant: &str) -> Result<CpuKernel, LaunchError> {
    type Cache = Mutex<HashMap<(StandardKernel, String), CpuKernel>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let id = (kernel, variant.to_string());
    if let Some(built) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
    {
        return Ok(built.clone());
    }
    let built = build(kernel, variant)?;
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, built.clone());
    Ok(built)
}
