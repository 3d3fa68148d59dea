//! The compute client: the entry point users call.
//!
//! A [`ComputeClient`] is a cheap, clonable reference to one device, bound to a stream (the
//! calling thread's by default). Creating memory mints handles on the caller's thread and
//! queues the upload; launches are fire-and-forget; reads return futures (and blocking
//! helpers). Errors of queued work come back from the next `flush`, `sync` or `read` on the
//! same stream. Every fallible call returns a `Result`; nothing here panics on bad input.
//!
//! The methods are listed by concern, in the order a user meets them: uploads and empty
//! memory (`create*`, `empty*`), writes into existing memory (`write*`, `copy`), reads
//! (`read*`), kernels and profiling (`launch*`, `profile`), graphs (capture and replay),
//! moving data between devices (`to_client*`), and collectives (all-reduce, send/recv,
//! process groups).

// One group per line, in the order above (not sorted: rustdoc shows them in this order).
mod create;
// Writes into existing memory.
mod copy;
mod import;
mod write;
// Reads.
mod lazy_read;
mod read;
// Launches and profiling.
mod launch;
// Graphs.
mod graph;
// Moving data between devices.
mod transfer;
// Collectives.
mod collective;

use crate::device::{Device, DeviceId};
use crate::device_handle::{self, DeviceHandle, DeviceHandleMode};
use crate::error::{IoError, ServerError};
use crate::future::{DynFut, block_on, ready};
use crate::kernel::{CubeCountSelection, CubeDim};
use crate::memory::{MemoryAllocationMode, MemoryOptions, MemoryReport, MemoryUsage};
use crate::properties::{DeviceProperties, Features};
use crate::runtime::Runtime;
use crate::server::{CallerWork, ComputeServer, ServerUtilities};
use crate::stream::{StreamId, StreamPolicy, StreamSettings};
use std::sync::Arc;

pub(crate) use copy::overlap_partly;
pub use create::{CALLER_WRITTEN_BELOW, HEAP_COPIED_BELOW, STAGED_BELOW};
pub use graph::Graph;
pub use lazy_read::LazyRead;

/// A client of one device: it allocates and uploads memory, launches kernels, reads
/// results back and reports the device's errors.
///
/// Clones are cheap and talk to the same device. Work is queued on the client's stream and
/// runs in order; errors of queued work come back from the next `flush`, `sync` or read
/// (see the [module docs](crate::client)).
///
/// ```
/// use cubert_cpu::{CpuDevice, CpuRuntime};
/// use cubert_runtime::{Bytes, ComputeClient, ElemType, ops};
///
/// let client = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0))?;
/// let input = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0]))?;
/// let output = client.empty(3 * 4)?; // 3 f32
/// ops::add(&client, &input, &input, &output, 3, ElemType::F32)?;
/// assert_eq!(client.read_one(output)?.to_elems::<f32>(), vec![2.0, 4.0, 6.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ComputeClient<R: Runtime> {
    device: DeviceHandle<R::Server>,
    utilities: Arc<ServerUtilities<R::Server>>,
    /// The stream of this client value, or `None` for the calling thread's.
    stream_id: Option<StreamId>,
    /// Whether `stream_id` was set by hand (`set_stream`), which clones keep.
    pinned: bool,
}

/// A clone shares the device and its server. Its stream follows the stream policy
/// (`[runtime] stream_policy`): under `per_task` a clone gets a new stream (unless this
/// client was pinned with `set_stream`), otherwise it works where this client does.
impl<R: Runtime> Clone for ComputeClient<R> {
    fn clone(&self) -> Self {
        let stream_id = if self.pinned {
            self.stream_id
        } else {
            Self::policy_stream(self.utilities.streams.policy)
        };
        Self {
            device: self.device.clone(),
            utilities: self.utilities.clone(),
            stream_id,
            pinned: self.pinned,
        }
    }
}

impl<R: Runtime> std::fmt::Debug for ComputeClient<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputeClient")
            .field("runtime", &R::name())
            .field("device", &self.device.device_id())
            .field("stream", &self.stream_id)
            .finish()
    }
}

impl<R: Runtime> ComputeClient<R> {
    fn from_handle(device: DeviceHandle<R::Server>) -> Self {
        let utilities = device.utilities();
        Self {
            stream_id: Self::policy_stream(utilities.streams.policy),
            device,
            utilities,
            pinned: false,
        }
    }

    /// The stream a new client value gets under `policy` (`None`: the calling thread's).
    fn policy_stream(policy: StreamPolicy) -> Option<StreamId> {
        match policy {
            StreamPolicy::PerThread => None,
            StreamPolicy::PerTask => Some(StreamId::fresh()),
            StreamPolicy::Single => Some(StreamId::SINGLE),
        }
    }

