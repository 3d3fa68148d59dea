//! The CPU compute server: one per virtual CPU device.
//!
//! It owns the device's memory manager over host storage, a pool of worker threads for
//! kernels, and the errors queued per stream. Work runs in submission order on the device's
//! runner thread, so every stream is complete once its tasks ran: memory freed by a handle
//! is reusable at once by any stream, reads resolve immediately, and profiling measures the
//! host clock around work that has already finished.

use crate::device::{CpuDevice, CpuInfo};
use crate::executor;
use crate::fault::FaultPlan;
use crate::kernel::{CpuKernel, RawArray};
use crate::properties::{cpu_properties, memory_limit, worker_threads};
use crate::storage::{HostResource, HostStorage};
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::config::{CubertConfig, global_config};
use cubert_runtime::copy::{CopyDescriptor, gather, scatter};
use cubert_runtime::future::{DynFut, ready};
use cubert_runtime::handle::MemoryId;
use cubert_runtime::host_slice::HostSlice;
use cubert_runtime::layout::PitchedLayoutPolicy;
use cubert_runtime::memory::{
    DeviceMemory, ForeignMemory, HostOrdering, MemoryAllocationMode, MemoryLimits, MemoryReport,
    MemoryUsage,
};
use cubert_runtime::profile::{HostProfiles, ProfileDuration, ProfilingToken};
use cubert_runtime::server::{
    CallerWork, ComputeServer, DeviceService, ServerCommunication, ServerUtilities, StreamErrors,
};
use cubert_runtime::storage::ManagedResource;
use cubert_runtime::{
    Binding, Bytes, CubeCount, Device, DeviceId, ExecutionMode, Handle, IoError, KernelArguments,
    LaunchError, ProfileError, ServerError, StreamId,
};
use std::sync::Arc;

/// The server of one virtual CPU device. See the module docs.
pub struct CpuServer {
    device: CpuDevice,
    memory: DeviceMemory<HostStorage>,
    utilities: Arc<ServerUtilities<CpuServer>>,
    errors: StreamErrors,
    profiles: HostProfiles,
    pool: rayon::ThreadPool,
}

impl std::fmt::Debug for CpuServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuServer")
            .field("device", &self.device)
            .finish()
    }
}

impl CpuServer {
    /// A server for `device` with the settings of `config`.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the worker threads can't be started.
    pub fn new(device: CpuDevice, config: &CubertConfig) -> Result<Self, ServerError> {
        Self::with_storage(device, config, HostStorage::default())
    }

    /// A server for `device` whose storage allocations fail where `plan` says: fault
    /// injection, to test how the runtime handles allocation failures (see
    /// [`crate::fault`]). Keep a clone of `plan` to steer it and read its counts.
    ///
    /// # Errors
    /// As [`CpuServer::new`].
    pub fn with_fault_plan(
        device: CpuDevice,
        config: &CubertConfig,
        plan: FaultPlan,
    ) -> Result<Self, ServerError> {
        Self::with_storage(device, config, HostStorage::with_fault_plan(plan))
    }

