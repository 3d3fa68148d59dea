//! Device properties read from the CUDA driver's device attributes.

use crate::driver::{DriverFailure, device};
use cubert_runtime::elem::ElemType;
use cubert_runtime::properties::{
    DeviceProperties, Features, HardwareProperties, MemoryDeviceProperties, TimingMethod,
};
use cudarc::driver::sys::{CUdevice, CUdevice_attribute as Attr};

/// Alignment of every device allocation the runtime makes, in bytes.
pub const DEVICE_ALIGNMENT: u64 = 256;

fn attribute(dev: CUdevice, attr: Attr) -> Result<u32, DriverFailure> {
    let value = device::attribute(dev, attr)?;
    Ok(value.max(0) as u32)
}

/// What the runtime needs to know about a device, read from its attributes.
#[derive(Clone, Debug)]
pub struct CudaDeviceInfo {
    /// The runtime's view of the device.
    pub properties: DeviceProperties,
    /// Bytes of L2 cache.
    pub l2_cache_bytes: u32,
}

/// Reads the properties of `dev`.
///
/// # Errors
/// The driver's error.
pub fn read_properties(dev: CUdevice) -> Result<CudaDeviceInfo, DriverFailure> {
    let name = device::name(dev)?;
    let total = device::total_memory(dev)? as u64;
    let major = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let warp = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?;
    let max_threads = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    let block = (
        attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
        attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
        attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
    );
    let grid = (
        attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
        attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
        attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
    );
    let shared_optin = attribute(
        dev,
        Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
    )?;
    let shared_default = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
    let pitch = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)?;
    let l2 = attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
    let mut types: std::collections::BTreeSet<ElemType> = ElemType::ALL.into_iter().collect();
    if major < 8 {
        types.remove(&ElemType::BF16);
    }
    let properties = DeviceProperties {
        name: format!("{name} (sm_{major}{minor})"),
        hardware: HardwareProperties {
            load_width: 128,
            plane_size_min: warp,
            plane_size_max: warp,
            max_bindings: crate::kernel::MAX_BUFFERS as u32,
            max_shared_memory_size: shared_optin.max(shared_default) as usize,
            max_cube_count: grid,
            max_units_per_cube: max_threads,
            max_cube_dim: block,
            num_streaming_multiprocessors: Some(sms),
            num_cpu_cores: None,
            max_vector_size: 4,
            compute_capability: Some((major, minor)),
        },
        memory: MemoryDeviceProperties {
            total_memory: total,
            max_allocation_size: total,
            alignment: DEVICE_ALIGNMENT,
            pitch_alignment: u64::from(pitch.max(16)),
        },
        features: Features {
            types,
            plane: true,
            tma: major >= 9,
            graphs: true,
            peer_to_peer: reaches_a_peer(dev),
            collectives: crate::nccl::nccl_status().is_ok(),
            // NVRTC compiles language kernels with `--fmad=false`.
            strict_float_math: true,
            f64_transcendentals: true,
            // The storage adopts device pointers checked with cuPointerGetAttribute.
            memory_import: true,
            // `mma.sync.aligned.m16n8k16` (bf16/f16) and `m16n8k8` (tf32): sm_80 and later;
            // `m16n8k32` on e4m3/e5m2: sm_89 and later.
            plane_mma: major >= 8,
            plane_mma_fp8: (major, minor) >= (8, 9),
            plane_group_mma: (major, minor) == (9, 0),
        },
        timing_method: TimingMethod::Device,
    };
    Ok(CudaDeviceInfo {
        properties,
        l2_cache_bytes: l2,
    })
}

/// Whether GPU `dev` can copy directly to or from another GPU of this machine
/// (`cuDeviceCanAccessPeer` with any other device).
fn reaches_a_peer(dev: CUdevice) -> bool {
    let count = crate::device_count();
    (0..count).any(|ordinal| match device::get(ordinal) {
        Ok(other) if other != dev => device::can_access_peer(dev, other).unwrap_or(false),
        _ => false,
    })
}