    /// How this device's streams are set up: the policy clients follow, and the most device
    /// queues and their priority (`[runtime]` of the configuration the server was made
    /// with).
    pub fn stream_settings(&self) -> StreamSettings {
        self.utilities.streams
    }

    /// Registers `server` as the server of `device` and returns its client.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the device already has a server.
    pub fn init<D: Device>(device: &D, server: R::Server) -> Result<Self, ServerError> {
        let mode = crate::config::global_config().runtime.device_handle;
        device_handle::register_device(device.to_id(), server, mode).map(Self::from_handle)
    }

    /// The client of `device`, starting its server on first use.
    ///
    /// # Errors
    /// The server's start error (no such device, missing driver...).
    pub fn load(device: &R::Device) -> Result<Self, ServerError> {
        let mode = crate::config::global_config().runtime.device_handle;
        device_handle::get_or_init_device::<R::Server>(device.to_id(), mode).map(Self::from_handle)
    }

    /// A client over `server` that no other client shares (not registered). Useful for
    /// tests and for isolating a workload's memory.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the runner thread can't start.
    pub fn from_server(server: R::Server, mode: DeviceHandleMode) -> Result<Self, ServerError> {
        DeviceHandle::new(server, mode).map(Self::from_handle)
    }

    /// The backend's information.
    pub fn info(&self) -> &<R::Server as ComputeServer>::Info {
        &self.utilities.info
    }

    /// The device handle.
    pub fn device_handle(&self) -> &DeviceHandle<R::Server> {
        &self.device
    }

    /// The device.
    pub fn device_id(&self) -> DeviceId {
        self.device.device_id()
    }

    /// The utilities shared with the server.
    pub fn utilities(&self) -> &Arc<ServerUtilities<R::Server>> {
        &self.utilities
    }

    /// The stream this client works on: the one set with [`Self::set_stream`], else the
    /// one the stream policy gives (the calling thread's by default; see
    /// [`StreamPolicy`]).
    pub fn stream_id(&self) -> StreamId {
        self.stream_id.unwrap_or_else(StreamId::current)
    }

    /// Pins this client (and its clones) to `stream`, whatever the stream policy. Handles
    /// used across streams are ordered by the server, so this is safe.
    pub fn set_stream(&mut self, stream: StreamId) {
        self.stream_id = Some(stream);
        self.pinned = true;
    }

