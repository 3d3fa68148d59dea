//! The CUDA compute server: one per client device, in the device's primary context.
//!
//! It runs on the device's runner thread (or under the inline lock) and never waits for the
//! device there, except where the API needs a host-visible value right away (a dynamic cube
//! count, an out-of-memory retry). Reads, syncs and profiles record an event and let the
//! completion thread resolve their futures, or, when that thread has nothing queued, let a
//! read's or a sync's caller watch the event itself (`direct_wait`). Errors of queued work
//! wait per stream in the shared state; a device fault marks the server unhealthy for good.
//!
//! The server keeps the core (context, memory, streams, status blocks, compiler, completion
//! thread) and owns one part per concept, each defined in its own module with private
//! state: [`Transfers`] (`transfer`: uploads and downloads), [`Profiler`] (`profiling`),
//! [`Graphs`] (`graph`: capture and replay) and [`CudaCollectives`] (`collective`). An
//! entry point checks the server's health, binds the context, resolves the memory it uses
//! and orders it on the stream, then calls the part with what it needs (the streams, a
//! device address, the stream id, the completion thread); the parts never see the server.
//! Kernel launches (`server/launch.rs`) and the `ServerCommunication` impl (peer copies and
//! collectives, `server/communication.rs`) work on the core itself, so they are child
//! modules of this one.

mod communication;
mod copy;
mod launch;

use crate::chunked_read::{CHUNK, CHUNKED_FROM, Chunk, ChunkedRead};
use crate::collective::{Caller, CudaCollectives};
use crate::compiler::Compiler;
use crate::completion::{Check, Completion, Job, Reply, Shared};
use crate::context::CudaContext;
use crate::device::{CudaDevice, CudaInfo};
use crate::direct_wait::{DirectWait, DirectWaitParts};
use crate::driver::{self, driver_status};
use crate::graph::Graphs;
use crate::kernel::CudaKernel;
use crate::profiling::Profiler;
use crate::properties::read_properties;
use crate::staging::{DEFAULT_MAX_CACHED, PinnedPool, PinnedStaging};
use crate::status::StatusBlocks;
use crate::storage::{CudaResource, CudaStorage};
use crate::streams::{EventPool, Streams};
use crate::transfer::{Transfers, upload_size};
use cubert_runtime::config::{CubertConfig, global_config};
use cubert_runtime::copy::CopyDescriptor;
use cubert_runtime::future::{DynFut, OneshotReceiver, oneshot, ready};
use cubert_runtime::handle::MemoryId;
use cubert_runtime::host_slice::HostSlice;
use cubert_runtime::layout::PitchedLayoutPolicy;
use cubert_runtime::memory::{
    DeviceMemory, ForeignMemory, IdMap, MemoryAllocationMode, MemoryLimits, MemoryReport,
    MemoryUsage, StreamOrdering, StreamPoints,
};
use cubert_runtime::profile::{ProfileDuration, ProfilingToken};
use cubert_runtime::server::{
    CallerWork, CapturedGraph, ComputeServer, DeviceService, FirstLaunchAfterWait, ServerUtilities,
    copy_read_into,
};
use cubert_runtime::storage::ManagedResource;
use cubert_runtime::{
    Binding, Bytes, CubeCount, Device, DeviceId, ExecutionMode, IoError, KernelArguments,
    ProfileError, ServerError, StreamId,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// The server of one CUDA device. See the module docs.
pub struct CudaServer {
    // Drop order (declaration order) matters: the completion thread first (it finishes
    // queued jobs), then the objects living in the context, the core's and the parts'; each
    // holds an `Arc` of the context, so the context itself goes last.
    completion: Completion,
    /// What a read or sync on an idle completion thread gives its caller to wait by itself.
    direct_wait: DirectWaitParts,
    shared: Arc<Shared>,
    device: CudaDevice,
    context: Arc<CudaContext>,
    memory: DeviceMemory<CudaStorage>,
    /// Released foreign memory whose last use is on a stream being captured: given back once
    /// the capture ends ([`CudaServer::retire_foreign`]).
    foreign_waiting: Vec<(ForeignMemory, StreamPoints)>,
    /// The stream each live allocation was last used on, once it was used: where its
    /// release must wait. Until then that is the stream it was reserved on, which the
    /// memory manager tells the release (`MemoryManager::release_with`).
    last_use: IdMap<StreamId>,
    streams: Streams,
    status: StatusBlocks,
    compiler: Compiler,
    /// Uploads and downloads: pinned pool, staging ring, copy threads.
    transfers: Transfers,
    /// Timing events and the profiles started.
    profiler: Profiler,
    /// The capture in progress and the instantiated graphs.
    graphs: Graphs,
    /// Collective stream, communicator slots, held calls.
    collectives: CudaCollectives,
    /// Whether a kernel was launched since the caller last waited for the device (a sync or
    /// a read): a launch runs on an idle caller's thread only when none was.
    launches: FirstLaunchAfterWait,
    utilities: Arc<ServerUtilities<CudaServer>>,
}

// SAFETY: the raw CUDA handles a server holds (streams, events, modules, functions) belong
// to its own context and are valid from any thread that binds that context; the device
// handle gives the server to one thread at a time, and every entry point binds the context
// first (`enter`).
unsafe impl Send for CudaServer {}

impl std::fmt::Debug for CudaServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaServer")
            .field("device", &self.device)
            .finish()
    }
}

