//! The dry-run server: every operation of a real server, checked the same way, run against
//! pools of [`VirtualStorage`] instead of a device.
//!
//! Allocations go through the real [`DeviceMemory`] (same options, same policy as the
//! target), so the pools' peaks are those the device would see. Launches, writes, copies
//! and reads resolve every binding (an invalid or released handle fails exactly as on a
//! device) and are then counted, not run: reads return zeroed bytes of the right length.

use super::kernel::DryRunKernel;
use super::storage::{VirtualRange, VirtualStorage};
use super::{DryRunDevice, DryRunInfo, DryRunReport, DryRunTarget};
use crate::bytes::Bytes;
use crate::config::CubertConfig;
use crate::copy::CopyDescriptor;
use crate::device::Device;
use crate::error::{IoError, LaunchError, ProfileError, ServerError};
use crate::future::{DynFut, ready};
use crate::handle::{Binding, MemoryId};
use crate::kernel::{CubeCount, ExecutionMode, KernelArguments};
use crate::layout::PitchedLayoutPolicy;
use crate::memory::{
    DeviceMemory, HostOrdering, MemoryAllocationMode, MemoryLimits, MemoryOptions, MemoryReport,
    MemoryUsage,
};
use crate::profile::{HostProfiles, ProfileDuration, ProfilingToken};
use crate::properties::TimingMethod;
use crate::server::{
    CallerWork, ComputeServer, DeviceService, ServerCommunication, ServerUtilities, StreamErrors,
};
use crate::storage::ManagedResource;
use crate::stream::StreamId;
use std::sync::Arc;

/// The server of one dry-run device. See the module docs.
pub struct DryRunServer {
    memory: DeviceMemory<VirtualStorage>,
    utilities: Arc<ServerUtilities<DryRunServer>>,
    errors: StreamErrors,
    profiles: HostProfiles,
    counts: DryRunReport,
}

impl std::fmt::Debug for DryRunServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DryRunServer")
            .field("device", &self.utilities.device_id)
            .finish()
    }
}

impl DryRunServer {
    /// A server of `device` mirroring `target`, with `config`'s client settings (streams,
    /// logging, profiling). The memory options are the target's.
    pub fn new(device: DryRunDevice, target: DryRunTarget, config: &CubertConfig) -> Self {
        let DryRunTarget {
            mut properties,
            page_size,
            memory: options,
        } = target;
        let memory_properties = properties.memory.clone();
        let storage = VirtualStorage::new(
            memory_properties.alignment,
            memory_properties.total_memory,
            page_size,
        );
        let memory = DeviceMemory::new(
            device.to_id(),
            storage,
            options.options(),
            MemoryLimits {
                max_allocation: memory_properties.max_allocation_size,
                capacity: Some(memory_properties.total_memory),
            },
        );
        let layout = PitchedLayoutPolicy::new(
            memory.handles(),
            memory_properties.alignment,
            memory_properties.pitch_alignment,
            memory_properties.max_allocation_size,
        );
        properties.name = format!("dry run of {}", properties.name);
        // What needs a device or a second one isn't mirrored.
        properties.features.graphs = false;
        properties.features.peer_to_peer = false;
        properties.features.collectives = false;
        properties.features.memory_import = false;
        properties.features.tma = false;
        properties.timing_method = TimingMethod::System;
        let info = DryRunInfo { page_size };
        let utilities = ServerUtilities::new(device.to_id(), properties, info, layout, config);
        Self {
            memory,
            utilities: Arc::new(utilities),
            errors: StreamErrors::default(),
            profiles: HostProfiles::default(),
            counts: DryRunReport::default(),
        }
    }

    /// What the workload did so far: its memory peaks and the work it queued.
    pub fn report(&mut self) -> DryRunReport {
        self.drain_releases();
        DryRunReport {
            memory: self.memory.manager().report(),
            ..self.counts.clone()
        }
    }

    fn drain_releases(&mut self) {
        // Nothing runs, so no released memory is still in use.
        self.memory
            .drain_releases(|_, _| crate::memory::StreamPoints::new());
    }

    fn resolve(&mut self, binding: &Binding) -> Result<VirtualRange, IoError> {
        self.memory.resolve(binding)
    }

