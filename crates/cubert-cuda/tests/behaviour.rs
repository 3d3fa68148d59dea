//! The backend-generic behaviour suite on the CUDA backend. Every test needs a GPU, so all
//! are `#[ignore = "needs a CUDA device"]`; scripts/gpu-test runs them with
//! `--include-ignored`.
//!
//! Device indices beyond the GPUs present open another server on GPU `index % count`: two
//! servers with different device ids act as two devices, so the multi-device tests run on
//! one GPU too (collectives excepted: they need one GPU per device, and skip otherwise).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cuda::interop::with_device_buffers;
use cubert_cuda::{CudaDevice, CudaKernel, CudaResource, CudaRuntime, CudaServer, device_count};
use cubert_runtime::config::CubertConfig;
use cubert_runtime::memory::ForeignMemory;
use cubert_runtime::{ComputeClient, CubeDim};
use cubert_test_suite::{ClientOptions, TestBackend};
use cudarc::driver::sys;

/// Device ids the fresh clients can have.
const TEST_DEVICES: u32 = 4;

/// The CUDA backend, for the suite.
struct Cuda;

impl TestBackend for Cuda {
    type R = CudaRuntime;

    fn fresh_client(options: &ClientOptions) -> Option<ComputeClient<CudaRuntime>> {
        let gpus = device_count();
        if gpus == 0 || options.device_index >= TEST_DEVICES {
            return None;
        }
        let mut config = CubertConfig::default();
        if let Some(limit) = options.memory_limit {
            config.cuda.memory_limit = limit;
        }
        if let Some(pitch) = options.pitch_alignment {
            config.cuda.pitch_alignment = pitch;
        }
        config.profiling.level = options.profile_level;
        options.apply_runtime(&mut config);
        let device = CudaDevice::new(options.device_index);
        let server = CudaServer::with_ordinal(device, options.device_index % gpus, &config)
            .expect("a CUDA server starts");
        Some(ComputeClient::from_server(server, options.mode).expect("a CUDA client starts"))
    }

    fn device_count_for_tests() -> u32 {
        TEST_DEVICES
    }

    fn collective_device_count() -> u32 {
        // NCCL refuses two ranks on one GPU: only the devices on distinct GPUs can group.
        device_count().min(TEST_DEVICES)
    }

    fn with_cube_dim(kernel: CudaKernel, cube_dim: CubeDim) -> CudaKernel {
        kernel.with_cube_dim(cube_dim)
    }

    fn with_shared_memory(kernel: CudaKernel, bytes: usize) -> CudaKernel {
        kernel.with_shared_memory(bytes)
    }

    fn resource_len(resource: &CudaResource) -> u64 {
        resource.size
    }

    fn foreign_memory(
        client: &ComputeClient<CudaRuntime>,
        size: u64,
        freed: Box<dyn FnOnce() + Send>,
    ) -> Option<ForeignMemory> {
        // `cuMemAlloc` on the runner thread, with the server's context current.
        let address = with_device_buffers(client, &[], move |_, _| {
            let mut ptr: sys::CUdeviceptr = 0;
            // SAFETY: a valid out pointer; the context is current in the closure.
            let result = unsafe { sys::cuMemAlloc_v2(&mut ptr, size as usize) };
            (result == sys::CUresult::CUDA_SUCCESS).then_some(ptr)
        })
        .unwrap()
        .expect("cuMemAlloc");
        Some(ForeignMemory::new(address, size, move || {
            // The release runs on a thread of the server, with its context current.
            // SAFETY: allocated above, freed once, by the one release, after the last use.
            // A failed free leaves `freed` uncalled, which the suite's count catches.
            if unsafe { sys::cuMemFree_v2(address) } == sys::CUresult::CUDA_SUCCESS {
                freed();
            }
        }))
    }
}

cubert_test_suite::testgen!(Cuda, ignore = "needs a CUDA device");
