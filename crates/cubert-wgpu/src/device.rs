//! wgpu devices: what identifies one and what its client can tell about it.

use cubert_runtime::{Device, DeviceId};

/// The backend's name (`Runtime::name` of `WgpuRuntime`).
pub(crate) const BACKEND_NAME: &str = "wgpu";

/// The `type_id` of wgpu devices.
pub const WGPU_DEVICE_TYPE: u16 = 2;

/// A device of wgpu: adapter `index` of the process's list (see [`crate::adapters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WgpuDevice {
    /// Index among the adapters wgpu lists (hardware first).
    pub index: u32,
}

impl WgpuDevice {
    /// Adapter number `index`.
    pub const fn new(index: u32) -> Self {
        Self { index }
    }
}

impl Device for WgpuDevice {
    fn to_id(&self) -> DeviceId {
        DeviceId::new(WGPU_DEVICE_TYPE, self.index)
    }

    fn from_id(id: DeviceId) -> Self {
        Self { index: id.index_id }
    }
}

/// What a wgpu client can tell about its adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgpuInfo {
    /// The adapter's name (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub adapter: String,
    /// The graphics API wgpu drives it through (`Vulkan`, `Metal`, `Dx12`, `Gl`).
    pub api: String,
    /// The driver and its version, as the adapter reports them.
    pub driver: String,
    /// Whether it is a software rasterizer (lavapipe, WARP).
    pub software: bool,
    /// Number of adapters wgpu lists in this process.
    pub device_count: u32,
    /// The file of the on-disk pipeline cache, where the adapter has one (Vulkan) and the
    /// `[compilation]` disk cache is on.
    pub pipeline_cache: Option<std::path::PathBuf>,
    /// How kernels reach the driver: `WGSL`, or `strict SPIR-V` with the float modes the
    /// device keeps (`crate::spirv`), e.g. `strict SPIR-V (NoContraction; subnormals kept:
    /// f32 f64; signed zeros, infinities, NaNs kept: f32 f64; strict float math)`.
    pub kernels: String,
}
