//! The on-disk pipeline cache: the driver's compiled pipelines kept between processes, so a
//! second run skips the driver's compile of every kernel it already built (on NVIDIA's
//! Vulkan driver, SPIR-V to machine code: the costly part of building a pipeline).
//!
//! It is wgpu's `PipelineCache` (Vulkan adapters with `PIPELINE_CACHE`): one file per
//! adapter, `<cache dir>/wgpu/<key>.bin`, the key made by wgpu from the adapter's vendor
//! and device ids. Every pipeline is built through the cache; the server saves it when a
//! stream syncs after new pipelines were built, and when the server is dropped. A file is
//! written whole to a temporary name and renamed, so a reader never sees half of one;
//! wgpu validates a file's header (format, adapter, driver, size) and the driver its
//! content, so a stale or foreign file is ignored, never trusted. The cache directory is
//! the `[compilation]` one (`cache_dir`, off with `disk_cache = false`), next to the CUDA
//! backend's kernels. Adapters without the feature (Metal, DX12, GL) build every pipeline
//! in each process.

use std::path::{Path, PathBuf};

/// The pipeline cache of one server, backed by a file.
pub struct DiskCache {
    cache: wgpu::PipelineCache,
    path: PathBuf,
    /// Pipelines built through the cache since it was last saved.
    unsaved: usize,
}

impl std::fmt::Debug for DiskCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskCache")
            .field("path", &self.path)
            .field("unsaved", &self.unsaved)
            .finish()
    }
}

impl DiskCache {
    /// The cache of `device` (made from an adapter described by `info`, with `features`)
    /// in `dir`, loaded from its file where one exists; `None` where the adapter has no
    /// pipeline cache or `dir` is `None`.
    pub fn open(
        device: &wgpu::Device,
        info: &wgpu::AdapterInfo,
        features: wgpu::Features,
        dir: Option<&Path>,
    ) -> Option<Self> {
        if !features.contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let key = wgpu::util::pipeline_cache_key(info)?;
        let path = dir?.join("wgpu").join(format!("{key}.bin"));
        let data = match std::fs::read(&path) {
            Ok(data) => Some(data),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => {
                tracing::warn!(
                    "wgpu pipeline cache: can't read {}: {error}",
                    path.display()
                );
                None
            }
        };
        // SAFETY: `data` was written by `save` below from `PipelineCache::get_data` of a
        // cache of an adapter with the same `pipeline_cache_key` (the file is named by it).
        // wgpu checks the header it put in front of the driver's data (format version,
        // adapter key, size) and, with `fallback`, ignores data it can't use instead of
        // failing; the file can't be torn, being written whole and renamed.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("cubert pipelines"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        tracing::debug!(
            target: "cubert::compile",
            "wgpu pipeline cache {} ({})",
            path.display(),
            data.as_ref()
                .map_or("new".to_string(), |data| format!("{} bytes loaded", data.len()))
        );
        Some(Self {
            cache,
            path,
            unsaved: 0,
        })
    }

    /// The cache to build pipelines through; counts one more pipeline to save.
    pub fn for_new_pipeline(&mut self) -> &wgpu::PipelineCache {
        self.unsaved += 1;
        &self.cache
    }

    /// Where the cache is saved.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the cache to its file if pipelines were built since the last save. A failure
    /// is a warning: the next process builds those pipelines again.
    pub fn save(&mut self) {
        if self.unsaved == 0 {
            return;
        }
        self.unsaved = 0;
        let Some(data) = self.cache.get_data() else {
            return;
        };
        let written = self
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                let temporary = self
                    .path
                    .with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&temporary, &data)?;
                std::fs::rename(&temporary, &self.path)
            });
        if let Err(error) = written {
            tracing::warn!(
                "wgpu pipeline cache: can't write {}: {error}",
                self.path.display()
            );
        }
    }
}

impl Drop for DiskCache {
    fn drop(&mut self) {
        self.save();
    }
}
