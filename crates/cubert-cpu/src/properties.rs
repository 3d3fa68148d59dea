//! The properties of a virtual CPU device, from the host and the `[cpu]` config.

use cubert_runtime::config::CpuConfig;
use cubert_runtime::elem::ElemType;
use cubert_runtime::properties::{
    DeviceProperties, Features, HardwareProperties, MemoryDeviceProperties, TimingMethod,
};

/// Physical memory of the machine in bytes (`/proc/meminfo`), or 8 GiB if unknown.
pub fn physical_memory() -> u64 {
    const FALLBACK: u64 = 8 << 30;
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("MemTotal:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(FALLBACK)
}

/// Worker threads for `config`: the configured count, or one per available core.
pub fn worker_threads(config: &CpuConfig) -> u32 {
    if config.threads > 0 {
        return config.threads;
    }
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Memory a device may hold for `config`: the configured limit, or physical memory.
pub fn memory_limit(config: &CpuConfig) -> u64 {
    if config.memory_limit > 0 {
        config.memory_limit
    } else {
        physical_memory()
    }
}

/// The properties of CPU device `index` under `config`.
pub fn cpu_properties(index: u32, config: &CpuConfig) -> DeviceProperties {
    let threads = worker_threads(config);
    let memory = memory_limit(config);
    DeviceProperties {
        name: format!("CPU device {index} ({threads} worker threads)"),
        hardware: HardwareProperties {
            load_width: 256,
            // Kernels of the language run planes of 32 units (`lang::native::PLANE_DIM`).
            plane_size_min: cubert_lang::native::PLANE_DIM,
            plane_size_max: cubert_lang::native::PLANE_DIM,
            max_bindings: 64,
            max_shared_memory_size: config.max_shared_memory as usize,
            max_cube_count: (i32::MAX as u32, 65_535, 65_535),
            max_units_per_cube: 1024,
            max_cube_dim: (1024, 1024, 64),
            num_streaming_multiprocessors: None,
            num_cpu_cores: Some(threads),
            max_vector_size: 8,
            compute_capability: None,
        },
        memory: MemoryDeviceProperties {
            total_memory: memory,
            max_allocation_size: memory,
            alignment: crate::storage::HOST_ALIGNMENT as u64,
            pitch_alignment: config.pitch_alignment.max(1),
        },
        features: Features {
            types: ElemType::ALL.into_iter().collect(),
            // Plane operations of the language (units of a cube run as coroutines).
            plane: true,
            tma: false,
            graphs: false,
            // Virtual devices share the process's memory: `to_client` copies directly.
            peer_to_peer: true,
            // All-reduce, send/recv and process groups between CPU devices.
            collectives: true,
            // Kernels are Rust, which rounds every operation as written.
            strict_float_math: true,
            f64_transcendentals: true,
            // A CPU device's memory is host memory: any host range can be adopted.
            memory_import: true,
            // Emulated: the plane's fragments are gathered and multiplied in f32.
            plane_mma: true,
            plane_mma_fp8: true,
            plane_group_mma: true,
        },
        timing_method: TimingMethod::System,
    }
}