    fn with_storage(
        device: CpuDevice,
        config: &CubertConfig,
        storage: HostStorage,
    ) -> Result<Self, ServerError> {
        let threads = worker_threads(&config.cpu);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads as usize)
            .thread_name(move |i| format!("cubert-cpu{}-worker{i}", device.index))
            .build()
            .map_err(|error| {
                ServerError::generic(format!("can't start the CPU worker threads: {error}"))
            })?;
        let properties = cpu_properties(device.index, &config.cpu);
        let limit = memory_limit(&config.cpu);
        let memory = DeviceMemory::new(
            device.to_id(),
            storage,
            config.memory.options(),
            MemoryLimits {
                max_allocation: limit,
                capacity: Some(limit),
            },
        );
        let layout = PitchedLayoutPolicy::new(
            memory.handles(),
            properties.memory.alignment,
            properties.memory.pitch_alignment,
            limit,
        );
        let info = CpuInfo {
            device_count: config.cpu.devices,
            threads,
            memory_limit: limit,
        };
        let utilities = ServerUtilities::new(device.to_id(), properties, info, layout, config);
        Ok(Self {
            device,
            memory,
            utilities: Arc::new(utilities),
            errors: StreamErrors::default(),
            profiles: HostProfiles::default(),
            pool,
        })
    }

    /// Frees the memory of every handle dropped since the last call. Work is complete once
    /// its task ran, so no stream can still use it.
    fn drain_releases(&mut self) {
        self.memory
            .drain_releases(|_, _| cubert_runtime::memory::StreamPoints::new());
        // The work that used released foreign memory has run: give it back now.
        drop(self.memory.manager().take_released_foreign());
    }

    /// The host range of `binding`.
    fn resolve(&mut self, binding: &Binding) -> Result<HostResource, IoError> {
        self.memory.resolve(binding)
    }

    fn read_one(&mut self, descriptor: &CopyDescriptor) -> Result<Bytes, ServerError> {
        let dense = descriptor.validate()?;
        let resource = self.resolve(&descriptor.handle)?;
        // SAFETY: the resource covers the binding's live bytes, and `validate` checked that
        // the descriptor stays inside the binding; nothing else touches device memory while
        // this task runs.
        let source = unsafe { std::slice::from_raw_parts(resource.as_ptr(), resource.len()) };
        if descriptor.is_contiguous() {
            // One copy into fresh memory, no zero fill first.
            return Ok(Bytes::from_bytes_vec(source[..dense].to_vec()));
        }
        // A broadcast (zero-stride) descriptor can ask for far more bytes than the buffer
        // holds: a failed allocation is an error, not an abort.
        let mut bytes = Bytes::try_zeroed(dense)?;
        gather(
            source,
            &descriptor.shape,
            &descriptor.strides,
            descriptor.elem_size,
            &mut bytes,
        );
        Ok(bytes)
    }

    /// Copies the described data straight from device memory into `out` (dense length).
    fn read_one_into(
        &mut self,
        descriptor: &CopyDescriptor,
        out: &mut [u8],
    ) -> Result<(), ServerError> {
        let dense = descriptor.validate()?;
        if dense != out.len() {
            return Err(ServerError::Io(IoError::invalid(format!(
                "read_into: the destination holds {} bytes but the data is {dense} bytes",
                out.len()
            ))));
        }
        let resource = self.resolve(&descriptor.handle)?;
        // SAFETY: as in `read_one`.
        let source = unsafe { std::slice::from_raw_parts(resource.as_ptr(), resource.len()) };
        if descriptor.is_contiguous() {
            cubert_runtime::bytes::copy_parallel(out, &source[..dense]);
        } else {
            gather(
                source,
                &descriptor.shape,
                &descriptor.strides,
                descriptor.elem_size,
                out,
            );
        }
        Ok(())
    }

    fn write_one(&mut self, descriptor: &CopyDescriptor, data: &Bytes) -> Result<(), IoError> {
        let dense = descriptor.validate()?;
        if dense != data.len() {
            return Err(IoError::invalid(format!(
                "writing {} bytes into a tensor of {dense} bytes",
                data.len()
            )));
        }
        let resource = self.resolve(&descriptor.handle)?;
        // SAFETY: as in `read_one`; the binding is alive (the task holds it).
        let target = unsafe { std::slice::from_raw_parts_mut(resource.as_ptr(), resource.len()) };
        scatter(
            data,
            &descriptor.shape,
            &descriptor.strides,
            descriptor.elem_size,
            target,
        );
        Ok(())
    }

    /// Copies `source`'s bytes into `destination` (`ComputeServer::copy`): a `memcpy` on
    /// several threads for large copies; nothing for a view copied onto itself.
    fn copy_one(&mut self, source: &Binding, destination: &Binding) -> Result<(), IoError> {
        let from = self.resolve(source)?;
        let to = self.resolve(destination)?;
        if from.len() != to.len() {
            return Err(IoError::invalid(format!(
                "copying {} bytes into {} bytes",
                from.len(),
                to.len()
            )));
        }
        let (start, end) = (from.as_ptr() as usize, to.as_ptr() as usize);
        if start == end || from.is_empty() {
            return Ok(());
        }
        if start < end + to.len() && end < start + from.len() {
            return Err(IoError::invalid(
                "the source and the destination of a copy overlap",
            ));
        }
        // SAFETY: both resources cover their bindings' live bytes (the task holds the
        // bindings), they don't overlap (checked above), and nothing else touches device
        // memory while this task runs.
        let (from, to) = unsafe {
            (
                std::slice::from_raw_parts(from.as_ptr(), from.len()),
                std::slice::from_raw_parts_mut(to.as_ptr(), to.len()),
            )
        };
        cubert_runtime::bytes::copy_parallel(to, from);
        Ok(())
    }

    fn cube_count(&mut self, count: &CubeCount) -> Result<(u32, u32, u32), LaunchError> {
        match count {
            CubeCount::Static(x, y, z) => Ok((*x, *y, *z)),
            CubeCount::Dynamic(binding) => {
                let resource = self.resolve(binding)?;
                if resource.len() < 12 {
                    return Err(LaunchError::unknown(format!(
                        "a dynamic cube count needs 12 bytes (three u32), the buffer has {}",
                        resource.len()
                    )));
                }
                // SAFETY: the resource has at least 12 live bytes.
                let bytes = unsafe { std::slice::from_raw_parts(resource.as_ptr(), 12) };
                let word = |i: usize| {
                    u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]])
                };
                let (x, y, z) = (word(0), word(4), word(8));
                let max = self.utilities.properties.hardware.max_cube_count;
                if x > max.0 || y > max.1 || z > max.2 {
                    return Err(cubert_runtime::ResourceLimitError::CubeCount {
                        requested: (x, y, z),
                        max,
                        backtrace: BackTrace::capture(),
                    }
                    .into());
                }
                Ok((x, y, z))
            }
        }
    }

    fn run_launch(
        &mut self,
        kernel: &CpuKernel,
        count: &CubeCount,
        arguments: &KernelArguments,
        mode: ExecutionMode,
    ) -> Result<(), ServerError> {
        if !arguments.tensor_maps.is_empty() {
            return Err(LaunchError::unknown("the CPU backend has no tensor maps").into());
        }
        let count = self.cube_count(count)?;
        let mut buffers = Vec::with_capacity(arguments.buffers.len());
        for binding in &arguments.buffers {
            let resource = self.resolve(binding).map_err(LaunchError::IoError)?;
            buffers.push(RawArray {
                ptr: resource.as_ptr(),
                len: resource.len(),
            });
        }
        executor::execute(
            &self.pool,
            kernel,
            count,
            &buffers,
            &arguments.info.data,
            mode,
        )
    }
}

