//! CPU devices: what identifies one and what its client can tell about the backend.
//!
//! The CPU backend offers `[cpu] devices` virtual devices (default 1). Each has its own
//! server, memory pools and worker threads, so code written for several GPUs (`to_client`,
//! collectives) runs and is tested on any machine. The runtime that ties devices to their
//! servers is in `runtime`; this module uses neither, so the server and the kernels can use
//! it.

use cubert_runtime::{Device, DeviceId};

/// The backend's name (`Runtime::name` of `CpuRuntime`), for messages.
pub(crate) const BACKEND_NAME: &str = "cpu";

/// The `type_id` of CPU devices.
pub const CPU_DEVICE_TYPE: u16 = 0;

/// A virtual CPU device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuDevice {
    /// Index among the virtual CPU devices.
    pub index: u32,
}

impl CpuDevice {
    /// Virtual device number `index`.
    pub const fn new(index: u32) -> Self {
        Self { index }
    }
}

impl Device for CpuDevice {
    fn to_id(&self) -> DeviceId {
        DeviceId::new(CPU_DEVICE_TYPE, self.index)
    }

    fn from_id(id: DeviceId) -> Self {
        Self { index: id.index_id }
    }
}

/// What a CPU client can tell about its backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuInfo {
    /// Number of virtual CPU devices configured.
    pub device_count: u32,
    /// Worker threads of this device.
    pub threads: u32,
    /// Memory this device may hold, in bytes.
    pub memory_limit: u64,
}
