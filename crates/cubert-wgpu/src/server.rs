//! The wgpu compute server: one per adapter a client uses.
//!
//! It owns the wgpu device and queue, the memory manager over wgpu buffers, the pipelines,
//! one pending command encoder and the errors queued per stream. `docs/wgpu.md` in the
//! repository walks through the data flow; in short:
//!
//! - launches are dispatches recorded into one compute pass of the pending encoder (until
//!   something else is recorded), submitted on `flush`, `sync`, reads, writes and every
//!   [`LAUNCHES_PER_SUBMIT`] launches; each launch prints the arrays its kernel accesses
//!   only by lines of four as `vec4`s where they start on 16 bytes and are whole 16-byte
//!   vectors;
//! - large aligned copies run as a kernel on GPUs, the driver's buffer copy otherwise;
//! - wgpu orders every command of its one queue, so all streams are ordered after each
//!   other and freed memory is reusable at once (`HostOrdering`, as on the CPU);
//! - reads and syncs return futures that wait for the device on the awaiting thread;
//!   allocations, syncs, reads and the first launch after a sync or read run on the
//!   caller's thread while the runner is idle (`ComputeServer::CALLER_WORK`), uploads and
//!   later launches on the runner;
//! - each launch's info words go into one buffer per submission (`InfoArena`);
//! - checked kernels count out-of-bounds accesses in a status word, read back by `sync`
//!   and reads; wgpu's validation errors and a lost device land in an error list that the
//!   next `flush`, `sync` or read returns.

use crate::device::{WgpuDevice, WgpuInfo};
use crate::disk_cache::DiskCache;
use crate::info_arena::InfoArena;
use crate::kernel::WgpuKernel;
use crate::lang::WgslTarget;
use crate::pipeline::PipelineCache;
use crate::properties::{wanted_features, wgpu_properties, wgsl_target};
use crate::readback::Readback;
use crate::storage::{WgpuResource, WgpuStorage};
use crate::timestamps::StartedProfile;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::config::{CubertConfig, global_config};
use cubert_runtime::copy::{CopyDescriptor, gather, scatter};
use cubert_runtime::future::{DynFut, ready};
use cubert_runtime::handle::MemoryId;
use cubert_runtime::kernel::standard::elementwise::copy_lines;
use cubert_runtime::kernel::{KernelMetadata, MetadataBindingInfo};
use cubert_runtime::layout::PitchedLayoutPolicy;
use cubert_runtime::memory::{
    DeviceMemory, HostOrdering, MemoryAllocationMode, MemoryLimits, MemoryReport, MemoryUsage,
};
use cubert_runtime::profile::{ProfileDuration, ProfileTicks, ProfilingToken};
use cubert_runtime::properties::TimingMethod;
use cubert_runtime::server::{
    CallerWork, ComputeServer, DeviceService, FirstLaunchAfterWait, ServerCommunication,
    ServerUtilities, StreamErrors,
};
use cubert_runtime::storage::ManagedResource;
use cubert_runtime::{
    Binding, Bytes, CubeCount, CubeDim, Device, DeviceId, ExecutionMode, IoError, KernelArguments,
    LaunchError, ProfileError, ServerError, StreamId,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

/// Smallest device-to-device copy that runs as a kernel (`copy_lines`) rather than as the
/// driver's buffer copy, on GPUs: NVIDIA's Vulkan driver copies buffers at about 850 GB/s
/// on an H200, a kernel of `vec4` lines at about 4 TB/s (`docs/wgpu.md`); below this size
/// the copy command's lower fixed cost wins.
const COPY_KERNEL_MIN_BYTES: u64 = 1 << 20;

/// Units per cube of the copy kernel.
const COPY_KERNEL_UNITS: u32 = 256;

/// Launches recorded before the pending encoder is submitted on its own.
pub const LAUNCHES_PER_SUBMIT: usize = 64;

/// Streams with a status word of their own.
pub const STATUS_SLOTS: u64 = 64;

/// Bytes of one stream's status slot (the storage-binding offset alignment).
const STATUS_SLOT_BYTES: u64 = 256;

use crate::adapter::DeviceErrors;

/// Settings of a wgpu server beyond the configuration file's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WgpuServerOptions {
    /// Most bytes the server may hold from the device (none: until the driver refuses).
    pub memory_limit: Option<u64>,
    /// Row alignment of pitched tensors in bytes (none: dense rows).
    pub pitch_alignment: Option<u64>,
}

