//! The CPU's variants of the standard matmul and reduce-sum for the autotuner (`variants`).
//! Every standard kernel comes from the kernel language (`cubert_runtime::kernel::standard`);
//! the backend picks, for matmul and reduce-sum, which of the language's kernels it runs
//! and how many units a cube has.

mod variants;

pub use variants::{matmul_variant, reduce_sum_variant, standard_variants, variant_kernel};
