//! Kernels of the wgpu backend: a language kernel's IR and the cube dim it is built for.
//!
//! `Runtime::language_kernel` has no device at hand, and the WGSL of a kernel depends on the
//! adapter (64-bit types, subgroups) and on the launch's execution mode (checked or not), so
//! a [`WgpuKernel`] keeps the IR; each server prints and compiles it on first launch
//! (`pipeline`).

use cubert_lang::ir;
use cubert_runtime::CubeDim;
use cubert_runtime::kernel::{KernelId, KernelMetadata};
use cubert_runtime::properties::fnv1a;
use std::sync::Arc;

/// A kernel of the language for wgpu devices.
#[derive(Clone, Debug)]
pub struct WgpuKernel {
    id: String,
    name: String,
    cube_dim: CubeDim,
    ir: Arc<ir::Kernel>,
    /// A hash of the IR: what pipelines are cached by (two definitions may share an id).
    ir_hash: u64,
    shared_memory: Option<usize>,
    /// The array slots a launch may print as `vec4` lines (`lang::vector::candidates`).
    vector_candidates: u64,
}

impl WgpuKernel {
    /// The kernel `id` (its specialization), named `name`, whose IR is `ir`, for cubes of
    /// `cube_dim` units.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        ir: Arc<ir::Kernel>,
        cube_dim: CubeDim,
    ) -> Self {
        let ir_hash = fnv1a(format!("{ir:?}").as_bytes());
        Self {
            ir_hash,
            vector_candidates: crate::lang::vector::candidates(&ir),
            id: id.into(),
            name: name.into(),
            cube_dim,
            ir,
            shared_memory: None,
        }
    }

    /// The same kernel for cubes of `cube_dim` units (its WGSL is printed for that size).
    pub fn with_cube_dim(mut self, cube_dim: CubeDim) -> Self {
        self.cube_dim = cube_dim;
        self
    }

    /// The same kernel declaring `bytes` of workgroup memory per cube instead of what its
    /// IR holds: the client checks a launch against the device's limit with it.
    pub fn with_shared_memory(mut self, bytes: usize) -> Self {
        self.shared_memory = Some(bytes);
        self
    }

    /// The kernel's IR.
    pub fn ir(&self) -> &Arc<ir::Kernel> {
        &self.ir
    }

    /// The specialization's id as text.
    pub fn id_text(&self) -> &str {
        &self.id
    }

    /// The array slots (bit `s` for slot `s`) accessed only by lines of four 4-byte
    /// elements, which a launch prints as `array<vec4<T>>` where their bindings allow it.
    pub fn vector_candidates(&self) -> u64 {
        self.vector_candidates
    }

    /// A hash of the kernel's IR (with the id, the pipeline cache's key).
    pub fn ir_hash(&self) -> u64 {
        self.ir_hash
    }
}

impl KernelMetadata for WgpuKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn id(&self) -> KernelId {
        KernelId::new(format!("{}@{:?}", self.id, self.cube_dim))
    }

    fn cube_dim(&self) -> CubeDim {
        self.cube_dim
    }

    /// Workgroup memory as the WGSL holds it: narrow types widened to 32-bit words.
    fn shared_memory_bytes(&self) -> usize {
        if let Some(bytes) = self.shared_memory {
            return bytes;
        }
        self.ir
            .shared_arrays()
            .iter()
            .map(|&(_, elem, len, _)| elem.size().max(4) * len as usize)
            .sum()
    }
}