impl CudaServer {
    /// A server for `device` with the settings of `config`.
    ///
    /// # Errors
    /// Why CUDA can't be used (no driver, no device...), or the driver's error.
    pub fn new(device: CudaDevice, config: &CubertConfig) -> Result<Self, ServerError> {
        Self::with_ordinal(device, device.index, config)
    }

    /// A server that presents itself as `device` but runs on GPU `ordinal`. Two servers on
    /// one GPU with different device ids behave as two devices (each has its own streams and
    /// memory), which lets multi-device code be tested on one GPU (collectives excepted:
    /// NCCL needs device i on GPU i).
    ///
    /// # Errors
    /// As [`CudaServer::new`].
    pub fn with_ordinal(
        device: CudaDevice,
        ordinal: u32,
        config: &CubertConfig,
    ) -> Result<Self, ServerError> {
        let context = CudaContext::new(ordinal)?;
        context.bind()?;
        let info = read_properties(context.device())?;
        let mut properties = info.properties;
        let arch = properties.hardware.compute_capability.unwrap_or((9, 0));
        if config.cuda.memory_limit > 0 {
            properties.memory.total_memory =
                properties.memory.total_memory.min(config.cuda.memory_limit);
            properties.memory.max_allocation_size = properties.memory.total_memory;
        }
        if config.cuda.pitch_alignment > 0 {
            properties.memory.pitch_alignment = config.cuda.pitch_alignment;
        }
        let total = properties.memory.total_memory;
        // Page-mapped pools are on with several GPUs too: the storage grants a peer GPU
        // access to mapped memory at the first peer copy it reads (`grant_reader`).
        let memory = DeviceMemory::new(
            device.to_id(),
            CudaStorage::new(context.clone()),
            config.memory.options(),
            MemoryLimits {
                max_allocation: total,
                capacity: (config.cuda.memory_limit > 0).then_some(config.cuda.memory_limit),
            },
        );
        let layout = PitchedLayoutPolicy::new(
            memory.handles(),
            properties.memory.alignment,
            properties.memory.pitch_alignment,
            total,
        );
        let pinned = PinnedPool::new(
            context.clone(),
            usize::try_from(config.cuda.pinned_cache).unwrap_or(DEFAULT_MAX_CACHED),
        );
        let nvrtc = crate::compiler::nvrtc_version().ok();
        let cuda_info = CudaInfo {
            ordinal,
            driver: driver_status().describe(),
            nvrtc,
            l2_cache_bytes: info.l2_cache_bytes,
            peer_copy: config.cuda.peer_copy,
        };
        let utilities = ServerUtilities::new(device.to_id(), properties, cuda_info, layout, config)
            .with_staging(Arc::new(PinnedStaging(pinned.clone())));
        let disk = config.compilation.disk_cache_dir();
        let events = EventPool::new(false);
        let timing_events = EventPool::new(true);
        let shared = Arc::new(Shared::default());
        let completion = Completion::start(
            context.clone(),
            shared.clone(),
            events.clone(),
            timing_events.clone(),
        )?;
        let transfers = Transfers::new(pinned, config.cuda.copy_threads, device.index)?;
        let direct_wait = DirectWaitParts {
            context: context.clone(),
            shared: shared.clone(),
            events: events.clone(),
            queue: completion.queue(),
        };
        Ok(Self {
            completion,
            direct_wait,
            shared,
            device,
            memory,
            foreign_waiting: Vec::new(),
            last_use: IdMap::default(),
            streams: Streams::new(context.clone(), events, utilities.streams),
            status: StatusBlocks::new(context.clone()),
            compiler: Compiler::new(context.clone(), arch, disk),
            transfers,
            profiler: Profiler::new(timing_events),
            graphs: Graphs::default(),
            collectives: CudaCollectives::default(),
            launches: FirstLaunchAfterWait::default(),
            utilities: Arc::new(utilities),
            context,
        })
    }

