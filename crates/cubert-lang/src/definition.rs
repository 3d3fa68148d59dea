//! [`KernelDefinition`]: what a backend builds a language kernel from.
//!
//! A `#[kernel]` function's `definition` builds one per (generic element types,
//! compile-time values): the IR from the expansion (for code generators), the native
//! function (for the CPU), and a [`KernelKey`] that identifies the specialization, which
//! clients use to cache the built kernel.

use crate::expand::ExpandError;
use crate::ir;
use crate::native::{Args, Unit};
use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

/// The native function of a kernel: runs every unit of `cubes` consecutive cubes along x,
/// the first placed by its `Unit` argument (see [`crate::native::run_cube`]). Backends
/// pass runs of more than one cube only for grids of one dimension and kernels that aren't
/// cooperative ([`crate::ir::Kernel::is_cooperative`]), whose cubes share no state.
pub type NativeKernel = Arc<dyn Fn(&Unit, u32, &Args<'_>) + Send + Sync>;

/// Identifies one specialization of a kernel: the kernel and its generic types (through
/// the `TypeId` of a marker type the macro makes per kernel) and the bits of its
/// compile-time values. Cheap to hash; built at every launch.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KernelKey {
    kernel: TypeId,
    comptime: Vec<u64>,
}

impl KernelKey {
    /// The key of marker type `M` (one per kernel and generic types) with compile-time
    /// values `comptime` (as bits).
    pub fn new<M: 'static>(comptime: Vec<u64>) -> Self {
        Self {
            kernel: TypeId::of::<M>(),
            comptime,
        }
    }
}

impl fmt::Debug for KernelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}{:?}", self.kernel, self.comptime)
    }
}

/// Everything a backend needs to build a kernel. See the module docs.
#[derive(Clone)]
pub struct KernelDefinition {
    name: String,
    id: String,
    ir: Result<Arc<ir::Kernel>, ExpandError>,
    native: NativeKernel,
}

impl KernelDefinition {
    /// A definition named `name` with the readable specialization id `id` (name, types,
    /// compile-time values: part of compile-cache keys), the recorded IR, and the native
    /// function.
    pub fn new(
        name: impl Into<String>,
        id: impl Into<String>,
        ir: Result<ir::Kernel, ExpandError>,
        native: NativeKernel,
    ) -> Self {
        Self {
            name: name.into(),
            id: id.into(),
            ir: ir.map(Arc::new),
            native,
        }
    }

    /// The same kernel under another name and specialization id: how a library that
    /// builds kernels from its own descriptions (the runtime's standard kernels) names them
    /// in profiles, errors and compile caches. `id` must identify the specialization as
    /// [`Self::id`] does.
    pub fn renamed(self, name: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            id: id.into(),
            ..self
        }
    }

    /// The kernel's name (the Rust function's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The specialization's readable id (`saxpy<f32>`, with compile-time values).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The IR, or why the expansion failed.
    ///
    /// # Errors
    /// The expansion's error.
    pub fn ir(&self) -> Result<&Arc<ir::Kernel>, &ExpandError> {
        self.ir.as_ref()
    }

    /// The native function (runs a run of cubes).
    pub fn native(&self) -> &NativeKernel {
        &self.native
    }
}

impl fmt::Debug for KernelDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelDefinition")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
