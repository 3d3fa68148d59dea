//! The process's wgpu instance and its adapters: the devices of this backend.
//!
//! One [`wgpu::Instance`] per process (its backends from `WGPU_BACKEND`, all of them by
//! default), created and asked for its adapters once, on first use. Device `i` is the
//! `i`-th adapter of that list, so indices are stable for the life of the process. Software
//! adapters (Mesa's lavapipe, WARP) are listed after the hardware ones, so device 0 is a
//! GPU where there is one.

use cubert_runtime::ServerError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Errors wgpu reports outside any call (validation, a lost device), waiting for the next
/// `flush`, `sync` or read of a server of the device.
pub type DeviceErrors = Arc<Mutex<Vec<String>>>;

/// An open wgpu device, its queue and the errors it reported.
type OpenDevice = (wgpu::Device, wgpu::Queue, DeviceErrors);

/// The device of adapter `index`, opened on first use with `features` and `limits` and
/// shared by every server of that adapter afterwards (as CUDA's servers share a device's
/// primary context): one driver device per adapter, whatever the number of clients.
///
/// # Errors
/// [`ServerError::Generic`] when wgpu refuses the device.
pub fn open_device(
    index: u32,
    adapter: &wgpu::Adapter,
    features: wgpu::Features,
    limits: &wgpu::Limits,
) -> Result<OpenDevice, ServerError> {
    static OPEN: OnceLock<Mutex<HashMap<u32, OpenDevice>>> = OnceLock::new();
    let mut open = OPEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(device) = open.get(&index) {
        return Ok(device.clone());
    }
    let (gpu, queue) =
        cubert_runtime::future::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("cubert"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|error| {
            ServerError::generic(format!("wgpu refused a device on adapter {index}: {error}"))
        })?;
    let errors = DeviceErrors::default();
    let sink = errors.clone();
    gpu.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
        sink.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(error.to_string());
    }));
    let sink = errors.clone();
    gpu.set_device_lost_callback(move |reason, message| {
        sink.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("the wgpu device was lost ({reason:?}): {message}"));
    });
    let device = (gpu, queue, errors);
    open.insert(index, device.clone());
    Ok(device)
}

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
