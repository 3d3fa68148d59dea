//! Strict SPIR-V on device 0:
//!
//! - the SPIR-V of every language test kernel and every standard kernel passes the Khronos
//!   validator (`spirv-val`) for the device's Vulkan version: the modules the backend hands
//!   the driver as they are, with no validation on wgpu's side, are valid SPIR-V, their
//!   `NoContraction` decorations and float-control modes included;
//! - the driver keeps `a * b + c` two roundings apart. NVIDIA's driver fuses them without
//!   the decorations (`CUBERT_WGPU_KERNELS=spirv` makes this test fail there); lavapipe
//!   computes a fused multiply-add as a product and a sum, so there it holds either way.
//!
//! Needs a Vulkan device whose servers take strict SPIR-V (lavapipe will do) and `spirv-val`
//! (`scripts/setup-vulkan` installs both; `.ci/run` runs this with `--include-ignored`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::{self, MatmulTiling, StandardKernel};
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{Bytes, CubeCount, CubeDim};
use cubert_wgpu::WgpuRuntime;
use cubert_wgpu::lang::{entry_name, generate};
use cubert_wgpu::spirv::SpirvTarget;
use std::process::Command;

/// Whether wgpu finds no adapter here (as the behaviour suite, the tests then have nothing
/// to run on and say so; `.ci/run` fails without one, in the demo before the tests).
fn no_adapter() -> bool {
    let none = cubert_wgpu::device_count() == 0;
    if none {
        eprintln!("no wgpu adapter on this machine: the test has nothing to run on");
    }
    none
}

/// Every kernel to check, with its cube dim.
fn kernels() -> Vec<(KernelDefinition, (u32, u32, u32))> {
    let dim = |cube_dim: CubeDim| (cube_dim.x, cube_dim.y, cube_dim.z);
    let mut all: Vec<_> = cubert_test_suite::language::kernel_definitions()
        .into_iter()
        .map(|definition| (definition, (32, 2, 2)))
        .collect();
    for kernel in StandardKernel::every() {
        if let Some((definition, cube_dim)) = standard::definition(kernel).unwrap() {
            all.push((definition, dim(cube_dim)));
        }
    }
    // The wgpu backend's matmul tiling (`DEFAULT_MATMUL`) and a unit-per-element one.
    let tilings = [
        cubert_wgpu::DEFAULT_MATMUL,
        MatmulTiling::Unit { rows: 8, cols: 4 },
    ];
    for elem in [ElemType::F32, ElemType::F64, ElemType::I32] {
        for (index, tiling) in tilings.into_iter().enumerate() {
            let name = format!("matmul_{elem}_{index}");
            let (definition, cube_dim) = standard::matmul_definition(elem, tiling, &name).unwrap();
            all.push((definition, dim(cube_dim)));
        }
    }
    all
}

#[test]
#[ignore = "needs a Vulkan device (lavapipe will do) and spirv-val: scripts/setup-vulkan"]
fn every_kernel_is_valid_strict_spirv_for_the_device() {
    if no_adapter() {
        return;
    }
    let target = SpirvTarget::of_device(0)
        .expect("device 0 takes no strict SPIR-V: not Vulkan, or no passthrough shaders");
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (definition, cube_dim) in kernels() {
        let entry = entry_name(definition.name(), definition.id());
        let ir = definition.ir().unwrap();
        for checked_accesses in [false, true] {
            let wgsl_target = target.wgsl_target(checked_accesses);
            // Kernels the device can't run (a type or plane operation it lacks) are refused
            // before any SPIR-V; `wgsl_generate` checks those refusals.
            let Ok(source) = generate(ir, &entry, cube_dim, &wgsl_target) else {
                continue;
            };
            let words = target
                .compile(&source)
                .unwrap_or_else(|error| panic!("{entry}: {error}"));
            let path = dir.path().join(format!("{entry}_{checked_accesses}.spv"));
            let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
            std::fs::write(&path, bytes).unwrap();
            let output = Command::new("spirv-val")
                .arg("--target-env")
                .arg(target.vulkan_env())
                .arg(&path)
                .output()
                .expect("spirv-val is not installed: run scripts/setup-vulkan");
            if !output.status.success() {
                failures.push(format!(
                    "{entry} (checked: {checked_accesses}): {}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            checked += 1;
        }
    }
    assert!(checked > 200, "only {checked} modules checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} modules are invalid:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `a * b + c`, element by element.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn product_plus(a: &Array<f32>, b: &Array<f32>, c: &Array<f32>, out: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    if i < a.len() {
        out[i] = a[i] * b[i] + c[i];
    }
}

#[test]
#[ignore = "needs a Vulkan device whose kernels are strict SPIR-V (lavapipe will do)"]
fn products_and_sums_round_apart_not_fused() {
    if no_adapter() {
        return;
    }
    let client = cubert_wgpu::default_client().unwrap();
    assert!(
        client.info().kernels.contains("SPIR-V"),
        "device 0's kernels are {}",
        client.info().kernels
    );
    // Products of numbers in [1, 2) that round, and minus their rounded value: two
    // roundings give exactly zero; a fused multiply-add gives the product's rounding error.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        1.0 + (rng >> 40) as f32 / (1u64 << 24) as f32
    };
    let n = 1 << 16;
    let a: Vec<f32> = (0..n).map(|_| next()).collect();
    let b: Vec<f32> = (0..n).map(|_| next()).collect();
    let c: Vec<f32> = a.iter().zip(&b).map(|(a, b)| -(a * b)).collect();
    let fused_differs = a
        .iter()
        .zip(&b)
        .zip(&c)
        .filter(|((a, b), c)| a.mul_add(**b, **c) != 0.0)
        .count();
    assert!(
        fused_differs > n / 2,
        "the inputs don't tell fused from unfused"
    );
    let upload = |values: &[f32]| client.create(Bytes::from_elems(values.to_vec())).unwrap();
    let (ha, hb, hc) = (upload(&a), upload(&b), upload(&c));
    let out = upload(&vec![f32::NAN; n]);
    let dim = CubeDim::new_1d(256);
    product_plus::launch::<WgpuRuntime>(
        &client,
        CubeCount::Static((n as u32).div_ceil(256), 1, 1),
        dim,
        &ha,
        &hb,
        &hc,
        &out,
    )
    .unwrap();
    let got = client.read_one(out).unwrap().to_elems::<f32>();
    let fused: Vec<usize> = (0..n).filter(|&i| got[i] != 0.0).collect();
    assert!(
        fused.is_empty(),
        "{} of {n} results are not two roundings' zero, e.g. a = {}, b = {}: {}",
        fused.len(),
        a[fused[0]],
        b[fused[0]],
        got[fused[0]]
    );
}
