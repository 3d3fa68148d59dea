//! What a backend provides to run the suite: fresh, standalone clients and a few hooks to
//! build kernels the suite can't build generically.

use cubert_runtime::StreamSettings;
use cubert_runtime::config::{CubertConfig, DeviceHandleMode, ProfileLevel};
use cubert_runtime::memory::ForeignMemory;
use cubert_runtime::server::ComputeServer;
use cubert_runtime::storage::ComputeStorage;
use cubert_runtime::{ComputeClient, CubeDim, Runtime};

/// The kernel type of backend `B`.
pub type KernelOf<B> = <<<B as TestBackend>::R as Runtime>::Server as ComputeServer>::Kernel;

/// The storage resource type of backend `B` (what `get_resource` hands out).
pub type ResourceOf<B> =
    <<<<B as TestBackend>::R as Runtime>::Server as ComputeServer>::Storage as ComputeStorage>::Resource;

/// The client type of backend `B`.
pub type Client<B> = ComputeClient<<B as TestBackend>::R>;

/// How a test wants its client set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// Index of the device among the backend's devices.
    pub device_index: u32,
    /// Threaded (runner thread) or inline device handle.
    pub mode: DeviceHandleMode,
    /// Caps the memory the device's manager may hold, in bytes, so out-of-memory can be
    /// tested deterministically. `None` keeps the backend's default.
    pub memory_limit: Option<u64>,
    /// Row alignment in bytes of optimized (pitched) tensors; `Some(1)` keeps them dense.
    /// `None` keeps the backend's default.
    pub pitch_alignment: Option<u64>,
    /// What profiling records.
    pub profile_level: ProfileLevel,
    /// The `[runtime]` stream keys (policy, most device queues, priority).
    pub streams: StreamSettings,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            device_index: 0,
            mode: DeviceHandleMode::Threaded,
            memory_limit: None,
            pitch_alignment: None,
            profile_level: ProfileLevel::Disabled,
            streams: StreamSettings::of(&CubertConfig::default()),
        }
    }
}

impl ClientOptions {
    /// Device 0, threaded, backend defaults, profiling off.
    pub fn new() -> Self {
        Self::default()
    }

    /// On device `index`.
    pub fn with_device(mut self, index: u32) -> Self {
        self.device_index = index;
        self
    }

    /// With a device handle in `mode`.
    pub fn with_mode(mut self, mode: DeviceHandleMode) -> Self {
        self.mode = mode;
        self
    }

    /// With the device's memory capped at `bytes`.
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// With rows of optimized tensors aligned to `bytes`.
    pub fn with_pitch_alignment(mut self, bytes: u64) -> Self {
        self.pitch_alignment = Some(bytes);
        self
    }

    /// With profiling at `level`.
    pub fn with_profile_level(mut self, level: ProfileLevel) -> Self {
        self.profile_level = level;
        self
    }

    /// With the `[runtime]` stream keys of `streams`.
    pub fn with_streams(mut self, streams: StreamSettings) -> Self {
        self.streams = streams;
        self
    }

    /// Sets the `[runtime]` keys these options choose in `config` (every backend's
    /// `fresh_client` calls it).
    pub fn apply_runtime(&self, config: &mut CubertConfig) {
        config.runtime.stream_policy = self.streams.policy;
        config.runtime.max_streams = self.streams.max_streams;
        config.runtime.stream_priority = self.streams.priority;
    }
}

/// A backend the suite runs on. Implement it on a local unit struct in the backend's test
/// crate and call [`testgen!`](crate::testgen) with it.
pub trait TestBackend: Send + Sync + 'static {
    /// The runtime under test.
    type R: Runtime;

    /// A new client over a new server of device `options.device_index`, configured as
    /// `options` says, that no other client shares: NOT the globally registered one, so each
    /// test gets its own memory manager and a deterministic memory baseline. Built with
    /// `ComputeClient::from_server(server, options.mode)`. `None` if the device doesn't
    /// exist.
    fn fresh_client(options: &ClientOptions) -> Option<ComputeClient<Self::R>>;

    /// How many devices [`TestBackend::fresh_client`] can open (at least 1). Multi-device
    /// tests need 2.
    fn device_count_for_tests() -> u32;

    /// How many of those devices can form a collective group together (the collective and
    /// peer-copy tests need 2). NCCL refuses two ranks on one GPU, so a backend whose test
    /// devices share hardware says how many are distinct. Defaults to all of them.
    fn collective_device_count() -> u32 {
        Self::device_count_for_tests()
    }

    /// `kernel` with another cube dim (to exceed the device's limits).
    fn with_cube_dim(kernel: KernelOf<Self>, cube_dim: CubeDim) -> KernelOf<Self>;

    /// `kernel` declaring `bytes` of shared memory per cube (to exceed the device's limit).
    fn with_shared_memory(kernel: KernelOf<Self>, bytes: usize) -> KernelOf<Self>;

    /// Length in bytes of the range a storage resource covers.
    fn resource_len(resource: &ResourceOf<Self>) -> u64;

    /// `size` bytes that `client`'s device can use, allocated outside cubert (the system
    /// allocator on the CPU, `cuMemAlloc` on CUDA), aligned to the device's alignment, as a
    /// [`ForeignMemory`] whose release frees them and then calls `freed`. `None` (the
    /// default) where the backend can't import memory.
    fn foreign_memory(
        _client: &Client<Self>,
        _size: u64,
        _freed: Box<dyn FnOnce() + Send>,
    ) -> Option<ForeignMemory> {
        None
    }
}
