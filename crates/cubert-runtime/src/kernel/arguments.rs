//! The arguments of a kernel launch: buffers, packed scalars and metadata, tensor maps.

use super::tensor_map::TensorMapBinding;
use crate::handle::Binding;
use std::fmt;

/// Scalars and metadata of a launch, packed as 64-bit words.
///
/// Scalars come first (each in one word: floats as their bit pattern, integers
/// zero- or sign-extended), then static metadata (shapes, strides), then dynamic metadata
/// starting at `dynamic_metadata_offset`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MetadataBindingInfo {
    /// The packed words.
    pub data: Vec<u64>,
    /// Index of the first dynamic-metadata word.
    pub dynamic_metadata_offset: usize,
}

impl MetadataBindingInfo {
    /// Info with the given words and dynamic offset.
    pub fn new(data: Vec<u64>, dynamic_metadata_offset: usize) -> Self {
        Self {
            data,
            dynamic_metadata_offset,
        }
    }

    /// Info holding custom words, for kernels compiled outside the runtime.
    pub fn custom(data: Vec<u64>) -> Self {
        Self::new(data, 0)
    }
}

/// Everything a kernel launch binds.
#[derive(Debug, Default)]
pub struct KernelArguments {
    /// Buffers, in the order the kernel expects them.
    pub buffers: Vec<Binding>,
    /// Packed scalars and metadata.
    pub info: MetadataBindingInfo,
    /// Tensor maps (TMA descriptors) on backends that support them.
    pub tensor_maps: Vec<TensorMapBinding>,
}

impl KernelArguments {
    /// No buffers, no info.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a buffer.
    pub fn with_buffer(mut self, binding: Binding) -> Self {
        self.buffers.push(binding);
        self
    }

    /// Adds several buffers.
    pub fn with_buffers(mut self, bindings: Vec<Binding>) -> Self {
        self.buffers.extend(bindings);
        self
    }

    /// Sets the packed info.
    pub fn with_info(mut self, info: MetadataBindingInfo) -> Self {
        self.info = info;
        self
    }

    /// Adds a scalar word to the info.
    pub fn with_scalar(mut self, word: u64) -> Self {
        self.info.data.push(word);
        self
    }

    /// Adds tensor maps.
    pub fn with_tensor_maps(mut self, bindings: Vec<TensorMapBinding>) -> Self {
        self.tensor_maps.extend(bindings);
        self
    }
}

impl fmt::Display for KernelArguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KernelArguments")?;
        for buffer in &self.buffers {
            write!(f, "\n - buffer: {buffer:?}")?;
        }
        if !self.info.data.is_empty() {
            write!(f, "\n - info: {:?}", self.info.data)?;
        }
        Ok(())
    }
}
