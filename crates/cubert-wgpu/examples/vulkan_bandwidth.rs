//! Raw Vulkan bandwidth next to wgpu's and cubert's: where does the wgpu backend's memory
//! bandwidth go on a driver?
//!
//! `cubert --backend wgpu bench --only bandwidth` measures wgpu's buffer copy and vector
//! add; this program measures the same operations on plain Vulkan (through `ash`), through
//! wgpu alone, and through cubert's wgpu backend, so figures from one machine say whether a
//! slow figure is the driver's, wgpu's or cubert's (`docs/wgpu.md` has what it found on
//! the H200).
//!
//! Plain Vulkan (the default): buffers are placed in each way a Vulkan program can place
//! them: `type N`, each array in its own allocation of memory type `N` (every
//! `DEVICE_LOCAL` type; the first is what wgpu's allocator picks for storage buffers);
//! `dedicated`, the same with `VkMemoryDedicatedAllocateInfo`; `one buffer`, the three
//! arrays as ranges of one buffer, as cubert's pool places handles; `address`, memory
//! allocated with the device-address flag, as wgpu's allocator does. For each size (64 MiB
//! per array and up): `copy` is `vkCmdCopyBuffer` (GB/s counting 2 × size), `fill`
//! `vkCmdFillBuffer` (1 × size), then each kernel adds two arrays into a third (3 × size):
//! `vec4` is a one-line WGSL add of `vec4<f32>`, and every WGSL file named on the command
//! line (as `FILE:ELEMENTS_PER_UNIT`) is a kernel printed by cubert (`CUBERT_KERNEL_DUMP=dir
//! cubert --backend wgpu bench --only bandwidth` writes them), bound by cubert's ABI: status
//! word, info words (each array's offset and length, then the length as a `u64` scalar),
//! then the three arrays. WGSL is compiled by naga as wgpu compiles it on a device with
//! robust buffer access 2. Each figure is the median of 5 runs after one warm-up, timed by
//! timestamps around the command; each kernel's output is zeroed first and checked at three
//! elements after (the inputs hold 1.0 and 2.0).
//!
//! Other modes, by environment variable:
//! - `THROUGH_WGPU=1`: the copy and the kernels through wgpu alone (its Vulkan adapter).
//! - `THROUGH_CUBERT=1`: `ops::copy` and `ops::add` through cubert's wgpu backend, on
//!   arrays made in several ways (filled on the device, uploaded whole or in parts), in an
//!   order that tells a slow array from a slow device.
//! - `STAGING=1`: figures on 1 GiB arrays between uploads staged through each host-visible
//!   memory type (`STAGING_PLAN=TYPE:CHUNK_MIB:alive|reused,...` picks the steps).
//!
//! Run: `cargo run --release -p cubert-wgpu --example vulkan_bandwidth [MAX_MIB [FILE:N ...]]`
//! (with `ROBUST=1`, the device has robust buffer access on, as wgpu's has). It needs a
//! Vulkan loader and driver; it picks the first discrete GPU, else the first device.

use ash::vk;
use std::error::Error;
use std::ffi::CStr;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const MIB: u64 = 1 << 20;
const REPS: usize = 5;
const MAX_GROUPS_X: u32 = 65535;

const ADD_WGSL: &str = "
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let i = id.x + id.y * n.x * 256u;
    if (i < arrayLength(&c)) {
        c[i] = a[i] + b[i];
    }
}
";

/// A compute shader compiled from WGSL: its SPIR-V words, entry point, number of storage
/// bindings (group 0, bindings `0..n`) and workgroup size in x.
struct Shader {
    words: Vec<u32>,
    entry: std::ffi::CString,
    bindings: u32,
    workgroup: u32,
}

/// Compiles `wgsl` as wgpu does on a Vulkan device with robust buffer access 2: buffer
/// accesses unchecked, loops bounded.
fn compile(wgsl: &str) -> Result<Shader> {
    let module = naga::front::wgsl::parse_str(wgsl)?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)?;
    let entry = module.entry_points.first().ok_or("no entry point")?;
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.name.clone(),
    };
    let options = naga::back::spv::Options {
        lang_version: (1, 5),
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: naga::proc::BoundsCheckPolicy::Unchecked,
            image_load: naga::proc::BoundsCheckPolicy::Unchecked,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        ..naga::back::spv::Options::default()
    };
    let bindings = module
        .global_variables
        .iter()
        .filter(|(_, global)| global.binding.is_some())
        .count() as u32;
    Ok(Shader {
        words: naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))?,
        entry: std::ffi::CString::new(entry.name.clone())?,
        bindings,
        workgroup: entry.workgroup_size[0],
    })
}

/// Workgroups of `workgroup` units for `items` units: along x up to the limit, then rows.
fn grid(items: u64, workgroup: u32) -> (u32, u32) {
    let groups = items.div_ceil(u64::from(workgroup)).max(1);
    let x = groups.min(u64::from(MAX_GROUPS_X)) as u32;
    (x, groups.div_ceil(u64::from(MAX_GROUPS_X)) as u32)
}

/// How the three arrays of one measurement are placed.
#[derive(Clone, Copy, Debug)]
enum Placement {
    Separate {
        memory_type: u32,
        dedicated: bool,
    },
    OneBuffer {
        memory_type: u32,
    },
    /// Separate, the memory allocated with `VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT`, as
    /// wgpu's allocator allocates all memory where the device has buffer device addresses.
    DeviceAddress {
        memory_type: u32,
    },
}

impl Placement {
    fn label(self) -> String {
        match self {
            Placement::Separate {
                memory_type,
                dedicated: false,
            } => format!("type {memory_type}"),
            Placement::Separate {
                memory_type,
                dedicated: true,
            } => format!("type {memory_type} dedicated"),
            Placement::OneBuffer { memory_type } => format!("type {memory_type} one buffer"),
            Placement::DeviceAddress { memory_type } => format!("type {memory_type} address"),
        }
    }
}