    /// A clone of this client pinned to `stream`.
    ///
    /// ```
    /// # use cubert_runtime::{Bytes, StreamId};
    /// # let client = cubert_cpu::default_client()?;
    /// let pinned = client.with_stream(StreamId::new(1 << 40));
    /// assert_eq!(pinned.stream_id(), StreamId::new(1 << 40));
    /// assert_eq!(client.stream_id(), StreamId::current()); // the original is unchanged
    /// let handle = pinned.create(Bytes::from_elems(vec![1u8, 2, 3]))?;
    /// assert_eq!(handle.stream(), StreamId::new(1 << 40));
    /// // Another stream may use the handle: the server orders the work.
    /// assert_eq!(client.read_one(handle)?.to_vec(), vec![1, 2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_stream(&self, stream: StreamId) -> Self {
        let mut client = self.clone();
        client.set_stream(stream);
        client
    }

    /// The device's properties.
    pub fn properties(&self) -> &DeviceProperties {
        &self.utilities.properties
    }

    /// The device's properties to change (a test pretending a smaller device, a lower
    /// limit), or `None` while anything else shares them: the server and every other clone
    /// of the client hold them too, so this is `Some` only for a client that owns them alone
    /// (one made with [`Self::from_server`] and not cloned yet).
    pub fn properties_mut(&mut self) -> Option<&mut DeviceProperties> {
        Arc::get_mut(&mut self.utilities).map(|utilities| &mut utilities.properties)
    }

    /// The device's optional features.
    pub fn features(&self) -> &Features {
        &self.utilities.properties.features
    }

    /// Whether work runs on the caller's thread (inline device handle).
    pub fn is_blocking(&self) -> bool {
        self.device.is_blocking()
    }

    /// The first error of a fire-and-forget task that panicked, if any.
    fn take_async_error(&self) -> Result<(), ServerError> {
        let mut errors = self.device.take_async_errors().into_iter();
        match errors.next() {
            None => Ok(()),
            Some(first) => {
                for later in errors {
                    tracing::warn!("further error on {:?}: {later}", self.device_id());
                }
                Err(first)
            }
        }
    }

    fn call<T: Send + 'static>(
        &self,
        task: impl FnOnce(&mut R::Server) -> T + Send + 'static,
    ) -> Result<T, ServerError> {
        self.device.submit_blocking(task).map_err(ServerError::from)
    }

    /// Runs `task` with the device's server, after the work submitted to the device before
    /// it, and returns its result: the door for backend-specific features built on the
    /// server's own API (CUDA's interop lends device memory to other libraries this way).
    /// The server is the device's one: don't keep what `task` borrows from it.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the device is unreachable or `task` panicked.
    pub fn with_server<T: Send + 'static>(
        &self,
        task: impl FnOnce(&mut R::Server) -> T + Send + 'static,
    ) -> Result<T, ServerError> {
        self.call(task)
    }

    /// Runs `task` on the caller's thread with no other client's work on this device
    /// interleaved. Work `task` does through this device's clients runs in order, inline.
    /// `profile` and the autotuner use it to measure without interference.
    ///
    /// ```
    /// # use cubert_runtime::{Bytes, ServerError};
    /// # let client = cubert_cpu::default_client()?;
    /// let sum = client.exclusive(|| -> Result<u32, ServerError> {
    ///     // No other thread's work on this device runs in between.
    ///     let handle = client.create(Bytes::from_elems(vec![2u32; 8]))?;
    ///     Ok(client.read_one(handle)?.to_elems::<u32>().iter().sum())
    /// })??;
    /// assert_eq!(sum, 16);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ServerError::Generic`] if `task` panicked or the device is unreachable.
    pub fn exclusive<Re>(&self, task: impl FnOnce() -> Re) -> Result<Re, ServerError> {
        self.device.exclusive(task).map_err(ServerError::from)
    }

    /// Runs `task(input)` with every allocation it makes on this client's stream in
    /// persistent mode: exact-size blocks that never fragment the dynamic pools (weights,
    /// caches). Windows nest; the previous mode is restored when `task` returns or panics.
    ///
    /// # Errors
    /// Never fails today; `Result` leaves room for backends that can't switch modes.
    pub fn memory_persistent_allocation<Input, Re>(
        &self,
        input: Input,
        task: impl FnOnce(Input) -> Re,
    ) -> Result<Re, ServerError> {
        let stream = self.stream_id();
        self.device.submit(move |server| {
            server.begin_allocation_window(MemoryAllocationMode::Persistent, stream)
        });
        struct EndWindow<'a, S: ComputeServer> {
            device: &'a DeviceHandle<S>,
            stream: StreamId,
        }
        impl<S: ComputeServer> Drop for EndWindow<'_, S> {
            fn drop(&mut self) {
                let stream = self.stream;
                self.device
                    .submit(move |server| server.end_allocation_window(stream));
            }
        }
        let _end = EndWindow {
            device: &self.device,
            stream,
        };
        Ok(task(input))
    }

    /// Sets the allocation mode of this client's stream.
    pub fn allocation_mode(&self, mode: MemoryAllocationMode) {
        let stream = self.stream_id();
        self.device
            .submit(move |server| server.allocation_mode(mode, stream));
    }

    /// Hands queued work to the device and returns the errors of queued work on this stream
    /// known so far. On an asynchronous device (a GPU) errors of kernels still running are
    /// only known at the next `sync` or `read`.
    ///
    /// ```
    /// # use cubert_runtime::ops;
    /// # let client = cubert_cpu::default_client()?;
    /// let out = client.empty(4 * 4)?;
    /// ops::fill(&client, &out, 4, 1.0f32)?; // queued
    /// client.flush()?; // handed to the device, not waited for
    /// assert_eq!(client.read_one(out)?.to_elems::<f32>(), vec![1.0; 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The first error of queued work on this stream.
    pub fn flush(&self) -> Result<(), ServerError> {
        self.take_async_error()?;
        let stream = self.stream_id();
        let result = self.call(move |server| server.flush(stream))?;
        // A task queued before this flush that panicked is known now that the flush ran.
        Self::first_of(self.take_async_error(), result)
    }

    /// The first of two outcomes' errors; a second error is logged, not lost silently.
    fn first_of(
        first: Result<(), ServerError>,
        second: Result<(), ServerError>,
    ) -> Result<(), ServerError> {
        match (first, second) {
            (Err(first), Err(second)) => {
                tracing::warn!("further error: {second}");
                Err(first)
            }
            (Err(error), Ok(())) | (Ok(()), Err(error)) => Err(error),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    /// A future resolved when all work queued on this stream is done, with its errors. The
    /// profile summary (if profiling is on) is printed when it resolves.
    pub fn sync_async(&self) -> DynFut<Result<(), ServerError>> {
        if let Err(error) = self.take_async_error() {
            return ready(Err(error));
        }
        let stream = self.stream_id();
        let logger = self.utilities.logger.clone();
        let synced = self
            .device
            .submit_blocking_as(CallerWork::Sync, move |server| server.sync(stream))
            .map_err(ServerError::from);
        match synced {
            Ok(future) => {
                // Tasks queued before this sync have run: a panic among them is known now.
                let panicked = self.take_async_error();
                Box::pin(async move {
                    let result = future.await;
                    logger.profile_summary();
                    Self::first_of(panicked, result)
                })
            }
            Err(error) => ready(Err(error)),
        }
    }

    /// Waits until all work queued on this stream is done.
    ///
    /// # What an error invalidates
    /// Work is queued and runs later, so its errors come back from the next `sync`,
    /// `flush` or `read` on the stream. An error there invalidates exactly:
    /// - the handles whose allocation failed (`create`/`empty` returned them, then the
    ///   device had no room: [`IoError::OutOfMemory`]). From
    ///   then on they read as `NotFound` and a launch binding them fails;
    /// - the launches that bound such a handle, or failed themselves: they did not run (a
    ///   checked launch that went out of bounds wrote its in-bounds part), so their outputs
    ///   keep their earlier contents.
    ///
    /// Every other handle keeps its bytes. To learn which handles failed, read the ones
    /// created since the last successful sync: the failed ones answer `NotFound`.
    ///
    /// ```
    /// # use cubert_runtime::ops;
    /// # let client = cubert_cpu::default_client()?;
    /// let out = client.empty(1024 * 4)?;
    /// ops::fill(&client, &out, 1024, 0.5f32)?; // returns once queued
    /// client.sync()?; // returns once it ran, with its error if it failed
    /// assert_eq!(client.read_one(out)?.to_elems::<f32>(), vec![0.5; 1024]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// An error found by the device (an out-of-bounds access of a kernel, a fault) is
    /// returned here: see [`ServerError`] for an example.
    ///
    /// # Errors
    /// The first error of queued work on this stream (later ones of the same stream are
    /// logged; they concern the same kinds of handles and launches).
    pub fn sync(&self) -> Result<(), ServerError> {
        block_on(self.sync_async())
    }

    /// Current memory usage of the device.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let before = client.memory_usage()?;
    /// let handle = client.create(Bytes::from_elems(vec![0u8; 4096]))?;
    /// let now = client.memory_usage()?;
    /// assert_eq!(now.number_allocs, before.number_allocs + 1);
    /// assert!(now.bytes_in_use >= before.bytes_in_use + 4096);
    /// assert!(now.bytes_reserved >= now.bytes_in_use);
    /// # drop(handle);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ServerError`] if the device is unreachable.
    pub fn memory_usage(&self) -> Result<MemoryUsage, ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.memory_usage(stream))?
    }

    /// Memory usage per pool, with peaks.
    ///
    /// # Errors
    /// [`ServerError`] if the device is unreachable.
    pub fn memory_report(&self) -> Result<MemoryReport, ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.memory_report(stream))?
    }

    /// Gives back cached device memory no handle uses. The allocator decides what is worth
    /// giving back; memory of live handles is never touched.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![0u8; 1 << 20]))?;
    /// drop(handle); // its block goes back to the pool, still reserved
    /// let cached = client.memory_usage()?;
    /// assert_eq!(cached.bytes_in_use, 0);
    /// client.memory_cleanup();
    /// assert!(client.memory_usage()?.bytes_reserved < cached.bytes_reserved);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn memory_cleanup(&self) {
        let stream = self.stream_id();
        self.device
            .submit(move |server| server.memory_cleanup(stream));
    }

    /// Caps the bytes this device's memory pools may hold at `bytes` (`None` lifts the cap),
    /// like PyTorch's per-process memory fraction: past the cap an allocation gives back
    /// cached memory, then fails with [`IoError::OutOfMemory`] as on a full device
    /// (allocations are made in stream order: the next `sync` or read reports it). Cached
    /// memory above the cap is given back now. The cap holds for every stream and clone of
    /// this client's device.
    ///
    /// ```
    /// # use cubert_runtime::{IoError, ServerError};
    /// # let client = cubert_cpu::default_client()?;
    /// client.set_memory_cap(Some(64 << 20))?;
    /// let held = client.empty(48 << 20)?;
    /// let over = client.empty(32 << 20)?;
    /// assert!(matches!(client.sync(), Err(ServerError::Io(IoError::OutOfMemory { .. }))));
    /// // A cap below what live handles hold is refused, and the old one stays.
    /// assert!(client.set_memory_cap(Some(16 << 20)).is_err());
    /// assert_eq!(client.memory_cap(), Some(64 << 20));
    /// drop(held);
    /// client.set_memory_cap(None)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ServerError::Io`] with [`IoError::InvalidArgument`] when live allocations already
    /// hold more than `bytes`; the cap is left as it was and no handle is touched.
    pub fn set_memory_cap(&self, bytes: Option<u64>) -> Result<(), ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.set_memory_cap(bytes, stream))??;
        *self
            .utilities
            .memory_cap
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = bytes;
        Ok(())
    }

    /// Installs new options for this device's memory pools at run time, as `[memory]` of
    /// `cubert.toml` sets them at start. `persistent` and `idle_release_ms` change at any
    /// time; the pools' shapes (rounding, segment sizes, splits, `compact_before_growth`,
    /// `growable_block`) only while the device holds no live allocation (its cached memory
    /// is given back first); `paged` and `growable` only at start.
    ///
    /// ```
    /// # use cubert_runtime::memory::{MemoryOptions, PersistentMemory};
    /// # let client = cubert_cpu::default_client()?;
    /// client.install_memory_pools(MemoryOptions {
    ///     small_segment: 8 << 20,
    ///     persistent: PersistentMemory::Enabled,
    ///     ..MemoryOptions::default()
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ServerError::Io`] with [`IoError::InvalidArgument`] naming what stands in the way
    /// (live allocations, a change of `paged` or `growable`); nothing changes then.
    pub fn install_memory_pools(&self, options: MemoryOptions) -> Result<(), ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.install_memory_pools(options, stream))?
    }

    /// Caps this device's memory pools at `fraction` of the device's memory
    /// ([`MemoryDeviceProperties::total_memory`](crate::properties::MemoryDeviceProperties)),
    /// as [`ComputeClient::set_memory_cap`] does with bytes.
    ///
    /// # Errors
    /// [`ServerError::Io`] with [`IoError::InvalidArgument`] for a fraction outside
    /// `(0, 1]`, or as [`ComputeClient::set_memory_cap`].
    pub fn set_memory_fraction(&self, fraction: f64) -> Result<(), ServerError> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(ServerError::Io(IoError::invalid(format!(
                "a memory fraction must be in (0, 1], not {fraction}"
            ))));
        }
        let total = self.properties().memory.total_memory;
        self.set_memory_cap(Some((total as f64 * fraction) as u64))
    }

    /// The cap set by [`ComputeClient::set_memory_cap`], if any.
    pub fn memory_cap(&self) -> Option<u64> {
        *self
            .utilities
            .memory_cap
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Devices of kind `type_id` of this runtime.
    pub fn enumerate_devices(&self, type_id: u16) -> Vec<DeviceId> {
        R::enumerate_devices(type_id, self.info())
    }

    /// Every device of this runtime.
    pub fn enumerate_all_devices(&self) -> Vec<DeviceId> {
        R::enumerate_all_devices(self.info())
    }

    /// Number of devices of kind `type_id`.
    pub fn device_count(&self, type_id: u16) -> usize {
        self.enumerate_devices(type_id).len()
    }

    /// Number of devices of this runtime.
    pub fn device_count_total(&self) -> usize {
        self.enumerate_all_devices().len()
    }

    /// Vector widths (in elements of `elem_size` bytes) worth trying for loads and stores,
    /// widest first: powers of two up to the device's load width and maximum vector size.
    pub fn io_optimized_vector_sizes(
        &self,
        elem_size: usize,
    ) -> impl Iterator<Item = usize> + Clone {
        let hardware = &self.properties().hardware;
        let bits = elem_size.max(1) * 8;
        let max = (hardware.load_width as usize / bits)
            .min(hardware.max_vector_size)
            .max(1);
        let count = max.ilog2() + 1;
        (0..count).map(|i| 1usize << i).rev()
    }
}

impl CubeDim {
    /// A cube dim for `working_units` units of elementwise work on the client's device.
    pub fn new<R: Runtime>(client: &ComputeClient<R>, working_units: usize) -> Self {
        CubeDim::from_properties(client.properties(), working_units)
    }
}

impl CubeCountSelection {
    /// Spreads `num_cubes` over x, y, z within the client's device limits.
    pub fn new<R: Runtime>(client: &ComputeClient<R>, num_cubes: u32) -> Self {
        CubeCountSelection::from_properties(client.properties(), num_cubes)
    }
}