    /// Lends the device memory of `bindings` and the raw stream of `stream` to `task` (the
    /// server's side of [`crate::interop::with_device_buffers`], whose docs say how it is
    /// ordered).
    ///
    /// # Errors
    /// The errors queued on `stream`, memory that isn't here, the driver's error, or a
    /// stream being captured; `task` didn't run then.
    pub fn lend<T>(
        &mut self,
        bindings: Vec<Binding>,
        stream: StreamId,
        task: impl FnOnce(&[crate::interop::DeviceBuffer], cudarc::driver::sys::CUstream) -> T,
    ) -> Result<T, ServerError> {
        self.enter()?;
        self.refuse_if_capturing(stream)?;
        self.drain_releases();
        self.shared.take_errors(stream)?;
        let mut buffers = Vec::with_capacity(bindings.len());
        for binding in &bindings {
            self.use_on(binding.id(), stream)?;
            let resource = self.resolve(binding)?;
            buffers.push(crate::interop::DeviceBuffer {
                ptr: resource.ptr,
                size: resource.size,
            });
        }
        let raw = self.streams.raw(stream)?;
        let result = task(&buffers, raw);
        // Whatever `task` queued counts as work on the stream, for the memory's reuse.
        self.streams.bump(stream);
        // A library may have bound another context on this thread.
        self.context.bind()?;
        drop(bindings);
        Ok(result)
    }

    /// Number of `CUstream`s this server has created for its streams: at most
    /// `[runtime] max_streams`, however many stream ids were used.
    pub fn device_queues(&self) -> usize {
        self.streams.device_queues()
    }

    /// The CUDA priority of the `CUstream` behind `stream` (created if needed): the
    /// device's greatest with `[runtime] stream_priority = "high"`, else the default.
    ///
    /// # Errors
    /// The driver's error.
    pub fn stream_priority(&mut self, stream: StreamId) -> Result<i32, ServerError> {
        self.context.bind()?;
        Ok(self.streams.priority_of(stream)?)
    }

    /// The CUDA stream priorities of this device: `(least, greatest)`.
    ///
    /// # Errors
    /// The driver's error.
    pub fn stream_priority_range(&self) -> Result<(i32, i32), ServerError> {
        self.context.bind()?;
        Ok(crate::driver::stream::priority_range()?)
    }

    /// Compile-cache counters (NVRTC compiles, disk hits, memory hits).
    pub fn compile_stats(&self) -> crate::compiler::CompileStats {
        self.compiler.stats()
    }

    /// Binds the context and fails if the device faulted.
    fn enter(&mut self) -> Result<(), ServerError> {
        self.shared.health()?;
        self.context.bind()?;
        // An inline handle's collective call held until its peers called is settled before
        // anything else runs here (see `collective`).
        self.settle_held_collectives(false)
    }

    /// A key unique among live servers: the address of the server's utilities.
    fn collective_owner(&self) -> usize {
        Arc::as_ptr(&self.utilities) as usize
    }

    /// The collectives part, and what a collective call uses of the server.
    fn collective_parts(&mut self) -> (&mut CudaCollectives, Caller<'_>) {
        let owner = self.collective_owner();
        let caller = Caller {
            context: &self.context,
            device: self.device,
            streams: &mut self.streams,
            shared: &self.shared,
            owner,
        };
        (&mut self.collectives, caller)
    }

    /// Settles the held collective calls of an inline handle (see
    /// `CudaCollectives::settle_held`).
    fn settle_held_collectives(&mut self, queue_behind: bool) -> Result<(), ServerError> {
        let (collectives, mut caller) = self.collective_parts();
        collectives.settle_held(&mut caller, queue_behind)
    }