/// The server of one wgpu device. See the module docs.
pub struct WgpuServer {
    device: WgpuDevice,
    gpu: wgpu::Device,
    queue: wgpu::Queue,
    features: wgpu::Features,
    limits: wgpu::Limits,
    memory: DeviceMemory<WgpuStorage>,
    utilities: Arc<ServerUtilities<WgpuServer>>,
    errors: StreamErrors,
    device_errors: DeviceErrors,
    pipelines: PipelineCache,
    /// The compute pass open in `encoder`, holding the launches recorded since anything
    /// else was ([`WgpuServer::compute_pass`]). Declared before the encoder, so that it ends
    /// before the encoder is dropped.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: Option<wgpu::CommandEncoder>,
    recorded: usize,
    /// The info words of the launches in `encoder`, bound from one buffer.
    info_arena: InfoArena,
    /// Whether a kernel was launched since the caller last waited for the device (a sync or
    /// a read): a launch runs on an idle caller's thread only when none was.
    launches: FirstLaunchAfterWait,
    /// One 256-byte slot per stream (up to [`STATUS_SLOTS`], then shared round the slots):
    /// word 0 of a stream's slot counts its kernels' out-of-bounds accesses.
    status: wgpu::Buffer,
    status_slots: HashMap<StreamId, u64>,
    /// Per stream, the checked kernels launched since its status word was last read.
    checked_since: HashMap<StreamId, Vec<String>>,
    /// The started profiles: host-timed (`Instant`) or device-timed (timestamps).
    profiles: HashMap<u64, StartedTiming>,
    /// Where device-timed profiles lie on the host clock (shared by all of them).
    clock_anchor: Arc<crate::timestamps::ClockAnchor>,
    next_token: u64,
    /// Whether large aligned copies run as a kernel: on GPUs, not on a CPU adapter
    /// (lavapipe's buffer copy is a `memcpy`, five times its kernel's speed).
    kernel_copies: bool,
    /// The copy kernel of large copies, built on first use.
    copy_kernel: Option<WgpuKernel>,
}

/// How a started profile is timed.
#[derive(Debug)]
enum StartedTiming {
    /// The host clock, after waiting for the device.
    Host(Instant),
    /// Timestamp queries in the command stream.
    Device(StartedProfile),
}

impl std::fmt::Debug for WgpuServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuServer")
            .field("device", &self.device)
            .finish()
    }
}

impl WgpuServer {
    /// A server for `device` with the settings of `config`.
    ///
    /// # Errors
    /// [`ServerError::Generic`] when wgpu has no such adapter or it refuses a device.
    pub fn new(device: WgpuDevice, config: &CubertConfig) -> Result<Self, ServerError> {
        Self::with_options(device, config, &WgpuServerOptions::default())
    }

