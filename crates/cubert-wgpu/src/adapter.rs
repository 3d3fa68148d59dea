//! The process's wgpu instance and its adapters: the devices of this backend.
//!
//! One [`wgpu::Instance`] per process (its backends from `WGPU_BACKEND`, all of them by
//! default), created and asked for its adapters once, on first use. Device `i` is the
//! `i`-th adapter of that list, so indices are stable for the life of the process. Software
//! adapters (Mesa's lavapipe, WARP) are listed after the hardware ones, so device 0 is a
//! GPU where there is one.

use std::sync::OnceLock;

/// The adapters of the process, in device order.
pub fn adapters() -> &'static [wgpu::Adapter] {
    static ADAPTERS: OnceLock<Vec<wgpu::Adapter>> = OnceLock::new();
    ADAPTERS.get_or_init(|| {
        let instance = instance();
        let mut adapters: Vec<wgpu::Adapter> = cubert_runtime::future::block_on(
            instance.enumerate_adapters(wgpu::Backends::all().with_env()),
        )
        .into_iter()
        .filter(|adapter| {
            adapter.get_downlevel_capabilities().is_webgpu_compliant() || compute_capable(adapter)
        })
        .collect();
        // Hardware first; then by backend order (Vulkan, Metal, DX12, GL).
        adapters.sort_by_key(|adapter| {
            let info = adapter.get_info();
            (
                matches!(
                    info.device_type,
                    wgpu::DeviceType::Cpu | wgpu::DeviceType::Other
                ),
                info.backend as u8,
            )
        });
        adapters
    })
}

/// The process's instance.
pub fn instance() -> &'static wgpu::Instance {
    static INSTANCE: OnceLock<wgpu::Instance> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
    })
}

/// Whether `adapter` can run compute shaders.
fn compute_capable(adapter: &wgpu::Adapter) -> bool {
    adapter
        .get_downlevel_capabilities()
        .flags
        .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
}

/// How many adapters (devices) wgpu finds.
pub fn device_count() -> usize {
    adapters().len()
}
