//! CPU kernels: Rust functions run once per cube.
//!
//! A [`CpuKernel`] wraps a function `Fn(&mut CubeContext) -> Result<(), KernelError>` with a
//! name, a stable id, the cube dim and the shared memory each cube needs. The executor runs
//! the function for every cube of the launch, spreading cubes over the device's worker
//! threads; the function loops over the cube's units.
//!
//! ```
//! use cubert_cpu::{CpuKernel, KernelError};
//! use cubert_runtime::CubeDim;
//!
//! // out[i] = 2 * input[i], one element per unit.
//! let double = CpuKernel::new("double_f32", CubeDim::new_1d(64), |ctx| {
//!     let input = ctx.buffer::<f32>(0)?;
//!     let output = ctx.buffer::<f32>(1)?;
//!     let len = ctx.info_usize(0)?;
//!     for unit in ctx.units() {
//!         let i = unit.absolute_x as usize;
//!         if i < len {
//!             output.store(i, 2.0 * input.load(i));
//!         }
//!     }
//!     Ok::<(), KernelError>(())
//! });
//! # let _ = double;
//! ```

mod access;
mod buffer;
mod context;
mod language;

pub use access::{AccessChecker, MAX_COUNTED_VIOLATIONS};
pub use buffer::{Buffer, RawArray};
pub use context::{CubeContext, UnitPos};
pub use language::language_kernel;

use cubert_runtime::{CubeDim, KernelId, KernelMetadata};
use std::fmt;
use std::sync::Arc;

/// An error a kernel reports; the launch fails with `ServerError::KernelFailed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelError {
    message: String,
}

impl KernelError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KernelError {}

/// The function of a CPU kernel.
pub type KernelFn = dyn Fn(&mut CubeContext<'_>) -> Result<(), KernelError> + Send + Sync;

struct KernelInner {
    name: String,
    id: KernelId,
    cube_dim: CubeDim,
    shared_memory: usize,
    takes_cube_runs: bool,
    function: Arc<KernelFn>,
}

fn kernel_id(name: &str, cube_dim: CubeDim, shared_memory: usize) -> KernelId {
    KernelId::new(format!(
        "cpu/{name}/{}x{}x{}/smem{shared_memory}",
        cube_dim.x, cube_dim.y, cube_dim.z
    ))
}

/// A kernel for the CPU backend. Cheap to clone.
#[derive(Clone)]
pub struct CpuKernel {
    inner: Arc<KernelInner>,
}

impl CpuKernel {
    /// A kernel named `name` running `function` once per cube of `cube_dim` units.
    pub fn new(
        name: impl Into<String>,
        cube_dim: CubeDim,
        function: impl Fn(&mut CubeContext<'_>) -> Result<(), KernelError> + Send + Sync + 'static,
    ) -> Self {
        let name = name.into();
        Self {
            inner: Arc::new(KernelInner {
                id: kernel_id(&name, cube_dim, 0),
                name,
                cube_dim,
                shared_memory: 0,
                takes_cube_runs: false,
                function: Arc::new(function),
            }),
        }
    }

    /// The same kernel with `bytes` of shared memory per cube.
    pub fn with_shared_memory(&self, bytes: usize) -> Self {
        self.rebuild(self.inner.cube_dim, bytes)
    }

    /// The same kernel with another cube dim.
    pub fn with_cube_dim(&self, cube_dim: CubeDim) -> Self {
        self.rebuild(cube_dim, self.inner.shared_memory)
    }

    fn rebuild(&self, cube_dim: CubeDim, shared_memory: usize) -> Self {
        Self {
            inner: Arc::new(KernelInner {
                name: self.inner.name.clone(),
                id: kernel_id(&self.inner.name, cube_dim, shared_memory),
                cube_dim,
                shared_memory,
                takes_cube_runs: self.inner.takes_cube_runs,
                function: self.inner.function.clone(),
            }),
        }
    }

    /// The same kernel, whose function runs every cube of a run: the cube at
    /// `ctx.cube_pos` and the `ctx.cubes - 1` next ones along x. The executor then hands
    /// it runs of cubes of one-dimensional grids, which saves the per-cube call for
    /// kernels with little work per cube.
    pub(crate) fn with_cube_runs(mut self) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.takes_cube_runs = true;
            self
        } else {
            Self {
                inner: Arc::new(KernelInner {
                    name: self.inner.name.clone(),
                    id: self.inner.id.clone(),
                    cube_dim: self.inner.cube_dim,
                    shared_memory: self.inner.shared_memory,
                    takes_cube_runs: true,
                    function: self.inner.function.clone(),
                }),
            }
        }
    }

    /// Whether the function runs runs of cubes (see [`Self::with_cube_runs`]).
    pub(crate) fn takes_cube_runs(&self) -> bool {
        self.inner.takes_cube_runs
    }

    /// Runs the kernel's function for one cube.
    ///
    /// # Errors
    /// The kernel's error.
    pub fn run(&self, ctx: &mut CubeContext<'_>) -> Result<(), KernelError> {
        (self.inner.function)(ctx)
    }
}

impl fmt::Debug for CpuKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuKernel")
            .field("name", &self.inner.name)
            .field("cube_dim", &self.inner.cube_dim)
            .field("shared_memory", &self.inner.shared_memory)
            .finish()
    }
}

impl KernelMetadata for CpuKernel {
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
