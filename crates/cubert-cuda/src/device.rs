//! CUDA devices: the device type (an ordinal), what a client can tell about its backend
//! ([`CudaInfo`]), and how many devices there are. The runtime naming the server and the
//! device types together is in `runtime`.

use cubert_runtime::{Device, DeviceId};

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
    /// peer_copy`).
    pub peer_copy: bool,
}

/// Number of CUDA devices (0 without a driver).
pub fn device_count() -> u32 {
    match crate::driver::driver_status() {
        crate::driver::DriverStatus::Available { devices, .. } => *devices,
        _ => 0,
    }
}
