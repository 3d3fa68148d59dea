//! CUDA devices and the CUDA runtime.

use crate::server::CudaServer;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::DeviceFingerprint;
use cubert_runtime::{Device, DeviceId, LaunchError, Runtime};

/// The `type_id` of CUDA devices.
pub const CUDA_DEVICE_TYPE: u16 = 1;

/// A CUDA device, by ordinal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CudaDevice {
    /// The device ordinal (as `nvidia-smi` numbers them, unless `CUDA_VISIBLE_DEVICES` says
    /// otherwise).
    pub index: u32,
}

impl CudaDevice {
    /// Device number `index`.
    pub const fn new(index: u32) -> Self {
        Self { index }
    }
}

impl Device for CudaDevice {
    fn to_id(&self) -> DeviceId {
        DeviceId::new(CUDA_DEVICE_TYPE, self.index)
    }

    fn from_id(id: DeviceId) -> Self {
        Self { index: id.index_id }
    }
}

/// What a CUDA client can tell about its backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaInfo {
    /// The device ordinal.
    pub ordinal: u32,
    /// The driver, as `driver_status` describes it.
    pub driver: String,
    /// NVRTC version, if NVRTC was found.
    pub nvrtc: Option<(i32, i32)>,
    /// Bytes of L2 cache.
    pub l2_cache_bytes: u32,
    /// Whether `to_client` may copy directly between this GPU and its peers (`[cuda]
    /// peer_copy`, off with `[memory] paged`).
    pub peer_copy: bool,
}

/// The CUDA runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaRuntime;

/// Number of CUDA devices (0 without a driver).
pub fn device_count() -> u32 {
    match crate::driver::driver_status() {
        crate::driver::DriverStatus::Available { devices, .. } => *devices,
        _ => 0,
    }
}

impl Runtime for CudaRuntime {
    type Server = CudaServer;
    type Device = CudaDevice;

    fn name() -> &'static str {
        "cuda"
    }

    fn enumerate_devices(type_id: u16, _info: &CudaInfo) -> Vec<DeviceId> {
        if type_id != CUDA_DEVICE_TYPE {
            return Vec::new();
        }
        (0..device_count())
            .map(|index| DeviceId::new(CUDA_DEVICE_TYPE, index))
            .collect()
    }

    fn enumerate_all_devices(info: &CudaInfo) -> Vec<DeviceId> {
        Self::enumerate_devices(CUDA_DEVICE_TYPE, info)
    }

    fn standard_kernel(kernel: StandardKernel) -> Result<crate::CudaKernel, LaunchError> {
        crate::kernels::standard_kernel(kernel)
    }

    fn standard_variants(
        kernel: StandardKernel,
        properties: &DeviceProperties,
    ) -> Vec<StandardVariant> {
        crate::kernels::standard_variants(kernel, properties)
    }

    fn standard_kernel_variant(
        kernel: StandardKernel,
        variant: &str,
    ) -> Result<crate::CudaKernel, LaunchError> {
        crate::kernels::variant_kernel(kernel, variant)
    }

    /// The properties (the name carries the GPU model; identical GPUs share results), the
    /// driver and NVRTC versions, and the backend's version (its kernels' code).
    fn tune_fingerprint(properties: &DeviceProperties, info: &CudaInfo) -> DeviceFingerprint {
        let driver = match crate::driver::driver_status() {
            crate::driver::DriverStatus::Available { version, .. } => {
                format!("driver {}.{}", version / 1000, (version % 1000) / 10)
            }
            other => other.describe(),
        };
        let nvrtc = info
            .nvrtc
            .map(|(major, minor)| format!(", nvrtc {major}.{minor}"))
            .unwrap_or_default();
        DeviceFingerprint::new(
            Self::name(),
            properties.checksum(),
            format!("{driver}{nvrtc}, cubert-cuda {}", env!("CARGO_PKG_VERSION")),
        )
    }
}
