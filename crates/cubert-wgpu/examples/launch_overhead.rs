//! Launch overhead through wgpu alone next to cubert's wgpu backend: where does a launch's
//! time go on a driver?
//!
//! `cubert --backend wgpu bench --only launch` measures cubert's launch + sync round trip
//! and back-to-back launches; this program measures the same two things through wgpu
//! itself, binding what each launch binds in several ways, then through cubert, in one
//! process on one adapter, so one run says which part is the driver's and wgpu's floor and
//! which part cubert adds.
//!
//! Every kernel is empty in effect: one workgroup of one invocation that reads its info
//! word and writes the status word only if the info holds a value nobody writes. Bindings,
//! as cubert's kernels have them: 0 a status word (a slice of one long-lived buffer), 1 the
//! launch's info words. Variants:
//!
//! - `submit only`: an empty encoder submitted (round trip: then `poll` until done);
//! - `no bindings`: a kernel without bindings, a compute pass each;
//! - `info buffer + bind group per launch`: what cubert's backend does today, a buffer
//!   created with the info words (`create_buffer_init`) and a bind group, per launch;
//! - `info arena + bind group per launch`: the info words of all launches of a submission
//!   appended to one host vector, written into one long-lived buffer by one
//!   `Queue::write_buffer` before the submit, each launch binding its slice;
//! - `info arena + one bind group`: the same with the info bound at a dynamic offset, one
//!   bind group made once and reused by every launch;
//! - `..., one pass`: the launches of a submission in one compute pass instead of a pass
//!   each.
//!
//! Round trip: one launch, submit, `poll` until the device is idle: median of 2,000 (after
//! 100). Back to back: 20,000 launches, a submit every 64 (as cubert's backend), then
//! `poll`; wall time per launch, median of 5. cubert: `ops::noop` + `sync`, and back-to-back
//! `ops::noop` then `sync`, measured the same way.
//!
//! Run: `cargo run --release -p cubert-wgpu --example launch_overhead` (`QUICK=1` for a
//! tenth of the counts). It needs a Vulkan loader and driver; wgpu picks the
//! high-performance adapter.

use cubert_runtime::ops;
use std::error::Error;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// cubert's backend submits the pending encoder after this many launches.
const LAUNCHES_PER_SUBMIT: usize = 64;
/// Bytes of a launch's info words (cubert's empty kernel binds one word; rounded up to
/// the storage offset alignment in the arena).
const INFO_BYTES: u64 = 16;

const BOUND_WGSL: &str = "
@group(0) @binding(0) var<storage, read_write> status: array<u32>;
@group(0) @binding(1) var<storage, read> info: array<u32>;
@compute @workgroup_size(1)
fn main() {
    if info[0] == 0xdeadbeefu { status[0] = 1u; }
}
";

const BARE_WGSL: &str = "
@compute @workgroup_size(1)
fn main() {}
";

/// How a launch binds its status word and info.
#[derive(Clone, Copy, PartialEq)]
enum Binding {
    /// A kernel without bindings.
    None,
    /// A buffer and a bind group made per launch.
    BufferPerLaunch,
    /// A slice of the arena, a bind group made per launch.
    ArenaGroupPerLaunch,
    /// The arena at a dynamic offset, one bind group.
    ArenaOneGroup,
}

impl Binding {
    fn label(self) -> &'static str {
        match self {
            Binding::None => "no bindings",
            Binding::BufferPerLaunch => "info buffer + bind group per launch",
            Binding::ArenaGroupPerLaunch => "info arena + bind group per launch",
            Binding::ArenaOneGroup => "info arena + one bind group",
        }
    }
}

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    bare: wgpu::ComputePipeline,
    bound: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    dynamic: wgpu::ComputePipeline,
    dynamic_layout: wgpu::BindGroupLayout,
    status: wgpu::Buffer,
    arena: wgpu::Buffer,
    alignment: u64,
}

fn entry(binding: u32, read_only: bool, dynamic: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: dynamic,
            min_binding_size: None,
        },
        count: None,
    }
}

