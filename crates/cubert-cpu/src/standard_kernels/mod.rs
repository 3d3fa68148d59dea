//! The standard kernel the CPU backend still writes itself, matmul (see
//! `cubert_runtime::kernel::standard` for its calling convention), and the CPU's variants
//! of matmul and reduce-sum for the autotuner (`variants`); the other kernels, reduce-sum
//! included, come from the kernel language (`cubert_runtime::kernel::standard`).
//!
//! Integer arithmetic wraps (as on GPUs); floats accumulate in their own type. Built
//! kernels are cached, so launching a standard kernel allocates nothing to build it.

mod matmul;
mod matmul_variants;
mod numeric;
mod variants;

pub use numeric::Numeric;
pub use variants::{reduce_sum_variant, standard_variants, variant_kernel};

use crate::kernel::CpuKernel;
use cubert_runtime::LaunchError;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::StandardKernel;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Calls `$body` with `$t` bound to the Rust type of `$elem`, for numeric types; booleans
/// are refused.
macro_rules! with_numeric {
    ($elem:expr, $kernel:expr, $t:ident => $body:expr) => {
        match $elem {
            ElemType::Bool => Err(unsupported($kernel)),
            elem => cubert_runtime::with_elem!(elem, u8, $t => $body),
        }
    };
}

fn unsupported(kernel: StandardKernel) -> LaunchError {
    LaunchError::unknown(format!(
        "the CPU backend has no `{kernel}` kernel: arithmetic on booleans is not defined"
    ))
}

fn build(kernel: StandardKernel) -> Result<CpuKernel, LaunchError> {
    let name = kernel.name();
    match kernel {
        StandardKernel::Matmul(elem) => {
            with_numeric!(elem, kernel, T => Ok(matmul::matmul::<T>(name)))
        }
        other => Err(LaunchError::unknown(format!(
            "`{other}` comes from the kernel language, not from the CPU backend's own kernels"
        ))),
    }
}

/// The CPU's own matmul kernel, built once and cached.
///
/// # Errors
/// [`LaunchError`] for combinations the CPU backend doesn't define (arithmetic on
/// booleans), and for the standard kernels that come from the kernel language.
pub fn standard_kernel(kernel: StandardKernel) -> Result<CpuKernel, LaunchError> {
    static CACHE: OnceLock<Mutex<HashMap<StandardKernel, CpuKernel>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(built) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&kernel)
    {
        return Ok(built.clone());
    }
    let built = build(kernel)?;
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(kernel, built.clone());
    Ok(built)
}
