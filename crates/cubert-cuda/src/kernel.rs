//! CUDA kernels: source the runtime compiles (CUDA C++) or loads (PTX, cubin).
//!
//! # The kernel ABI
//!
//! Every kernel takes one parameter, the launch's [`KernelArgs`], by value (its size set
//! by the kernel's [`ArgsCapacity`]):
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

/// How many buffers and info words a kernel's argument block has room for: the size of
/// its `cubert::Args` parameter. The driver copies the whole parameter at every launch (and
/// keeps it in every node of a graph), so kernels that need few arguments declare a small
/// block: the standard kernels pass 4 + 4 (112 bytes) instead of the 1040 bytes of the
/// default 32 + 64, which makes each launch cheaper.
// On an H200 the full block was what separated a cubert launch from a plain CUDA one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgsCapacity {
    buffers: usize,
    info: usize,
}

impl Default for ArgsCapacity {
    fn default() -> Self {
        Self {
            buffers: MAX_BUFFERS,
            info: MAX_INFO,
        }
    }
}

impl ArgsCapacity {
    /// Room for `buffers` buffers and `info` info words, each brought into
    /// `1 ..= MAX_BUFFERS` and `1 ..= MAX_INFO` (so a block always fits the prelude's
    /// largest layout).
    pub const fn new(buffers: usize, info: usize) -> Self {
        const fn within(value: usize, max: usize) -> usize {
            if value < 1 {
                1
            } else if value > max {
                max
            } else {
                value
            }
        }
        Self {
            buffers: within(buffers, MAX_BUFFERS),
            info: within(info, MAX_INFO),
        }
    }

    /// Buffers the block has room for (1 ..= [`MAX_BUFFERS`]).
    pub fn buffers(self) -> usize {
        self.buffers
    }

    /// Info words the block has room for (1 ..= [`MAX_INFO`]).
    pub fn info(self) -> usize {
        self.info
    }

    /// Bytes of the block: both arrays of buffers, the info words, the status pointer and
    /// the two counts.
    pub fn bytes(self) -> usize {
        self.words() * 8
    }

    fn words(self) -> usize {
        2 * self.buffers + self.info + 2
    }

    /// The NVRTC options that size the prelude's `cubert::Args` to this capacity.
    pub fn options(self) -> Vec<String> {
        vec![
            format!("-DCUBERT_MAX_BUFFERS={}", self.buffers),
            format!("-DCUBERT_MAX_INFO={}", self.info),
        ]
    }
}

/// Words of the largest argument block.
const MAX_WORDS: usize = 2 * MAX_BUFFERS + MAX_INFO + 2;

/// The parameter block of one launch, laid out as the prelude's `cubert::Args` of a given
/// [`ArgsCapacity`]: `void* buffers[B]; u64 lengths[B]; u64 info_words[I]; u32* status;
/// u32 num_buffers; u32 num_info;` (8-byte words, little-endian counts). It lives on the
/// stack; the driver reads the kernel's declared size from its start.
#[derive(Clone, Copy, Debug)]
pub struct KernelArgs {
    capacity: ArgsCapacity,
    words: [u64; MAX_WORDS],
}

impl KernelArgs {
    /// An empty block of `capacity`.
    pub fn new(capacity: ArgsCapacity) -> Self {
        Self {
            capacity,
            words: [0; MAX_WORDS],
        }
    }

    /// The block's capacity.
    pub fn capacity(&self) -> ArgsCapacity {
        self.capacity
    }

    /// Sets buffer `index` (below the capacity; others are ignored): its device address
    /// and length in bytes.
    pub fn set_buffer(&mut self, index: usize, address: u64, length: u64) {
        if index < self.capacity.buffers {
            self.words[index] = address;
            self.words[self.capacity.buffers + index] = length;
        }
    }

    /// Sets the info words (as many as fit) and the two counts.
    pub fn set_counts_and_info(&mut self, buffers: usize, info: &[u64]) {
        let capacity = self.capacity;
        let kept = info.len().min(capacity.info);
        let start = 2 * capacity.buffers;
        self.words[start..start + kept].copy_from_slice(&info[..kept]);
        let buffers = buffers.min(capacity.buffers) as u64;
        self.words[capacity.words() - 1] = buffers | ((kept as u64) << 32);
    }

    /// Sets the device address of the launch's out-of-bounds counter.
    pub fn set_status(&mut self, address: u64) {
        let status = self.capacity.words() - 2;
        self.words[status] = address;
    }

    /// The block as the driver reads it.
    pub fn as_words(&self) -> &[u64] {
        &self.words[..self.capacity.words()]
    }

