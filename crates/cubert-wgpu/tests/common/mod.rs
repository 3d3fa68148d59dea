//! Runs a generated WGSL kernel on a wgpu adapter with the bindings of
//! `cubert_wgpu::lang`'s ABI: a minimal stand-in for the server, so the generator's
//! semantics can be checked against the CPU's (on Mesa's lavapipe, a Vulkan driver on the
//! CPU, where no GPU is).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_wgpu::lang::WgslTarget;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` until it is ready (wgpu's native futures are ready at once or after a
/// device poll).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::yield_now();
    }
}

/// One array argument: its elements' bytes, element size, and whether the kernel writes
/// it. `offset` elements of padding precede it in its binding (a view into a buffer).
#[derive(Clone, Debug)]
pub struct ArrayArg {
    pub bytes: Vec<u8>,
    pub elem_size: usize,
    pub mutable: bool,
    pub offset: usize,
}

impl ArrayArg {
    pub fn new(bytes: Vec<u8>, elem_size: usize, mutable: bool) -> Self {
        Self {
            bytes,
            elem_size,
            mutable,
            offset: 0,
        }
    }

    pub fn with_offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    fn len(&self) -> usize {
        self.bytes.len() / self.elem_size
    }
}

/// What a launch gives back: each array's bytes (without the offset's padding) and the
/// out-of-bounds count.
pub struct Outcome {
    pub arrays: Vec<Vec<u8>>,
    pub out_of_bounds: u32,
}

/// A wgpu device and what it can do.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pub features: wgpu::Features,
    pub name: String,
}

impl Gpu {
    /// The first Vulkan adapter's device, with the optional features the generator uses
    /// that it has; `None` when there is no adapter.
    pub fn new() -> Option<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter =
            block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())).ok()?;
        let wanted = wgpu::Features::SHADER_F64
            | wgpu::Features::SHADER_INT64
            | wgpu::Features::SUBGROUP
            | wgpu::Features::SHADER_F16;
        let features = adapter.features() & wanted;
        let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("cubert wgsl tests"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .ok()?;
        eprintln!("wgpu adapter: {} ({features:?})", adapter.get_info().name);
        Some(Gpu {
            device,
            queue,
            features,
            name: adapter.get_info().name,
        })
    }

    /// The target of this device.
    pub fn target(&self, checked: bool) -> WgslTarget {
        WgslTarget {
            shader_f16: self.features.contains(wgpu::Features::SHADER_F16),
            shader_f64: self.features.contains(wgpu::Features::SHADER_F64),
            shader_int64: self.features.contains(wgpu::Features::SHADER_INT64),
            subgroups: self.features.contains(wgpu::Features::SUBGROUP),
            checked,
            vector_lines: 0,
        }
    }

    fn storage_buffer(&self, contents: &[u8], read_back: bool) -> wgpu::Buffer {
        // Whole 16-byte vectors: arrays of lines may be bound as `array<vec4<T>>`.
        let size = contents.len().next_multiple_of(16).max(16);
        let mut usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        if read_back {
            usage |= wgpu::BufferUsages::COPY_SRC;
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: size as u64,
            usage,
            mapped_at_creation: false,
        });
        let mut padded = contents.to_vec();
        padded.resize(size, 0);
        self.queue.write_buffer(&buffer, 0, &padded);
        buffer
    }

    fn read(&self, buffer: &wgpu::Buffer) -> Vec<u8> {
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: buffer.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, buffer.size());
        self.queue.submit([encoder.finish()]);
        staging.map_async(wgpu::MapMode::Read, .., |result| result.unwrap());
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        let bytes = staging.get_mapped_range(..).unwrap().to_vec();
        staging.unmap();
        bytes
    }

    /// Runs entry point `entry` of `source` on a grid of `cubes` workgroups with `arrays`
    /// and the 64-bit info words `info` (scalars, then tensor metadata).
    pub fn run(
        &self,
        source: &str,
        entry: &str,
        arrays: &[ArrayArg],
        info: &[u64],
        cubes: (u32, u32, u32),
    ) -> Outcome {
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(entry),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries = vec![storage(0, false), storage(1, true)];
        // Every array is bound read-write, as the ABI says (views of one buffer may be
        // bound to several slots).
        for slot in 0..arrays.len() {
            entries.push(storage(slot as u32 + 2, false));
        }
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
        let status = self.storage_buffer(&[0; 4], true);
        let mut words: Vec<u32> = Vec::new();
        for array in arrays {
            words.push(array.offset as u32);
            words.push(array.len() as u32);
        }
        for word in info {
            words.push(*word as u32);
            words.push((*word >> 32) as u32);
        }
        let info_bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let info_buffer = self.storage_buffer(&info_bytes, false);
        let buffers: Vec<wgpu::Buffer> = arrays
            .iter()
            .map(|array| {
                // The view starts `offset` elements into its binding, after junk.
                let mut bytes = vec![0xa5u8; array.offset * array.elem_size];
                bytes.extend_from_slice(&array.bytes);
                self.storage_buffer(&bytes, true)
            })
            .collect();
        let mut bind_entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: status.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: info_buffer.as_entire_binding(),
            },
        ];
        for (slot, buffer) in buffers.iter().enumerate() {
            bind_entries.push(wgpu::BindGroupEntry {
                binding: slot as u32 + 2,
                resource: buffer.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &bind_entries,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(cubes.0, cubes.1, cubes.2);
        }
        self.queue.submit([encoder.finish()]);
        let arrays_out = arrays
            .iter()
            .zip(&buffers)
            .map(|(array, buffer)| {
                let bytes = self.read(buffer);
                let start = array.offset * array.elem_size;
                bytes[start..start + array.bytes.len()].to_vec()
            })
            .collect();
        let status = self.read(&status);
        Outcome {
            arrays: arrays_out,
            out_of_bounds: u32::from_le_bytes(status[..4].try_into().unwrap()),
        }
    }
}
