//! What a device is and can do: limits, memory, features, how it measures time.
//!
//! Backends fill [`DeviceProperties`] when a server starts (the CPU from the host and the
//! config, CUDA from device attributes). Launch validation, layout policies, `CubeDim` and
//! `CubeCountSelection` helpers and the autotune cache key all read them.

use crate::elem::ElemType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How a backend measures the duration of profiled work.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimingMethod {
    /// Host clock around synchronized work.
    System,
    /// Device timestamps (events).
    Device,
}

/// Limits of the compute hardware.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct HardwareProperties {
    /// Widest load in bits a unit can do in one instruction.
    pub load_width: u32,
    /// Smallest plane (warp) size.
    pub plane_size_min: u32,
    /// Largest plane (warp) size.
    pub plane_size_max: u32,
    /// Most buffers one launch can bind.
    pub max_bindings: u32,
    /// Most shared memory one cube can use, in bytes.
    pub max_shared_memory_size: usize,
    /// Most cubes along x, y, z.
    pub max_cube_count: (u32, u32, u32),
    /// Most units in one cube.
    pub max_units_per_cube: u32,
    /// Most units along x, y, z of one cube.
    pub max_cube_dim: (u32, u32, u32),
    /// Streaming multiprocessors (GPUs).
    pub num_streaming_multiprocessors: Option<u32>,
    /// Cores running cubes (CPUs).
    pub num_cpu_cores: Option<u32>,
    /// Widest vector (elements) worth using.
    pub max_vector_size: usize,
    /// Compute capability (major, minor) on NVIDIA GPUs.
    pub compute_capability: Option<(u32, u32)>,
}

/// Memory of the device.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct MemoryDeviceProperties {
    /// Total memory of the device in bytes.
    pub total_memory: u64,
    /// Largest single allocation in bytes.
    pub max_allocation_size: u64,
    /// Alignment of every allocation in bytes.
    pub alignment: u64,
    /// Row alignment of pitched (optimized) tensors in bytes.
    pub pitch_alignment: u64,
}

/// Optional capabilities.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Features {
    /// Element types kernels can use.
    pub types: BTreeSet<ElemType>,
    /// Plane (warp) operations.
    pub plane: bool,
    /// Tensor memory accelerator (bulk tensor copies).
    pub tma: bool,
    /// Capturing launches into a graph and replaying it.
    pub graphs: bool,
    /// Direct copies between devices.
    pub peer_to_peer: bool,
    /// Collective operations (all-reduce, send/recv).
    pub collectives: bool,
    /// Float math of kernels follows the language's strict rules: every operation rounds as
    /// written (`a * b + c` is two roundings, never contracted into a fused multiply-add;
    /// `(a + b) + c` is never reassociated), `mul_add` rounds once, and the transcendental
    /// functions are within 4 ulps of Rust's `std`. False where the shading language lets
    /// the driver contract, reassociate, flush subnormal values and compute `fma` unfused
    /// (wgpu on Metal and DX12, and on Vulkan devices that don't keep subnormal values or
    /// whose `fma` rounds twice, such as lavapipe): results then differ from the CPU's in
    /// the last bits, and `mul_add` may round twice. The transcendental functions are within a few ulps of `std`
    /// everywhere either way (wgpu computes them in software).
    pub strict_float_math: bool,
    /// Kernels can call the transcendental functions (`exp`, `ln`, `sin`, `powf`, ...) on
    /// `f64`. True wherever `f64` exists: wgpu's shading languages have them for 32-bit
    /// floats only, so the wgpu backend computes them in software. Where false, such a
    /// kernel fails to build with an `Unsupported` error.
    pub f64_transcendentals: bool,
    /// Memory allocated outside cubert can become a handle
    /// (`ComputeClient::import_memory`): device memory of the client's device on CUDA, host
    /// memory on the CPU. False on wgpu, whose API can't wrap a foreign address in a buffer.
    pub memory_import: bool,
    /// Kernels can call `plane_mma`, the plane's matrix multiply-accumulate of `bf16`,
    /// `f16` and `f32` (as TF32) fragments into `f32` (tensor cores), and load fragments
    /// with `plane_load_a`/`plane_load_b`: CUDA devices of compute capability 8.0 or later,
    /// and the CPU (emulated, exactly, as a reference). False on wgpu. Where it is false a
    /// kernel using them fails to build with `LaunchError::Unsupported`.
    pub plane_mma: bool,
    /// Kernels can call `plane_mma` on `e4m3`/`e5m2` fragments (and load them): CUDA
    /// devices of compute capability 8.9 or later, and the CPU (emulated). Where it is
    /// false such a kernel fails to build with `LaunchError::Unsupported`.
    pub plane_mma_fp8: bool,
    /// Kernels can call `plane_group_mma`, the plane group's multiply-accumulate of
    /// `bf16`/`f16` tiles in shared memory into `f32` (Hopper's `wgmma`): CUDA devices of
    /// compute capability 9.0 exactly (`wgmma` is sm_90a's; later architectures have
    /// other instructions), and the CPU (emulated, exactly). Where it is false a kernel
    /// using it fails to build with `LaunchError::Unsupported`.
    pub plane_group_mma: bool,
}

impl Features {
    /// Whether kernels can use `elem`.
    pub fn supports_type(&self, elem: ElemType) -> bool {
        self.types.contains(&elem)
    }
}

/// Everything the runtime knows about a device.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct DeviceProperties {
    /// Human-readable device name.
    pub name: String,
    /// Compute limits.
    pub hardware: HardwareProperties,
    /// Memory.
    pub memory: MemoryDeviceProperties,
    /// Optional capabilities.
    pub features: Features,
    /// How durations are measured.
    pub timing_method: TimingMethod,
}

impl DeviceProperties {
    /// A stable 64-bit checksum of the properties (FNV-1a over their JSON form), identical
    /// across processes and compiler versions: a key for on-disk caches.
    pub fn checksum(&self) -> u64 {
        let text = serde_json::to_string(self).unwrap_or_default();
        fnv1a(text.as_bytes())
    }
}

/// FNV-1a 64-bit hash of `bytes` (the `fnv` crate's): stable across processes and Rust
/// versions, unlike `std`'s hashers.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_known_vector() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
