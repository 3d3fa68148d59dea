//! The kernels of a dry run: what a launch names (its kernel's name, id, cube dim and
//! shared memory, which the client checks against the target's limits), with no code.

use crate::kernel::{CubeDim, KernelId, KernelMetadata};

/// A kernel of the language (or a standard kernel), built for a dry run: no code is
/// generated, the launch is checked and counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunKernel {
    name: String,
    id: KernelId,
    cube_dim: CubeDim,
    shared_memory_bytes: usize,
}

impl DryRunKernel {
    /// The kernel `name` (compile-cache id `id`) for cubes of `cube_dim`, using
    /// `shared_memory_bytes` of shared memory per cube.
    pub fn new(
        name: impl Into<String>,
        id: impl Into<String>,
        cube_dim: CubeDim,
        shared_memory_bytes: usize,
    ) -> Self {
        let id: String = id.into();
        Self {
            name: name.into(),
            id: KernelId::new(format!("dry-run:{id}@{cube_dim:?}")),
            cube_dim,
            shared_memory_bytes,
        }
    }
}

impl KernelMetadata for DryRunKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn id(&self) -> KernelId {
        self.id.clone()
    }

    fn cube_dim(&self) -> CubeDim {
        self.cube_dim
    }

    fn shared_memory_bytes(&self) -> usize {
        self.shared_memory_bytes
    }
}