    /// A server for `device` with the settings of `config` and `options`.
    ///
    /// # Errors
    /// As [`WgpuServer::new`].
    pub fn with_options(
        device: WgpuDevice,
        config: &CubertConfig,
        options: &WgpuServerOptions,
    ) -> Result<Self, ServerError> {
        let adapters = crate::adapter::adapters();
        let adapter = adapters.get(device.index as usize).ok_or_else(|| {
            ServerError::generic(format!(
                "there is no wgpu device {}: wgpu finds {} adapter(s) (`cubert info` lists them)",
                device.index,
                adapters.len()
            ))
        })?;
        let features = wanted_features(adapter);
        let limits = adapter.limits();
        let (gpu, queue, device_errors) =
            crate::adapter::open_device(device.index, adapter, features, &limits)?;
        let spirv = crate::spirv::SpirvTarget::of(adapter, features, config.wgpu.kernels);
        let mut properties = wgpu_properties(adapter, &limits, features);
        properties.features.strict_float_math = spirv
            .as_ref()
            .is_some_and(crate::spirv::SpirvTarget::strict_float_math);
        if let Some(pitch) = options.pitch_alignment {
            properties.memory.pitch_alignment = pitch.max(1);
        }
        if let Some(limit) = options.memory_limit {
            properties.memory.total_memory = limit;
            properties.memory.max_allocation_size =
                properties.memory.max_allocation_size.min(limit);
        }
        let max_allocation = properties.memory.max_allocation_size;
        let memory = DeviceMemory::new(
            device.to_id(),
            WgpuStorage::new(gpu.clone()),
            config.memory.options(),
            MemoryLimits {
                max_allocation,
                capacity: options.memory_limit,
            },
        );
        let layout = PitchedLayoutPolicy::new(
            memory.handles(),
            properties.memory.alignment,
            properties.memory.pitch_alignment,
            max_allocation,
        );
        let adapter_info = adapter.get_info();
        let disk = DiskCache::open(
            &gpu,
            &adapter_info,
            features,
            config.compilation.disk_cache_dir().as_deref(),
        );
        let pipelines = PipelineCache::new(disk, spirv);
        let info = WgpuInfo {
            adapter: adapter_info.name.clone(),
            api: format!("{:?}", adapter_info.backend),
            driver: format!("{} {}", adapter_info.driver, adapter_info.driver_info)
                .trim()
                .to_string(),
            software: adapter_info.device_type == wgpu::DeviceType::Cpu,
            device_count: adapters.len() as u32,
            pipeline_cache: pipelines.disk_path().map(Path::to_path_buf),
            kernels: pipelines.kernel_format(),
        };
        let status = gpu.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cubert status"),
            size: STATUS_SLOTS * STATUS_SLOT_BYTES,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let kernel_copies = !info.software;
        let info_arena =
            InfoArena::new(&gpu, u64::from(limits.min_storage_buffer_offset_alignment));
        let utilities = ServerUtilities::new(device.to_id(), properties, info, layout, config);
        Ok(Self {
            device,
            gpu,
            queue,
            features,
            limits,
            memory,
            utilities: Arc::new(utilities),
            errors: StreamErrors::default(),
            device_errors,
            pipelines,
            encoder: None,
            pass: None,
            recorded: 0,
            info_arena,
            launches: FirstLaunchAfterWait::default(),
            status,
            status_slots: HashMap::new(),
            checked_since: HashMap::new(),
            profiles: HashMap::new(),
            clock_anchor: crate::timestamps::ClockAnchor::new(),
            next_token: 0,
            kernel_copies,
            copy_kernel: None,
        })
    }