impl Drop for CpuServer {
    /// Abandons the collective calls of this server still waiting for their peers and
    /// forgets its groups, so a later server of the same device starts clean.
    fn drop(&mut self) {
        crate::collective::leave_all(self);
    }
}

impl DeviceService for CpuServer {
    fn init(device_id: DeviceId) -> Result<Self, ServerError> {
        let config = global_config();
        if device_id.type_id != crate::device::CPU_DEVICE_TYPE
            || device_id.index_id >= config.cpu.devices
        {
            return Err(ServerError::generic(format!(
                "there is no CPU device {device_id:?}: {} virtual CPU device(s) are configured \
                 (set `[cpu] devices` in cubert.toml or CUBERT_CPU_DEVICES)",
                config.cpu.devices
            )));
        }
        CpuServer::new(CpuDevice::from_id(device_id), config)
    }
}

/// Collectives among the virtual devices (`crate::collective`) and direct copies between
/// them (`crate::peer`).
impl ServerCommunication for CpuServer {
    const SERVER_COMM_ENABLED: bool = true;
    type PeerSource = crate::peer::HostSource;
    type PeerReceipt = ();

    fn peer_copy_supported(_src: &ServerUtilities<Self>, _dst: &ServerUtilities<Self>) -> bool {
        // Every virtual device's memory is host memory of this process.
        true
    }

    fn peer_source(
        &mut self,
        descriptor: CopyDescriptor,
        stream: StreamId,
        // Every virtual device reads this process's host memory.
        _reader: DeviceId,
    ) -> Result<Option<Self::PeerSource>, ServerError> {
        self.errors.take(stream)?;
        descriptor.validate()?;
        let resource = self.resolve(&descriptor.handle)?;
        Ok(Some(crate::peer::HostSource::new(
            descriptor,
            resource.as_ptr(),
            resource.len(),
        )))
    }

    fn peer_pull(
        &mut self,
        source: Self::PeerSource,
        target: Binding,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        // A failed allocation of the target is queued on the stream: report it here.
        self.errors.take(stream)?;
        let resource = self.resolve(&target)?;
        // SAFETY: the resource covers the target binding's live bytes, which nothing else
        // touches while this task runs (the handle isn't returned to the caller yet).
        let bytes = unsafe { std::slice::from_raw_parts_mut(resource.as_ptr(), resource.len()) };
        source.copy_into(bytes)
    }

    fn sync_collective(&mut self, _stream: StreamId) -> Result<(), ServerError> {
        crate::collective::sync_collective(self)
    }

    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        crate::collective::comm_init(self, device_ids)
    }

    fn all_reduce(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: cubert_runtime::ElemType,
        _stream: StreamId,
        op: cubert_runtime::server::ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        crate::collective::all_reduce(self, &src, dst, dtype, op, device_ids)
    }

    fn all_gather(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: cubert_runtime::ElemType,
        _stream: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        crate::collective::all_gather(self, &src, dst, dtype, device_ids)
    }

    fn reduce_scatter(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: cubert_runtime::ElemType,
        _stream: StreamId,
        op: cubert_runtime::server::ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        crate::collective::reduce_scatter(self, &src, dst, dtype, op, device_ids)
    }

    fn broadcast(
        &mut self,
        buffer: Binding,
        dtype: cubert_runtime::ElemType,
        _stream: StreamId,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        crate::collective::broadcast(self, buffer, dtype, root, device_ids)
    }

    fn send(
        &mut self,
        desc: CopyDescriptor,
        dtype: cubert_runtime::ElemType,
        _stream: StreamId,
        device_id_dst: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        crate::collective::send(self, &desc, dtype, device_id_dst, device_ids)
    }

    fn recv(
        &mut self,
        handle: Handle,
        dtype: cubert_runtime::ElemType,
        _stream: StreamId,
        device_id_src: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        crate::collective::recv(self, handle.binding(), dtype, device_id_src, device_ids)
    }
}