/// The three arrays (`a`, `b`, `c`) of a measurement: a buffer and an offset each.
struct Arrays {
    buffers: Vec<vk::Buffer>,
    memories: Vec<vk::DeviceMemory>,
    ranges: [(vk::Buffer, u64); 3],
}

/// A compute pipeline with one descriptor set of storage buffers.
struct Pipeline {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    shader: vk::ShaderModule,
    descriptors: vk::DescriptorPool,
    set: vk::DescriptorSet,
    workgroup: u32,
}

/// A kernel to time: its pipeline, elements per unit, and whether it takes cubert's ABI.
struct Kernel {
    label: String,
    pipeline: Pipeline,
    per_unit: u64,
    cubert_abi: bool,
}

struct Gpu {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    command: vk::CommandBuffer,
    fence: vk::Fence,
    queries: vk::QueryPool,
    period_ns: f64,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// cubert's status word and info words, 256 bytes each, in one buffer.
    abi: (vk::Buffer, vk::DeviceMemory),
}

const ABI_BYTES: u64 = 256;

fn flags_text(flags: vk::MemoryPropertyFlags) -> String {
    let names = [
        (vk::MemoryPropertyFlags::DEVICE_LOCAL, "DEVICE_LOCAL"),
        (vk::MemoryPropertyFlags::HOST_VISIBLE, "HOST_VISIBLE"),
        (vk::MemoryPropertyFlags::HOST_COHERENT, "HOST_COHERENT"),
        (vk::MemoryPropertyFlags::HOST_CACHED, "HOST_CACHED"),
        (
            vk::MemoryPropertyFlags::LAZILY_ALLOCATED,
            "LAZILY_ALLOCATED",
        ),
        (vk::MemoryPropertyFlags::PROTECTED, "PROTECTED"),
    ];
    let set: Vec<&str> = names
        .iter()
        .filter(|(flag, _)| flags.contains(*flag))
        .map(|(_, name)| *name)
        .collect();
    if set.is_empty() {
        "-".into()
    } else {
        set.join("|")
    }
}

