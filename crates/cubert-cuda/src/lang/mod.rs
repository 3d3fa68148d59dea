//! Kernels of the language on CUDA: the IR printed as CUDA C++.
//!
//! [`generate`] walks a kernel's IR and prints one C++ statement per instruction over the
//! existing prelude and kernel ABI (`cubert::Args`: array parameters are buffers 0, 1, ...;
//! scalar parameters are info words 0, 1, ...). The result is compiled by the ordinary
//! NVRTC path (`compiler.rs`), so it is cached in memory and on disk like every CUDA kernel,
//! and the launch's execution mode applies to its loads and stores. Where C++ leaves
//! behaviour undefined or different from the language (signed overflow, division by zero,
//! oversized shifts, float-to-integer overflow, half arithmetic), the printed code spells
//! the language's semantics out (each operation of `cubert_lang::ir` documents its own).
//!
//! `CUBERT_KERNEL_DUMP=dir` writes each generated source to `dir/<entry>.cu`.

mod cooperative;
pub(crate) mod cuda_type;
mod generate;
mod group_mma;
mod line;
mod mma;
mod pipeline;

pub use generate::{GenerateError, generate};

use crate::kernel::{ArgsCapacity, CudaKernel};
use cubert_lang::KernelDefinition;
use cubert_runtime::properties::fnv1a;
use cubert_runtime::{CubeDim, LaunchError};

/// The CUDA kernel of `definition` with cubes of `cube_dim` units.
///
/// # Errors
/// [`LaunchError`] naming the kernel if its expansion failed or the generator can't print
/// its IR.
pub fn language_kernel(
    definition: &KernelDefinition,
    cube_dim: CubeDim,
) -> Result<CudaKernel, LaunchError> {
    let ir = definition
        .ir()
        .map_err(|error| LaunchError::unknown(error.to_string()))?;
    let entry = entry_name(definition.name(), definition.id());
    let source = generate(ir, &entry)
        .map_err(|error| LaunchError::unknown(format!("kernel `{}`: {error}", definition.id())))?;
    dump(&entry, &source);
    let arrays = ir.arrays().count();
    let scalars = ir.scalars().count();
    // `--fmad=false`: the language rounds after every operation, so `a * x + y` must not be
    // contracted into one fused multiply-add (the CPU, and the language's tests, compute
    // it in two roundings); `mul_add` is the way to ask for a fused one.
    // Tensors' metadata follows the scalars: room for as many words as a block may take.
    let info = if ir.tensors > 0 {
        crate::kernel::MAX_INFO
    } else {
        scalars
    };
    let kernel = CudaKernel::from_cuda(definition.id(), entry, source, cube_dim)
        .with_args_capacity(ArgsCapacity::new(arrays, info))
        .with_options(vec!["--fmad=false".to_string(), cube_dim_option(cube_dim)]);
    // Shared arrays live in dynamic shared memory: the launch checks the size against the
    // device's limit and raises the function's limit past the static 48 KiB.
    let shared = ir.shared_memory_bytes();
    Ok(if shared > 0 {
        kernel.with_shared_memory(shared)
    } else {
        kernel
    })
}

/// The compile option that tells a generated kernel the cube dim it is launched with: its
/// registers are bounded to what that many units per cube may use (`__launch_bounds__`),
/// and the compiler may assume each unit's position is below it (dropping index checks it
/// can then prove). `CudaKernel::with_cube_dim` rewrites it, so a kernel always runs with
/// the cube dim it was built for.
pub fn cube_dim_option(cube_dim: CubeDim) -> String {
    format!("{CUBE_DIM}{},{},{}", cube_dim.x, cube_dim.y, cube_dim.z)
}

/// The prefix of [`cube_dim_option`].
pub const CUBE_DIM: &str = "-DCUBERT_CUBE_DIM=";

/// A C identifier for the specialization: the kernel's name (its characters that C
/// allows) and a hash of the full id.
pub fn entry_name(name: &str, id: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("cubert_{clean}_{:016x}", fnv1a(id.as_bytes()))
}

/// Writes `source` to `$CUBERT_KERNEL_DUMP/<entry>.cu` when the variable is set. A dump
/// that can't be written is logged; the launch goes on.
fn dump(entry: &str, source: &str) {
    let Some(dir) = std::env::var_os("CUBERT_KERNEL_DUMP") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let path = dir.join(format!("{entry}.cu"));
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, source));
    if let Err(error) = written {
        tracing::warn!(
            "CUBERT_KERNEL_DUMP: can't write {}: {error}",
            path.display()
        );
    }
}