    /// The pending encoder, started if there is none; the open compute pass, if any, ends
    /// first (an encoder records nothing else while a pass is open).
    fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        let gpu = &self.gpu;
        self.encoder.get_or_insert_with(|| {
            gpu.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("cubert"),
            })
        })
    }

    /// The open compute pass of the pending encoder, begun if there is none. Launches
    /// recorded one after another share it: a dispatch is its own usage scope, so wgpu
    /// orders dependent dispatches within a pass as it does across passes, and one pass
    /// per launch cost about 4 µs of each back-to-back launch on an H200 with NVIDIA's
    /// Vulkan driver (wgpu alone, `examples/launch_overhead.rs`).
    fn compute_pass(&mut self) -> &mut wgpu::ComputePass<'static> {
        let (pass, encoder, gpu) = (&mut self.pass, &mut self.encoder, &self.gpu);
        pass.get_or_insert_with(|| {
            encoder
                .get_or_insert_with(|| {
                    gpu.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("cubert"),
                    })
                })
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("cubert launches"),
                    timestamp_writes: None,
                })
                .forget_lifetime()
        })
    }

    /// Submits the pending encoder, if any, after the info words of its launches.
    fn submit(&mut self) {
        self.pass = None;
        self.info_arena.write(&self.queue);
        if let Some(encoder) = self.encoder.take() {
            self.queue.submit([encoder.finish()]);
        }
        self.recorded = 0;
    }

    /// Submits everything and waits for the device (profiling's clock reads).
    fn wait_idle(&mut self) -> Result<(), ServerError> {
        self.submit();
        self.gpu
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|error| ServerError::generic(format!("wgpu: waiting for the device: {error}")))
    }

    /// Moves the errors wgpu reported on its own onto `stream`, then takes the stream's.
    fn take_errors(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let reported: Vec<String> = std::mem::take(
            &mut *self
                .device_errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for message in reported {
            self.errors
                .push(stream, ServerError::generic(format!("wgpu: {message}")));
        }
        self.errors.take(stream)
    }

    /// Frees the memory of every handle dropped since the last call. wgpu orders all
    /// commands, so any later command may reuse it.
    fn drain_releases(&mut self) {
        self.memory
            .drain_releases(|_, _| cubert_runtime::memory::StreamPoints::new());
    }

    fn resolve(&mut self, binding: &Binding) -> Result<WgpuResource, IoError> {
        self.memory.resolve(binding)
    }

    /// A copy of the status word and a reset of it, recorded if a checked kernel ran since
    /// the last one; with the names of those kernels.
    fn record_status_check(&mut self, stream: StreamId) -> Option<(Readback, Vec<String>)> {
        let names = self
            .checked_since
            .remove(&stream)
            .filter(|names| !names.is_empty())?;
        let offset = self.status_offset(stream);
        let gpu = self.gpu.clone();
        let status = self.status.clone();
        let encoder = self.encoder();
        let readback = Readback::record(&gpu, encoder, &status, offset, 4);
        encoder.clear_buffer(&status, offset, Some(4));
        Some((readback, names))
    }

    /// Where `stream`'s status word is in the status buffer.
    fn status_offset(&mut self, stream: StreamId) -> u64 {
        let next = self.status_slots.len() as u64 % STATUS_SLOTS;
        *self.status_slots.entry(stream).or_insert(next) * STATUS_SLOT_BYTES
    }

    /// The bytes `offset..offset + size` of `buffer`, read at once (the runner waits: used
    /// only by writes that aren't whole aligned words).
    fn read_now(
        &mut self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, ServerError> {
        let gpu = self.gpu.clone();
        let readback = Readback::record(&gpu, self.encoder(), buffer, offset, size);
        self.submit();
        readback.wait()
    }

    fn write_one(&mut self, descriptor: &CopyDescriptor, data: &Bytes) -> Result<(), ServerError> {
        let dense = descriptor.validate()?;
        if dense != data.len() {
            return Err(IoError::invalid(format!(
                "writing {} bytes into a tensor of {dense} bytes",
                data.len()
            ))
            .into());
        }
        let resource = self.resolve(&descriptor.handle)?;
        // Commands recorded before this write run before it.
        self.submit();
        if descriptor.is_contiguous() && resource.offset % 4 == 0 && dense % 4 == 0 {
            if dense > 0 {
                self.queue
                    .write_buffer(&resource.buffer, resource.offset, &data[..dense]);
            }
            return Ok(());
        }
        // Not whole words, or strided: patch the enclosing words on the host.
        let start = resource.offset & !3;
        let end = (resource.offset + resource.size).next_multiple_of(4);
        let mut words = self.read_now(&resource.buffer, start, end - start)?;
        let skip = (resource.offset - start) as usize;
        let target = &mut words[skip..skip + resource.size as usize];
        if descriptor.is_contiguous() {
            target[..dense].copy_from_slice(&data[..dense]);
        } else {
            scatter(
                data,
                &descriptor.shape,
                &descriptor.strides,
                descriptor.elem_size,
                target,
            );
        }
        self.queue.write_buffer(&resource.buffer, start, &words);
        Ok(())
    }

    fn copy_one(
        &mut self,
        source: &Binding,
        destination: &Binding,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let from = self.resolve(source)?;
        let to = self.resolve(destination)?;
        if from.size != to.size {
            return Err(IoError::invalid(format!(
                "copying {} bytes into {} bytes",
                from.size, to.size
            ))
            .into());
        }
        let same_buffer = from.buffer == to.buffer;
        if same_buffer && from.offset == to.offset {
            return Ok(());
        }
        if same_buffer && from.offset < to.offset + to.size && to.offset < from.offset + from.size {
            return Err(
                IoError::invalid("the source and the destination of a copy overlap").into(),
            );
        }
        if from.offset % 4 != 0 || to.offset % 4 != 0 || from.size % 4 != 0 {
            // Not whole words: through the host.
            let start = from.offset & !3;
            let end = (from.offset + from.size).next_multiple_of(4);
            let words = self.read_now(&from.buffer, start, end - start)?;
            let skip = (from.offset - start) as usize;
            let bytes = Bytes::from_bytes_vec(words[skip..skip + from.size as usize].to_vec());
            let descriptor = CopyDescriptor::bytes(destination.clone());
            return self.write_one(&descriptor, &bytes);
        }
        if self.kernel_copies
            && from.size >= COPY_KERNEL_MIN_BYTES
            && from.size % 16 == 0
            && from.size / 16 <= u64::from(u32::MAX)
            && from.offset % 16 == 0
            && to.offset % 16 == 0
        {
            return self.copy_by_kernel(source, destination, from.size / 16, stream);
        }
        let gpu = self.gpu.clone();
        let encoder = self.encoder();
        if same_buffer {
            // WebGPU copies between two buffers: go through a temporary one.
            let temporary = gpu.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cubert copy"),
                size: from.size,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(&from.buffer, from.offset, &temporary, 0, from.size);
            encoder.copy_buffer_to_buffer(&temporary, 0, &to.buffer, to.offset, to.size);
        } else {
            encoder.copy_buffer_to_buffer(
                &from.buffer,
                from.offset,
                &to.buffer,
                to.offset,
                from.size,
            );
        }
        Ok(())
    }

    /// Copies `lines` 16-byte lines from `source` to `destination` (distinct, 16-byte
    /// aligned ranges) with the `copy_lines` kernel, as `vec4`s.
    fn copy_by_kernel(
        &mut self,
        source: &Binding,
        destination: &Binding,
        lines: u64,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let kernel = match &self.copy_kernel {
            Some(kernel) => kernel.clone(),
            None => {
                let definition = copy_lines::definition();
                let ir = definition
                    .ir()
                    .map_err(|error| LaunchError::unknown(error.to_string()))?;
                let kernel = WgpuKernel::new(
                    definition.id(),
                    definition.name(),
                    ir.clone(),
                    CubeDim::new_1d(COPY_KERNEL_UNITS),
                );
                self.copy_kernel = Some(kernel.clone());
                kernel
            }
        };
        let count = cubert_runtime::ops::elementwise_grid(
            &self.utilities.properties,
            lines,
            COPY_KERNEL_UNITS,
        );
        let arguments = KernelArguments::new()
            .with_buffers(vec![source.clone(), destination.clone()])
            .with_info(MetadataBindingInfo::custom(vec![lines]));
        self.run_launch(
            &kernel,
            &count,
            &arguments,
            ExecutionMode::Unchecked,
            stream,
        )
    }

    fn run_launch(
        &mut self,
        kernel: &WgpuKernel,
        count: &CubeCount,
        arguments: &KernelArguments,
        mode: ExecutionMode,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        if !arguments.tensor_maps.is_empty() {
            return Err(ServerError::unsupported(
                "tensor maps",
                crate::device::BACKEND_NAME,
            ));
        }
        let checked = mode != ExecutionMode::Unchecked;
        let alignment = u64::from(self.limits.min_storage_buffer_offset_alignment.max(4));
        let candidates = kernel.vector_candidates();
        let mut vector_lines = 0u64;
        let mut resources = Vec::with_capacity(arguments.buffers.len());
        for (slot, binding) in arguments.buffers.iter().enumerate() {
            let resource = self.resolve(binding).map_err(LaunchError::IoError)?;
            let base = resource.offset - resource.offset % alignment;
            let relative = resource.offset - base;
            // A line array prints as `vec4` where it is whole vectors of the binding: its
            // start and its size multiples of 16 bytes, so no access reaches past the
            // handle into a neighbour in the same buffer.
            if slot < 64
                && candidates & (1 << slot) != 0
                && relative % 16 == 0
                && resource.size % 16 == 0
                && resource.size > 0
            {
                vector_lines |= 1 << slot;
            }
            resources.push((resource, base, relative));
        }
        let target = WgslTarget {
            vector_lines,
            ..wgsl_target(self.features, checked)
        };
        let pipeline = self.pipelines.get(&self.gpu, target, kernel)?;
        if arguments.buffers.len() != pipeline.elem_sizes.len() {
            return Err(LaunchError::unknown(format!(
                "kernel `{}` takes {} arrays, the launch binds {}",
                kernel.name(),
                pipeline.elem_sizes.len(),
                arguments.buffers.len()
            ))
            .into());
        }
        let mut words: Vec<u32> =
            Vec::with_capacity(2 * (arguments.buffers.len() + arguments.info.data.len()));
        let mut ranges = Vec::with_capacity(arguments.buffers.len());
        for (slot, (resource, base, relative)) in resources.into_iter().enumerate() {
            let elem = pipeline.elem_sizes[slot];
            if relative % elem != 0 {
                return Err(LaunchError::unknown(format!(
                    "kernel `{}`: array {slot} starts {} bytes into its memory, not on a \
                     {elem}-byte element",
                    kernel.name(),
                    resource.offset
                ))
                .into());
            }
            let size = if vector_lines & (1 << slot) != 0 {
                relative + resource.size
            } else {
                (relative + resource.size)
                    .max(4)
                    .next_multiple_of(4)
                    .min(resource.buffer.size() - base)
            };
            words.push(u32::try_from(relative / elem).unwrap_or(u32::MAX));
            words.push(u32::try_from(resource.size / elem).unwrap_or(u32::MAX));
            ranges.push((resource.buffer, base, size));
        }
        for word in &arguments.info.data {
            words.push(*word as u32);
            words.push((*word >> 32) as u32);
        }
        if words.is_empty() {
            words.push(0);
        }
        let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
        let status_offset = self.status_offset(stream);
        let (info, info_offset) = self.info_arena.push(&self.gpu, &self.queue, &bytes);
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.status,
                    offset: status_offset,
                    size: wgpu::BufferSize::new(STATUS_SLOT_BYTES),
                }),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &info,
                    offset: info_offset,
                    size: wgpu::BufferSize::new(bytes.len() as u64),
                }),
            },
        ];
        for (slot, (buffer, offset, size)) in ranges.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: 2 + slot as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset: *offset,
                    size: wgpu::BufferSize::new(*size),
                }),
            });
        }
        let bind_group = self.gpu.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.name()),
            layout: &pipeline.layout,
            entries: &entries,
        });
        let indirect = match count {
            CubeCount::Static(x, y, z) => {
                let max = self.limits.max_compute_workgroups_per_dimension;
                if *x > max || *y > max || *z > max {
                    return Err(
                        LaunchError::from(cubert_runtime::ResourceLimitError::CubeCount {
                            requested: (*x, *y, *z),
                            max: (max, max, max),
                            backtrace: BackTrace::capture(),
                        })
                        .into(),
                    );
                }
                None
            }
            CubeCount::Dynamic(binding) => {
                let resource = self.resolve(binding).map_err(LaunchError::IoError)?;
                if resource.size < 12 || resource.offset % 4 != 0 {
                    return Err(LaunchError::unknown(format!(
                        "a dynamic cube count needs 12 bytes (three u32) on a 4-byte boundary; \
                         the buffer has {} at offset {}",
                        resource.size, resource.offset
                    ))
                    .into());
                }
                // Copied into a buffer of its own: the count's handle may share a pooled
                // buffer with the kernel's arrays, and WebGPU refuses one buffer as indirect
                // arguments and as read-write storage in the same dispatch.
                let counts = self.gpu.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("cubert cube count"),
                    size: 12,
                    usage: wgpu::BufferUsages::INDIRECT | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.encoder().copy_buffer_to_buffer(
                    &resource.buffer,
                    resource.offset,
                    &counts,
                    0,
                    12,
                );
                Some(counts)
            }
        };
        let name = kernel.name().to_string();
        let pass = self.compute_pass();
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        match (count, indirect) {
            (CubeCount::Static(x, y, z), _) => pass.dispatch_workgroups(*x, *y, *z),
            (_, Some(counts)) => pass.dispatch_workgroups_indirect(&counts, 0),
            (CubeCount::Dynamic(_), None) => {}
        }
        // A kernel without checked accesses can't count one: its stream's next sync need
        // not read the status word back for it.
        if checked && pipeline.counts_out_of_bounds {
            let checked_kernels = self.checked_since.entry(stream).or_default();
            if !checked_kernels.contains(&name) {
                checked_kernels.push(name);
            }
        }
        self.recorded += 1;
        if self.recorded >= LAUNCHES_PER_SUBMIT {
            self.submit();
        }
        Ok(())
    }
}