    /// Frees the memory of every handle dropped since the last call, at the point its last
    /// stream has reached.
    fn drain_releases(&mut self) {
        let (last_use, streams) = (&mut self.last_use, &mut self.streams);
        self.memory.drain_releases(|id, reserved| {
            let stream = last_use.remove(&id).or(reserved.map(|(stream, _)| stream));
            let points: StreamPoints = stream
                .map(|stream| streams.point(stream))
                .into_iter()
                .collect();
            if reserved.is_some_and(|(_, paged)| paged) {
                // Arms an event at the point (if none covers it yet), so the paged pool sees
                // the block complete once the stream passes it and can remap its pages.
                for point in &points {
                    StreamOrdering::is_complete(streams, *point);
                }
            }
            points
        });
        self.retire_foreign();
    }

    /// Gives back released foreign memory once the device is done with it: at once where
    /// its stream point is complete, else through an event recorded on that stream, which
    /// the completion thread waits for before dropping the memory (running its callback).
    fn retire_foreign(&mut self) {
        let mut released = self.memory.manager().take_released_foreign();
        if released.is_empty() && self.foreign_waiting.is_empty() {
            return;
        }
        released.append(&mut self.foreign_waiting);
        for (memory, points) in released {
            let pending: StreamPoints = points
                .into_iter()
                .filter(|point| !StreamOrdering::is_complete(&mut self.streams, *point))
                .collect();
            let Some(last) = pending.first().map(|point| point.stream) else {
                drop(memory);
                continue;
            };
            if pending
                .iter()
                .any(|point| self.streams.is_capturing(point.stream))
            {
                self.foreign_waiting.push((memory, pending));
                continue;
            }
            // One event after every pending point: `last` waits for the other streams.
            for point in &pending[1..] {
                if let Err(failure) = self.streams.order(last, point.stream) {
                    self.shared.push_error(last, failure.into());
                }
            }
            // On failure (a device fault, the completion thread gone) the job and the memory
            // in it are dropped: the device can't use the memory any more either.
            if let Err(error) = self.submit_job(last, Reply::Retire(Box::new(memory))) {
                self.shared.push_error(last, error);
            }
        }
    }

    /// The device range of a binding.
    fn resolve(&mut self, binding: &Binding) -> Result<CudaResource, IoError> {
        self.memory.resolve(binding)
    }

    /// Orders a use of `id` on `stream` after its last use on another stream. Memory not
    /// used since its allocation was last used on the stream it was reserved on: the
    /// allocation records nothing, so an alloc + free pair costs no map entry.
    fn use_on(&mut self, id: MemoryId, stream: StreamId) -> Result<(), ServerError> {
        let last = match self.last_use.insert(id, stream) {
            Some(last) => Some(last),
            None => self
                .memory
                .manager_ref()
                .reserved_on(id)
                .map(|(reserved, _)| reserved),
        };
        match last {
            Some(last) if last != stream => self.streams.order(stream, last).map_err(Into::into),
            _ => Ok(()),
        }
    }

    /// Sends a job resolved when `stream` reaches this point, with its status checks.
    fn submit_job(&mut self, stream: StreamId, reply: Reply) -> Result<(), ServerError> {
        let (event, checks) = self.detach_and_record(stream)?;
        self.completion.submit(Job {
            event,
            timing_event: false,
            stream,
            checks,
            reply,
        })
    }

    /// Detaches the stream's status block and records an event after the work queued on
    /// the stream: what waiting for that work needs.
    fn detach_and_record(
        &mut self,
        stream: StreamId,
    ) -> Result<(cudarc::driver::sys::CUevent, Vec<Check>), ServerError> {
        self.refuse_if_capturing(stream)?;
        let checks: Vec<Check> = self
            .status
            .detach(stream)
            .map(|block| Check::Block(block, stream))
            .into_iter()
            .collect();
        let event = self.streams.record(stream)?;
        Ok((event, checks))
    }

    /// Only launches may be captured into a graph.
    fn refuse_if_capturing(&mut self, stream: StreamId) -> Result<(), ServerError> {
        if self.streams.is_capturing(stream) {
            return Err(ServerError::generic(
                "the stream is being captured into a graph: only launches may be captured; \
                 end the capture before reading, writing or syncing",
            ));
        }
        Ok(())
    }

    /// Waits for all work of this server's streams (unless a graph is being captured) and
    /// records every stream point as complete, so every free block can be reused or
    /// released. Other servers sharing the device's context are not waited for.
    fn settle(&mut self) {
        settle(&mut self.streams, &self.shared);
    }