    /// The pointer `cuLaunchKernel` takes for this parameter.
    pub fn as_param(&mut self) -> *mut std::ffi::c_void {
        self.words.as_mut_ptr().cast()
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
    args: ArgsCapacity,
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
        args: ArgsCapacity,
    ) -> Self {
        let id = KernelId::new(format!(
            "cuda/{name}/{entry}/{:016x}/{:016x}/{}x{}x{}/smem{shared_memory}/args{}x{}",
            source_hash(&source),
            fnv1a(options.join("\u{1f}").as_bytes()),
            cube_dim.x,
            cube_dim.y,
            cube_dim.z,
            args.buffers,
            args.info
        ));
        Self {
            inner: Arc::new(KernelInner {
                name: Arc::from(name),
                entry,
                source,
                cube_dim,
                shared_memory,
                options,
                args,
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
            ArgsCapacity::default(),
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
            ArgsCapacity::default(),
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
            ArgsCapacity::default(),
        )
    }

    fn rebuild(&self, cube_dim: CubeDim, shared_memory: usize, options: Vec<String>) -> Self {
        // A generated kernel's register bound and unit positions follow its cube dim.
        let options = options
            .into_iter()
            .map(|option| {
                if option.starts_with(crate::lang::CUBE_DIM) {
                    crate::lang::cube_dim_option(cube_dim)
                } else {
                    option
                }
            })
            .collect();
        Self::build(
            self.inner.name.to_string(),
            self.inner.entry.clone(),
            self.inner.source.clone(),
            cube_dim,
            shared_memory,
            options,
            self.inner.args,
        )
    }

    /// The same kernel with an argument block of `capacity` (see [`ArgsCapacity`]). CUDA
    /// C++ source is compiled with the prelude's `cubert::Args` sized to match; a PTX or
    /// cubin kernel must have been built with that same layout. Launches passing more
    /// buffers or info words than the capacity are refused.
    pub fn with_args_capacity(&self, capacity: ArgsCapacity) -> Self {
        Self::build(
            self.inner.name.to_string(),
            self.inner.entry.clone(),
            self.inner.source.clone(),
            self.inner.cube_dim,
            self.inner.shared_memory,
            self.inner.options.clone(),
            capacity,
        )
    }

    /// The argument block's capacity.
    pub fn args_capacity(&self) -> ArgsCapacity {
        self.inner.args
    }

    /// The NVRTC options for CUDA C++ source: the extra options, then the argument block's
    /// size.
    pub fn compile_options(&self) -> Vec<String> {
        let mut options = self.inner.options.clone();
        if self.inner.args != ArgsCapacity::default() {
            options.extend(self.inner.args.options());
        }
        options
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
    fn default_argument_block_matches_the_prelude_layout() {
        // 32 + 32 + 64 words, a status pointer, two u32 counts.
        let args = KernelArgs::new(ArgsCapacity::default());
        assert_eq!(args.as_words().len() * 8, (32 + 32 + 64 + 1) * 8 + 8);
        assert_eq!(ArgsCapacity::default().bytes(), 1040);
    }

    #[test]
    fn small_argument_block_places_every_field_where_the_prelude_reads_it() {
        let mut args = KernelArgs::new(ArgsCapacity::new(4, 4));
        args.set_buffer(0, 0xA0, 10);
        args.set_buffer(2, 0xA2, 12);
        args.set_buffer(4, 0xFF, 99); // beyond the capacity: ignored
        args.set_counts_and_info(3, &[7, 8]);
        args.set_status(0x5000);
        assert_eq!(
            args.as_words(),
            &[
                0xA0,
                0,
                0xA2,
                0,
                10,
                0,
                12,
                0,
                7,
                8,
                0,
                0,
                0x5000,
                3 | (2 << 32)
            ]
        );
        assert_eq!(ArgsCapacity::new(4, 4).bytes(), 112);
    }

    #[test]
    fn capacity_is_kept_within_the_prelude_limits() {
        assert_eq!(ArgsCapacity::new(0, 0), ArgsCapacity::new(1, 1));
        assert_eq!(ArgsCapacity::new(1000, 1000), ArgsCapacity::default());
    }

    #[test]
    fn capacity_changes_the_id_and_the_compile_options() {
        let a = CudaKernel::from_cuda("k", "k", "a", CubeDim::new_1d(1));
        let small = a.with_args_capacity(ArgsCapacity::new(2, 3));
        assert_ne!(a.id(), small.id());
        assert!(a.compile_options().is_empty());
        assert_eq!(
            small.compile_options(),
            vec![
                "-DCUBERT_MAX_BUFFERS=2".to_string(),
                "-DCUBERT_MAX_INFO=3".into()
            ]
        );
    }

    #[test]
    fn ids_change_with_source_and_options() {
        let a = CudaKernel::from_cuda("k", "k", "a", CubeDim::new_1d(1));
        let b = CudaKernel::from_cuda("k", "k", "b", CubeDim::new_1d(1));
        assert_ne!(a.id(), b.id());
        assert_ne!(a.id(), a.with_options(vec!["-DX=1".into()]).id());
    }
}
