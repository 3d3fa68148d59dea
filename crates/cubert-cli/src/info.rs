//! `cubert info`: the backends, every device with its properties and memory usage, and
//! where the configuration came from.

use crate::backend::Backend;
use crate::error::CliResult;
use cubert::config::{DeviceHandleMode, global_config, load_config};
use cubert::memory::format_bytes;
use cubert::properties::{DeviceProperties, TimingMethod};
use cubert::{ComputeClient, CpuDevice, CpuRuntime, Runtime, StreamPolicy, StreamPriority};
use std::process::ExitCode;

/// Prints everything.
///
/// # Errors
/// A usage error for an unknown configured backend; the CPU device's start error.
pub fn run(requested: Option<Backend>) -> CliResult<ExitCode> {
    let selected = Backend::select(requested)?;
    outln!("cubert {}", env!("CARGO_PKG_VERSION"));
    outln!();
    outln!("backends:");
    for backend in Backend::ALL {
        let mark = if backend == selected {
            " (selected)"
        } else {
            ""
        };
        outln!("  {}{mark}", backend.name());
    }
    outln!();
    print_config(requested);
    outln!();
    print_cpu_devices()?;
    outln!();
    print_cuda_devices();
    outln!();
    print_wgpu_devices();
    Ok(ExitCode::SUCCESS)
}

fn print_config(requested: Option<Backend>) {
    let loaded = load_config();
    let config = global_config();
    outln!("configuration:");
    match &loaded.file {
        Some(path) => outln!("  file                {}", path.display()),
        None => {
            let cwd = std::env::current_dir()
                .map(|dir| dir.display().to_string())
                .unwrap_or_else(|_| "the working directory".into());
            outln!(
                "  file                none (no {} in {cwd} or above, CUBERT_CONFIG unset): defaults",
                cubert::config::CONFIG_FILE_NAME
            );
        }
    }
    // `vars_os`: a variable that isn't UTF-8 must not take `info` down.
    let overrides: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| name.starts_with("CUBERT_"))
        .collect();
    if overrides.is_empty() {
        outln!("  environment         no CUBERT_* variables");
    } else {
        outln!("  environment         {}", overrides.join(", "));
    }
    if loaded.warnings.is_empty() {
        outln!("  warnings            none");
    } else {
        for warning in &loaded.warnings {
            outln!("  warning             {warning}");
        }
    }
    let origin = if requested.is_some() {
        "--backend"
    } else {
        "configuration"
    };
    let backend = requested.map_or_else(|| config.runtime.backend.clone(), |b| b.to_string());
    outln!("  backend             {backend} (from {origin})");
    let mode = match config.runtime.device_handle {
        DeviceHandleMode::Threaded => "threaded (one runner thread per device)",
        DeviceHandleMode::Inline => "inline (work runs on the calling thread)",
    };
    outln!("  device handle mode  {mode}");
    outln!(
        "  profiling level     {}",
        spelling(&config.profiling.level)
    );
    outln!("  logging level       {}", config.logging.level);
    outln!(
        "  bounds check        {}",
        spelling(&config.compilation.bounds_check)
    );
}

/// A configuration choice as `cubert.toml` spells it (`disabled`, `auto`), not as Rust
/// names it.
fn spelling<T: serde::Serialize + std::fmt::Debug>(choice: &T) -> String {
    match serde_json::to_value(choice) {
        Ok(serde_json::Value::String(word)) => word,
        _ => format!("{choice:?}"),
    }
}

/// The wgpu backend: its adapters, then each device.
fn print_wgpu_devices() {
    let adapters = cubert::wgpu::adapters();
    if adapters.is_empty() {
        outln!("wgpu backend: no adapter (no Vulkan, Metal or DX12 driver found)");
        return;
    }
    outln!("wgpu backend: {} adapter(s)", adapters.len());
    for index in 0..adapters.len() as u32 {
        match cubert::WgpuRuntime::client(&cubert::WgpuDevice::new(index)) {
            Ok(client) => {
                let info = client.info();
                outln!();
                outln!(
                    "  adapter {index}: {} via {}{}, driver {}",
                    info.adapter,
                    info.api,
                    if info.software { " (software)" } else { "" },
                    info.driver
                );
                outln!("  kernels             {}", info.kernels);
                if let Some(path) = &info.pipeline_cache {
                    outln!("  pipeline cache      {}", path.display());
                }
                print_device(&client);
            }
            Err(error) => outln!("  device {index}: can't start: {error}"),
        }
    }
}

