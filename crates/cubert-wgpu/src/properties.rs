//! What a wgpu adapter can do, as cubert's [`DeviceProperties`] and the WGSL generator's
//! [`WgslTarget`].
//!
//! Limits come from the adapter (the device is requested with the adapter's own limits, not
//! WebGPU's defaults), features from its optional features: `SHADER_INT64` gives `i64`/`u64`,
//! `SHADER_F64` with it `f64`, `SUBGROUP` plane operations. The narrow types (`u8` to
//! `i16`, `bool`, `f16`, `bf16`) are packed in 32-bit words by the generator and run on every
//! adapter. wgpu doesn't report device memory: the total is the host's physical memory (a
//! bound, not a measure), and running out is reported by the driver as it happens.

use crate::lang::WgslTarget;
use cubert_runtime::elem::ElemType;
use cubert_runtime::properties::{
    DeviceProperties, Features, HardwareProperties, MemoryDeviceProperties, TimingMethod,
};

/// The features cubert asks of a device: those of `adapter` it uses.
pub fn wanted_features(adapter: &wgpu::Adapter) -> wgpu::Features {
    let useful = wgpu::Features::SHADER_INT64
        | wgpu::Features::SHADER_F64
        | wgpu::Features::SUBGROUP
        | wgpu::Features::PIPELINE_CACHE
        | crate::timestamps::FEATURES;
    // SPIR-V handed to the driver as it is, where the backend writes it itself (`spirv`:
    // Vulkan only).
    let passthrough = if adapter.get_info().backend == wgpu::Backend::Vulkan {
        wgpu::Features::PASSTHROUGH_SHADERS
    } else {
        wgpu::Features::empty()
    };
    adapter.features() & (useful | passthrough)
}

/// The WGSL target of a device with `features` (checked accesses: see [`WgslTarget`]).
pub fn wgsl_target(features: wgpu::Features, checked: bool) -> WgslTarget {
    WgslTarget {
        shader_f16: false,
        shader_f64: features.contains(wgpu::Features::SHADER_F64),
        shader_int64: features.contains(wgpu::Features::SHADER_INT64),
        subgroups: features.contains(wgpu::Features::SUBGROUP),
        checked,
        vector_lines: 0,
    }
}

/// The element types kernels can use on a device with `features`.
pub fn supported_types(features: wgpu::Features) -> std::collections::BTreeSet<ElemType> {
    let target = wgsl_target(features, true);
    ElemType::ALL
        .into_iter()
        .filter(|elem| match elem {
            ElemType::I64 | ElemType::U64 => target.shader_int64,
            ElemType::F64 => target.shader_int64 && target.shader_f64,
            _ => true,
        })
        .collect()
}

/// The properties of a device made from `adapter` with `limits` and `features`.
pub fn wgpu_properties(
    adapter: &wgpu::Adapter,
    limits: &wgpu::Limits,
    features: wgpu::Features,
) -> DeviceProperties {
    let info = adapter.get_info();
    let max_binding = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    let subgroups = features.contains(wgpu::Features::SUBGROUP);
    // Arrays bind at most this many bytes: a buffer can't be bound past it.
    let max_allocation = max_binding & !255;
    let cubes = limits.max_compute_workgroups_per_dimension;
    DeviceProperties {
        name: format!("{} ({:?})", info.name, info.backend),
        hardware: HardwareProperties {
            load_width: 128,
            plane_size_min: if subgroups { info.subgroup_min_size } else { 1 },
            plane_size_max: if subgroups { info.subgroup_max_size } else { 1 },
            // Two bindings are the kernel's status word and info words.
            max_bindings: limits
                .max_storage_buffers_per_shader_stage
                .saturating_sub(2),
            max_shared_memory_size: limits.max_compute_workgroup_storage_size as usize,
            max_cube_count: (cubes, cubes, cubes),
            max_units_per_cube: limits.max_compute_invocations_per_workgroup,
            max_cube_dim: (
                limits.max_compute_workgroup_size_x,
                limits.max_compute_workgroup_size_y,
                limits.max_compute_workgroup_size_z,
            ),
            // wgpu doesn't say how many multiprocessors a GPU has; a software adapter runs
            // cubes on the host's cores.
            num_streaming_multiprocessors: None,
            num_cpu_cores: (info.device_type == wgpu::DeviceType::Cpu)
                .then(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32)),
            max_vector_size: 4,
            compute_capability: None,
        },
        memory: MemoryDeviceProperties {
            total_memory: physical_memory(),
            max_allocation_size: max_allocation,
            alignment: u64::from(limits.min_storage_buffer_offset_alignment.max(256)),
            pitch_alignment: 1,
        },
        features: Features {
            types: supported_types(features),
            plane: subgroups,
            tma: false,
            graphs: false,
            peer_to_peer: false,
            collectives: false,
            // WGSL lets the driver contract and reassociate float arithmetic, compute `fma`
            // unfused and flush subnormal values. The server sets it where its kernels are
            // strict SPIR-V instead (`spirv::SpirvTarget::strict_float_math`). (The
            // transcendental functions are cubert's own, `lang::float32` and
            // `lang::float64`, within a few ulps of the CPU's either way.)
            strict_float_math: false,
            // In software on f64 arithmetic (`lang::float64`), wherever f64 exists.
            f64_transcendentals: supported_types(features).contains(&ElemType::F64),
            // A wgpu buffer can't wrap an address allocated elsewhere.
            memory_import: false,
            plane_mma: false,
            plane_mma_fp8: false,
            plane_group_mma: false,
        },
        // Timestamp queries where the adapter has them (see `timestamps`).
        timing_method: if features.contains(crate::timestamps::FEATURES) {
            TimingMethod::Device
        } else {
            TimingMethod::System
        },
    }
}

/// Physical memory of the machine in bytes (`/proc/meminfo`), or 8 GiB if unknown.
fn physical_memory() -> u64 {
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
