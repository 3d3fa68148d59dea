//! Kernels and their launch parameters.
//!
//! A kernel is backend-native (a Rust function on the CPU, CUDA C++ on NVIDIA GPUs); the
//! runtime only needs what [`KernelMetadata`] says about it. A launch runs a grid of cubes
//! ([`CubeCount`]), each of [`CubeDim`] units, over the buffers and scalars of
//! [`KernelArguments`], in an [`ExecutionMode`]. The standard kernels (`standard`) may come
//! in several [`StandardVariant`]s, each with the [`Priority`] the autotuner tries it at
//! (`variant`). Kernels of the language (`cubert_lang`, `#[kernel]`) are built by the
//! backend from a definition once per specialization and cube dim (`language_cache`).

mod arguments;
mod cube;
mod language_cache;
pub mod standard;
mod tensor_arg;
mod tensor_map;
pub mod variant;

pub use arguments::{KernelArguments, MetadataBindingInfo};
pub use cube::{CubeCount, CubeCountSelection, CubeDim, cube_count_spread};
pub use language_cache::LanguageKernelCache;
pub use tensor_arg::{MAX_TENSOR_RANK, TensorArg};
pub use tensor_map::{
    OobFill, TensorMapBinding, TensorMapFormat, TensorMapInterleave, TensorMapMeta,
    TensorMapPrefetch, TensorMapSwizzle,
};
pub use variant::{Priority, StandardVariant};

use serde::{Deserialize, Serialize};
use std::fmt;

/// A stable identifier of a compiled kernel: the key of compile caches.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KernelId {
    text: String,
}

impl KernelId {
    /// An id from any text that identifies the kernel and its compile-time parameters.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// What the runtime knows about a kernel.
pub trait KernelMetadata: Send + 'static {
    /// A readable name, used in profiles and error messages.
    fn name(&self) -> &str;
    /// The stable id (compile-cache key).
    fn id(&self) -> KernelId;
    /// Units per cube.
    fn cube_dim(&self) -> CubeDim;
    /// Bytes of shared memory each cube uses.
    fn shared_memory_bytes(&self) -> usize {
        0
    }
}

/// How strictly a launch checks memory accesses.
#[derive(Default, Hash, PartialEq, Eq, Clone, Debug, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    /// Every buffer access is bounds-checked; an out-of-bounds access does nothing and is
    /// reported as an error at the next sync.
    #[default]
    Checked,
    /// Like `Checked`, and every out-of-bounds access is logged as it happens.
    Validate,
    /// No checks: an out-of-bounds access is undefined behaviour.
    Unchecked,
}
