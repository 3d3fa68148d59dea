//! The CPU backend's variants of the standard matmul and reduce-sum, for the autotuner.
//!
//! Matmul variants are named `t<tm>x<tn>m<MR>n<NR>[k<kc>]`: an output tile of `tm × tn`
//! per cube, register blocks of `MR × NR` (NR is the inner loop's vector width), and the
//! `p` loop blocked by `kc` (see `matmul_variants`). Reduce-sum variants are the kernel
//! language's unit-per-row kernel (`cubert_runtime::kernel::standard::reduce`), named
//! `l<partial sums>r<rows per cube>`: 8 or 32 partial sums, and rows (units) per cube (a
//! cube's units run one after another on one worker thread, so fewer rows per cube spread
//! few rows over more threads). The default variant is the standard kernel itself. Priorities put a few likely winners
//! first (`minimal` tries only those).
//!
//! Built variants are cached like the standard kernels.

use super::matmul_variants::{MatmulParams, Micro, matmul_blocked};
use super::numeric::Numeric;
use super::standard_kernel;
use crate::CpuRuntime;
use crate::kernel::CpuKernel;
use cubert_runtime::LaunchError;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::kernel::standard::{RowSplit, reduce_sum_kernel};
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::Priority;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Tile of the default matmul (`kernels::matmul::TILE`), for its variant entry.
const DEFAULT_MATMUL_TILE: u32 = 32;

const MATMUL: [(&str, MatmulParams, Priority); 9] = [
    ("t32x32m4n8", params(32, 32, 0, Micro::M4N8), Priority::High),
    (
        "t64x64m4n8k256",
        params(64, 64, 256, Micro::M4N8),
        Priority::High,
    ),
    (
        "t32x64m4n16",
        params(32, 64, 0, Micro::M4N16),
        Priority::Normal,
    ),
    (
        "t16x32m2n8",
        params(16, 32, 0, Micro::M2N8),
        Priority::Normal,
    ),
    (
        "t64x64m8n8k128",
        params(64, 64, 128, Micro::M8N8),
        Priority::Normal,
    ),
    (
        "t64x128m4n16k256",
        params(64, 128, 256, Micro::M4N16),
        Priority::Normal,
    ),
    (
        "t128x128m4n8k256",
        params(128, 128, 256, Micro::M4N8),
        Priority::Low,
    ),
    ("t32x32m4n4", params(32, 32, 0, Micro::M4N4), Priority::Low),
    (
        "t32x128m4n8k512",
        params(32, 128, 512, Micro::M4N8),
        Priority::Low,
    ),
];

const fn params(tm: usize, tn: usize, kc: usize, micro: Micro) -> MatmulParams {
    MatmulParams { tm, tn, kc, micro }
}

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
            let default = StandardVariant::default_with_tile((DEFAULT_MATMUL_TILE, 32));
            std::iter::once(default)
                .chain(MATMUL.iter().map(|(name, p, priority)| {
                    StandardVariant::new(*name, (p.tn as u32, p.tm as u32), *priority)
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

fn numeric_elem(kernel: StandardKernel, elem: ElemType) -> Result<(), LaunchError> {
    if elem == ElemType::Bool {
        Err(LaunchError::unknown(format!(
            "the CPU backend has no `{kernel}` kernel: arithmetic on booleans is not defined"
        )))
    } else {
        Ok(())
    }
}

fn build_matmul<T: Numeric>(
    kernel: StandardKernel,
    variant: &str,
    fallback: CpuKernel,
) -> Result<CpuKernel, LaunchError> {
    let (_, params, _) = MATMUL
        .iter()
        .find(|(name, ..)| *name == variant)
        .ok_or_else(|| unknown(kernel, variant))?;
    Ok(matmul_blocked::<T>(
        format!("{kernel}/{variant}"),
        *params,
        fallback,
    ))
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
    if variant == StandardVariant::DEFAULT {
        return standard_kernel(kernel);
    }
    match kernel {
        StandardKernel::Matmul(elem) => {
            numeric_elem(kernel, elem)?;
            let fallback = standard_kernel(kernel)?;
            cubert_runtime::with_elem!(elem, u8, T => build_matmul::<T>(kernel, variant, fallback))
        }
        StandardKernel::ReduceSum(elem) => reduce_sum_variant(elem, variant),
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