    /// Uploads `data` (dense) to the place `descriptor` describes, on `stream`: checked,
    /// resolved and ordered here, copied by [`Transfers::upload`].
    fn upload(
        &mut self,
        descriptor: &CopyDescriptor,
        data: Bytes,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        if upload_size(descriptor, &data)? == 0 {
            return Ok(());
        }
        self.refuse_if_capturing(stream)?;
        let resource = self.resolve(&descriptor.handle)?;
        self.use_on(descriptor.handle.id(), stream)?;
        let source =
            self.transfers
                .upload(descriptor, resource.ptr, data, &mut self.streams, stream)?;
        match source {
            // The pinned source must live until the DMA has read it.
            Some(source) => self.submit_job(stream, Reply::Retire(Box::new(source))),
            None => Ok(()),
        }
    }

    /// Queues the downloads of `descriptors` into pinned buffers, returned in order
    /// ([`Transfers::download`]). They hold the data once `stream` has passed this point.
    fn download(
        &mut self,
        descriptors: &[CopyDescriptor],
        stream: StreamId,
    ) -> Result<Vec<Bytes>, ServerError> {
        self.refuse_if_capturing(stream)?;
        let raw = self.streams.raw(stream)?;
        let mut buffers = Vec::with_capacity(descriptors.len());
        for descriptor in descriptors {
            let dense = descriptor.validate()?;
            let resource = self.resolve(&descriptor.handle)?;
            self.use_on(descriptor.handle.id(), stream)?;
            buffers.push(
                self.transfers
                    .download(descriptor, dense, resource.ptr, raw)?,
            );
        }
        self.streams.bump(stream);
        Ok(buffers)
    }
}

impl CudaServer {
    /// Writes graph `graph` as a Graphviz DOT file at `path` (see [`crate::write_graph_dot`]).
    ///
    /// # Errors
    /// No such graph; a path with a NUL byte; the driver's error (an unwritable path).
    pub fn write_graph_dot(
        &mut self,
        graph: u64,
        path: &std::path::Path,
    ) -> Result<(), ServerError> {
        self.context
            .bind()
            .map_err(ServerError::from)
            .and_then(|()| self.graphs.write_dot(graph, path))
    }

    /// The future of a read (into `buffers`) or a sync (none) of `stream` that its caller
    /// waits on itself ([`DirectWait`]). Only while the completion thread has nothing
    /// queued: then nothing queued can add an error for the stream.
    fn wait_on_caller(
        &mut self,
        stream: StreamId,
        buffers: Vec<Bytes>,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        match self.detach_and_record(stream) {
            Ok((event, checks)) => Box::pin(DirectWait::new(
                self.direct_wait.clone(),
                stream,
                event,
                checks,
                buffers,
            )),
            Err(error) => ready(Err(self.shared.observe(error))),
        }
    }

    /// Queues the chunks of a read of `dense` contiguous bytes into pinned memory, each
    /// followed by an event, then a sync job for the stream's errors. Returns the buffer
    /// (and its address), the chunks and the job's answer; `None` when no pinned memory is
    /// left (the caller reads the ordinary way).
    #[allow(clippy::type_complexity)]
    fn start_chunked_read(
        &mut self,
        descriptor: &CopyDescriptor,
        dense: usize,
        stream: StreamId,
    ) -> Result<
        Option<(
            (Bytes, *const u8),
            VecDeque<Chunk>,
            OneshotReceiver<Result<(), ServerError>>,
        )>,
        ServerError,
    > {
        // Errors already queued on the stream come first, as for every read.
        self.enter()?;
        self.shared.take_errors(stream)?;
        self.drain_releases();
        self.refuse_if_capturing(stream)?;
        let raw = self.streams.raw(stream)?;
        let resource = self.resolve(&descriptor.handle)?;
        self.use_on(descriptor.handle.id(), stream)?;
        let Ok(mut pinned) = self.transfers.staging(dense) else {
            return Ok(None);
        };
        let base = pinned.as_mut_ptr();
        let mut chunks = VecDeque::new();
        let mut queued = Ok(());
        for start in (0..dense).step_by(CHUNK) {
            let end = (start + CHUNK).min(dense);
            // SAFETY: the pinned buffer holds `dense` bytes and the device range `dense`
            // bytes from `resource.ptr` (the descriptor was validated against it); the
            // buffer is dropped only after the device passed the chunk (by the future, or
            // after the synchronization below).
            let copied = unsafe {
                driver::copy::dtoh_async(
                    base.add(start).cast(),
                    resource.ptr + start as u64,
                    end - start,
                    raw,
                )
            };
            match copied.and_then(|()| self.streams.record(stream)) {
                Ok(event) => chunks.push_back(Chunk {
                    event,
                    range: start..end,
                }),
                Err(error) => {
                    queued = Err(ServerError::from(error));
                    break;
                }
            }
        }
        self.streams.bump(stream);
        let (sender, receiver) = oneshot();
        if let Err(error) = queued.and_then(|()| self.submit_job(stream, Reply::Sync(sender))) {
            // Let the queued chunks land before the buffer goes back to the pool.
            let _ = self.streams.synchronize(stream);
            for chunk in chunks {
                self.streams.events().give_back(chunk.event);
            }
            return Err(error);
        }
        Ok(Some(((pinned, base.cast_const()), chunks, receiver)))
    }
}

