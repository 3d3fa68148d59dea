//! The backend-generic behaviour suite on the wgpu backend, on the first adapter wgpu finds.
//! The tests are ignored by default, as CUDA's are: run them with `--include-ignored` where
//! wgpu has an adapter (`scripts/setup-vulkan` installs Mesa's lavapipe, a Vulkan device on
//! the CPU).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_runtime::config::CubertConfig;
use cubert_runtime::{ComputeClient, CubeDim};
use cubert_test_suite::{ClientOptions, TestBackend};
use cubert_wgpu::{
    WgpuDevice, WgpuKernel, WgpuResource, WgpuRuntime, WgpuServer, WgpuServerOptions,
};

/// The wgpu backend, for the suite.
struct Wgpu;

impl TestBackend for Wgpu {
    type R = WgpuRuntime;

    fn fresh_client(options: &ClientOptions) -> Option<ComputeClient<WgpuRuntime>> {
        if options.device_index >= Self::device_count_for_tests() {
            if cubert_wgpu::device_count() == 0 {
                eprintln!("no wgpu adapter on this machine: the test has nothing to run on");
            }
            return None;
        }
        let mut config = CubertConfig::default();
        config.profiling.level = options.profile_level;
        options.apply_runtime(&mut config);
        let server = WgpuServer::with_options(
            WgpuDevice::new(options.device_index),
            &config,
            &WgpuServerOptions {
                memory_limit: options.memory_limit,
                pitch_alignment: options.pitch_alignment,
            },
        )
        .expect("a wgpu server starts");
        Some(ComputeClient::from_server(server, options.mode).expect("a wgpu client starts"))
    }

    fn device_count_for_tests() -> u32 {
        cubert_wgpu::device_count().min(1) as u32
    }

    fn with_cube_dim(kernel: WgpuKernel, cube_dim: CubeDim) -> WgpuKernel {
        kernel.with_cube_dim(cube_dim)
    }

    fn with_shared_memory(kernel: WgpuKernel, bytes: usize) -> WgpuKernel {
        kernel.with_shared_memory(bytes)
    }

    fn resource_len(resource: &WgpuResource) -> u64 {
        resource.size
    }
}

cubert_test_suite::testgen!(
    Wgpu,
    ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"
);
