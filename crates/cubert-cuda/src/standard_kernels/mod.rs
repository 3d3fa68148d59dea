//! The standard kernel the CUDA backend still writes itself, matmul (see
//! `cubert_runtime::kernel::standard` for its calling convention; the others come from the
//! kernel language): the template library of `library.rs` plus one `extern "C"` entry
//! point per element type. Built kernels are cached; the compiled modules are cached by
//! the compiler (in memory and on disk). Matmul and reduce-sum have variants for the
//! autotuner (`variants.rs`; reduce-sum's are splits of the language's kernels).

mod library;
mod variants;

pub use library::LIBRARY;
pub use variants::{
    DEFAULT_REDUCE, VARIANT_LIBRARY, reduce_sum_splits, reduce_sum_variant, standard_variants,
    variant_kernel, variant_names, variant_source,
};

use crate::kernel::{ArgsCapacity, CudaKernel};
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::{CubeDim, LaunchError};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The argument block of the standard kernels and their variants: at most three buffers
/// and three info words are passed (matmul), so 4 + 4 keeps each launch's parameter at 112
/// bytes instead of 1040.
pub const STANDARD_ARGS: ArgsCapacity = ArgsCapacity::new(4, 4);
/// Side of the matmul output tile (units per cube: `TILE × TILE`).
pub const TILE: u32 = 16;

fn no_booleans(kernel: StandardKernel, elem: ElemType) -> Result<(), LaunchError> {
    if elem == ElemType::Bool {
        Err(LaunchError::unknown(format!(
            "the CUDA backend has no `{kernel}` kernel: arithmetic on booleans is not defined"
        )))
    } else {
        Ok(())
    }
}

/// The body of the entry point and its cube dim.
fn body(kernel: StandardKernel) -> Result<(String, CubeDim), LaunchError> {
    Ok(match kernel {
        StandardKernel::Matmul(elem) => {
            no_booleans(kernel, elem)?;
            (
                format!(
                    "cubert_std::matmul<{}>(a);",
                    crate::lang::cuda_type::name(elem)
                ),
                CubeDim::new_2d(TILE, TILE),
            )
        }
        other => {
            return Err(LaunchError::unknown(format!(
                "`{other}` comes from the kernel language, not from the CUDA backend's own \
                 kernels"
            )));
        }
    })
}

/// The CUDA C++ source (without the prelude) and cube dim of a standard kernel.
///
/// # Errors
/// [`LaunchError`] for kernels the backend doesn't define (arithmetic on booleans).
pub fn standard_source(kernel: StandardKernel) -> Result<(String, String, CubeDim), LaunchError> {
    let entry = kernel.name();
    let (call, cube_dim) = body(kernel)?;
    let source = format!(
        "{LIBRARY}\nextern \"C\" __global__ void {entry}(const __grid_constant__ cubert::Args a) {{ {call} }}\n"
    );
    Ok((entry, source, cube_dim))
}

/// The CUDA kernel of a standard kernel, built once and cached.
///
/// # Errors
/// As [`standard_source`].
pub fn standard_kernel(kernel: StandardKernel) -> Result<CudaKernel, LaunchError> {
    static CACHE: OnceLock<Mutex<HashMap<StandardKernel, CudaKernel>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(built) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&kernel)
    {
        return Ok(built.clone());
    }
    let (entry, source, cube_dim) = standard_source(kernel)?;
    let built = CudaKernel::from_cuda(kernel.name(), entry, source, cube_dim)
        .with_args_capacity(STANDARD_ARGS);
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(kernel, built.clone());
    Ok(built)
}