/// [`CudaServer::settle`] on the server's streams and shared state, for where the server's
/// memory is borrowed.
fn settle(streams: &mut Streams, shared: &Shared) {
    if streams.any_capturing() {
        return;
    }
    match streams.synchronize_all() {
        Ok(()) => streams.mark_all_complete(),
        Err(failure) => {
            shared.observe(failure.into_server_error());
        }
    }
}

impl Drop for CudaServer {
    fn drop(&mut self) {
        // Collective calls still waiting for their peers are abandoned.
        let owner = self.collective_owner();
        self.collectives.shutdown(owner, &self.context);
        if self.context.bind().is_ok() {
            // Every piece of memory, stream and module is freed after this; let the device
            // finish with them first (only this server's streams: the context is shared).
            let _ = self.streams.synchronize_all();
        }
        self.collectives.release_events(self.streams.events());
    }
}

impl DeviceService for CudaServer {
    fn init(device_id: DeviceId) -> Result<Self, ServerError> {
        if device_id.type_id != crate::device::CUDA_DEVICE_TYPE {
            return Err(ServerError::generic(format!(
                "{device_id:?} is not a CUDA device"
            )));
        }
        let device = CudaDevice::from_id(device_id);
        std::panic::catch_unwind(|| CudaServer::new(device, global_config())).unwrap_or_else(|_| {
            Err(ServerError::generic(
                "the CUDA driver is missing a required function (driver too old?)",
            ))
        })
    }
}

impl ComputeServer for CudaServer {
    type Kernel = CudaKernel;
    type Info = CudaInfo;
    type MemoryLayoutPolicy = PitchedLayoutPolicy;
    type Storage = CudaStorage;

    fn import_memory(
        &mut self,
        id: MemoryId,
        memory: ForeignMemory,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        if let Err(error) = self.enter() {
            // Its handle's release then finds a failed id, not an early release.
            self.memory.record_failure(id, error.to_string());
            return Err(error);
        }
        self.drain_releases();
        self.memory.import(id, memory, stream)?;
        self.last_use.insert(id, stream);
        Ok(())
    }

