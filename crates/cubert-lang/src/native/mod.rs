//! The native path: what the CPU runs for a kernel.
//!
//! The macro writes a kernel's body out as Rust over these items: builtins read the
//! [`Unit`]'s position, array parameters are [`Array`]s (bounds-checked, relaxed atomic
//! accesses), every operation calls the function of the same name here (`add`, `lt`,
//! `cast`, ...), which gives the language's semantics (wrapping integers, division by zero
//! gives zero, ...) instead of Rust's (a panic in debug builds). The CPU backend builds the
//! [`Args`] of a launch and calls the kernel's [`crate::NativeKernel`] once per unit.
//! The expansion side ([`crate::expand`]) has a function of the same name and arity for
//! each of these, which is what lets the macro write one body twice.

mod array;
mod atomic;
mod cooperative;
mod exclusive;
mod group_mma;
mod line;
mod ops;
mod pipeline;
mod plain_reads;
mod tensor;
mod unit;

pub use array::{AccessMonitor, Args, Array, Indexable, RawArray};
pub use atomic::*;
pub use cooperative::{
    PLANE_DIM, SharedMemory, plane_all, plane_any, plane_broadcast, plane_load_a, plane_load_b,
    plane_max, plane_min, plane_mma, plane_shuffle, plane_sum, run_cube_cooperative, shared_array,
    sync_cube,
};
pub use exclusive::{
    ExclusiveArray, ExclusiveParam, ExclusiveRun, ExclusiveUnit, GatheredArray, exclusive_cubes,
};
pub use group_mma::{plane_group_mma, plane_group_mma_wait};
pub use line::{load_line, store_line};
pub use ops::*;
pub use pipeline::{commit_async_copies, copy_line_async, wait_async_copies};
pub use plain_reads::plain_reads_allowed;
pub use tensor::{Tensor, rank, shape, stride};
pub use unit::{Unit, run_cube, run_cube_by_unit};