impl Gpu {
    fn new() -> Result<Self> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN,
            ..wgpu::InstanceDescriptor::new_without_display_handle_from_env()
        });
        let adapter = cubert_runtime::future::block_on(instance.request_adapter(
            &wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            },
        ))?;
        println!("wgpu adapter: {:?}", adapter.get_info().name);
        let (device, queue) =
            cubert_runtime::future::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: None,
                required_features: wgpu::Features::empty(),
                required_limits: adapter.limits(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            }))?;
        device.on_uncaptured_error(std::sync::Arc::new(|error: wgpu::Error| {
            println!("wgpu error: {error:?}");
        }));
        let alignment = u64::from(device.limits().min_storage_buffer_offset_alignment);
        let pipeline = |wgsl: &str, layouts: &[Option<&wgpu::BindGroupLayout>]| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(wgsl.into()),
            });
            let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: layouts,
                immediate_size: 0,
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: None,
            entries: &[entry(0, false, false), entry(1, true, false)],
        });
        let dynamic_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: None,
            entries: &[entry(0, false, false), entry(1, true, true)],
        });
        let bare = pipeline(BARE_WGSL, &[]);
        let bound = pipeline(BOUND_WGSL, &[Some(&layout)]);
        let dynamic = pipeline(BOUND_WGSL, &[Some(&dynamic_layout)]);
        let storage = |size: u64| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let status = storage(256);
        let arena = storage(LAUNCHES_PER_SUBMIT as u64 * alignment.max(INFO_BYTES));
        Ok(Self {
            device,
            queue,
            bare,
            bound,
            layout,
            dynamic,
            dynamic_layout,
            status,
            arena,
            alignment,
        })
    }

    fn wait(&self) -> Result<()> {
        self.device.poll(wgpu::PollType::wait_indefinitely())?;
        Ok(())
    }

    /// Records `launches` launches bound as `binding` into one encoder, a compute pass each
    /// (or one pass for all of them: `one_pass`), and submits it (the arena's words first,
    /// where the launches use it).
    fn submit(
        &self,
        launches: usize,
        binding: Binding,
        one_pass: bool,
        one_group: Option<&wgpu::BindGroup>,
    ) {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        let mut arena_words = Vec::new();
        if one_pass {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for launch in 0..launches {
                self.record(&mut pass, launch, binding, &mut arena_words, one_group);
            }
        } else {
            for launch in 0..launches {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                self.record(&mut pass, launch, binding, &mut arena_words, one_group);
            }
        }
        if !arena_words.is_empty() {
            self.queue.write_buffer(&self.arena, 0, &arena_words);
        }
        self.queue.submit([encoder.finish()]);
    }

    /// Records launch number `launch` of a submission into `pass`.
    fn record(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        launch: usize,
        binding: Binding,
        arena_words: &mut Vec<u8>,
        one_group: Option<&wgpu::BindGroup>,
    ) {
        let stride = self.alignment.max(INFO_BYTES);
        match binding {
            Binding::None => pass.set_pipeline(&self.bare),
            Binding::BufferPerLaunch => {
                let info = wgpu::util::DeviceExt::create_buffer_init(
                    &self.device,
                    &wgpu::util::BufferInitDescriptor {
                        label: None,
                        contents: &[0u8; INFO_BYTES as usize],
                        usage: wgpu::BufferUsages::STORAGE,
                    },
                );
                let group = self.group(info.as_entire_binding());
                pass.set_pipeline(&self.bound);
                pass.set_bind_group(0, &group, &[]);
            }
            Binding::ArenaGroupPerLaunch => {
                arena_words.resize(arena_words.len() + stride as usize, 0u8);
                let group = self.group(wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.arena,
                    offset: launch as u64 * stride,
                    size: wgpu::BufferSize::new(INFO_BYTES),
                }));
                pass.set_pipeline(&self.bound);
                pass.set_bind_group(0, &group, &[]);
            }
            Binding::ArenaOneGroup => {
                arena_words.resize(arena_words.len() + stride as usize, 0u8);
                pass.set_pipeline(&self.dynamic);
                if let Some(group) = one_group {
                    pass.set_bind_group(0, group, &[(launch as u64 * stride) as u32]);
                }
            }
        }
        pass.dispatch_workgroups(1, 1, 1);
    }

    /// A bind group of `layout` of the status word and `info`.
    fn group_of(
        &self,
        layout: &wgpu::BindGroupLayout,
        info: wgpu::BindingResource<'_>,
    ) -> wgpu::BindGroup {
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &self.status,
                        offset: 0,
                        size: wgpu::BufferSize::new(4),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: info,
                },
            ],
        })
    }

    /// A bind group of the static layout of the status word and `info`.
    fn group(&self, info: wgpu::BindingResource<'_>) -> wgpu::BindGroup {
        self.group_of(&self.layout, info)
    }

    /// The one bind group of the dynamic layout: the arena's first slice, moved by the
    /// dynamic offset.
    fn one_group(&self) -> wgpu::BindGroup {
        self.group_of(
            &self.dynamic_layout,
            wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.arena,
                offset: 0,
                size: wgpu::BufferSize::new(INFO_BYTES),
            }),
        )
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Median µs of `trips` calls of `trip`, after `trips / 20` unmeasured ones.
fn round_trip(trips: usize, mut trip: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..trips / 20 {
        trip()?;
    }
    let mut times = Vec::with_capacity(trips);
    for _ in 0..trips {
        let start = Instant::now();
        trip()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(times))
}

