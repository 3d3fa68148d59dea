//! Compute pipelines: a kernel's WGSL compiled for one device, cached by specialization (its
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
//! refuses is a [`LaunchError::CompilationError`] naming the kernel, never a panic.

use crate::disk_cache::DiskCache;
use crate::kernel::WgpuKernel;
use crate::lang::{WgslTarget, entry_name, generate};
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
}

impl PipelineCache {
    /// An empty cache that builds through `disk` where there is one.
    pub fn new(disk: Option<DiskCache>) -> Self {
        Self {
            pipelines: HashMap::new(),
            disk,
        }
    }

    /// Saves the on-disk cache if pipelines were built since it was last saved.
    pub fn save_to_disk(&mut self) {
        if let Some(disk) = &mut self.disk {
            disk.save();
        }
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
        let pipeline = Arc::new(build(device, target, kernel, disk)?);
        self.pipelines.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

fn build(
    device: &wgpu::Device,
    target: WgslTarget,
    kernel: &WgpuKernel,
    disk: Option<&wgpu::PipelineCache>,
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
    dump(&entry, &source);
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
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(kernel.name()),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
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

/// Writes `source` to `$CUBERT_KERNEL_DUMP/<entry>.wgsl` when the variable is set.
fn dump(entry: &str, source: &str) {
    let Some(dir) = std::env::var_os("CUBERT_KERNEL_DUMP") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let path = dir.join(format!("{entry}.wgsl"));
    if let Err(error) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, source)) {
        tracing::warn!(
            "CUBERT_KERNEL_DUMP: can't write {}: {error}",
            path.display()
        );
    }
}
