//! The kernel language's differential tests (`cubert_test_suite::differential`) on the
//! first wgpu adapter: the CPU and wgpu agree on random inputs and launch shapes. Ignored
//! by default, like the behaviour suite: run them with `--include-ignored` where wgpu has
//! an adapter (`scripts/setup-vulkan` installs Mesa's lavapipe).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cpu::{CpuDevice, CpuRuntime};
use cubert_runtime::{ComputeClient, Runtime};
use cubert_test_suite::differential;
use cubert_wgpu::{WgpuDevice, WgpuRuntime};

/// CPU device 0 and wgpu device 0.
fn cpu_and_wgpu() -> (ComputeClient<CpuRuntime>, ComputeClient<WgpuRuntime>) {
    (
        CpuRuntime::client(&CpuDevice::new(0)).unwrap(),
        WgpuRuntime::client(&WgpuDevice::new(0)).expect("a wgpu adapter"),
    )
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn integer_kernels_agree_bit_for_bit() {
    let (cpu, wgpu) = cpu_and_wgpu();
    differential::integer_kernels_agree_bit_for_bit(&cpu, &wgpu);
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn float_operations_agree_exactly_or_within_4_ulps() {
    let (cpu, wgpu) = cpu_and_wgpu();
    differential::float_operations_agree_exactly_or_within_4_ulps(&cpu, &wgpu);
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn casts_agree_bit_for_bit() {
    let (cpu, wgpu) = cpu_and_wgpu();
    differential::casts_agree_bit_for_bit(&cpu, &wgpu);
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn plane_sums_agree_bit_for_bit() {
    let (cpu, wgpu) = cpu_and_wgpu();
    differential::plane_sums_agree_bit_for_bit(&cpu, &wgpu);
}
