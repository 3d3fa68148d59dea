//! The compute server: the backend object that owns a device.
//!
//! A [`ComputeServer`] runs on its device's runner thread (or under its lock in inline mode)
//! and is only ever reached through a `ComputeClient`. Fire-and-forget operations
//! (`allocate`, `write`, `launch`, `memory_cleanup`...) queue their errors on the
//! stream; `flush`, `sync` and `read` on that stream return them.
//!
//! [`ServerUtilities`] is what the client may read without a round trip: the device's
//! properties, its layout policy (to mint handles on the caller's thread), its profiling
//! logger and bounds-check mode (client policies the runtime builds from the configuration,
//! [`ServerUtilities::new`]), and an optional pinned staging provider that works without
//! stalling the queue.
//!
//! [`ServerCommunication`] (peer copies and collectives) is the part about other devices;
//! [`local_group`] is where the collective calls of the devices of one process meet.

mod caller_work;
mod communication;
pub mod local_group;
mod stream_errors;

pub use caller_work::{CallerWork, FirstLaunchAfterWait};
pub use communication::{
    COLLECTIVE_TYPES, CommunicationId, DeviceSet, ReduceOperation, ServerCommunication,
    check_collective_type, check_in_place_or_disjoint, check_part_sizes,
};
pub use stream_errors::StreamErrors;

use crate::bytes::Bytes;
use crate::config::{BoundsCheckMode, CubertConfig};
use crate::copy::CopyDescriptor;
use crate::device::DeviceId;
use crate::error::{IoError, ProfileError, ServerError};
use crate::future::DynFut;
use crate::handle::{Binding, MemoryId};
use crate::host_slice::HostSlice;
use crate::kernel::{CubeCount, ExecutionMode, KernelArguments, KernelMetadata};
use crate::layout::MemoryLayoutPolicy;
use crate::logging::ServerLogger;
use crate::memory::{ForeignMemory, MemoryAllocationMode, MemoryReport, MemoryUsage};
use crate::profile::{ProfileDuration, ProfilingToken};
use crate::properties::DeviceProperties;
use crate::storage::{ComputeStorage, ManagedResource};
use crate::stream::StreamId;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, RwLock};

/// Creates the server of a device the first time a client asks for it.
pub trait DeviceService: Send + Sized + 'static {
    /// Starts the server of `device_id`.
    ///
    /// # Errors
    /// A [`ServerError`] saying why the device can't be used (missing driver, no such
    /// device...).
    fn init(device_id: DeviceId) -> Result<Self, ServerError>;
}

/// Allocates pinned (page-locked) host buffers without going through the device queue, so
/// staging never stalls kernels already queued.
pub trait StagingProvider: Send + Sync {
    /// One buffer per size.
    ///
    /// # Errors
    /// An [`IoError`] when pinned memory can't be had.
    fn reserve(&self, sizes: &[usize]) -> Result<Vec<Bytes>, IoError>;
}

