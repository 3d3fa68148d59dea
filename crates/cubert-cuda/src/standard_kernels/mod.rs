//! The CUDA backend's variants of the standard matmul and reduce-sum for the autotuner
//! (`variants`). Every standard kernel comes from the kernel language
//! (`cubert_runtime::kernel::standard`, compiled by NVRTC and cached in memory and on
//! disk); the backend picks, for matmul and reduce-sum, which of the language's kernels it
//! runs, with which tile and how many units a cube has.

mod variants;

pub use variants::{
    DEFAULT_MATMUL, DEFAULT_REDUCE, matmul_tilings, matmul_variant, reduce_sum_splits,
    reduce_sum_variant, standard_variants, variant_kernel,
};