/// The CUDA backend: whether a device was found and, if not, why; then each device.
fn print_cuda_devices() {
    let status = cubert::cuda::driver_status();
    outln!("cuda backend: {}", status.describe());
    match cubert::cuda::nvrtc_version() {
        Ok((major, minor)) => outln!("  nvrtc               {major}.{minor}"),
        Err(reason) => outln!("  nvrtc               {reason}"),
    }
    match cubert::cuda::nccl::nccl_status() {
        Ok(version) => outln!("  nccl                {version}"),
        Err(reason) => outln!("  nccl                {reason}"),
    }
    if !status.is_available() {
        return;
    }
    for index in 0..cubert::cuda::device_count() {
        match cubert::CudaRuntime::client(&cubert::CudaDevice::new(index)) {
            Ok(client) => {
                outln!();
                print_device(&client);
            }
            Err(error) => outln!("  device {index}: can't start: {error}"),
        }
    }
}

fn print_cpu_devices() -> CliResult<()> {
    let first = CpuRuntime::client(&CpuDevice::new(0))?;
    let count = first.device_count_total();
    let info = first.info();
    outln!(
        "cpu backend: {count} virtual device(s), {} worker thread(s) each, memory limit {} each",
        info.threads,
        format_bytes(info.memory_limit)
    );
    for index in 0..count {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let client = CpuRuntime::client(&CpuDevice::new(index))?;
        outln!();
        print_device(&client);
    }
    Ok(())
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

fn print_device<R: Runtime>(client: &ComputeClient<R>) {
    let properties: &DeviceProperties = client.properties();
    let hardware = &properties.hardware;
    let memory = &properties.memory;
    let features = &properties.features;
    outln!("{:?}: {}", client.device_id(), properties.name);
    let cores = match (
        hardware.num_cpu_cores,
        hardware.num_streaming_multiprocessors,
    ) {
        (Some(cores), _) => format!("{cores} CPU core(s)"),
        (None, Some(sms)) => format!("{sms} streaming multiprocessor(s)"),
        (None, None) => "unknown".into(),
    };
    outln!("  compute units       {cores}");
    if let Some((major, minor)) = hardware.compute_capability {
        outln!("  compute capability  {major}.{minor}");
    }
    outln!(
        "  memory              {} total, largest allocation {}, alignment {} B, pitch alignment {} B",
        format_bytes(memory.total_memory),
        format_bytes(memory.max_allocation_size),
        memory.alignment,
        memory.pitch_alignment
    );
    let (dx, dy, dz) = hardware.max_cube_dim;
    outln!("  max cube dim        {dx} × {dy} × {dz}");
    let (cx, cy, cz) = hardware.max_cube_count;
    outln!("  max cube count      {cx} × {cy} × {cz}");
    outln!("  max units per cube  {}", hardware.max_units_per_cube);
    outln!(
        "  shared memory       {} per cube",
        format_bytes(hardware.max_shared_memory_size as u64)
    );
    outln!("  max bindings        {}", hardware.max_bindings);
    outln!(
        "  plane size          {}..{}",
        hardware.plane_size_min,
        hardware.plane_size_max
    );
    outln!(
        "  loads               {} bits wide, vectors of up to {} elements",
        hardware.load_width,
        hardware.max_vector_size
    );
    outln!(
        "  features            plane {}, plane mma {} (fp8 {}), plane group mma {}, tma {}, \
         graphs {}, peer-to-peer {}, collectives {}, memory import {}",
        yes_no(features.plane),
        yes_no(features.plane_mma),
        yes_no(features.plane_mma_fp8),
        yes_no(features.plane_group_mma),
        yes_no(features.tma),
        yes_no(features.graphs),
        yes_no(features.peer_to_peer),
        yes_no(features.collectives),
        yes_no(features.memory_import)
    );
    outln!(
        "  float math          strict {}, f64 transcendentals {}",
        yes_no(features.strict_float_math),
        yes_no(features.f64_transcendentals)
    );
    let types: Vec<&str> = features.types.iter().map(|t| t.name()).collect();
    outln!("  element types       {}", types.join(" "));
    let timing = match properties.timing_method {
        TimingMethod::System => "system (host clock around synchronized work)",
        TimingMethod::Device => "device (event timestamps)",
    };
    outln!("  timing              {timing}");
    outln!(
        "  device handle       {}",
        if client.is_blocking() {
            "inline (blocking)"
        } else {
            "threaded (asynchronous)"
        }
    );
    let streams = client.stream_settings();
    let queues = if R::name() == "cuda" {
        format!(
            "up to {} CUDA streams at {} priority",
            streams.max_streams,
            match streams.priority {
                StreamPriority::Normal => "normal",
                StreamPriority::High => "high",
            }
        )
    } else {
        "one queue per device".to_string()
    };
    let policy = match streams.policy {
        StreamPolicy::PerThread => "per_thread",
        StreamPolicy::PerTask => "per_task",
        StreamPolicy::Single => "single",
    };
    outln!("  streams             policy {policy}, {queues}");
    match client.memory_usage() {
        Ok(usage) => outln!("  memory usage        {usage}"),
        Err(error) => outln!("  memory usage        unavailable: {error}"),
    }
}