/// The backend object that owns a device. See the module docs.
pub trait ComputeServer: Send + Debug + ServerCommunication + DeviceService + 'static {
    /// Kernels this backend runs.
    type Kernel: KernelMetadata + Clone;
    /// Backend-specific information readable by clients.
    type Info: Debug + Send + Sync + 'static;
    /// How new tensors are laid out.
    type MemoryLayoutPolicy: MemoryLayoutPolicy;
    /// Raw device memory.
    type Storage: ComputeStorage;

    /// The kinds of work this server may run on its callers' threads (see [`CallerWork`]):
    /// a threaded device handle asks [`Self::runs_on_caller`] only for these, and hands
    /// every other kind to the runner without touching the server's lock (a try of the lock
    /// per allocation, against the runner's, cost a third of the CUDA allocation
    /// throughput on an H200 host). The default: none.
    const CALLER_WORK: &'static [CallerWork] = &[];

    /// Whether a threaded device handle may run `work` (one of [`Self::CALLER_WORK`]) on
    /// the calling thread now, while its runner is idle, instead of handing it to the
    /// runner. Asked with the server locked, on the thread that would run the work. Worth
    /// it where the work is short and needs nothing of the runner's thread: the round trip
    /// then never crosses threads. The default: `true`.
    fn runs_on_caller(&self, work: CallerWork) -> bool {
        let _ = work;
        true
    }

    /// Binds allocation `id` (a whole allocation, as minted by the layout policy) to `size`
    /// bytes of device memory for `stream`. The one entry point of every allocation
    /// (`create*`, `empty*`, a transfer's target), queued through
    /// `DeviceHandle::allocate`/`allocate_then`, which carry only the id: the allocation's
    /// handles may be dropped (and the id released) before this runs. The server's
    /// `DeviceMemory` notes the release of an id it doesn't know (and whose allocation
    /// didn't fail) as early, and the allocation then reserves nothing
    /// (`DeviceMemory::allocate`). Failure is queued on the stream.
    fn allocate(&mut self, id: MemoryId, size: u64, stream: StreamId);

    /// Reserves staging buffers through the queue. Prefer
    /// [`ServerUtilities::staging`], which doesn't stall the queue.
    ///
    /// # Errors
    /// [`IoError::UnsupportedIoOperation`] where the backend has no staging memory.
    fn staging(&mut self, _sizes: &[usize], _stream: StreamId) -> Result<Vec<Bytes>, ServerError> {
        Err(ServerError::Io(IoError::UnsupportedIoOperation {
            backtrace: crate::backtrace::BackTrace::capture(),
        }))
    }

    /// The utilities shared with clients.
    fn utilities(&self) -> Arc<ServerUtilities<Self>>;

    /// Reads the described data as dense bytes, after everything queued before on `stream`.
    /// Errors queued on the stream are returned instead.
    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream: StreamId,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>>;

    /// Reads the described data as dense bytes into `destination`, whose length is the
    /// descriptor's dense length, after everything queued before on `stream`. The future
    /// resolves once the bytes are there. The default reads into fresh memory
    /// ([`Self::read`]) and copies from it when the future is polled ([`copy_read_into`]);
    /// backends that can do better do (CUDA overlaps the two copies of a large read).
    ///
    /// # Safety
    /// `destination`'s memory must stay lent (see [`HostSlice::as_mut_slice`]) until the
    /// returned future has resolved or been dropped.
    unsafe fn read_into(
        &mut self,
        descriptor: CopyDescriptor,
        destination: HostSlice,
        stream: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        let read = self.read(vec![descriptor], stream);
        // SAFETY: the caller keeps `destination` lent until the future resolves or drops.
        unsafe { copy_read_into(read, destination) }
    }

    /// Writes dense bytes to the described places. Failure is queued on the stream.
    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream: StreamId);

    /// Copies the bytes of `source` into `destination`, two bindings of this device of one
    /// size, ordered on `stream` like a launch (a memory copy, no kernel: the driver's
    /// device-to-device copy on CUDA, `memcpy` on the CPU). Bindings of different sizes or
    /// partly overlapping ranges are refused; failure is queued on the stream.
    fn copy(&mut self, source: Binding, destination: Binding, stream: StreamId);

    /// A future resolved when everything queued on `stream` is done, with the errors queued
    /// on it.
    fn sync(&mut self, stream: StreamId) -> DynFut<Result<(), ServerError>>;

    /// The storage resource behind a binding.
    ///
    /// # Errors
    /// [`IoError::NotFound`] (inside [`ServerError::Io`]) if the memory isn't bound here.
    fn get_resource(
        &mut self,
        binding: Binding,
        stream: StreamId,
    ) -> Result<ManagedResource<<Self::Storage as ComputeStorage>::Resource>, ServerError>;

    /// Runs `kernel` over `count` cubes with `arguments`. Failure is queued on the stream.
    ///
    /// # Safety
    /// With [`ExecutionMode::Unchecked`] an out-of-bounds access of the kernel is undefined
    /// behaviour: the caller guarantees the kernel stays in bounds.
    unsafe fn launch(
        &mut self,
        kernel: Self::Kernel,
        count: CubeCount,
        arguments: KernelArguments,
        mode: ExecutionMode,
        stream: StreamId,
    );

    /// Hands queued work on `stream` to the device and returns the errors queued on it.
    ///
    /// # Errors
    /// The first error queued on the stream.
    fn flush(&mut self, stream: StreamId) -> Result<(), ServerError>;

    /// Current memory usage.
    ///
    /// # Errors
    /// A [`ServerError`] if the device can't be queried.
    fn memory_usage(&mut self, stream: StreamId) -> Result<MemoryUsage, ServerError>;

    /// Memory usage per pool.
    ///
    /// # Errors
    /// A [`ServerError`] if the device can't be queried.
    fn memory_report(&mut self, stream: StreamId) -> Result<MemoryReport, ServerError>;

    /// Gives back cached memory that no handle uses.
    fn memory_cleanup(&mut self, stream: StreamId);

    /// Caps the bytes the device's memory pools may hold at `cap` (`None` lifts the cap);
    /// cached memory above it is given back first. See
    /// [`MemoryManager::set_cap`](crate::memory::MemoryManager::set_cap).
    ///
    /// # Errors
    /// [`ServerError::Io`] with [`IoError::InvalidArgument`] when live allocations already
    /// hold more than `cap` (the cap is left as it was).
    fn set_memory_cap(&mut self, cap: Option<u64>, stream: StreamId) -> Result<(), ServerError>;

    /// Binds allocation `id` to `memory`, allocated outside cubert, for use on `stream`
    /// (`ComputeClient::import_memory`; see [`ForeignMemory`] for when its release callback
    /// runs). The default: this backend can't import memory.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] where the backend can't; [`ServerError::Io`] with
    /// [`IoError::InvalidArgument`] for a range the backend refuses. `memory` is dropped on
    /// error, which runs its release callback.
    fn import_memory(
        &mut self,
        _id: MemoryId,
        memory: ForeignMemory,
        _stream: StreamId,
    ) -> Result<(), ServerError> {
        drop(memory);
        Err(ServerError::unsupported_by::<Self>(
            "importing foreign memory",
        ))
    }

    /// Installs new memory-pool options
    /// ([`MemoryManager::install_options`](crate::memory::MemoryManager::install_options) says
    /// which keys change when).
    ///
    /// # Errors
    /// [`ServerError::Io`] with [`IoError::InvalidArgument`] naming what stands in the way;
    /// the options in force stay.
    fn install_memory_pools(
        &mut self,
        options: crate::memory::MemoryOptions,
        stream: StreamId,
    ) -> Result<(), ServerError>;

    /// Starts a profile on `stream`.
    ///
    /// # Errors
    /// A [`ServerError`] if timing can't start.
    fn start_profile(&mut self, stream: StreamId) -> Result<ProfilingToken, ServerError>;

    /// Ends the profile of `token`.
    ///
    /// # Errors
    /// [`ProfileError::NotRegistered`] for an unknown token.
    fn end_profile(
        &mut self,
        stream: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError>;

    /// Sets the base allocation mode of `stream`.
    fn allocation_mode(&mut self, mode: MemoryAllocationMode, stream: StreamId);

    /// Opens a nested allocation window in `mode` on `stream`.
    fn begin_allocation_window(&mut self, mode: MemoryAllocationMode, stream: StreamId);

    /// Closes the innermost allocation window of `stream`.
    fn end_allocation_window(&mut self, stream: StreamId);

    /// Starts capturing the launches submitted on `stream` into a graph instead of running
    /// them.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] on backends without graphs.
    fn start_capture(&mut self, _stream: StreamId) -> Result<(), ServerError> {
        Err(ServerError::unsupported_by::<Self>("graph capture"))
    }

    /// Ends the capture on `stream`: the graph's id and the memory it uses (which must stay
    /// alive while the graph may be replayed).
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] on backends without graphs, or the backend's error.
    fn end_capture(&mut self, _stream: StreamId) -> Result<CapturedGraph, ServerError> {
        Err(ServerError::unsupported_by::<Self>("graph capture"))
    }

    /// Replays graph `graph` on `stream`.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] on backends without graphs, or an unknown graph.
    fn replay(&mut self, _graph: u64, _stream: StreamId) -> Result<(), ServerError> {
        Err(ServerError::unsupported_by::<Self>("graph replay"))
    }

    /// Frees graph `graph`.
    fn drop_graph(&mut self, _graph: u64) {}
}

