//! cubert: a compute runtime for Rust.
//!
//! Pooled device memory, asynchronous launches on streams, host/device transfers,
//! profiling, autotuning and collectives, on the CPU (always available) and NVIDIA GPUs,
//! with one kernel language for both. This crate re-exports the runtime core
//! ([`ComputeClient`], [`Handle`], [`Bytes`], [`ops`], the errors), the backends ([`cpu`],
//! `cuda`) and the kernel language ([`lang`], [`#[kernel]`](macro@kernel)).
//!
//! # Start here: a client
//!
//! Everything goes through a [`ComputeClient`] of one device. [`default_client`] is CPU
//! device 0; [`best_client`] honours the configuration and can pick a GPU (see *Choosing a
//! backend* below).
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
//!
//! # Memory
//!
//! [`ComputeClient::create`] uploads [`Bytes`] and returns a [`Handle`] at once (the copy
//! is queued); [`ComputeClient::empty`] allocates without data. Memory is pooled per
//! device: dropping the last clone of a handle returns its block to the pool, where the
//! next allocation of that stream reuses it. [`Handle::view`] is a sub-range without a
//! copy; [`ComputeClient::read`] and [`ComputeClient::read_one`] bring bytes back;
//! [`ComputeClient::memory_usage`] and [`ComputeClient::memory_cleanup`] report and give
//! memory back.
//!
//! ```
//! let client = cubert::default_client()?;
//! let handle = client.create(cubert::Bytes::from_elems(vec![1u32, 2, 3, 4]))?;
//! let middle = handle.view(4, 8)?;                 // bytes 4..12: elements 1 and 2
//! assert_eq!(client.read_one(middle)?.to_elems::<u32>(), vec![2, 3]);
//! assert!(client.memory_usage()?.bytes_in_use >= 16);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Launches and errors
//!
//! Launches ([`ops`], your own kernels) are queued and return at once. What can be checked
//! on the caller's thread (a zero size, a length past a handle, a cube dim the device can't
//! run) is returned right away as an error; what only the device finds (out of memory, an
//! out-of-bounds access, a fault) comes back from the next [`ComputeClient::sync`],
//! [`ComputeClient::flush`] or read on the same stream, as a [`ServerError`]. Nothing
//! panics on bad input, and the client keeps working after an error.
//!
//! ```
//! use cubert::{ElemType, ops};
//!
//! let client = cubert::default_client()?;
//! let small = client.empty(16)?;
//! // 1000 elements don't fit in 16 bytes: refused before anything is queued.
//! assert!(ops::fill(&client, &small, 1000, 0.0f32).is_err());
//! ops::fill(&client, &small, 4, 1.5f32)?;
//! client.sync()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Streams
//!
//! Each thread works on its own stream by default, so threads don't wait for each other;
//! [`ComputeClient::with_stream`] pins a clone of the client to a [`StreamId`]. Handles
//! used across streams are ordered by the server.
//!
//! # Profiling
//!
//! [`ComputeClient::profile`] runs a closure and measures the device time of what it
//! queued (CUDA events on GPUs). `[profiling] level = "basic"` in `cubert.toml` (or
//! `CUBERT_PROFILING_LEVEL=basic`) times every launch into the device's logger;
//! `examples/examples/profiling.rs` prints the summary and writes a Chrome trace.
//!
//! # Configuration
//!
//! `cubert.toml` (found from the working directory upwards, or `CUBERT_CONFIG`) and
//! `CUBERT_<SECTION>_<KEY>` variables set the backend, memory pools, CPU threads, CUDA
//! options, profiling and logging; [`config`] documents every key. A bad value is reported
//! as a warning and keeps its default.
//!
//! # Logs and traces
//!
//! cubert reports through [`tracing`](https://docs.rs/tracing): warnings and errors as
//! events, and a span for each launch (`cubert::launch`: `launch` on the caller's thread,
//! `execute` on the device's runner), kernel build (`cubert::compile`), transfer
//! (`cubert::transfer`: `upload`, `write`, `read`, `to_client`) and allocation
//! (`cubert::memory`, with an event for each device allocation). Install any subscriber
//! (`tracing_subscriber::fmt`, `tracing-chrome` for a Perfetto timeline) to see them next to
//! your own spans; without one, the events reach a `log` logger if the program has one. The
//! `cubert` command prints them at `[logging] level`, or as `RUST_LOG` says
//! (`RUST_LOG=cubert::memory=debug cubert demo`).
//!
//! # Choosing a backend
//!
//! A client is typed by its runtime. Code written once, generic over [`Runtime`], runs on
//! whichever device the configuration picks: `[runtime] backend = "auto"` (or
//! `CUBERT_BACKEND=auto`) is CUDA when a device is usable, else the CPU.
//!
//! ```
//! use cubert::{Bytes, ClientJob, ComputeClient, Runtime};
//!
//! struct RoundTrip(Vec<u8>);
//!
//! impl ClientJob for RoundTrip {
//!     type Output = Result<Vec<u8>, cubert::ServerError>;
//!     fn run<R: Runtime>(self, client: &ComputeClient<R>) -> Self::Output {
//!         let handle = client.create(Bytes::from_elems(self.0))?;
//!         Ok(client.read_one(handle)?.to_vec())
//!     }
//! }
//!
//! let client = cubert::best_client()?;
//! assert_eq!(client.run(RoundTrip(vec![7, 8, 9]))?, vec![7, 8, 9]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Your own kernels
//!
//! Write a kernel once in Rust with [`#[kernel]`](macro@kernel); it runs natively on the CPU and as CUDA
//! C++ on NVIDIA GPUs, with the same results ([`lang`] lists the language: element-type
//! generics, compile-time parameters, control flow, math,
//! shared memory and `sync_cube`, plane operations, atomics, lines, tensors).
//!
//! ```
//! use cubert::lang::prelude::*;
//! use cubert::{Bytes, CubeCount, CubeDim};
//!
//! #[cubert::kernel]
//! fn saxpy<F: Float>(a: F, x: &Array<F>, y: &mut Array<F>) {
//!     let i = ABSOLUTE_POS;
//!     if i < x.len() {
//!         y[i] = a * x[i] + y[i];
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = cubert::default_client()?;
//!     let x = client.create(Bytes::from_elems(vec![1.0f32; 1000]))?;
//!     let y = client.create(Bytes::from_elems(vec![0.5f32; 1000]))?;
//!     saxpy::launch::<f32, cubert::CpuRuntime>(
//!         &client, CubeCount::Static(4, 1, 1), CubeDim::new_1d(256), 2.0, &x, &y,
//!     )?;
//!     assert_eq!(client.read_one(y)?.to_elems::<f32>(), vec![2.5; 1000]);
//!     Ok(())
//! }
//! ```
//!
//! Backend-native kernels remain possible: a Rust function per cube on the CPU
//! ([`cpu::CpuKernel`]) and CUDA C++, PTX or cubin on GPUs (`cuda::CudaKernel`).

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;

pub use backend::{
    AnyClient, Backend, ClientJob, best_available_backend, best_client, configured_backend,
};
pub use cubert_runtime::*;

/// Makes a function a kernel of the language, run on every backend: see [`lang`] for what
/// a kernel may contain.
pub use cubert_macros::kernel;

/// The CPU backend.
pub use cubert_cpu as cpu;
pub use cubert_cpu::{CpuDevice, CpuRuntime};

/// The CUDA backend (NVIDIA GPUs).
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use cubert_cuda as cuda;
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use cubert_cuda::{CudaDevice, CudaRuntime};

/// The wgpu backend (Vulkan, Metal, DX12 devices).
#[cfg(feature = "wgpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "wgpu")))]
pub use cubert_wgpu as wgpu;
#[cfg(feature = "wgpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "wgpu")))]
pub use cubert_wgpu::{WgpuDevice, WgpuRuntime};

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
