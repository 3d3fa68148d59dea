//! The kernel language of cubert: write a kernel once in Rust, run it on every backend.
//!
//! A function marked `#[cubert::kernel]` is written out twice by the macro: an
//! [`expand`]sion that records the kernel's [`ir`] for code generators (CUDA C++ today),
//! and a [`native`] Rust function the CPU backend runs. This crate holds both halves' support
//! code, the element types ([`elem`]) and scalar traits ([`scalar`]) they share, and the
//! [`KernelDefinition`] a backend builds a kernel from.
//!
//! Modules: `elem` (element types), `fp8` (the 8-bit float types `e4m3` and `e5m2`),
//! `half_rounding` (correctly rounded f64 to half conversions), `scalar` (the traits kernels are generic over), `ir`, `expand`, `native`,
//! `definition`, `prelude` (what a kernel author imports).

#![warn(missing_docs)]

pub mod definition;
pub mod elem;
pub mod expand;
pub mod fp8;
pub mod half_rounding;
pub mod ir;
pub mod native;
pub mod prelude;
pub mod scalar;

pub use definition::{KernelDefinition, KernelKey, NativeKernel};
pub use elem::{ElemType, Element};
pub use scalar::{Float, Int, MmaFragment, MmaInput, Numeric, Scalar, Widened, round_to_tf32};
