//! The standard kernels every backend ships, and their calling conventions.
//!
//! The CLI, the benchmarks and the backend-generic tests run the same workload on every
//! backend through these. Each backend builds them with `Runtime::standard_kernel`; the
//! launch helpers in `crate::ops` pack the arguments as described on each variant.
//!
//! Scalars are packed one per 64-bit info word, as the little-endian bytes of the value
//! padded with zeros ([`encode_scalar`] / [`decode_scalar`]).
//!
//! The elementwise kernels (and the empty one) are written once, in the kernel language
//! (`elementwise`), and built for every runtime by [`standard_kernel`]; that calling
//! convention is the language's own (arrays are the buffers in order, scalars the info
//! words in order). Reduce-sum is written once too (`reduce`), in two kernels that share
//! rows among units differently; each backend's variants pick one and a cube size
//! ([`RowSplit`]) and build it with [`reduce_sum_kernel`]. Matmul likewise (`matmul`: a
//! kernel of a unit per output block for CPUs, one of cubes sharing tiles through shared
//! memory for GPUs; [`MatmulTiling`], [`matmul_kernel`]).

mod build;
pub mod elementwise;
pub mod matmul;
pub mod matmul_group_mma;
pub mod matmul_mma;
pub mod matmul_tf32;
pub mod reduce;
pub mod tensor_cores;

pub use build::{
    ELEMENTWISE_CUBE_DIM, built_standard_kernel, definition, lines_definition, lines_kernel,
    matmul_kernel, no_arithmetic, reduce_sum_kernel, standard_kernel, units_definition,
    units_kernel,
};
pub use matmul::{MatmulTiling, matmul_definition};
pub use reduce::{RowSplit, reduce_sum_definition};

use crate::elem::ElemType;
use bytemuck::Pod;
use serde::{Deserialize, Serialize};
use std::fmt;

// The maps and the unit-per-row reduce must take the CPU's exclusive fast path: a kernel the
// macro can't prove exclusive runs the checked body, about half as fast (a name bound twice
// in the body is enough to lose it), so losing it fails the build.
const _: () = {
    assert!(elementwise::fill::IS_EXCLUSIVE);
    assert!(elementwise::copy::IS_EXCLUSIVE);
    assert!(elementwise::cast::IS_EXCLUSIVE);
    assert!(elementwise::binary::IS_EXCLUSIVE);
    assert!(elementwise::binary_lines::IS_EXCLUSIVE);
    assert!(reduce::reduce_rows_by_unit::IS_EXCLUSIVE);
};

/// A standard kernel and the element types it works on.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum StandardKernel {
    /// Does nothing. No buffers, no info. Used to measure launch overhead.
    Noop,
    /// `out[i] = value` for `i < len`. Buffers `[out]`; info `[len, value]`.
    Fill(ElemType),
    /// `dst[i] = src[i]` for `i < len`. Buffers `[src, dst]`; info `[len]`.
    Copy(ElemType),
    /// `dst[i] = src[i] as to` for `i < len`. Buffers `[src, dst]`; info `[len]`.
    Cast {
        /// Source element type.
        from: ElemType,
        /// Destination element type.
        to: ElemType,
    },
    /// `out[i] = lhs[i] + rhs[i]` for `i < len`. Buffers `[lhs, rhs, out]`; info `[len]`.
    Add(ElemType),
    /// `out[i] = lhs[i] * rhs[i]` for `i < len`. Buffers `[lhs, rhs, out]`; info `[len]`.
    Mul(ElemType),
    /// `out[r] = sum(input[r * cols .. (r + 1) * cols])` for `r < rows`: the sum of each row
    /// of a row-major matrix. Buffers `[input, out]`; info `[rows, cols]`. The default
    /// kernel of every backend sums one row per cube (rows beyond the cube count are
    /// handled by striding); halves accumulate in `f32`, integers wrap.
    ReduceSum(ElemType),
    /// `out = lhs × rhs` for row-major `lhs` (m×k), `rhs` (k×n), `out` (m×n). Buffers
    /// `[lhs, rhs, out]`; info `[m, k, n]`.
    Matmul(ElemType),
}

impl StandardKernel {
    /// Every standard kernel for every element type it is defined for (arithmetic on
    /// booleans and the 8-bit floats is not): what code-generation tests compile.
    pub fn every() -> Vec<StandardKernel> {
        let mut kernels = vec![StandardKernel::Noop];
        for elem in ElemType::ALL {
            kernels.push(StandardKernel::Fill(elem));
            kernels.push(StandardKernel::Copy(elem));
            if elem.has_arithmetic() {
                kernels.push(StandardKernel::Add(elem));
                kernels.push(StandardKernel::Mul(elem));
                kernels.push(StandardKernel::ReduceSum(elem));
                kernels.push(StandardKernel::Matmul(elem));
            }
            for to in ElemType::ALL {
                kernels.push(StandardKernel::Cast { from: elem, to });
            }
        }
        kernels
    }

    /// A short name (`add_f32`, `cast_f32_i32`, ...).
    pub fn name(&self) -> String {
        match self {
            StandardKernel::Noop => "noop".into(),
            StandardKernel::Fill(elem) => format!("fill_{elem}"),
            StandardKernel::Copy(elem) => format!("copy_{elem}"),
            StandardKernel::Cast { from, to } => format!("cast_{from}_{to}"),
            StandardKernel::Add(elem) => format!("add_{elem}"),
            StandardKernel::Mul(elem) => format!("mul_{elem}"),
            StandardKernel::ReduceSum(elem) => format!("reduce_sum_{elem}"),
            StandardKernel::Matmul(elem) => format!("matmul_{elem}"),
        }
    }
}

impl fmt::Display for StandardKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Packs a scalar into an info word: its little-endian bytes, zero-padded.
pub fn encode_scalar<T: Pod>(value: T) -> u64 {
    let mut word = [0u8; 8];
    let bytes = bytemuck::bytes_of(&value);
    let len = bytes.len().min(8);
    word[..len].copy_from_slice(&bytes[..len]);
    u64::from_le_bytes(word)
}

/// Unpacks a scalar packed by [`encode_scalar`].
pub fn decode_scalar<T: Pod>(word: u64) -> T {
    let bytes = word.to_le_bytes();
    let size = std::mem::size_of::<T>().min(8);
    let mut value = T::zeroed();
    bytemuck::bytes_of_mut(&mut value)[..size].copy_from_slice(&bytes[..size]);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_round_trip_through_info_words() {
        assert_eq!(decode_scalar::<f32>(encode_scalar(1.5f32)), 1.5);
        assert_eq!(decode_scalar::<i32>(encode_scalar(-7i32)), -7);
        assert_eq!(decode_scalar::<f64>(encode_scalar(-2.25f64)), -2.25);
        assert_eq!(decode_scalar::<u8>(encode_scalar(200u8)), 200);
    }
}
