//! The wgpu backend of cubert: Vulkan, Metal, DX12 devices through the `wgpu` crate,
//! running kernels of the cubert kernel language printed as WGSL (on Vulkan, compiled
//! here to SPIR-V whose float operations the driver may not rewrite: [`spirv`]).
//!
//! Devices are wgpu's adapters ([`adapters`], hardware first). Each server pools wgpu
//! buffers through the runtime's memory manager, records launches into a command encoder
//! submitted on flush and sync, and reads back through mapped buffers on the waiting
//! thread. What wgpu can't do (collectives, peer copies, graphs, tensor maps, 64-bit types
//! on adapters without them) is an `Unsupported` error and a false feature flag.

#![warn(missing_docs)]

mod adapter;
mod device;
mod disk_cache;
mod info_arena;
mod kernel;
pub mod lang;
mod pipeline;
mod properties;
mod readback;
mod runtime;
mod server;
pub mod spirv;
mod storage;
mod timestamps;

pub use adapter::{adapters, device_count};
pub use device::{WGPU_DEVICE_TYPE, WgpuDevice, WgpuInfo};
pub use kernel::WgpuKernel;
pub use runtime::{DEFAULT_MATMUL, DEFAULT_REDUCE, WgpuRuntime, default_client};
pub use server::{WgpuServer, WgpuServerOptions};
pub use storage::{WgpuResource, WgpuStorage};
