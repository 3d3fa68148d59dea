//! cubert: a compute runtime for Rust.
//!
//! Pooled device memory, asynchronous launches on streams, host/device transfers,
//! profiling and multi-device transfers, on the CPU (always available) and NVIDIA GPUs.
//! This facade re-exports the runtime core and the backends.
//!
//! ```
//! use cubert::{Bytes, ElemType, ops};
//!
//! let client = cubert::default_client()?;
//! let data = client.create(Bytes::from_elems(vec![1.0f32; 1024]))?;
//! let doubled = client.empty(1024 * 4)?;
//! ops::add(&client, &data, &data, &doubled, 1024, ElemType::F32)?;
//! let values = client.read_one(doubled)?.to_elems::<f32>();
//! assert!(values.iter().all(|v| *v == 2.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod backend;

pub use backend::{
    AnyClient, Backend, ClientJob, best_available_backend, best_client, configured_backend,
};
pub use cubert_runtime::*;

/// Makes a function a kernel of the language, run on every backend: see [`lang`] and
/// `docs/kernel-language.md`.
pub use cubert_macros::kernel;

/// The CPU backend.
pub use cubert_cpu as cpu;
pub use cubert_cpu::{CpuDevice, CpuRuntime};

/// The CUDA backend (NVIDIA GPUs).
#[cfg(feature = "cuda")]
pub use cubert_cuda as cuda;
#[cfg(feature = "cuda")]
pub use cubert_cuda::{CudaDevice, CudaRuntime};

/// The client of the embedded default device: CPU device 0. To honour the configuration
/// and use a GPU when there is one, see [`best_client`].
///
/// # Errors
/// The server's start error.
pub fn default_client() -> Result<ComputeClient<CpuRuntime>, ServerError> {
    cubert_cpu::default_client()
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
