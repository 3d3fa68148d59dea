//! The backend-generic behaviour suite on the CPU backend, plus the few client entry points
//! that only make sense on the registered CPU devices (`load`, `init`) and the CPU's `info`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cpu::storage::{HOST_ALIGNMENT, HostResource};
use cubert_cpu::{CpuDevice, CpuKernel, CpuRuntime, CpuServer};
use cubert_runtime::config::CubertConfig;
use cubert_runtime::memory::ForeignMemory;
use cubert_runtime::{ComputeClient, CubeDim};
use cubert_test_suite::{ClientOptions, TestBackend};
use std::alloc::Layout;

/// Virtual CPU devices the fresh clients' configuration declares.
const TEST_DEVICES: u32 = 4;

/// The CPU backend, for the suite.
struct Cpu;

fn test_config(options: &ClientOptions) -> CubertConfig {
    let mut config = CubertConfig::default();
    config.cpu.devices = TEST_DEVICES;
    if let Some(limit) = options.memory_limit {
        config.cpu.memory_limit = limit;
    }
    if let Some(pitch) = options.pitch_alignment {
        config.cpu.pitch_alignment = pitch;
    }
    config.profiling.level = options.profile_level;
    options.apply_runtime(&mut config);
    config
}

impl TestBackend for Cpu {
    type R = CpuRuntime;

    fn fresh_client(options: &ClientOptions) -> Option<ComputeClient<CpuRuntime>> {
        if options.device_index >= TEST_DEVICES {
            return None;
        }
        let config = test_config(options);
        let server = CpuServer::new(CpuDevice::new(options.device_index), &config)
            .expect("a CPU server starts");
        Some(ComputeClient::from_server(server, options.mode).expect("a CPU client starts"))
    }

    fn device_count_for_tests() -> u32 {
        TEST_DEVICES
    }

    fn with_cube_dim(kernel: CpuKernel, cube_dim: CubeDim) -> CpuKernel {
        kernel.with_cube_dim(cube_dim)
    }

    fn with_shared_memory(kernel: CpuKernel, bytes: usize) -> CpuKernel {
        kernel.with_shared_memory(bytes)
    }

    fn resource_len(resource: &HostResource) -> u64 {
        resource.len() as u64
    }

    fn foreign_memory(
        _client: &ComputeClient<CpuRuntime>,
        size: u64,
        freed: Box<dyn FnOnce() + Send>,
    ) -> Option<ForeignMemory> {
        let layout = Layout::from_size_align(size as usize, HOST_ALIGNMENT).unwrap();
        // SAFETY: the layout's size is not zero (the suite asks for bytes).
        let address = unsafe { std::alloc::alloc_zeroed(layout) } as usize;
        assert_ne!(address, 0);
        Some(ForeignMemory::new(address as u64, size, move || {
            // SAFETY: allocated above with this layout, freed once, by the one release.
            unsafe { std::alloc::dealloc(address as *mut u8, layout) };
            freed();
        }))
    }
}

cubert_test_suite::testgen!(Cpu);

/// Entry points and information specific to the CPU backend.
mod cpu_only {
    use super::*;
    use cubert_runtime::{Bytes, ElemType, IoError, ServerError, ops};

    /// `load` returns the registered client of CPU device 0: two loads share one device.
    #[test]
    fn load_returns_the_registered_client_of_device_zero() {
        let first = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0)).unwrap();
        let second = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0)).unwrap();
        assert!(first.device_handle().same_device(second.device_handle()));
        let handle = first.create(Bytes::from_elems(vec![1.0f32, 2.0])).unwrap();
        let out = second.empty(8).unwrap();
        ops::add(&second, &handle, &handle, &out, 2, ElemType::F32).unwrap();
        assert_eq!(
            first.read_one(out).unwrap().to_elems::<f32>(),
            vec![2.0, 4.0]
        );
        let handle = first.create_from_slice(&[1, 2, 3]).unwrap();
        let fresh = Cpu::fresh_client(&ClientOptions::new()).unwrap();
        assert!(
            !fresh.device_handle().same_device(first.device_handle()),
            "fresh clients are not the registered one"
        );
        // Same device id, another server: the handle is unknown there, never misread.
        let error = fresh.read_one(handle).unwrap_err();
        assert!(
            matches!(error, ServerError::Io(IoError::NotFound { .. })),
            "{error:?}"
        );
        let missing = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(99));
        assert!(
            matches!(missing, Err(ServerError::Generic { .. })),
            "{missing:?}"
        );
    }

    /// `init` registers a server for a device; `load` then returns it; a second `init` for
    /// the same device is refused.
    #[test]
    fn init_registers_a_server_that_load_returns() {
        let index = 13;
        let mut config = CubertConfig::default();
        config.cpu.devices = 16;
        let device = CpuDevice::new(index);
        let server = CpuServer::new(device, &config).unwrap();
        let registered = ComputeClient::<CpuRuntime>::init(&device, server).unwrap();
        let loaded = ComputeClient::<CpuRuntime>::load(&device).unwrap();
        assert!(
            loaded
                .device_handle()
                .same_device(registered.device_handle())
        );
        let again =
            ComputeClient::<CpuRuntime>::init(&device, CpuServer::new(device, &config).unwrap());
        assert!(
            matches!(again, Err(ServerError::Generic { .. })),
            "{again:?}"
        );
        let handle = registered.create_from_slice(&[5, 6, 7]).unwrap();
        assert_eq!(loaded.read_one(handle).unwrap().to_vec(), vec![5, 6, 7]);
    }

    /// `info` reports the configured device count and memory limit.
    #[test]
    fn info_reports_the_configured_devices_and_memory_limit() {
        let client = Cpu::fresh_client(&ClientOptions::new().with_memory_limit(64 << 20)).unwrap();
        let info = client.info();
        assert_eq!(info.device_count, TEST_DEVICES);
        assert_eq!(info.memory_limit, 64 << 20);
        assert!(info.threads >= 1);
        assert_eq!(client.properties().memory.total_memory, 64 << 20);
        assert_eq!(client.device_count_total(), TEST_DEVICES as usize);
    }
}
