//! Compute pipelines: a kernel's WGSL compiled for one device (on Vulkan through the
//! backend's own strict SPIR-V, [`crate::spirv`]), cached by specialization (its
//! id and a hash of its IR: two definitions may share an id), cube dim, execution mode and
//! the arrays printed as `vec4` lines (`lang::vector`).
//!
//! Every pipeline has the same kind of bind group layout, made explicitly (WGSL's automatic
//! layout leaves out bindings a kernel doesn't use): binding 0 the status word
//! (read-write), 1 the info words (read-only), `2 + s` array `s` (read-write, whatever the
//! shader declares: arrays of one launch often share a pooled buffer).
//! Pipelines are built through the adapter's on-disk cache where it has one
//! ([`DiskCache`]), so a later process skips the driver's compile.
//! Shader and pipeline creation run inside a validation error scope, so WGSL the adapter
//! refuses (or naga can't write as SPIR-V) is a [`LaunchError::CompilationError`] naming
//! the kernel, never a panic.

use crate::disk_cache::DiskCache;
use crate::kernel::WgpuKernel;
use crate::lang::{WgslTarget, entry_name, generate};
use crate::spirv::SpirvTarget;
use cubert_lang::ir::Param;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::error::CompilationError;
use cubert_runtime::kernel::KernelMetadata;
use cubert_runtime::{CubeDim, LaunchError};
use std::collections::HashMap;
use std::sync::Arc;

/// A compiled kernel and the layout of its bindings.
#[derive(Debug)]
pub struct Pipeline {
    /// The pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Its bind group layout.
    pub layout: wgpu::BindGroupLayout,
    /// Element size in bytes of each array parameter, in slot order.
    pub elem_sizes: Vec<u64>,
    /// Whether the kernel may count an out-of-bounds access in its status word (checked
    /// accesses printed); a kernel without any can't, and its launch needs no status check.
    pub counts_out_of_bounds: bool,
}

/// The pipelines of one device, in memory and (where the adapter can) on disk.
#[derive(Debug, Default)]
pub struct PipelineCache {
    pipelines: HashMap<(String, u64, CubeDim, bool, u64), Arc<Pipeline>>,
    disk: Option<DiskCache>,
    /// Where kernels are handed to the driver as strict SPIR-V rather than WGSL.
    spirv: Option<SpirvTarget>,
}

impl PipelineCache {
    /// An empty cache that builds through `disk` where there is one, as strict SPIR-V for
    /// `spirv` where there is one ([`crate::spirv`]), else as WGSL.
    pub fn new(disk: Option<DiskCache>, spirv: Option<SpirvTarget>) -> Self {
        Self {
            pipelines: HashMap::new(),
            disk,
            spirv,
        }
    }

    /// Saves the on-disk cache if pipelines were built since it was last saved.
    pub fn save_to_disk(&mut self) {
        if let Some(disk) = &mut self.disk {
            disk.save();
        }
    }

    /// How kernels reach the driver (`WgpuInfo::kernels`).
    pub fn kernel_format(&self) -> String {
        self.spirv
            .as_ref()
            .map_or_else(|| "WGSL".to_string(), SpirvTarget::describe)
    }

    /// The file of the on-disk cache, if there is one.
    pub fn disk_path(&self) -> Option<&std::path::Path> {
        self.disk.as_ref().map(DiskCache::path)
    }