    /// Syncs, reads, allocations, and the first launch after a sync or a read, run on an
    /// idle runner's caller, on a thread where this device's context or none is current (see
    /// `CudaContext::suits_calling_thread`): a caller that waits for each launch then
    /// makes the driver calls itself and never crosses threads. Later launches queue, so
    /// back-to-back launches keep the overlap of the caller's work with the runner's
    /// driver calls (measured on an H200: one-element adds back to back took 5.5-5.8 µs
    /// each on the caller, 4.8-5.1 queued). An allocation on the caller crosses no thread
    /// either (its handle's release is drained by the next allocation on the same thread):
    /// on an H200 host, 1.9-4.3 M alloc + free pairs/s against 1.8-2.5 M queued in the same
    /// calls, once the growable pool took its block freed last back without a search and
    /// stopped reading the precise clock (2026-11-29, `docs/benchmarks.md`; which of the
    /// host's vCPUs the caller runs on moves the figure by 1.5 ×). Before that, the
    /// pool's work on the caller made 64 MiB pairs slower than queued. An allocation that
    /// has to grow the pool makes its driver calls on the caller, as `cudaMalloc` does. A
    /// read queues its copies into pinned staging and an event on the caller, which then
    /// waits for them, as after a sync.
    const CALLER_WORK: &'static [CallerWork] = &[
        CallerWork::Allocation,
        CallerWork::Launch,
        CallerWork::Sync,
        CallerWork::Read,
    ];

    fn runs_on_caller(&self, work: CallerWork) -> bool {
        self.launches.allows(work) && self.context.suits_calling_thread()
    }

    fn allocate(&mut self, id: MemoryId, size: u64, stream: StreamId) {
        if let Err(error) = self.enter() {
            self.memory.record_failure(id, error.to_string());
            self.shared.push_error(stream, error);
            return;
        }
        self.drain_releases();
        let shared = &self.shared;
        // Blocks freed on other streams may still be pending when the device is full: finish
        // all work (the memory then gives back what is free and tries once more).
        let allocated = self
            .memory
            .allocate(id, size, stream, &mut self.streams, |streams| {
                settle(streams, shared);
                true
            });
        // A bound allocation's last use is the stream it was reserved on until `use_on`
        // records another.
        if let Err(error) = allocated {
            self.shared.push_error(stream, error.into());
        }
    }

    fn staging(&mut self, sizes: &[usize], _stream: StreamId) -> Result<Vec<Bytes>, ServerError> {
        sizes
            .iter()
            .map(|&size| self.transfers.staging(size).map_err(ServerError::from))
            .collect()
    }

    fn utilities(&self) -> Arc<ServerUtilities<Self>> {
        self.utilities.clone()
    }

    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream: StreamId,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        // The caller waits for this read as for a sync: its next launch may be its own.
        self.launches.waited();
        // Errors already queued on the stream come first, as for every read.
        let started = self
            .enter()
            .and_then(|()| self.shared.take_errors(stream))
            .and_then(|()| {
                self.drain_releases();
                self.download(&descriptors, stream)
            });
        let buffers = match started {
            Ok(buffers) => buffers,
            Err(error) => return ready(Err(self.shared.observe(error))),
        };
        if self.completion.is_idle() {
            return self.wait_on_caller(stream, buffers);
        }
        let (sender, receiver) = oneshot();
        if let Err(error) = self.submit_job(stream, Reply::Read(buffers, sender)) {
            return ready(Err(self.shared.observe(error)));
        }
        Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|| Err(ServerError::generic("the CUDA completion thread stopped")))
        })
    }

    /// Large contiguous reads go in chunks whose host copies overlap the device's
    /// (`chunked_read`); others as the default, through [`Self::read`].
    unsafe fn read_into(
        &mut self,
        descriptor: CopyDescriptor,
        destination: HostSlice,
        stream: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        let chunked = match descriptor.validate() {
            Ok(dense) if dense >= CHUNKED_FROM && descriptor.is_contiguous() => {
                self.start_chunked_read(&descriptor, dense, stream)
            }
            Ok(_) => Ok(None),
            Err(error) => Err(error.into()),
        };
        match chunked {
            Ok(Some((pinned, chunks, reply))) => {
                // SAFETY: the address is the buffer's, which covers every chunk;
                // `destination` is lent until the future resolves or drops (this function's
                // contract) and is as long as the read (the client checks).
                Box::pin(unsafe {
                    ChunkedRead::new(
                        self.direct_wait.clone(),
                        stream,
                        self.transfers.copy_pool(),
                        pinned,
                        chunks,
                        destination,
                        reply,
                    )
                })
            }
            Ok(None) => {
                let read = self.read(vec![descriptor], stream);
                // SAFETY: this function's contract, passed on.
                unsafe { copy_read_into(read, destination) }
            }
            Err(error) => ready(Err(self.shared.observe(error))),
        }
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream: StreamId) {
        if let Err(error) = self.enter() {
            self.shared.push_error(stream, error);
            return;
        }
        for (descriptor, data) in descriptors {
            if let Err(error) = self.upload(&descriptor, data, stream) {
                self.shared.push_error(stream, error);
            }
        }
    }

    fn copy(&mut self, source: Binding, destination: Binding, stream: StreamId) {
        if let Err(error) = self.copy_between(&source, &destination, stream) {
            self.shared.push_error(stream, error);
        }
    }

    fn sync(&mut self, stream: StreamId) -> DynFut<Result<(), ServerError>> {
        if let Err(error) = self.enter() {
            return ready(Err(error));
        }
        self.launches.waited();
        self.drain_releases();
        self.memory.manager().release_idle(&mut self.streams);
        if self.completion.is_idle() {
            let wait = self.wait_on_caller(stream, Vec::new());
            return Box::pin(async move { wait.await.map(|_| ()) });
        }
        let (sender, receiver) = oneshot();
        if let Err(error) = self.submit_job(stream, Reply::Sync(sender)) {
            return ready(Err(self.shared.observe(error)));
        }
        Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|| Err(ServerError::generic("the CUDA completion thread stopped")))
        })
    }

    fn get_resource(
        &mut self,
        binding: Binding,
        stream: StreamId,
    ) -> Result<ManagedResource<CudaResource>, ServerError> {
        self.enter()?;
        self.use_on(binding.id(), stream)?;
        let resource = self.resolve(&binding)?;
        Ok(ManagedResource::new(binding, resource))
    }

    unsafe fn launch(
        &mut self,
        kernel: CudaKernel,
        count: CubeCount,
        arguments: KernelArguments,
        mode: ExecutionMode,
        stream: StreamId,
    ) {
        self.launches.launched();
        if let Err(error) = self.launch_kernel(&kernel, &count, &arguments, mode, stream) {
            self.shared.push_error(stream, error);
        }
    }

    fn flush(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.drain_releases();
        self.shared.take_errors(stream)
    }

    fn memory_usage(&mut self, _stream: StreamId) -> Result<MemoryUsage, ServerError> {
        self.enter()?;
        self.drain_releases();
        Ok(self.memory.manager().usage())
    }

    fn memory_report(&mut self, _stream: StreamId) -> Result<MemoryReport, ServerError> {
        self.enter()?;
        self.drain_releases();
        Ok(self.memory.manager().report())
    }

    fn memory_cleanup(&mut self, _stream: StreamId) {
        if self.enter().is_err() {
            return;
        }
        self.drain_releases();
        // An explicit request: wait for the device so every free block can be released.
        self.settle();
        self.memory.manager().cleanup(&mut self.streams);
        self.transfers.trim();
    }

    fn set_memory_cap(&mut self, cap: Option<u64>, _stream: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        self.drain_releases();
        // Cached blocks can be given back only once the device is done with them.
        self.settle();
        Ok(self.memory.manager().set_cap(cap, &mut self.streams)?)
    }

    fn install_memory_pools(
        &mut self,
        options: cubert_runtime::memory::MemoryOptions,
        _stream: StreamId,
    ) -> Result<(), ServerError> {
        self.enter()?;
        self.drain_releases();
        // Freed blocks can be given back only once the device is done with them.
        self.settle();
        Ok(self
            .memory
            .manager()
            .install_options(options, &mut self.streams)?)
    }

    fn start_profile(&mut self, stream: StreamId) -> Result<ProfilingToken, ServerError> {
        self.enter()?;
        let raw = self.streams.raw(stream)?;
        self.profiler.start(raw)
    }

    fn end_profile(
        &mut self,
        stream: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        let started = self.profiler.take(&token)?;
        let to_profile_error = |error: ServerError| ProfileError::Server(Box::new(error));
        self.enter().map_err(to_profile_error)?;
        let raw = self
            .streams
            .raw(stream)
            .map_err(|f| to_profile_error(f.into()))?;
        self.profiler
            .end(started, raw, stream, &self.completion)
            .map_err(to_profile_error)
    }

    fn allocation_mode(&mut self, mode: MemoryAllocationMode, stream: StreamId) {
        self.memory.manager().modes().set(stream, mode);
    }

    fn begin_allocation_window(&mut self, mode: MemoryAllocationMode, stream: StreamId) {
        self.memory.manager().modes().push(stream, mode);
    }

    fn end_allocation_window(&mut self, stream: StreamId) {
        self.memory.manager().end_allocation_window(stream);
    }

    fn start_capture(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.enter()
            .and_then(|()| self.graphs.begin(&mut self.streams, stream))
            .map_err(|error| self.shared.observe(error))
    }

    fn end_capture(&mut self, stream: StreamId) -> Result<CapturedGraph, ServerError> {
        self.context
            .bind()
            .map_err(ServerError::from)
            .and_then(|()| {
                self.graphs
                    .finish(&mut self.streams, &mut self.status, stream)
            })
            .map_err(|error| self.shared.observe(error))
    }

    fn replay(&mut self, graph: u64, stream: StreamId) -> Result<(), ServerError> {
        self.enter()
            .and_then(|()| {
                self.graphs
                    .replay(graph, &mut self.streams, &self.completion, stream)
            })
            .map_err(|error| self.shared.observe(error))
    }

    fn drop_graph(&mut self, graph: u64) {
        self.graphs.destroy(graph, &self.context, &mut self.streams);
    }
}
