//! The backend-agnostic core of cubert, a compute runtime for Rust.
//!
//! Users hold a [`ComputeClient`]: it allocates pooled device memory, uploads and reads
//! bytes, launches kernels asynchronously on streams, profiles them, and moves data between
//! devices. Each device is owned by a [`server::ComputeServer`] that a backend implements
//! (`cubert-cpu`, `cubert-cuda`) and that a [`device_handle::DeviceHandle`] feeds from any
//! thread.
//!
//! Module map (one concept each): `client` (the API), `server` (the backend trait),
//! `device_handle` (threads and queues), `spin` (waiting: spin briefly, then sleep),
//! `thread_role` (what the calling thread does for the devices: runner, task, exclusive
//! section), `stream`, `memory` (pools and the manager), `storage` (raw allocations),
//! `layout` (tensor placement), `handle`, `bytes`, `copy`, `kernel`, `profile`, `logging`,
//! `config`, `tune` (autotuning), `distributed` (process groups and their rendezvous),
//! `error`.
//!
//! Applications usually depend on the `cubert` crate, which re-exports this one with the
//! backends and the kernel language. Start with [`ComputeClient`], [`Handle`], [`Bytes`],
//! [`ops`] and [`error`]: their docs have runnable examples.

#![warn(missing_docs)]

pub mod backtrace;
pub mod bytes;
pub mod client;
pub mod config;
pub mod copy;
pub mod device;
pub mod device_handle;
pub mod distributed;
pub mod dry_run;
pub use cubert_lang as lang;
pub use cubert_lang::elem;
pub mod error;
pub mod future;
pub use cubert_lang::half_rounding;
pub mod handle;
pub mod host_slice;
pub mod kernel;
pub mod layout;
pub mod logging;
pub mod memory;
pub mod ops;
pub mod profile;
pub mod properties;
pub mod runtime;
mod scoped_bytes;
pub mod server;
pub mod shape;
pub mod spin;
pub mod storage;
pub mod stream;
pub mod thread_role;
mod tracing_gate;
pub mod tune;

pub use bytes::{AllocationProperty, Bytes};
pub use client::ComputeClient;
pub use copy::CopyDescriptor;
pub use device::{Device, DeviceId};
pub use elem::{ElemType, Element};
pub use error::{
    CompilationError, IoError, LaunchError, ProfileError, ResourceLimitError, ServerError,
};
pub use handle::{Binding, Handle};
pub use kernel::{
    CubeCount, CubeCountSelection, CubeDim, ExecutionMode, KernelArguments, KernelId,
    KernelMetadata, MetadataBindingInfo, TensorArg,
};
pub use layout::{MemoryLayout, MemoryLayoutDescriptor, MemoryLayoutStrategy};
pub use memory::{MemoryAllocationMode, MemoryUsage};
pub use runtime::Runtime;
pub use shape::{Shape, Strides};
pub use stream::{StreamId, StreamPolicy, StreamPriority, StreamSettings};