    /// The pipeline of `kernel` in checked mode or not, built on first use.
    ///
    /// # Errors
    /// [`LaunchError::Unsupported`] for a kernel the adapter can't run (a type or operation it
    /// lacks), [`LaunchError::CompilationError`] for WGSL wgpu refuses.
    pub fn get(
        &mut self,
        device: &wgpu::Device,
        target: WgslTarget,
        kernel: &WgpuKernel,
    ) -> Result<Arc<Pipeline>, LaunchError> {
        let key = (
            kernel.id_text().to_string(),
            kernel.ir_hash(),
            kernel.cube_dim(),
            target.checked,
            target.vector_lines,
        );
        if let Some(pipeline) = self.pipelines.get(&key) {
            return Ok(pipeline.clone());
        }
        let _span = tracing::debug_span!(target: "cubert::compile", "wgsl", kernel = kernel.name(), checked = target.checked).entered();
        let disk = self.disk.as_mut().map(DiskCache::for_new_pipeline);
        let pipeline = Arc::new(build(device, target, kernel, disk, self.spirv.as_ref())?);
        self.pipelines.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

fn build(
    device: &wgpu::Device,
    target: WgslTarget,
    kernel: &WgpuKernel,
    disk: Option<&wgpu::PipelineCache>,
    spirv: Option<&SpirvTarget>,
) -> Result<Pipeline, LaunchError> {
    let ir = kernel.ir();
    let dim = kernel.cube_dim();
    let entry = entry_name(kernel.name(), kernel.id_text());
    let source = generate(ir, &entry, (dim.x, dim.y, dim.z), &target).map_err(|error| {
        LaunchError::unsupported(format!(
            "kernel `{}` can't run on this adapter: {error}",
            kernel.name()
        ))
    })?;
    dump(&format!("{entry}.wgsl"), source.as_bytes());
    let counts_out_of_bounds = source.contains("&cubert_status[0]");
    let compilation_error = |log: String| {
        LaunchError::CompilationError(CompilationError {
            kernel: kernel.name().to_string(),
            log,
            backtrace: BackTrace::capture(),
        })
    };
    let mut entries = vec![storage_entry(0, false), storage_entry(1, true)];
    let mut elem_sizes = Vec::new();
    for (slot, param) in ir
        .params
        .iter()
        .filter(|param| matches!(param, Param::Array { .. }))
        .enumerate()
    {
        if let Param::Array { elem, .. } = param {
            // Read-write even for an `&Array`: handles share pooled buffers, and WebGPU
            // refuses one buffer bound read-only and read-write in the same dispatch.
            entries.push(storage_entry(2 + slot as u32, false));
            elem_sizes.push(elem.size() as u64);
        }
    }
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(kernel.name()),
        entries: &entries,
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(kernel.name()),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let module = match spirv {
        Some(spirv) => {
            let words = spirv.compile(&source).map_err(compilation_error)?;
            dump(&format!("{entry}.spv"), &words_as_bytes(&words));
            let entry_points = [wgpu::PassthroughShaderEntryPoint {
                name: entry.as_str().into(),
                workgroup_size: (dim.x, dim.y, dim.z),
            }];
            // SAFETY: the words are naga's SPIR-V of WGSL that naga validated for this
            // device's features, written with the options wgpu's Vulkan backend uses
            // (bounds checks included) and only decorated and given execution modes the
            // device reported (`SpirvTarget`); its bindings are this layout's.
            unsafe {
                device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
                    label: Some(kernel.name()),
                    entry_points: entry_points.as_slice().into(),
                    spirv: Some(words.into()),
                    ..Default::default()
                })
            }
        }
        None => device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(kernel.name()),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        }),
    };
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(kernel.name()),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some(&entry),
        compilation_options: wgpu::PipelineCompilationOptions::default(),
        cache: disk,
    });
    if let Some(error) = cubert_runtime::future::block_on(scope.pop()) {
        return Err(compilation_error(error.to_string()));
    }
    Ok(Pipeline {
        pipeline,
        layout,
        elem_sizes,
        counts_out_of_bounds,
    })
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// The bytes of a SPIR-V module (little-endian words, as `spirv-val` reads a file).
fn words_as_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_le_bytes()).collect()
}

/// Writes `contents` to `$CUBERT_KERNEL_DUMP/<file>` when the variable is set: each
/// kernel's WGSL (`<entry>.wgsl`) and, where the device takes strict SPIR-V, its SPIR-V
/// (`<entry>.spv`).
fn dump(file: &str, contents: &[u8]) {
    let Some(dir) = std::env::var_os("CUBERT_KERNEL_DUMP") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let path = dir.join(file);
    if let Err(error) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, contents))
    {
        tracing::warn!(
            "CUBERT_KERNEL_DUMP: can't write {}: {error}",
            path.display()
        );
    }
}
