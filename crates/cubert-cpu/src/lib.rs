//! The CPU backend of cubert: the embedded default, always available.
//!
//! Kernels are Rust functions run once per cube ([`CpuKernel`], [`CubeContext`]); cubes are
//! spread over one worker thread per core and units are looped inside the cube. Device
//! memory is pooled host memory. `[cpu] devices` virtual devices (default 1) let multi-device
//! code run on any machine. [`fault`] injects storage failures for reliability tests.
//!
//! ```
//! use cubert_cpu::{CpuDevice, CpuRuntime};
//! use cubert_runtime::{Bytes, ComputeClient, ElemType, ops};
//!
//! let client = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0)).unwrap();
//! let lhs = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0])).unwrap();
//! let rhs = client.create(Bytes::from_elems(vec![10.0f32, 20.0, 30.0])).unwrap();
//! let out = client.empty(3 * 4).unwrap();
//! ops::add(&client, &lhs, &rhs, &out, 3, ElemType::F32).unwrap();
//! let sum = client.read_one(out).unwrap();
//! assert_eq!(sum.to_elems::<f32>(), vec![11.0, 22.0, 33.0]);
//! ```

#![warn(missing_docs)]

mod collective;
mod device;
mod executor;
pub mod fault;
pub mod kernel;
mod peer;
pub mod properties;
mod reduction;
mod runtime;
mod server;
pub mod standard_kernels;
pub mod storage;

pub use device::{CPU_DEVICE_TYPE, CpuDevice, CpuInfo};
pub use kernel::{Buffer, CpuKernel, CubeContext, KernelError, MAX_COUNTED_VIOLATIONS, UnitPos};
pub use runtime::{CpuRuntime, default_client};
pub use server::CpuServer;