/// Median over 5 runs of µs per launch of `run(launches)` (which ends idle), after one.
fn per_launch(launches: usize, mut run: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    run(launches / 10)?;
    let mut times = Vec::with_capacity(5);
    for _ in 0..5 {
        let start = Instant::now();
        run(launches)?;
        times.push(start.elapsed().as_secs_f64() * 1e6 / launches as f64);
    }
    Ok(median(times))
}

fn main() -> Result<()> {
    let quick = std::env::var("QUICK").is_ok_and(|value| value == "1");
    let (trips, launches) = if quick { (200, 2_000) } else { (2_000, 20_000) };
    let gpu = Gpu::new()?;
    let one_group = gpu.one_group();
    println!(
        "{:<52} {:>16} {:>22}",
        "", "launch + sync, µs", "back to back, µs/launch"
    );
    let trip = round_trip(trips, || {
        gpu.queue.submit([gpu
            .device
            .create_command_encoder(&Default::default())
            .finish()]);
        gpu.wait()
    })?;
    println!("{:<52} {trip:>16.2} {:>22}", "wgpu: submit only", "-");
    for (binding, one_pass) in [
        (Binding::None, false),
        (Binding::BufferPerLaunch, false),
        (Binding::ArenaGroupPerLaunch, false),
        (Binding::ArenaOneGroup, false),
        (Binding::ArenaGroupPerLaunch, true),
    ] {
        let trip = round_trip(trips, || {
            gpu.submit(1, binding, one_pass, Some(&one_group));
            gpu.wait()
        })?;
        let each = per_launch(launches, |count| {
            let mut left = count;
            while left > 0 {
                let now = left.min(LAUNCHES_PER_SUBMIT);
                gpu.submit(now, binding, one_pass, Some(&one_group));
                left -= now;
            }
            gpu.wait()
        })?;
        let passes = if one_pass { ", one pass" } else { "" };
        println!(
            "{:<52} {trip:>16.2} {each:>22.2}",
            format!("wgpu: {}{passes}", binding.label())
        );
    }
    drop(one_group);
    drop(gpu);

    let client = cubert_wgpu::default_client()?;
    let trip = round_trip(trips, || {
        ops::noop(&client)?;
        client.sync()?;
        Ok(())
    })?;
    let each = per_launch(launches, |count| {
        for _ in 0..count {
            ops::noop(&client)?;
        }
        client.sync()?;
        Ok(())
    })?;
    println!(
        "{:<52} {trip:>16.2} {each:>22.2}",
        "cubert: ops::noop (+ sync)"
    );
    Ok(())
}