impl Gpu {
    fn new() -> Result<Self> {
        // SAFETY: loading the system's Vulkan loader; nothing else in this process loads
        // another one.
        let entry = unsafe { ash::Entry::load()? };
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
        // SAFETY: a valid create info without layers or extensions.
        let instance = unsafe {
            entry.create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )?
        };
        // SAFETY: `instance` is alive for every call below.
        let physicals = unsafe { instance.enumerate_physical_devices()? };
        let mut chosen = None;
        for &physical in &physicals {
            // SAFETY: `physical` comes from `instance`.
            let properties = unsafe { instance.get_physical_device_properties(physical) };
            // SAFETY: the driver fills `device_name` with a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(properties.device_name.as_ptr()) };
            println!(
                "device: {} ({:?}, driver version {:#x})",
                name.to_string_lossy(),
                properties.device_type,
                properties.driver_version
            );
            let discrete = properties.device_type == vk::PhysicalDeviceType::DISCRETE_GPU;
            if chosen.is_none() || discrete {
                chosen = Some((physical, properties));
            }
            if discrete {
                break;
            }
        }
        let (physical, properties) = chosen.ok_or("no Vulkan device")?;
        // SAFETY: `physical` comes from `instance`.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        for (index, heap) in memory.memory_heaps[..memory.memory_heap_count as usize]
            .iter()
            .enumerate()
        {
            println!("heap {index}: {} MiB, {:?}", heap.size / MIB, heap.flags);
        }
        for (index, ty) in memory.memory_types[..memory.memory_type_count as usize]
            .iter()
            .enumerate()
        {
            println!(
                "memory type {index}: heap {}, {}",
                ty.heap_index,
                flags_text(ty.property_flags)
            );
        }
        println!(
            "maxStorageBufferRange: {} MiB",
            properties.limits.max_storage_buffer_range / MIB as u32
        );
        // SAFETY: `physical` comes from `instance`.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let family = families
            .iter()
            .position(|family| family.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        // wgpu turns robust buffer access on; `ROBUST=1` does too, to see what it costs.
        let robust = std::env::var("ROBUST").is_ok_and(|value| value == "1");
        // SAFETY: `physical` comes from `instance`.
        let supported = unsafe { instance.get_physical_device_features(physical) };
        println!("robustBufferAccess: {robust}");
        let features = vk::PhysicalDeviceFeatures::default()
            .robust_buffer_access(robust)
            .shader_int64(supported.shader_int64 == vk::TRUE);
        let mut vulkan12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut query = vk::PhysicalDeviceFeatures2::default().push_next(&mut vulkan12);
        // SAFETY: `physical` comes from `instance`, a Vulkan 1.2 instance.
        unsafe { instance.get_physical_device_features2(physical, &mut query) };
        let device_address = vulkan12.buffer_device_address == vk::TRUE;
        let mut enabled12 =
            vk::PhysicalDeviceVulkan12Features::default().buffer_device_address(device_address);
        // SAFETY: one queue of a family the device has; only features it reports.
        let device = unsafe {
            instance.create_device(
                physical,
                &vk::DeviceCreateInfo::default()
                    .queue_create_infos(&queue_info)
                    .enabled_features(&features)
                    .push_next(&mut enabled12),
                None,
            )?
        };
        // SAFETY: queue 0 of `family` was created with the device.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: valid create infos on a live device, here and below.
        let pool = unsafe {
            device.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )?
        };
        // SAFETY: as above.
        let command = unsafe {
            device.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )?[0]
        };
        // SAFETY: as above.
        let fence = unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None)? };
        // SAFETY: as above.
        let queries = unsafe {
            device.create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2),
                None,
            )?
        };
        let mut gpu = Self {
            _entry: entry,
            instance,
            device,
            queue,
            pool,
            command,
            fence,
            queries,
            period_ns: f64::from(properties.limits.timestamp_period),
            memory,
            abi: (vk::Buffer::null(), vk::DeviceMemory::null()),
        };
        let first = *gpu
            .device_local_types()
            .first()
            .ok_or("no DEVICE_LOCAL memory")?;
        let buffer = gpu.buffer(2 * ABI_BYTES)?;
        let memory = gpu.bind_new_memory(buffer, first)?;
        gpu.abi = (buffer, memory);
        Ok(gpu)
    }

    /// The memory types with `DEVICE_LOCAL`, in order.
    fn device_local_types(&self) -> Vec<u32> {
        (0..self.memory.memory_type_count)
            .filter(|&index| {
                self.memory.memory_types[index as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
            })
            .collect()
    }

    fn buffer(&self, size: u64) -> Result<vk::Buffer> {
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a valid create info on a live device.
        Ok(unsafe { self.device.create_buffer(&info, None)? })
    }

    /// Allocates memory of `memory_type` for `buffer` (dedicated to it if asked) and binds it.
    fn bind_memory(
        &self,
        buffer: vk::Buffer,
        memory_type: u32,
        dedicated: bool,
    ) -> Result<vk::DeviceMemory> {
        self.bind_memory_with(buffer, memory_type, dedicated, false)
    }

    /// [`Gpu::bind_memory`], the memory allocated with the device-address flag if asked.
    fn bind_memory_with(
        &self,
        buffer: vk::Buffer,
        memory_type: u32,
        dedicated: bool,
        device_address: bool,
    ) -> Result<vk::DeviceMemory> {
        // SAFETY: the buffer was created on this device.
        let requirements = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        if requirements.memory_type_bits & (1 << memory_type) == 0 {
            return Err(format!("memory type {memory_type} can't hold the buffer").into());
        }
        let mut dedicated_info = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type);
        if dedicated {
            info = info.push_next(&mut dedicated_info);
        }
        let mut flags_info =
            vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        if device_address {
            info = info.push_next(&mut flags_info);
        }
        // SAFETY: a valid allocate info on a live device; the memory fits the buffer's
        // requirements and is bound at offset 0.
        unsafe {
            let memory = self.device.allocate_memory(&info, None)?;
            self.device.bind_buffer_memory(buffer, memory, 0)?;
            Ok(memory)
        }
    }

    fn bind_new_memory(&self, buffer: vk::Buffer, memory_type: u32) -> Result<vk::DeviceMemory> {
        self.bind_memory(buffer, memory_type, false)
    }

    /// Three arrays of `size` bytes placed as `placement`.
    fn arrays(&self, size: u64, placement: Placement) -> Result<Arrays> {
        let mut arrays = Arrays {
            buffers: Vec::new(),
            memories: Vec::new(),
            ranges: [(vk::Buffer::null(), 0); 3],
        };
        let result = (|| -> Result<()> {
            match placement {
                Placement::Separate {
                    memory_type,
                    dedicated,
                } => {
                    for k in 0..3 {
                        let buffer = self.buffer(size)?;
                        arrays.buffers.push(buffer);
                        arrays
                            .memories
                            .push(self.bind_memory(buffer, memory_type, dedicated)?);
                        arrays.ranges[k] = (buffer, 0);
                    }
                }
                Placement::DeviceAddress { memory_type } => {
                    for k in 0..3 {
                        let buffer = self.buffer(size)?;
                        arrays.buffers.push(buffer);
                        arrays.memories.push(self.bind_memory_with(
                            buffer,
                            memory_type,
                            false,
                            true,
                        )?);
                        arrays.ranges[k] = (buffer, 0);
                    }
                }
                Placement::OneBuffer { memory_type } => {
                    let buffer = self.buffer(3 * size)?;
                    arrays.buffers.push(buffer);
                    arrays
                        .memories
                        .push(self.bind_new_memory(buffer, memory_type)?);
                    for k in 0..3 {
                        arrays.ranges[k] = (buffer, k as u64 * size);
                    }
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(arrays),
            Err(error) => {
                self.free(arrays);
                Err(error)
            }
        }
    }

    fn free(&self, arrays: Arrays) {
        // SAFETY: the queue is idle (every submission waits on the fence), so nothing uses
        // these objects any more.
        unsafe {
            for buffer in arrays.buffers {
                self.device.destroy_buffer(buffer, None);
            }
            for memory in arrays.memories {
                self.device.free_memory(memory, None);
            }
        }
    }

    /// Records `work` between two timestamps, submits, waits; the device seconds.
    fn timed(&self, work: impl Fn(vk::CommandBuffer)) -> Result<f64> {
        let device = &self.device;
        let command = self.command;
        // SAFETY: the command buffer is idle (the previous submission was waited for), and
        // everything recorded refers to live objects of this device.
        unsafe {
            device.reset_command_buffer(command, vk::CommandBufferResetFlags::empty())?;
            device.begin_command_buffer(
                command,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )?;
            device.cmd_reset_query_pool(command, self.queries, 0, 2);
            device.cmd_write_timestamp(
                command,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.queries,
                0,
            );
            work(command);
            device.cmd_write_timestamp(
                command,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.queries,
                1,
            );
            device.end_command_buffer(command)?;
            let commands = [command];
            device.queue_submit(
                self.queue,
                &[vk::SubmitInfo::default().command_buffers(&commands)],
                self.fence,
            )?;
            device.wait_for_fences(&[self.fence], true, u64::MAX)?;
            device.reset_fences(&[self.fence])?;
            let mut stamps = [0u64; 2];
            device.get_query_pool_results(
                self.queries,
                0,
                &mut stamps,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )?;
            Ok(stamps[1].wrapping_sub(stamps[0]) as f64 * self.period_ns * 1e-9)
        }
    }

    /// Median GB/s of `work` moving `bytes`, after one warm-up.
    fn bandwidth(&self, bytes: u64, work: impl Fn(vk::CommandBuffer)) -> Result<f64> {
        self.timed(&work)?;
        let mut seconds = Vec::with_capacity(REPS);
        for _ in 0..REPS {
            seconds.push(self.timed(&work)?);
        }
        seconds.sort_by(f64::total_cmp);
        Ok(bytes as f64 / seconds[REPS / 2] / 1e9)
    }

    fn fill(&self, (buffer, offset): (vk::Buffer, u64), size: u64, value: f32) -> Result<()> {
        let device = &self.device;
        self.timed(|command| {
            // SAFETY: recording into a command buffer in the recording state.
            unsafe { device.cmd_fill_buffer(command, buffer, offset, size, value.to_bits()) };
        })?;
        Ok(())
    }

    /// Writes cubert's info words for three arrays of `elements` f32 each.
    fn write_info(&self, elements: u64) -> Result<()> {
        let n = u32::try_from(elements)?;
        let words: [u32; 8] = [0, n, 0, n, 0, n, n, 0];
        let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
        let device = &self.device;
        self.timed(|command| {
            // SAFETY: recording into a command buffer in the recording state; 32 bytes at a
            // 4-byte aligned offset of a live buffer.
            unsafe {
                device.cmd_fill_buffer(command, self.abi.0, 0, ABI_BYTES, 0);
                device.cmd_update_buffer(command, self.abi.0, ABI_BYTES, &bytes);
            }
        })?;
        Ok(())
    }

    /// Copy, fill and every kernel's figures on arrays of `size` bytes placed as `placement`.
    fn measure(&self, size: u64, placement: Placement, kernels: &[Kernel]) -> Result<()> {
        let arrays = match self.arrays(size, placement) {
            Ok(arrays) => arrays,
            Err(error) => {
                println!(
                    "{:>6} MiB  {:<24} not placed: {error}",
                    size / MIB,
                    placement.label()
                );
                return Ok(());
            }
        };
        let [a, b, c] = arrays.ranges;
        self.fill(a, size, 1.0)?;
        self.fill(b, size, 2.0)?;
        let device = &self.device;
        let copy = self.bandwidth(2 * size, |command| {
            let region = [vk::BufferCopy::default()
                .src_offset(a.1)
                .dst_offset(c.1)
                .size(size)];
            // SAFETY: recording into a command buffer in the recording state; the two
            // ranges don't overlap.
            unsafe { device.cmd_copy_buffer(command, a.0, c.0, &region) };
        })?;
        let fill = self.bandwidth(size, |command| {
            // SAFETY: recording into a command buffer in the recording state.
            unsafe { device.cmd_fill_buffer(command, c.0, c.1, size, 0) };
        })?;
        let mut line = format!(
            "{:>6} MiB  {:<24} copy {copy:>7.1}  fill {fill:>7.1}",
            size / MIB,
            placement.label()
        );
        let elements = size / 4;
        self.write_info(elements)?;
        for kernel in kernels {
            self.fill(c, size, 0.0)?;
            let pipeline = &kernel.pipeline;
            let mut bound = Vec::new();
            if kernel.cubert_abi {
                bound.push((self.abi.0, 0, ABI_BYTES));
                bound.push((self.abi.0, ABI_BYTES, ABI_BYTES));
            }
            bound.extend(
                arrays
                    .ranges
                    .iter()
                    .map(|&(buffer, offset)| (buffer, offset, size)),
            );
            pipeline.bind(device, &bound);
            let (x, y) = grid(elements / kernel.per_unit, pipeline.workgroup);
            let add = self.bandwidth(3 * size, |command| {
                // SAFETY: recording into a command buffer in the recording state; the set
                // binds live buffers.
                unsafe { pipeline.record(device, command, (x, y)) }
            })?;
            let checked = self.check_add(c, size)?;
            line += &format!("  {} {add:>7.1}{checked}", kernel.label);
        }
        println!("{line}   (GB/s)");
        self.free(arrays);
        Ok(())
    }

    /// Reads the first, middle and last four floats of `c` through host-visible memory:
    /// empty if all are 3.0, else what they are.
    fn check_add(&self, (c, offset): (vk::Buffer, u64), size: u64) -> Result<String> {
        let host_type = (0..self.memory.memory_type_count)
            .find(|&index| {
                self.memory.memory_types[index as usize]
                    .property_flags
                    .contains(
                        vk::MemoryPropertyFlags::HOST_VISIBLE
                            | vk::MemoryPropertyFlags::HOST_COHERENT,
                    )
            })
            .ok_or("no host-visible memory")?;
        let probe = 16u64;
        let staging = self.buffer(probe * 3)?;
        let memory = self.bind_new_memory(staging, host_type)?;
        let device = &self.device;
        self.timed(|command| {
            for (k, at) in [0, size / 2, size - probe].into_iter().enumerate() {
                let region = [vk::BufferCopy::default()
                    .src_offset(offset + at)
                    .dst_offset(probe * k as u64)
                    .size(probe)];
                // SAFETY: recording into a command buffer in the recording state.
                unsafe { device.cmd_copy_buffer(command, c, staging, &region) };
            }
        })?;
        let mut values = [0f32; 12];
        // SAFETY: the memory is host-visible and coherent, mapped whole, and the copy into
        // it finished (`timed` waits on the fence); 48 bytes are read as 12 floats.
        unsafe {
            let pointer =
                self.device
                    .map_memory(memory, 0, probe * 3, vk::MemoryMapFlags::empty())?;
            std::ptr::copy_nonoverlapping(pointer.cast::<f32>(), values.as_mut_ptr(), 12);
            self.device.unmap_memory(memory);
            self.device.destroy_buffer(staging, None);
            self.device.free_memory(memory, None);
        }
        Ok(if values.iter().all(|&v| v == 3.0) {
            String::new()
        } else {
            format!(" (WRONG: {values:?})")
        })
    }

    /// Uploads `total` bytes into `destination` through a staging buffer of `chunk` bytes in
    /// `memory_type` (allocated, mapped, written, copied from, freed), as wgpu's
    /// `write_buffer` stages through a buffer of its own.
    fn stage(
        &self,
        destination: vk::Buffer,
        total: u64,
        chunk: u64,
        memory_type: u32,
    ) -> Result<()> {
        let staging = self.buffer(chunk)?;
        let memory = self.bind_new_memory(staging, memory_type)?;
        // SAFETY: host-visible memory bound whole to `staging`, mapped once; each round
        // writes `chunk` bytes through the mapping, then copies them on the device and
        // waits (`timed`), so the next round's writes don't race the copy.
        unsafe {
            let pointer = self
                .device
                .map_memory(memory, 0, chunk, vk::MemoryMapFlags::empty())?
                .cast::<u8>();
            let mut at = 0;
            while at < total {
                std::ptr::write_bytes(pointer, 0x3f, chunk as usize);
                let device = &self.device;
                self.timed(|command| {
                    let region = [vk::BufferCopy::default().dst_offset(at).size(chunk)];
                    device.cmd_copy_buffer(command, staging, destination, &region);
                })?;
                at += chunk;
            }
            self.device.unmap_memory(memory);
            self.device.destroy_buffer(staging, None);
            self.device.free_memory(memory, None);
        }
        Ok(())
    }

    /// Uploads `total` bytes into `destination` through `total / chunk` staging buffers of
    /// `chunk` bytes in `memory_type`, all allocated and written before any is freed.
    fn stage_alive(
        &self,
        destination: vk::Buffer,
        total: u64,
        chunk: u64,
        memory_type: u32,
    ) -> Result<()> {
        let mut staged = Vec::new();
        let mut at = 0;
        while at < total {
            let staging = self.buffer(chunk)?;
            let memory = self.bind_new_memory(staging, memory_type)?;
            // SAFETY: host-visible memory bound whole to `staging`; written through its
            // mapping, unmapped, then copied on the device and waited for.
            unsafe {
                let pointer = self
                    .device
                    .map_memory(memory, 0, chunk, vk::MemoryMapFlags::empty())?
                    .cast::<u8>();
                std::ptr::write_bytes(pointer, 0x3f, chunk as usize);
                self.device.unmap_memory(memory);
                let device = &self.device;
                self.timed(|command| {
                    let region = [vk::BufferCopy::default().dst_offset(at).size(chunk)];
                    device.cmd_copy_buffer(command, staging, destination, &region);
                })?;
            }
            staged.push((staging, memory));
            at += chunk;
        }
        for (staging, memory) in staged {
            // SAFETY: the copies from them were waited for.
            unsafe {
                self.device.destroy_buffer(staging, None);
                self.device.free_memory(memory, None);
            }
        }
        Ok(())
    }

    /// Copy and vec4-add figures on three 1 GiB arrays, between uploads staged in each
    /// host-visible memory type: does an upload leave the device slower?
    fn staging(&self, kernel: &Kernel) -> Result<()> {
        let size = 1024 * MIB;
        let first = *self
            .device_local_types()
            .first()
            .ok_or("no DEVICE_LOCAL memory")?;
        let arrays = self.arrays(
            size,
            Placement::Separate {
                memory_type: first,
                dedicated: false,
            },
        )?;
        let [a, b, c] = arrays.ranges;
        let device = &self.device;
        let report = |label: &str| -> Result<()> {
            let copy = self.bandwidth(2 * size, |command| {
                let region = [vk::BufferCopy::default().size(size)];
                // SAFETY: recording into a command buffer in the recording state.
                unsafe { device.cmd_copy_buffer(command, a.0, c.0, &region) };
            })?;
            let pipeline = &kernel.pipeline;
            pipeline.bind(device, &[(a.0, 0, size), (b.0, 0, size), (c.0, 0, size)]);
            let (x, y) = grid(size / 16, pipeline.workgroup);
            let add = self.bandwidth(3 * size, |command| {
                // SAFETY: recording into a command buffer in the recording state.
                unsafe { pipeline.record(device, command, (x, y)) }
            })?;
            println!("  1024 MiB  {label:<52} copy {copy:>7.1}  vec4 {add:>7.1}   (GB/s)");
            Ok(())
        };
        report("before any upload")?;
        let host_types: Vec<u32> = (0..self.memory.memory_type_count)
            .filter(|&index| {
                self.memory.memory_types[index as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
            })
            .collect();
        // Host memory first, then the device-local host-visible types.
        let (mut order, device_local): (Vec<u32>, Vec<u32>) = host_types.iter().partition(|&&ty| {
            !self.memory.memory_types[ty as usize]
                .property_flags
                .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        });
        order.extend(device_local);
        if let Ok(plan) = std::env::var("STAGING_PLAN") {
            // `TYPE:CHUNK_MIB:alive|reused,...`
            for step in plan.split(',') {
                let parts: Vec<&str> = step.split(':').collect();
                let [memory_type, chunk, how] = parts[..] else {
                    return Err(
                        format!("a plan step is TYPE:CHUNK_MIB:alive|reused, not {step}").into(),
                    );
                };
                let (memory_type, chunk): (u32, u64) =
                    (memory_type.parse()?, chunk.parse::<u64>()? * MIB);
                if how == "alive" {
                    self.stage_alive(a.0, size, chunk, memory_type)?;
                } else {
                    self.stage(a.0, size, chunk, memory_type)?;
                }
                report(&format!("after 1 GiB staged: {step}"))?;
            }
            self.free(arrays);
            return Ok(());
        }
        for memory_type in order {
            let flags = flags_text(self.memory.memory_types[memory_type as usize].property_flags);
            for (chunk, rounds) in [(64 * MIB, 1), (size, 1), (size, 2)] {
                for _ in 0..rounds {
                    self.stage(a.0, size, chunk, memory_type)?;
                }
                report(&format!(
                    "after {rounds} x 1 GiB staged in {} MiB of type {memory_type} ({flags})",
                    chunk / MIB
                ))?;
            }
        }
        std::thread::sleep(std::time::Duration::from_secs(3));
        report("3 s later")?;
        self.free(arrays);
        Ok(())
    }

    fn kernel(&self, label: &str, wgsl: &str, per_unit: u64, cubert_abi: bool) -> Result<Kernel> {
        let shader = compile(wgsl)?;
        Ok(Kernel {
            label: label.into(),
            pipeline: Pipeline::new(&self.device, &shader)?,
            per_unit,
            cubert_abi,
        })
    }
}

impl Pipeline {
    fn new(device: &ash::Device, shader: &Shader) -> Result<Self> {
        // SAFETY: valid create infos on a live device; the SPIR-V was validated by naga.
        unsafe {
            let module = device.create_shader_module(
                &vk::ShaderModuleCreateInfo::default().code(&shader.words),
                None,
            )?;
            let bindings: Vec<_> = (0..shader.bindings)
                .map(|binding| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(binding)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let set_layout = device.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            )?;
            let set_layouts = [set_layout];
            let layout = device.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
                None,
            )?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&shader.entry);
            let pipeline = device
                .create_compute_pipelines(
                    vk::PipelineCache::null(),
                    &[vk::ComputePipelineCreateInfo::default()
                        .stage(stage)
                        .layout(layout)],
                    None,
                )
                .map_err(|(_, error)| error)?[0];
            let sizes = [vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(shader.bindings)];
            let descriptors = device.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&sizes),
                None,
            )?;
            let set = device.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(descriptors)
                    .set_layouts(&set_layouts),
            )?[0];
            Ok(Self {
                set_layout,
                layout,
                pipeline,
                shader: module,
                descriptors,
                set,
                workgroup: shader.workgroup,
            })
        }
    }

    /// Records a dispatch of `groups` (x, y) workgroups with this pipeline and its set.
    ///
    /// # Safety
    /// `command` is in the recording state and the set points at live buffers.
    unsafe fn record(&self, device: &ash::Device, command: vk::CommandBuffer, groups: (u32, u32)) {
        // SAFETY: the caller's contract; the pipeline, layout and set belong to `device`.
        unsafe {
            device.cmd_bind_pipeline(command, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            device.cmd_bind_descriptor_sets(
                command,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[self.set],
                &[],
            );
            device.cmd_dispatch(command, groups.0, groups.1, 1);
        }
    }

    /// Points binding `k` of the set at range `k` of `bound` (buffer, offset, size).
    fn bind(&self, device: &ash::Device, bound: &[(vk::Buffer, u64, u64)]) {
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = bound
            .iter()
            .map(|&(buffer, offset, range)| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(buffer)
                    .offset(offset)
                    .range(range)]
            })
            .collect();
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(binding, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(self.set)
                    .dst_binding(binding as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        // SAFETY: the set isn't in use (the queue is idle) and the buffers are alive.
        unsafe { device.update_descriptor_sets(&writes, &[]) };
    }

    fn destroy(&self, device: &ash::Device) {
        // SAFETY: the queue is idle and the objects were created on `device`.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
            device.destroy_descriptor_pool(self.descriptors, None);
            device.destroy_shader_module(self.shader, None);
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: the queue is idle; every object was created on this device, which is
        // destroyed last, then the instance.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_buffer(self.abi.0, None);
            self.device.free_memory(self.abi.1, None);
            self.device.destroy_query_pool(self.queries, None);
            self.device.destroy_fence(self.fence, None);
            self.device.destroy_command_pool(self.pool, None);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// The same figures through wgpu itself (no cubert): its Vulkan adapter, a buffer per array
/// (storage and copies, as cubert's), `copy_buffer_to_buffer` and each kernel in a compute
/// pass, timed by timestamps written into the encoder around them.
mod through_wgpu {
    use super::{MIB, REPS, Result};

    struct Wgpu {
        device: wgpu::Device,
        queue: wgpu::Queue,
        queries: wgpu::QuerySet,
        resolved: wgpu::Buffer,
        readback: wgpu::Buffer,
        period_ns: f64,
    }

    impl Wgpu {
        fn new() -> Result<Self> {
            let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
                backends: wgpu::Backends::VULKAN,
                ..wgpu::InstanceDescriptor::new_without_display_handle_from_env()
            });
            let adapter =
                pollster_block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    ..Default::default()
                }))?;
            println!("wgpu adapter: {:?}", adapter.get_info().name);
            let features = wgpu::Features::TIMESTAMP_QUERY
                | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
                | (adapter.features() & wgpu::Features::SHADER_INT64);
            let (device, queue) =
                pollster_block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                    label: None,
                    required_features: features,
                    required_limits: adapter.limits(),
                    experimental_features: wgpu::ExperimentalFeatures::disabled(),
                    memory_hints: wgpu::MemoryHints::Performance,
                    trace: wgpu::Trace::Off,
                }))?;
            device.on_uncaptured_error(std::sync::Arc::new(|error: wgpu::Error| {
                println!("wgpu error: {error:?}");
            }));
            let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
                label: None,
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolved = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let readback = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let period_ns = f64::from(queue.get_timestamp_period());
            Ok(Self {
                device,
                queue,
                queries,
                resolved,
                readback,
                period_ns,
            })
        }

        fn buffer(&self, size: u64) -> wgpu::Buffer {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        }

        /// Records `work` between two timestamps, submits, waits; the device seconds.
        fn timed(&self, work: &dyn Fn(&mut wgpu::CommandEncoder)) -> Result<f64> {
            let mut encoder = self.device.create_command_encoder(&Default::default());
            encoder.write_timestamp(&self.queries, 0);
            work(&mut encoder);
            encoder.write_timestamp(&self.queries, 1);
            encoder.resolve_query_set(&self.queries, 0..2, &self.resolved, 0);
            encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, 16);
            self.queue.submit([encoder.finish()]);
            let slice = self.readback.slice(..);
            slice.map_async(wgpu::MapMode::Read, |_| {});
            self.device.poll(wgpu::PollType::wait_indefinitely())?;
            let stamps: Vec<u64> = slice
                .get_mapped_range()?
                .chunks_exact(8)
                .map(|chunk| u64::from_le_bytes(chunk.try_into().unwrap_or_default()))
                .collect();
            self.readback.unmap();
            Ok(stamps[1].wrapping_sub(stamps[0]) as f64 * self.period_ns * 1e-9)
        }

        fn bandwidth(&self, bytes: u64, work: &dyn Fn(&mut wgpu::CommandEncoder)) -> Result<f64> {
            self.timed(work)?;
            let mut seconds = Vec::with_capacity(REPS);
            for _ in 0..REPS {
                seconds.push(self.timed(work)?);
            }
            seconds.sort_by(f64::total_cmp);
            Ok(bytes as f64 / seconds[REPS / 2] / 1e9)
        }
    }

    fn pollster_block_on<F: std::future::Future>(future: F) -> F::Output {
        cubert_runtime::future::block_on(future)
    }

    /// Copy and kernel figures through wgpu, 64 MiB per array up to `max_mib`.
    pub fn run(max_mib: u64, kernels: &[(String, String, u64, bool)]) -> Result<()> {
        let gpu = Wgpu::new()?;
        let mut pipelines = Vec::new();
        for (label, wgsl, per_unit, cubert_abi) in kernels {
            let module = gpu
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: None,
                    source: wgpu::ShaderSource::Wgsl(wgsl.as_str().into()),
                });
            // Every binding in the layout (an automatic one leaves out what the kernel
            // doesn't use, as the unchecked kernels' status word), as cubert binds them.
            let read_only: &[bool] = if *cubert_abi {
                &[false, true, false, false, false]
            } else {
                &[true, true, false]
            };
            let entries: Vec<_> = read_only
                .iter()
                .enumerate()
                .map(|(binding, &read_only)| wgpu::BindGroupLayoutEntry {
                    binding: binding as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                })
                .collect();
            let group_layout =
                gpu.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: None,
                        entries: &entries,
                    });
            let layout = gpu
                .device
                .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: None,
                    bind_group_layouts: &[Some(&group_layout)],
                    immediate_size: 0,
                });
            let pipeline = gpu
                .device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: None,
                    layout: Some(&layout),
                    module: &module,
                    entry_point: None,
                    compilation_options: Default::default(),
                    cache: None,
                });
            pipelines.push((label, pipeline, group_layout, *per_unit, *cubert_abi));
        }
        // Two buffers: WebGPU refuses one buffer bound read-write and read-only at once.
        let (status, abi) = (gpu.buffer(256), gpu.buffer(256));
        let mut size = 64 * MIB;
        while size <= max_mib * MIB {
            let [a, b, c] = [gpu.buffer(size), gpu.buffer(size), gpu.buffer(size)];
            let elements = size / 4;
            let n = u32::try_from(elements)?;
            let words: [u32; 8] = [0, n, 0, n, 0, n, n, 0];
            let info: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
            gpu.queue.write_buffer(&abi, 0, &info);
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            encoder.clear_buffer(&status, 0, None);
            gpu.queue.submit([encoder.finish()]);
            let copy = gpu.bandwidth(2 * size, &|encoder| {
                encoder.copy_buffer_to_buffer(&a, 0, &c, 0, size);
            })?;
            let mut line = format!(
                "{:>6} MiB  wgpu                     copy {copy:>7.1}",
                size / MIB
            );
            for (label, pipeline, layout, per_unit, cubert_abi) in &pipelines {
                let mut entries = Vec::new();
                let mut buffers: Vec<(&wgpu::Buffer, u64, u64)> = Vec::new();
                if *cubert_abi {
                    buffers.push((&status, 0, 256));
                    buffers.push((&abi, 0, 256));
                }
                buffers.extend([(&a, 0, size), (&b, 0, size), (&c, 0, size)]);
                for (binding, (buffer, offset, range)) in buffers.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry {
                        binding: binding as u32,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer,
                            offset: *offset,
                            size: wgpu::BufferSize::new(*range),
                        }),
                    });
                }
                let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout,
                    entries: &entries,
                });
                let (x, y) = super::grid(elements / per_unit, 256);
                let add = gpu.bandwidth(3 * size, &|encoder| {
                    let mut pass = encoder.begin_compute_pass(&Default::default());
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, &group, &[]);
                    pass.dispatch_workgroups(x, y, 1);
                })?;
                line += &format!("  {label} {add:>7.1}");
            }
            println!("{line}   (GB/s)");
            size *= 2;
        }
        Ok(())
    }
}

