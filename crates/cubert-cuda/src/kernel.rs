//! CUDA kernels: source the runtime compiles (CUDA C++) or loads (PTX, cubin).
//!
//! # The kernel ABI
//!
//! Every kernel takes one parameter, the launch's [`KernelArgs`], by value:
//!
//! ```cuda
//! extern "C" __global__ void scale(const __grid_constant__ cubert::Args args) {
//!     unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
//!     float factor = cubert::scalar<float>(args, 1);
//!     if (i < cubert::info(args, 0))
//!         cubert::store<float>(args, 0, i, factor * cubert::load<float>(args, 0, i));
//! }
//! ```
//!
//! Kernels that use tensor maps take them as further parameters:
//! `(const __grid_constant__ cubert::Args args, const __grid_constant__ CUtensorMap map0, ...)`.
//!
//! The runtime prepends its prelude (`prelude.rs`) to CUDA C++ source: the `Args` type,
//! bounds-checked `load`/`store` helpers (in checked launches an out-of-bounds access does
//! nothing, counts in the launch's status word, and the launch fails at the next sync; in
//! unchecked launches they compile to raw accesses), `info`/`scalar` accessors, and f16/bf16
//! storage types with conversions.

use cubert_runtime::properties::fnv1a;
use cubert_runtime::{CubeDim, KernelId, KernelMetadata};
use std::sync::Arc;

/// Most buffers one launch can bind.
pub const MAX_BUFFERS: usize = 32;
/// Most info words one launch can pass.
pub const MAX_INFO: usize = 64;

/// The parameter block of every launch (mirrors `cubert::Args` of the prelude).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelArgs {
    /// Device addresses of the buffers.
    pub buffers: [u64; MAX_BUFFERS],
    /// Length of each buffer in bytes.
    pub lengths: [u64; MAX_BUFFERS],
    /// Info words (scalars and metadata).
    pub info: [u64; MAX_INFO],
    /// Device address of this launch's out-of-bounds counter (0 when unchecked).
    pub status: u64,
    /// Buffers bound.
    pub num_buffers: u32,
    /// Info words passed.
    pub num_info: u32,
}

impl Default for KernelArgs {
    fn default() -> Self {
        Self {
            buffers: [0; MAX_BUFFERS],
            lengths: [0; MAX_BUFFERS],
            info: [0; MAX_INFO],
            status: 0,
            num_buffers: 0,
            num_info: 0,
        }
    }
}

/// What a kernel is made of.
#[derive(Clone, Debug)]
pub enum KernelSource {
    /// CUDA C++, compiled by NVRTC with the runtime's prelude prepended.
    Cuda(Arc<str>),
    /// PTX text, compiled by the driver.
    Ptx(Arc<str>),
    /// A cubin for the device's architecture.
    Cubin(Arc<[u8]>),
}

struct KernelInner {
    name: Arc<str>,
    entry: String,
    source: KernelSource,
    cube_dim: CubeDim,
    shared_memory: usize,
    options: Vec<String>,
    id: KernelId,
}

/// A kernel of the CUDA backend. Cheap to clone.
#[derive(Clone)]
pub struct CudaKernel {
    inner: Arc<KernelInner>,
}

impl std::fmt::Debug for CudaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaKernel")
            .field("name", &self.inner.name)
            .field("entry", &self.inner.entry)
            .field("cube_dim", &self.inner.cube_dim)
            .finish()
    }
}

fn source_hash(source: &KernelSource) -> u64 {
    match source {
        KernelSource::Cuda(text) => fnv1a(text.as_bytes()),
        KernelSource::Ptx(text) => fnv1a(text.as_bytes()) ^ 1,
        KernelSource::Cubin(bytes) => fnv1a(bytes) ^ 2,
    }
}

impl CudaKernel {
    fn build(
        name: String,
        entry: String,
        source: KernelSource,
        cube_dim: CubeDim,
        shared_memory: usize,
        options: Vec<String>,
    ) -> Self {
        let id = KernelId::new(format!(
            "cuda/{name}/{entry}/{:016x}/{:016x}/{}x{}x{}/smem{shared_memory}",
            source_hash(&source),
            fnv1a(options.join("\u{1f}").as_bytes()),
            cube_dim.x,
            cube_dim.y,
            cube_dim.z
        ));
        Self {
            inner: Arc::new(KernelInner {
                name: Arc::from(name),
                entry,
                source,
                cube_dim,
                shared_memory,
                options,
                id,
            }),
        }
    }