impl ComputeServer for CpuServer {
    type Kernel = CpuKernel;
    type Info = CpuInfo;
    type MemoryLayoutPolicy = PitchedLayoutPolicy;
    type Storage = HostStorage;
    // Allocation and sync are bookkeeping here, a small upload a `memcpy`: on an idle
    // device they run on the caller. A launch runs the kernel, which stays on the runner
    // (the caller keeps the overlap).
    const CALLER_WORK: &'static [CallerWork] =
        &[CallerWork::Allocation, CallerWork::Upload, CallerWork::Sync];

    fn allocate(&mut self, id: MemoryId, size: u64, stream: StreamId) {
        self.drain_releases();
        // The manager already gave back what was cached before failing: nothing to wait for.
        let allocated = self
            .memory
            .allocate(id, size, stream, &mut HostOrdering, |_| false);
        if let Err(error) = allocated {
            self.errors.push(stream, error.into());
        }
    }

    fn import_memory(
        &mut self,
        id: MemoryId,
        memory: ForeignMemory,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        self.drain_releases();
        self.memory.import(id, memory, stream)?;
        Ok(())
    }

    fn utilities(&self) -> Arc<ServerUtilities<Self>> {
        self.utilities.clone()
    }

    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream: StreamId,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        if let Err(error) = self.errors.take(stream) {
            return ready(Err(error));
        }
        let result = descriptors
            .iter()
            .map(|descriptor| self.read_one(descriptor))
            .collect();
        ready(result)
    }

    unsafe fn read_into(
        &mut self,
        descriptor: CopyDescriptor,
        mut destination: HostSlice,
        stream: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        if let Err(error) = self.errors.take(stream) {
            return ready(Err(error));
        }
        // SAFETY: the caller lends the slice until the returned future resolves; it is
        // written here, before this returns.
        let out = unsafe { destination.as_mut_slice() };
        ready(self.read_one_into(&descriptor, out))
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream: StreamId) {
        for (descriptor, data) in &descriptors {
            if let Err(error) = self.write_one(descriptor, data) {
                self.errors.push(stream, error.into());
            }
        }
    }

    fn copy(&mut self, source: Binding, destination: Binding, stream: StreamId) {
        if let Err(error) = self.copy_one(&source, &destination) {
            self.errors.push(stream, error.into());
        }
    }

    fn sync(&mut self, stream: StreamId) -> DynFut<Result<(), ServerError>> {
        self.drain_releases();
        self.memory.manager().release_idle(&mut HostOrdering);
        ready(self.errors.take(stream))
    }

    fn get_resource(
        &mut self,
        binding: Binding,
        _stream: StreamId,
    ) -> Result<ManagedResource<HostResource>, ServerError> {
        let resource = self.resolve(&binding)?;
        Ok(ManagedResource::new(binding, resource))
    }

    unsafe fn launch(
        &mut self,
        kernel: CpuKernel,
        count: CubeCount,
        arguments: KernelArguments,
        mode: ExecutionMode,
        stream: StreamId,
    ) {
        if let Err(error) = self.run_launch(&kernel, &count, &arguments, mode) {
            self.errors.push(stream, error);
        }
    }

    fn flush(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.drain_releases();
        self.errors.take(stream)
    }

    fn memory_usage(&mut self, _stream: StreamId) -> Result<MemoryUsage, ServerError> {
        self.drain_releases();
        Ok(self.memory.manager().usage())
    }

    fn memory_report(&mut self, _stream: StreamId) -> Result<MemoryReport, ServerError> {
        self.drain_releases();
        Ok(self.memory.manager().report())
    }

    fn memory_cleanup(&mut self, _stream: StreamId) {
        self.drain_releases();
        self.memory.manager().cleanup(&mut HostOrdering);
    }

    fn set_memory_cap(&mut self, cap: Option<u64>, _stream: StreamId) -> Result<(), ServerError> {
        self.drain_releases();
        Ok(self.memory.manager().set_cap(cap, &mut HostOrdering)?)
    }

    fn install_memory_pools(
        &mut self,
        options: cubert_runtime::memory::MemoryOptions,
        _stream: StreamId,
    ) -> Result<(), ServerError> {
        self.drain_releases();
        Ok(self
            .memory
            .manager()
            .install_options(options, &mut HostOrdering)?)
    }

    fn start_profile(&mut self, _stream: StreamId) -> Result<ProfilingToken, ServerError> {
        Ok(self.profiles.start())
    }

    fn end_profile(
        &mut self,
        _stream: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        self.profiles.end(token)
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
}