    fn check_read(&mut self, descriptor: &CopyDescriptor) -> Result<usize, ServerError> {
        let dense = descriptor.validate()?;
        self.resolve(&descriptor.handle)?;
        Ok(dense)
    }

    fn check_launch(
        &mut self,
        count: &CubeCount,
        arguments: &KernelArguments,
    ) -> Result<(), ServerError> {
        if let CubeCount::Dynamic(binding) = count {
            let range = self.resolve(binding).map_err(LaunchError::IoError)?;
            if range.size < 12 {
                return Err(LaunchError::unknown(format!(
                    "a dynamic cube count needs 12 bytes (three u32), the buffer has {}",
                    range.size
                ))
                .into());
            }
        }
        for binding in &arguments.buffers {
            self.resolve(binding).map_err(LaunchError::IoError)?;
        }
        Ok(())
    }
}

impl DeviceService for DryRunServer {
    /// A dry run of [`DryRunTarget::default`] (a GPU of 80 GiB).
    fn init(device_id: crate::device::DeviceId) -> Result<Self, ServerError> {
        if device_id.type_id != super::DRY_RUN_DEVICE_TYPE {
            return Err(ServerError::generic(format!(
                "{device_id:?} is not a dry-run device"
            )));
        }
        Ok(Self::new(
            DryRunDevice::from_id(device_id),
            DryRunTarget::default(),
            crate::config::global_config(),
        ))
    }
}

impl ServerCommunication for DryRunServer {
    const SERVER_COMM_ENABLED: bool = false;
    type PeerSource = ();
    type PeerReceipt = ();
}

impl ComputeServer for DryRunServer {
    type Kernel = DryRunKernel;
    type Info = DryRunInfo;
    type MemoryLayoutPolicy = PitchedLayoutPolicy;
    type Storage = VirtualStorage;
    // Everything is bookkeeping here (a launch only counts): on an idle device all of it
    // runs on the caller.
    const CALLER_WORK: &'static [CallerWork] =
        &[CallerWork::Allocation, CallerWork::Launch, CallerWork::Sync];

    fn allocate(&mut self, id: MemoryId, size: u64, stream: StreamId) {
        self.drain_releases();
        self.counts.allocations += 1;
        let allocated = self
            .memory
            .allocate(id, size, stream, &mut HostOrdering, |_| false);
        if let Err(error) = allocated {
            self.errors.push(stream, error.into());
        }
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
            .map(|descriptor| {
                let dense = self.check_read(descriptor)?;
                self.counts.bytes_read += dense as u64;
                Ok(Bytes::from_bytes_vec(vec![0; dense]))
            })
            .collect();
        ready(result)
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream: StreamId) {
        for (descriptor, data) in &descriptors {
            let checked = self.check_read(descriptor).and_then(|dense| {
                if dense == data.len() {
                    Ok(())
                } else {
                    Err(IoError::invalid(format!(
                        "{} bytes written to a region of {dense}",
                        data.len()
                    ))
                    .into())
                }
            });
            match checked {
                Ok(()) => self.counts.bytes_written += data.len() as u64,
                Err(error) => self.errors.push(stream, error),
            }
        }
    }

    fn copy(&mut self, source: Binding, destination: Binding, stream: StreamId) {
        let checked = self.resolve(&source).and_then(|from| {
            let to = self.resolve(&destination)?;
            if from.size == to.size {
                Ok(from.size)
            } else {
                Err(IoError::invalid(format!(
                    "a copy of {} bytes into {}",
                    from.size, to.size
                )))
            }
        });
        match checked {
            Ok(size) => self.counts.bytes_copied += size,
            Err(error) => self.errors.push(stream, error.into()),
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
    ) -> Result<ManagedResource<VirtualRange>, ServerError> {
        let range = self.resolve(&binding)?;
        Ok(ManagedResource::new(binding, range))
    }

    unsafe fn launch(
        &mut self,
        _kernel: DryRunKernel,
        count: CubeCount,
        arguments: KernelArguments,
        _mode: ExecutionMode,
        stream: StreamId,
    ) {
        match self.check_launch(&count, &arguments) {
            Ok(()) => self.counts.launches += 1,
            Err(error) => self.errors.push(stream, error),
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
        options: MemoryOptions,
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
