//! The standard kernels of the CPU backend (see `cubert_runtime::kernel::standard` for
//! their calling conventions).
//!
//! Elementwise kernels give each cube one contiguous chunk of the elements; when every
//! buffer covers the chunk they run a tight loop the compiler vectorizes, otherwise every
//! access goes through the bounds-checked path so an undersized buffer is reported, never
//! overrun. Integer arithmetic wraps (as on GPUs); floats accumulate in their own type.
//!
//! Built kernels are cached, so launching a standard kernel allocates nothing to build it.
//! Matmul and reduce-sum also have variants for the autotuner (`variants`).

mod elementwise;
mod matmul;
mod matmul_variants;
mod numeric;
mod reduce;
mod reduce_variants;
mod variants;

pub use numeric::Numeric;
pub use variants::{standard_variants, variant_kernel};

use crate::kernel::CpuKernel;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::{CubeDim, LaunchError};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Units per cube of the elementwise kernels (used by the launch helpers to size the grid).
pub const ELEMENTWISE_CUBE_DIM: CubeDim = CubeDim::new_1d(1024);

/// Calls `$body` with `$t` bound to the Rust type of `$elem` (every type).
macro_rules! with_elem {
    ($elem:expr, $t:ident => $body:expr) => {
        match $elem {
            ElemType::F16 => {
                type $t = half::f16;
                $body
            }
            ElemType::BF16 => {
                type $t = half::bf16;
                $body
            }
            ElemType::F32 => {
                type $t = f32;
                $body
            }
            ElemType::F64 => {
                type $t = f64;
                $body
            }
            ElemType::I8 => {
                type $t = i8;
                $body
            }
            ElemType::I16 => {
                type $t = i16;
                $body
            }
            ElemType::I32 => {
                type $t = i32;
                $body
            }
            ElemType::I64 => {
                type $t = i64;
                $body
            }
            ElemType::U8 | ElemType::Bool => {
                type $t = u8;
                $body
            }
            ElemType::U16 => {
                type $t = u16;
                $body
            }
            ElemType::U32 => {
                type $t = u32;
                $body
            }
            ElemType::U64 => {
                type $t = u64;
                $body
            }
        }
    };
}

/// Calls `$body` with `$t` bound to the Rust type of `$elem`, for numeric types; booleans
/// are refused.
macro_rules! with_numeric {
    ($elem:expr, $kernel:expr, $t:ident => $body:expr) => {
        match $elem {
            ElemType::Bool => Err(unsupported($kernel)),
            elem => with_elem!(elem, $t => $body),
        }
    };
}

pub(crate) use with_elem;

fn unsupported(kernel: StandardKernel) -> LaunchError {
    LaunchError::unknown(format!(
        "the CPU backend has no `{kernel}` kernel: arithmetic on booleans is not defined"
    ))
}

fn build(kernel: StandardKernel) -> Result<CpuKernel, LaunchError> {
    let name = kernel.name();
    match kernel {
        StandardKernel::Noop => Ok(CpuKernel::new(name, CubeDim::new_single(), |_| Ok(()))),
        StandardKernel::Fill(elem) => with_elem!(elem, T => Ok(elementwise::fill::<T>(name))),
        StandardKernel::Copy(elem) => with_elem!(elem, T => Ok(elementwise::copy::<T>(name))),
        StandardKernel::Cast { from, to } => elementwise::cast(name, from, to),
        StandardKernel::Add(elem) => {
            with_numeric!(elem, kernel, T => Ok(elementwise::binary::<T>(name, T::add)))
        }
        StandardKernel::Mul(elem) => {
            with_numeric!(elem, kernel, T => Ok(elementwise::binary::<T>(name, T::mul)))
        }
        StandardKernel::ReduceSum(elem) => {
            with_numeric!(elem, kernel, T => Ok(reduce::reduce_sum::<T>(name)))
        }
        StandardKernel::Matmul(elem) => {
            with_numeric!(elem, kernel, T => Ok(matmul::matmul::<T>(name)))
        }
    }
}

/// The CPU kernel for a standard kernel, built once and cached.
///
/// # Errors
/// [`LaunchError`] for combinations the CPU backend doesn't define (arithmetic on booleans).
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
