//! The expansion: running a kernel's body to record its IR.
//!
//! The macro writes the body a second time over the items of this module: values are
//! [`Val`]s (a typed IR operand), array parameters [`ArrayVal`]s, and every operation calls
//! the function of the same name as on the native side (`add`, `lt`, `load`, ...), which
//! appends an instruction to the current block of a thread-local [`builder`]. Control flow
//! becomes calls that record a nested block around a closure (`if_else`, `range_loop`,
//! `while_loop`, ...). [`record`] runs one expansion and returns the [`crate::ir::Kernel`].
//!
//! Rust's type checker sees the expansion, so a type error in a kernel is reported by rustc
//! at the kernel's span, and generic element types are ordinary type parameters.

mod array;
pub mod builder;
mod control;
mod cooperative;
mod ops;
mod pipeline;
mod tensor;
mod val;

pub use array::{ArrayVal, Indexable, LocalArrayVal, load_line, store_line};
pub use builder::{ExpandError, record};
pub use control::*;
pub use cooperative::*;
pub use ops::*;
pub use pipeline::{commit_async_copies, copy_line_async, wait_async_copies};
pub use tensor::{TensorVal, rank, shape, stride};
pub use val::Val;