/// A captured graph as the server returns it.
#[derive(Debug)]
pub struct CapturedGraph {
    /// The graph's id on its server.
    pub id: u64,
    /// Number of launches captured.
    pub launches: usize,
    /// The memory the graph reads and writes.
    pub bindings: Vec<Binding>,
}

/// What clients read without a round trip to the device.
pub struct ServerUtilities<S: ComputeServer> {
    /// The device.
    pub device_id: DeviceId,
    /// Its properties.
    pub properties: DeviceProperties,
    /// Stable hash of the properties.
    pub properties_hash: u64,
    /// Backend information.
    pub info: S::Info,
    /// Profiling logger.
    pub logger: Arc<ServerLogger>,
    /// Layout policy (mints handles).
    pub layout_policy: S::MemoryLayoutPolicy,
    /// Bounds checking of `launch_unchecked`.
    pub check_mode: BoundsCheckMode,
    /// Communicators already initialized.
    pub initialized_comms: RwLock<HashMap<CommunicationId, usize>>,
    /// Pinned staging, where the backend has it.
    pub staging: Option<Arc<dyn StagingProvider>>,
    /// Language kernels built for this device, by specialization and cube dim.
    pub language_kernels: crate::kernel::LanguageKernelCache<S::Kernel>,
    /// The memory cap last set through a client (`ComputeClient::set_memory_cap`).
    pub memory_cap: std::sync::Mutex<Option<u64>>,
    /// How the device's streams are set up (`[runtime]` stream keys).
    pub streams: crate::stream::StreamSettings,
}

