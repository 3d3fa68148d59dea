//! The CUDA backend of cubert: NVIDIA GPUs through the driver API and NVRTC.
//!
//! The driver and NVRTC are loaded at run time (cudarc's dynamic loading), so this crate
//! builds and its users' tests run on machines without CUDA; [`driver_status`] says whether
//! a device can be used and, if not, why.
//!
//! Each server works in its device's primary context; device memory is pooled by the
//! runtime's memory manager over `cuMemAlloc`; stream ids map to non-blocking streams;
//! uploads and downloads go through pooled pinned memory; kernels are CUDA C++ compiled by
//! NVRTC (or PTX/cubin), cached in memory and on disk; reads, syncs and profiles resolve
//! through events, waited for by a completion thread or by the caller itself, never
//! blocking the runner.
//!
//! Several GPUs: `to_client` copies GPU to GPU directly where peer access exists (`peer`),
//! and collectives (`all_reduce`, `send`/`recv`) go through NCCL, also loaded at run time
//! ([`nccl::nccl_status`]), among the GPUs of one process or across processes
//! (`collective`).
//!
//! **After a device fault** (an illegal address, a trap in a kernel) every call of that
//! client returns `ServerError::ServerUnhealthy`; nothing panics or aborts, and the rest of
//! the program (the CPU backend, host work) keeps running. The fault is sticky: on the
//! drivers seen here (580, CUDA 13.0) it poisons CUDA for the whole process, so even a new
//! client fails to create its context. To keep using the GPU, restart the process; code
//! that runs untrusted kernels should run them in a child process (as the tests do).

#![warn(missing_docs)]

mod chunked_read;
mod collective;
mod compiler;
mod completion;
mod context;
pub mod cublas;
mod device;
mod direct_wait;
mod driver;
mod graph;
pub mod interop;
mod kernel;
pub mod lang;
mod mapped_runs;
pub mod nccl;
mod peer;
mod prelude;
mod profiling;
mod properties;
mod runtime;
mod server;
mod source_map;
mod staging;
pub mod standard_kernels;
mod status;
mod storage;
mod streams;
mod tma;
mod transfer;

pub use compiler::{CompileStats, compile_cuda, nvrtc_options, nvrtc_version};
pub use device::{CUDA_DEVICE_TYPE, CudaDevice, CudaInfo, device_count};
pub use driver::{DriverStatus, driver_status};
pub use graph::write_graph_dot;
pub use kernel::{ArgsCapacity, CudaKernel, KernelArgs, KernelSource, MAX_BUFFERS, MAX_INFO};
pub use peer::{DevicePeerReceipt, DevicePeerSource};
pub use prelude::{PRELUDE, PRELUDE_VERSION};
pub use runtime::CudaRuntime;
pub use server::CudaServer;
pub use storage::CudaResource;
