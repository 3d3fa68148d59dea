//! What a kernel author imports: `use cubert::lang::prelude::*;`.
//!
//! The scalar traits kernels are generic over, the array type of kernel signatures, the
//! builtins (as documentation: the macro replaces them), and the intrinsics. The macro
//! also replaces the cooperative calls (`sync_cube()`, `plane_sum(v)`, ...,
//! `atomic_add(x, i, v)`, ..., `SharedMemory::<T>::new(len)`).

pub use crate::fp8::{e4m3, e5m2};
pub use crate::native::{Array, SharedMemory, Tensor};
pub use crate::scalar::{Float, Int, MmaInput, Numeric, Scalar};
pub use half::{bf16, f16};

/// `select(cond, a, b)`: `a` if `cond` holds, else `b`; both are evaluated.
pub use crate::native::select;

/// Launch-geometry builtins. Inside a `#[kernel]` function the macro reads them from the
/// running unit; outside, they are zero. All are `u32`; `ABSOLUTE_POS` is
/// `CUBE_POS * CUBE_DIM + UNIT_POS`, the `_X`/`_Y`/`_Z` forms are per axis.
#[allow(missing_docs)]
pub mod builtins {
    pub const ABSOLUTE_POS: u32 = 0;
    pub const ABSOLUTE_POS_X: u32 = 0;
    pub const ABSOLUTE_POS_Y: u32 = 0;
    pub const ABSOLUTE_POS_Z: u32 = 0;
    pub const UNIT_POS: u32 = 0;
    pub const UNIT_POS_X: u32 = 0;
    pub const UNIT_POS_Y: u32 = 0;
    pub const UNIT_POS_Z: u32 = 0;
    pub const CUBE_POS: u32 = 0;
    pub const CUBE_POS_X: u32 = 0;
    pub const CUBE_POS_Y: u32 = 0;
    pub const CUBE_POS_Z: u32 = 0;
    pub const CUBE_DIM: u32 = 0;
    pub const CUBE_DIM_X: u32 = 0;
    pub const CUBE_DIM_Y: u32 = 0;
    pub const CUBE_DIM_Z: u32 = 0;
    pub const CUBE_COUNT: u32 = 0;
    pub const CUBE_COUNT_X: u32 = 0;
    pub const CUBE_COUNT_Y: u32 = 0;
    pub const CUBE_COUNT_Z: u32 = 0;
    pub const PLANE_DIM: u32 = crate::native::PLANE_DIM;
    pub const UNIT_POS_PLANE: u32 = 0;
}
pub use builtins::*;