/// The same figures through cubert's wgpu backend: `ops::copy` and `ops::add` on handles
/// from `client.empty` (filled by `ops::fill`) or from `client.create` (uploaded), timed
/// by `client.profile`.
mod through_cubert {
    use super::{MIB, REPS, Result};
    use cubert_runtime::{Bytes, ComputeClient, ElemType, Handle, ops};
    use cubert_wgpu::WgpuRuntime;

    fn seconds(
        client: &ComputeClient<WgpuRuntime>,
        work: &dyn Fn() -> std::result::Result<(), cubert_runtime::LaunchError>,
    ) -> Result<f64> {
        let (outcome, duration) = client.profile(work, "probe")?;
        outcome?;
        Ok(duration.resolve_blocking()?.duration().as_secs_f64())
    }

    fn bandwidth(
        client: &ComputeClient<WgpuRuntime>,
        bytes: u64,
        work: &dyn Fn() -> std::result::Result<(), cubert_runtime::LaunchError>,
    ) -> Result<f64> {
        work()?;
        client.sync()?;
        let mut all = Vec::with_capacity(REPS);
        for _ in 0..REPS {
            all.push(seconds(client, work)?);
        }
        all.sort_by(f64::total_cmp);
        Ok(bytes as f64 / all[REPS / 2] / 1e9)
    }

