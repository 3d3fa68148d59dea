//! Dry runs: a workload's allocations and launches, run against a device that doesn't
//! exist, to learn how much memory it would need there.
//!
//! [`DryRunRuntime`] is a backend like the CPU's or CUDA's: code generic over [`Runtime`]
//! (a model's training step, a tensor library's op) runs on it unchanged. Its device
//! mirrors a [`DryRunTarget`]: the memory size, alignment and limits of a real device (or of
//! a live client's, [`DryRunTarget::like`]), its memory-pool options, and whether its large
//! requests go to pools of mapped pages (CUDA's growable pool). Then:
//!
//! - **allocations** go through the real memory manager over [`VirtualStorage`], which
//!   holds no memory: the pools split, reuse, grow and give back exactly as on the target,
//!   so `client.memory_report()` (or [`report`]) gives the peak reserved and in-use bytes
//!   the target would see, and an allocation past the target's memory fails with
//!   `IoError::OutOfMemory` at the next sync, as it would there;
//! - **launches, writes, copies, reads** are checked like on a device (every handle is
//!   resolved: a released or foreign one fails; launch limits are the target's) and
//!   counted, not run. Kernels of the language are expanded, not compiled.
//!
//! **The promise and the hazard.** Nothing touches a device, and memory figures are the
//! target's. But no kernel runs, so every byte read back is zero: a workload whose shapes
//! or control flow depend on computed values (a data-dependent output size, an early stop
//! on a loss) takes another path under a dry run than on the device. Feed it the shapes,
//! not the data.
//!
//! ```
//! use cubert_runtime::dry_run::{self, DryRunTarget};
//! use cubert_runtime::{ElemType, ops};
//! // A workload written once for every backend.
//! fn step<R: cubert_runtime::Runtime>(
//!     client: &cubert_runtime::ComputeClient<R>,
//!     n: usize,
//! ) -> Result<(), Box<dyn std::error::Error>> {
//!     let a = client.empty(n * 4)?;
//!     let b = client.empty(n * 4)?;
//!     ops::add(client, &a, &a, &b, n, ElemType::F32)?;
//!     client.sync()?;
//!     Ok(())
//! }
//! let client = dry_run::client(DryRunTarget::with_memory(80 << 30))?;
//! step(&client, 1 << 28)?; // 1 GiB per buffer, on no device
//! let report = dry_run::report(&client)?;
//! assert!(report.memory.peak_bytes_in_use >= 2 << 30);
//! assert_eq!((report.launches, report.bytes_written), (1, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod kernel;
mod server;
mod storage;

pub use kernel::DryRunKernel;
pub use server::DryRunServer;
pub use storage::{VirtualRange, VirtualStorage};

use crate::client::ComputeClient;
use crate::config::DeviceHandleMode;
use crate::device::{Device, DeviceId};
use crate::elem::ElemType;
use crate::error::{LaunchError, ServerError};
use crate::kernel::CubeDim;
use crate::memory::{MemoryOptions, MemoryReport};
use crate::properties::{
    DeviceProperties, Features, HardwareProperties, MemoryDeviceProperties, TimingMethod,
};
use crate::runtime::Runtime;
use std::sync::atomic::{AtomicU32, Ordering};

/// The `type_id` of dry-run devices.
pub const DRY_RUN_DEVICE_TYPE: u16 = 3;

/// The page of mapped-memory pools on NVIDIA GPUs (the driver's allocation granularity).
const CUDA_PAGE: u64 = 2 << 20;

/// The device a dry run mirrors. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunTarget {
    /// The target's properties: memory size, alignment and allocation limit; the launch
    /// limits the client checks.
    pub properties: DeviceProperties,
    /// The page of the target's mapped-memory pools (`[memory] growable` / `paged`), if it
    /// has them (CUDA: 2 MiB); `None` serves large requests from block pools (the CPU).
    pub page_size: Option<u64>,
    /// The target's memory-pool options.
    pub memory: MemoryOptions,
}

impl DryRunTarget {
    /// An NVIDIA-like GPU with `total_memory` bytes: 256-byte alignment, CUDA's launch
    /// limits, 2 MiB pages for the growable pool, the default pool options.
    pub fn with_memory(total_memory: u64) -> Self {
        Self {
            properties: DeviceProperties {
                name: format!("a GPU of {}", crate::memory::format_bytes(total_memory)),
                hardware: HardwareProperties {
                    load_width: 128,
                    plane_size_min: 32,
                    plane_size_max: 32,
                    max_bindings: 64,
                    max_shared_memory_size: 227 << 10,
                    max_cube_count: (i32::MAX as u32, 65_535, 65_535),
                    max_units_per_cube: 1024,
                    max_cube_dim: (1024, 1024, 64),
                    num_streaming_multiprocessors: None,
                    num_cpu_cores: None,
                    max_vector_size: 4,
                    compute_capability: None,
                },
                memory: MemoryDeviceProperties {
                    total_memory,
                    max_allocation_size: total_memory,
                    alignment: 256,
                    pitch_alignment: 256,
                },
                features: Features {
                    types: ElemType::ALL.into_iter().collect(),
                    plane: true,
                    plane_mma: true,
                    plane_mma_fp8: true,
                    plane_group_mma: true,
                    strict_float_math: true,
                    f64_transcendentals: true,
                    ..Features::default()
                },
                timing_method: TimingMethod::System,
            },
            page_size: Some(CUDA_PAGE),
            memory: MemoryOptions::default(),
        }
    }

