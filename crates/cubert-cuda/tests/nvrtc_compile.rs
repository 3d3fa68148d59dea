//! Every standard kernel the CUDA backend writes itself and every autotune variant compiles
//! with NVRTC for Hopper, in every execution mode (the standard kernels written in the
//! kernel language compile in `language_codegen`).
//! Needs only NVRTC (no GPU): run with `--include-ignored` where libnvrtc is installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cubert_cuda::standard_kernels::{standard_source, variant_names, variant_source};
use cubert_cuda::{compile_cuda, nvrtc_options, nvrtc_version};
use cubert_runtime::ExecutionMode;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::StandardKernel;

/// The standard kernels the backend writes itself (the others come from the language).
fn own_standard_kernels() -> Vec<StandardKernel> {
    StandardKernel::every()
        .into_iter()
        .filter(|kernel| standard_source(*kernel).is_ok())
        .collect()
}

#[test]
#[ignore = "needs NVRTC"]
fn every_standard_kernel_compiles_for_sm_90() {
    let version = nvrtc_version().expect("NVRTC must be installed for this test");
    eprintln!("NVRTC {}.{}", version.0, version.1);
    let mut failures = Vec::new();
    let kernels = own_standard_kernels();
    assert!(!kernels.is_empty());
    for kernel in &kernels {
        let (_, source, _) = standard_source(*kernel).unwrap();
        for mode in [ExecutionMode::Checked, ExecutionMode::Unchecked] {
            let options = nvrtc_options((9, 0), mode, &[]);
            if let Err(log) = compile_cuda(&kernel.name(), &source, &options) {
                failures.push(format!("{kernel} ({mode:?}):\n{log}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first:\n{}",
        failures.len(),
        failures[0]
    );
    eprintln!("{} kernels compiled in 2 modes", kernels.len());
}

/// Every matmul variant the backend writes itself, for every numeric type (f32 also
/// unchecked; the reduce-sum variants come from the language: `language_codegen`).
#[test]
#[ignore = "needs NVRTC"]
fn every_autotune_variant_compiles_for_sm_90() {
    nvrtc_version().expect("NVRTC must be installed for this test");
    let mut failures = Vec::new();
    let mut compiled = 0;
    for elem in ElemType::ALL
        .into_iter()
        .filter(|elem| *elem != ElemType::Bool)
    {
        for kernel in [StandardKernel::Matmul(elem)] {
            for variant in variant_names(kernel) {
                let (entry, source, _) = variant_source(kernel, variant).unwrap();
                let modes: &[ExecutionMode] = if elem == ElemType::F32 {
                    &[ExecutionMode::Checked, ExecutionMode::Unchecked]
                } else {
                    &[ExecutionMode::Checked]
                };
                for mode in modes {
                    let options = nvrtc_options((9, 0), *mode, &[]);
                    match compile_cuda(&entry, &source, &options) {
                        Ok(_) => compiled += 1,
                        Err(log) => failures.push(format!("{entry} ({mode:?}):\n{log}")),
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first:\n{}",
        failures.len(),
        failures[0]
    );
    eprintln!("{compiled} variant compilations");
}

#[test]
#[ignore = "needs NVRTC"]
fn validate_mode_compiles_with_device_printf() {
    let (_, source, _) = standard_source(StandardKernel::Matmul(ElemType::F32)).unwrap();
    let options = nvrtc_options((9, 0), ExecutionMode::Validate, &[]);
    compile_cuda("matmul_f32", &source, &options).unwrap();
}

#[test]
#[ignore = "needs NVRTC"]
fn a_syntax_error_returns_the_compiler_log() {
    let options = nvrtc_options((9, 0), ExecutionMode::Checked, &[]);
    let log = compile_cuda(
        "broken",
        "extern \"C\" __global__ void broken(const __grid_constant__ cubert::Args a) { this is not C++ }",
        &options,
    )
    .unwrap_err();
    assert!(log.contains("broken.cu"), "{log}");
}

#[test]
#[ignore = "needs NVRTC"]
fn test_kernels_of_the_gpu_suite_compile() {
    let options = nvrtc_options((9, 0), ExecutionMode::Checked, &[]);
    compile_cuda("scale", common::SCALE, &options).unwrap();
    compile_cuda("tma_tile_copy", common::TMA_TILE_COPY, &options).unwrap();
}