    /// Copy and add figures of three arrays.
    fn figures(
        client: &ComputeClient<WgpuRuntime>,
        label: &str,
        [a, b, c]: [&Handle; 3],
        size: u64,
    ) -> Result<()> {
        let len = (size / 4) as usize;
        let copy = bandwidth(client, 2 * size, &|| {
            ops::copy(client, a, c, len, ElemType::F32)
        })?;
        let add = bandwidth(client, 3 * size, &|| {
            ops::add(client, a, b, c, len, ElemType::F32)
        })?;
        let got = client.read_one(c.view(size - 4, 4)?)?.to_elems::<f32>();
        println!(
            "{:>6} MiB  cubert {label:<40} copy {copy:>7.1}  add {add:>7.1} (last {got:?})   (GB/s)",
            size / MIB
        );
        Ok(())
    }

    fn filled(client: &ComputeClient<WgpuRuntime>, size: u64, value: f32) -> Result<Handle> {
        let handle = client.empty(size as usize)?;
        ops::fill(client, &handle, (size / 4) as usize, value)?;
        Ok(handle)
    }

    /// Copy and add figures, 64 MiB per array up to `max_mib`, on arrays made in several
    /// ways, in an order that tells a slow array from a slow device.
    pub fn run(max_mib: u64) -> Result<()> {
        let client = cubert_wgpu::default_client()?;
        let mut size = (256 * MIB).min(max_mib * MIB);
        while size <= max_mib * MIB {
            let len = (size / 4) as usize;
            let x = filled(&client, size, 1.0)?;
            let y = filled(&client, size, 2.0)?;
            let z = client.empty(size as usize)?;
            figures(&client, "A empty + fill", [&x, &y, &z], size)?;
            let a = client.create(Bytes::from_elems(vec![1.0f32; len]))?;
            let b = client.create(Bytes::from_elems(vec![2.0f32; len]))?;
            figures(&client, "B create", [&a, &b, &z], size)?;
            figures(&client, "C empty + fill again, after B", [&x, &y, &z], size)?;
            std::thread::sleep(std::time::Duration::from_secs(2));
            figures(&client, "D create, 2 s later", [&a, &b, &z], size)?;
            drop((a, b));
            let a = client.empty(size as usize)?;
            client.write(&a, Bytes::from_elems(vec![1.0f32; len]))?;
            let b = filled(&client, size, 2.0)?;
            figures(&client, "E a: empty + one write", [&a, &b, &z], size)?;
            drop(a);
            let a = client.empty(size as usize)?;
            let chunk = (size / 4) as usize;
            for k in 0..4 {
                let view = a.view((k * chunk) as u64, chunk as u64)?;
                client.write(&view, Bytes::from_elems(vec![1.0f32; chunk / 4]))?;
            }
            figures(&client, "F a: empty + four writes", [&a, &b, &z], size)?;
            drop((a, b, x, y, z));
            client.memory_cleanup();
            size *= 2;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let max_mib: u64 = match args.next() {
        Some(text) => text.parse()?,
        None => 1024,
    };
    let mut sources = vec![("vec4".to_string(), ADD_WGSL.to_string(), 4, false)];
    for arg in args {
        let (path, per_unit) = arg
            .rsplit_once(':')
            .ok_or("kernels are FILE:ELEMENTS_PER_UNIT")?;
        let wgsl = std::fs::read_to_string(path)?;
        let label = std::path::Path::new(path)
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or(path)
            .to_string();
        sources.push((label, wgsl, per_unit.parse()?, true));
    }
    if std::env::var("THROUGH_CUBERT").is_ok_and(|value| value == "1") {
        return through_cubert::run(max_mib);
    }
    if std::env::var("THROUGH_WGPU").is_ok_and(|value| value == "1") {
        return through_wgpu::run(max_mib, &sources);
    }
    let gpu = Gpu::new()?;
    let mut kernels = Vec::new();
    for (label, wgsl, per_unit, cubert_abi) in &sources {
        kernels.push(gpu.kernel(label, wgsl, *per_unit, *cubert_abi)?);
    }
    if std::env::var("STAGING").is_ok_and(|value| value == "1") {
        gpu.staging(&kernels[0])?;
        for kernel in &kernels {
            kernel.pipeline.destroy(&gpu.device);
        }
        return Ok(());
    }
    let types = gpu.device_local_types();
    let first = *types.first().ok_or("no DEVICE_LOCAL memory type")?;
    println!(
        "wgpu's allocator places storage buffers in memory type {first} (the first DEVICE_LOCAL one)"
    );
    let mut size = 64 * MIB;
    while size <= max_mib * MIB {
        let mut placements: Vec<Placement> = types
            .iter()
            .map(|&memory_type| Placement::Separate {
                memory_type,
                dedicated: false,
            })
            .collect();
        placements.push(Placement::Separate {
            memory_type: first,
            dedicated: true,
        });
        placements.push(Placement::OneBuffer { memory_type: first });
        placements.push(Placement::DeviceAddress { memory_type: first });
        for placement in placements {
            gpu.measure(size, placement, &kernels)?;
        }
        size *= 2;
    }
    for kernel in &kernels {
        kernel.pipeline.destroy(&gpu.device);
    }
    Ok(())
}