impl<S: ComputeServer> ServerUtilities<S> {
    /// Utilities for `device_id`. The client policies come from `config`, here and nowhere
    /// else: the profiling logger (`[profiling]`, whose level decides how the client times
    /// launches), the bounds checking of `launch_unchecked` (`[compilation]
    /// bounds_check`) and the stream settings (`[runtime]`). A backend passes its configuration on and wires neither itself.
    pub fn new(
        device_id: DeviceId,
        properties: DeviceProperties,
        info: S::Info,
        layout_policy: S::MemoryLayoutPolicy,
        config: &CubertConfig,
    ) -> Self {
        Self {
            device_id,
            properties_hash: properties.checksum(),
            properties,
            info,
            logger: Arc::new(ServerLogger::new(
                config.profiling.clone(),
                device_id.index_id,
            )),
            layout_policy,
            check_mode: config.compilation.bounds_check,
            initialized_comms: RwLock::new(HashMap::new()),
            staging: None,
            language_kernels: Default::default(),
            memory_cap: std::sync::Mutex::new(None),
            streams: crate::stream::StreamSettings::of(config),
        }
    }

    /// Adds a pinned staging provider.
    pub fn with_staging(mut self, staging: Arc<dyn StagingProvider>) -> Self {
        self.staging = Some(staging);
        self
    }
}

impl<S: ComputeServer> Debug for ServerUtilities<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerUtilities")
            .field("device_id", &self.device_id)
            .field("properties", &self.properties)
            .field("info", &self.info)
            .finish()
    }
}

/// What [`ComputeServer::read_into`] does by default: awaits `read` (a read of one
/// descriptor into fresh memory), then copies its bytes into `destination` on several
/// threads. A backend's own `read_into` falls back to it where it has no faster way.
///
/// # Safety
/// `destination`'s memory must stay lent until the returned future has resolved or been
/// dropped.
pub unsafe fn copy_read_into(
    read: DynFut<Result<Vec<Bytes>, ServerError>>,
    mut destination: HostSlice,
) -> DynFut<Result<(), ServerError>> {
    Box::pin(async move {
        let bytes = read
            .await?
            .pop()
            .ok_or_else(|| ServerError::generic("the server returned no bytes"))?;
        // SAFETY: this runs while the future is polled, which the caller's contract keeps
        // inside the lending.
        let out = unsafe { destination.as_mut_slice() };
        if bytes.len() != out.len() {
            return Err(ServerError::generic(format!(
                "the read returned {} bytes for a destination of {}",
                bytes.len(),
                out.len()
            )));
        }
        crate::bytes::copy_parallel(out, &bytes);
        Ok(())
    })
}
