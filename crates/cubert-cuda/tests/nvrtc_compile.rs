//! The NVRTC path compiles for Hopper: the device printf of validate mode, the compiler's
//! log for a broken source, the GPU suite's hand-written test kernels (the standard
//! kernels, all written in the kernel language, compile in `language_codegen`).
//! Needs only NVRTC (no GPU): run with `--include-ignored` where libnvrtc is installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cubert_cuda::lang::{entry_name, generate};
use cubert_cuda::{compile_cuda, nvrtc_options};
use cubert_runtime::ExecutionMode;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::{MatmulTiling, matmul_definition};

#[test]
#[ignore = "needs NVRTC"]
fn validate_mode_compiles_with_device_printf() {
    let tiling = MatmulTiling::Tiled {
        block: (64, 64),
        depth: 8,
        unit: (4, 4),
        lines: true,
    };
    let (definition, _) = matmul_definition(ElemType::F32, tiling, "matmul_f32").unwrap();
    let entry = entry_name(definition.name(), definition.id());
    let source = generate(definition.ir().unwrap(), &entry).unwrap();
    let options = nvrtc_options((9, 0), ExecutionMode::Validate, &[]);
    compile_cuda(&entry, &source, &options).unwrap();
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