/// The error of a non-zero status word: `accesses` out-of-bounds accesses by one of
/// `kernels`.
fn out_of_bounds(kernels: &[String], accesses: u64) -> ServerError {
    ServerError::OutOfBounds {
        kernel: kernels.join(", "),
        accesses,
        first: "the wgpu backend counts accesses, it doesn't record them".to_string(),
        backtrace: BackTrace::capture(),
    }
}

/// Checks a status word read back: `Err` if it counted accesses.
fn check_status(bytes: &[u8], kernels: &[String]) -> Result<(), ServerError> {
    let count = bytes
        .get(..4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .unwrap_or(0);
    if count > 0 {
        Err(out_of_bounds(kernels, u64::from(count)))
    } else {
        Ok(())
    }
}

impl DeviceService for WgpuServer {
    fn init(device_id: DeviceId) -> Result<Self, ServerError> {
        if device_id.type_id != crate::device::WGPU_DEVICE_TYPE {
            return Err(ServerError::generic(format!(
                "{device_id:?} is not a wgpu device"
            )));
        }
        WgpuServer::new(WgpuDevice::from_id(device_id), global_config())
    }
}

/// wgpu has no peer copies or collectives: `to_client` goes through the host, and the
/// collectives are `Unsupported`.
impl ServerCommunication for WgpuServer {
    const SERVER_COMM_ENABLED: bool = false;
    type PeerSource = ();
    type PeerReceipt = ();
}

impl ComputeServer for WgpuServer {
    type Kernel = WgpuKernel;
    type Info = WgpuInfo;
    type MemoryLayoutPolicy = PitchedLayoutPolicy;
    type Storage = WgpuStorage;
    // An allocation is host bookkeeping (a buffer created now and then), a sync a submit and
    // a status read recorded: on an idle device they run on the caller. So does a read (its
    // copies into mappable buffers recorded and submitted; the caller then waits for them,
    // as after a sync), and the first launch after a sync or a read (recorded into the
    // encoder), as on CUDA: a launch + sync or launch + read round trip then never crosses
    // threads; the launches after it are recorded on the runner, so that a stream of
    // launches returns to its caller at once. An upload stays queued:
    // a write that isn't whole words reads the buffer back first, waiting for the GPU,
    // which `create` must not make its caller do.
    const CALLER_WORK: &'static [CallerWork] = &[
        CallerWork::Allocation,
        CallerWork::Launch,
        CallerWork::Sync,
        CallerWork::Read,
    ];

    fn runs_on_caller(&self, work: CallerWork) -> bool {
        self.launches.allows(work)
    }

    fn allocate(&mut self, id: MemoryId, size: u64, stream: StreamId) {
        self.drain_releases();
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
        // The caller waits for this read as for a sync: its next launch may be its own.
        self.launches.waited();
        self.drain_releases();
        if let Err(error) = self.take_errors(stream) {
            return ready(Err(error));
        }
        let gpu = self.gpu.clone();
        let mut pending = Vec::with_capacity(descriptors.len());
        for descriptor in descriptors {
            let dense = match descriptor.validate() {
                Ok(dense) => dense,
                Err(error) => return ready(Err(error.into())),
            };
            let resource = match self.resolve(&descriptor.handle) {
                Ok(resource) => resource,
                Err(error) => return ready(Err(error.into())),
            };
            let start = resource.offset & !3;
            let end = (resource.offset + resource.size)
                .max(start + 4)
                .next_multiple_of(4);
            let readback =
                Readback::record(&gpu, self.encoder(), &resource.buffer, start, end - start);
            let skip = (resource.offset - start) as usize;
            pending.push((readback, skip, resource.size as usize, dense, descriptor));
        }
        let status = self.record_status_check(stream);
        self.submit();
        // What wgpu found wrong in the work just submitted.
        if let Err(error) = self.take_errors(stream) {
            return ready(Err(error));
        }
        Box::pin(async move {
            let mut results = Vec::with_capacity(pending.len());
            for (readback, skip, size, dense, descriptor) in pending {
                let words = readback.wait()?;
                let binding = &words[skip..skip + size];
                if descriptor.is_contiguous() {
                    results.push(Bytes::from_bytes_vec(binding[..dense].to_vec()));
                } else {
                    let mut bytes = Bytes::try_zeroed(dense)?;
                    gather(
                        binding,
                        &descriptor.shape,
                        &descriptor.strides,
                        descriptor.elem_size,
                        &mut bytes,
                    );
                    results.push(bytes);
                }
            }
            if let Some((readback, kernels)) = status {
                check_status(&readback.wait()?, &kernels)?;
            }
            Ok(results)
        })
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream: StreamId) {
        for (descriptor, data) in &descriptors {
            if let Err(error) = self.write_one(descriptor, data) {
                self.errors.push(stream, error);
            }
        }
    }

    fn copy(&mut self, source: Binding, destination: Binding, stream: StreamId) {
        if let Err(error) = self.copy_one(&source, &destination, stream) {
            self.errors.push(stream, error);
        }
    }

    fn sync(&mut self, stream: StreamId) -> DynFut<Result<(), ServerError>> {
        self.launches.waited();
        self.pipelines.save_to_disk();
        self.drain_releases();
        self.memory.manager().release_idle(&mut HostOrdering);
        let status = self.record_status_check(stream);
        self.submit();
        if let Err(error) = self.take_errors(stream) {
            return ready(Err(error));
        }
        let gpu = self.gpu.clone();
        Box::pin(async move {
            match status {
                Some((readback, kernels)) => check_status(&readback.wait()?, &kernels),
                None => gpu
                    .poll(wgpu::PollType::wait_indefinitely())
                    .map(|_| ())
                    .map_err(|error| {
                        ServerError::generic(format!("wgpu: waiting for the device: {error}"))
                    }),
            }
        })
    }

    fn get_resource(
        &mut self,
        binding: Binding,
        _stream: StreamId,
    ) -> Result<ManagedResource<WgpuResource>, ServerError> {
        let resource = self.resolve(&binding)?;
        Ok(ManagedResource::new(binding, resource))
    }

    unsafe fn launch(
        &mut self,
        kernel: WgpuKernel,
        count: CubeCount,
        arguments: KernelArguments,
        mode: ExecutionMode,
        stream: StreamId,
    ) {
        self.launches.launched();
        if let Err(error) = self.run_launch(&kernel, &count, &arguments, mode, stream) {
            self.errors.push(stream, error);
        }
    }

    fn flush(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.drain_releases();
        self.submit();
        self.take_errors(stream)
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
        let started = if self.features.contains(crate::timestamps::FEATURES) {
            let gpu = self.gpu.clone();
            StartedTiming::Device(StartedProfile::start(&gpu, self.encoder()))
        } else {
            self.wait_idle()?;
            StartedTiming::Host(Instant::now())
        };
        self.next_token += 1;
        self.profiles.insert(self.next_token, started);
        Ok(ProfilingToken {
            id: self.next_token,
        })
    }

    fn end_profile(
        &mut self,
        _stream: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        let started =
            self.profiles
                .remove(&token.id)
                .ok_or_else(|| ProfileError::NotRegistered {
                    backtrace: BackTrace::capture(),
                })?;
        let unknown = |error: ServerError| ProfileError::Unknown {
            reason: error.to_string(),
            backtrace: BackTrace::capture(),
        };
        match started {
            StartedTiming::Host(start) => {
                self.wait_idle().map_err(unknown)?;
                Ok(ProfileDuration::from_ticks(
                    ProfileTicks::new(start, Instant::now()),
                    TimingMethod::System,
                ))
            }
            StartedTiming::Device(started) => {
                let gpu = self.gpu.clone();
                let period = self.queue.get_timestamp_period();
                let anchor = self.clock_anchor.clone();
                let finished = started.finish(&gpu, self.encoder(), period, anchor);
                self.submit();
                // Read on the thread that awaits the duration, not on the runner.
                let future = async move {
                    let (start, duration) = finished.wait().map_err(unknown)?;
                    Ok(ProfileTicks::from_duration(start, duration))
                };
                Ok(ProfileDuration::new(Box::pin(future), TimingMethod::Device))
            }
        }
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