    /// A kernel from CUDA C++ `source` whose `extern "C"` entry point is `entry`.
    pub fn from_cuda(
        name: impl Into<String>,
        entry: impl Into<String>,
        source: impl Into<Arc<str>>,
        cube_dim: CubeDim,
    ) -> Self {
        Self::build(
            name.into(),
            entry.into(),
            KernelSource::Cuda(source.into()),
            cube_dim,
            0,
            Vec::new(),
        )
    }

    /// A kernel from PTX text.
    pub fn from_ptx(
        name: impl Into<String>,
        entry: impl Into<String>,
        ptx: impl Into<Arc<str>>,
        cube_dim: CubeDim,
    ) -> Self {
        Self::build(
            name.into(),
            entry.into(),
            KernelSource::Ptx(ptx.into()),
            cube_dim,
            0,
            Vec::new(),
        )
    }

    /// A kernel from a cubin built for the device's architecture.
    pub fn from_cubin(
        name: impl Into<String>,
        entry: impl Into<String>,
        cubin: impl Into<Arc<[u8]>>,
        cube_dim: CubeDim,
    ) -> Self {
        Self::build(
            name.into(),
            entry.into(),
            KernelSource::Cubin(cubin.into()),
            cube_dim,
            0,
            Vec::new(),
        )
    }

    fn rebuild(&self, cube_dim: CubeDim, shared_memory: usize, options: Vec<String>) -> Self {
        Self::build(
            self.inner.name.to_string(),
            self.inner.entry.clone(),
            self.inner.source.clone(),
            cube_dim,
            shared_memory,
            options,
        )
    }

    /// The same kernel with `bytes` of dynamic shared memory per cube.
    pub fn with_shared_memory(&self, bytes: usize) -> Self {
        self.rebuild(self.inner.cube_dim, bytes, self.inner.options.clone())
    }

    /// The same kernel with another cube dim.
    pub fn with_cube_dim(&self, cube_dim: CubeDim) -> Self {
        self.rebuild(
            cube_dim,
            self.inner.shared_memory,
            self.inner.options.clone(),
        )
    }

    /// The same kernel compiled with extra NVRTC options (`-DNAME=VALUE`, ...).
    pub fn with_options(&self, options: Vec<String>) -> Self {
        self.rebuild(self.inner.cube_dim, self.inner.shared_memory, options)
    }

    /// The entry point.
    pub fn entry(&self) -> &str {
        &self.inner.entry
    }

    /// The source.
    pub fn source(&self) -> &KernelSource {
        &self.inner.source
    }

    /// Extra compile options.
    pub fn options(&self) -> &[String] {
        &self.inner.options
    }

    /// The name, shared (status counters keep it without copying).
    pub fn shared_name(&self) -> &Arc<str> {
        &self.inner.name
    }

    /// The stable id as text, without cloning it.
    pub fn id_str(&self) -> &str {
        self.inner.id.as_str()
    }
}

impl KernelMetadata for CudaKernel {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn id(&self) -> KernelId {
        self.inner.id.clone()
    }

    fn cube_dim(&self) -> CubeDim {
        self.inner.cube_dim
    }

    fn shared_memory_bytes(&self) -> usize {
        self.inner.shared_memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_block_matches_the_prelude_layout() {
        // 32 + 32 + 64 words, a status pointer, two u32 counts.
        assert_eq!(
            std::mem::size_of::<KernelArgs>(),
            (32 + 32 + 64 + 1) * 8 + 8
        );
        assert_eq!(std::mem::align_of::<KernelArgs>(), 8);
    }

    #[test]
    fn ids_change_with_source_and_options() {
        let a = CudaKernel::from_cuda("k", "k", "a", CubeDim::new_1d(1));
        let b = CudaKernel::from_cuda("k", "k", "b", CubeDim::new_1d(1));
        assert_ne!(a.id(), b.id());
        assert_ne!(a.id(), a.with_options(vec!["-DX=1".into()]).id());
    }
}