    /// The device of `client`: its properties, the pool options of the configuration with
    /// the mapped-memory pools the client's device really has (its memory report says: on a
    /// host of several GPUs with peer copies on, CUDA keeps the growable pool off), and
    /// CUDA's 2 MiB pages for them (the CPU serves large requests from block pools).
    ///
    /// # Errors
    /// The client's error reading its memory report.
    pub fn like<R: Runtime>(client: &ComputeClient<R>) -> Result<Self, ServerError> {
        let report = client.memory_report()?;
        let has = |name: &str| report.pools.iter().any(|pool| pool.name == name);
        let mut memory = crate::config::global_config().memory.options();
        let maps_pages = R::name() == "cuda";
        memory.growable = maps_pages && has("growable");
        memory.paged = maps_pages && has("paged");
        Ok(Self {
            properties: client.properties().clone(),
            page_size: (memory.growable || memory.paged).then_some(CUDA_PAGE),
            memory,
        })
    }
}

impl Default for DryRunTarget {
    /// A GPU of 80 GiB ([`Self::with_memory`]).
    fn default() -> Self {
        Self::with_memory(80 << 30)
    }
}

/// A dry-run device. Registered devices ([`Runtime::client`]) mirror
/// [`DryRunTarget::default`]; [`client`] makes one of any target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DryRunDevice {
    /// Index among the dry-run devices.
    pub index: u32,
}

impl Device for DryRunDevice {
    fn to_id(&self) -> DeviceId {
        DeviceId::new(DRY_RUN_DEVICE_TYPE, self.index)
    }

    fn from_id(id: DeviceId) -> Self {
        Self { index: id.index_id }
    }
}

/// What a dry-run client can tell about its backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunInfo {
    /// The page of the mirrored mapped-memory pools, if any.
    pub page_size: Option<u64>,
}

/// What a dry run saw: memory figures as the target would have them, and the work queued.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DryRunReport {
    /// The pools' report: `peak_bytes_reserved` is what the device would have to hold,
    /// `peak_bytes_in_use` what the live handles needed at most, `storage_allocations` the
    /// device allocations the target's pools would make.
    pub memory: MemoryReport,
    /// Allocations queued (`create*`, `empty*`, a transfer's target).
    pub allocations: u64,
    /// Launches checked and dropped.
    pub launches: u64,
    /// Bytes written (uploads and writes).
    pub bytes_written: u64,
    /// Bytes read back (as zeros).
    pub bytes_read: u64,
    /// Bytes copied between handles.
    pub bytes_copied: u64,
}

/// The dry-run backend. See the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct DryRunRuntime;

impl Runtime for DryRunRuntime {
    type Server = DryRunServer;
    type Device = DryRunDevice;

    fn name() -> &'static str {
        "dry-run"
    }

    fn enumerate_devices(type_id: u16, _info: &DryRunInfo) -> Vec<DeviceId> {
        if type_id == DRY_RUN_DEVICE_TYPE {
            vec![DryRunDevice::default().to_id()]
        } else {
            Vec::new()
        }
    }

    fn enumerate_all_devices(info: &DryRunInfo) -> Vec<DeviceId> {
        Self::enumerate_devices(DRY_RUN_DEVICE_TYPE, info)
    }

    /// Expands the kernel (a kernel that fails to expand fails here, as on a device) and
    /// keeps its name, id and shared memory; no code is generated.
    fn language_kernel(
        definition: &cubert_lang::KernelDefinition,
        cube_dim: CubeDim,
    ) -> Result<DryRunKernel, LaunchError> {
        let ir = definition.ir().map_err(|error| {
            LaunchError::unknown(format!("kernel `{}`: {error}", definition.name()))
        })?;
        Ok(DryRunKernel::new(
            definition.name(),
            definition.id(),
            cube_dim,
            ir.shared_memory_bytes(),
        ))
    }
}

/// A client of a new dry-run device (a new index) mirroring `target` (work runs inline, on the caller's
/// thread), with the global configuration's client settings.
///
/// # Errors
/// [`ServerError::Generic`] if the client can't be set up.
pub fn client(target: DryRunTarget) -> Result<ComputeClient<DryRunRuntime>, ServerError> {
    // Each client's device gets its own index (the registered one is 0), so that handles of
    // one are refused by another, as between devices.
    static NEXT_INDEX: AtomicU32 = AtomicU32::new(1);
    let device = DryRunDevice {
        index: NEXT_INDEX.fetch_add(1, Ordering::Relaxed),
    };
    let server = DryRunServer::new(device, target, crate::config::global_config());
    ComputeClient::from_server(server, DeviceHandleMode::Inline)
}

/// What the dry run of `client`'s device saw so far (after the work queued before).
///
/// # Errors
/// [`ServerError::Generic`] if the device is unreachable.
pub fn report(client: &ComputeClient<DryRunRuntime>) -> Result<DryRunReport, ServerError> {
    client.with_server(DryRunServer::report)
}
