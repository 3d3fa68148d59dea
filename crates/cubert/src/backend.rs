//! Choosing the backend: the configured one, or the best one present.
//!
//! A client is typed by its runtime (`ComputeClient<CpuRuntime>`,
//! `ComputeClient<CudaRuntime>`), so code that should run on whichever backend is present
//! is written once, generic over [`Runtime`], and handed to the backend chosen at run time.
//! Two ways to do it:
//!
//! - [`AnyClient`]: a client of either backend, matched on where the concrete type matters;
//!   [`AnyClient::run`] hands it to a [`ClientJob`], code generic over the runtime.
//! - [`best_client`]: the client of device 0 of the [configured backend](configured_backend):
//!   `[runtime] backend` of `cubert.toml` or `CUBERT_BACKEND` (`cpu`, `cuda`, or `auto` for
//!   CUDA when a device is usable, else the CPU). Candle's `Device::cuda_if_available` is
//!   `auto`.
//!
//! ```
//! use cubert::{AnyClient, ClientJob, ComputeClient, Runtime, Bytes};
//!
//! /// Sums 1..=n on whichever device it is given.
//! struct Upload(u32);
//!
//! impl ClientJob for Upload {
//!     type Output = Result<Vec<u32>, cubert::ServerError>;
//!     fn run<R: Runtime>(self, client: &ComputeClient<R>) -> Self::Output {
//!         let handle = client.create(Bytes::from_elems((1..=self.0).collect::<Vec<u32>>()))?;
//!         Ok(client.read_one(handle)?.to_elems())
//!     }
//! }
//!
//! let client = cubert::best_client()?; // CPU here unless CUBERT_BACKEND says otherwise
//! println!("running on {}", client.backend().name());
//! let values = client.run(Upload(4))?;
//! assert_eq!(values, vec![1, 2, 3, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use cubert_cpu::{CpuDevice, CpuRuntime};
use cubert_runtime::config::global_config;
use cubert_runtime::{ComputeClient, Runtime, ServerError};

/// A backend cubert can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The CPU: always present.
    Cpu,
    /// NVIDIA GPUs through CUDA (with the `cuda` feature).
    Cuda,
    /// Vulkan, Metal and DX12 devices through wgpu (with the `wgpu` feature).
    Wgpu,
}

impl Backend {
    /// The lowercase name, as in the configuration (`cpu`, `cuda`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Wgpu => "wgpu",
        }
    }

    /// Whether this backend can run here: always for the CPU; for CUDA, whether the feature
    /// is built in, the driver loads and it sees at least one device.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Cpu => true,
            #[cfg(feature = "cuda")]
            Backend::Cuda => cubert_cuda::driver_status().is_available(),
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => false,
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => cubert_wgpu::device_count() > 0,
            #[cfg(not(feature = "wgpu"))]
            Backend::Wgpu => false,
        }
    }
}

/// The best backend present: CUDA if it [is available](Backend::is_available), else the
/// CPU.
pub fn best_available_backend() -> Backend {
    if Backend::Cuda.is_available() {
        Backend::Cuda
    } else {
        Backend::Cpu
    }
}

/// The backend the configuration asks for: `[runtime] backend` of `cubert.toml`, overridden
/// by `CUBERT_BACKEND`; `auto` is [`best_available_backend`]. The default is `cpu`.
pub fn configured_backend() -> Backend {
    match global_config().runtime.backend.as_str() {
        "cuda" => Backend::Cuda,
        "wgpu" => Backend::Wgpu,
        "auto" => best_available_backend(),
        _ => Backend::Cpu,
    }
}

/// Work written once, generic over the runtime, run on a client chosen at run time
/// ([`AnyClient::run`]).
pub trait ClientJob {
    /// What the work produces.
    type Output;

    /// Runs the work on `client`'s device.
    fn run<R: Runtime>(self, client: &ComputeClient<R>) -> Self::Output;
}

/// A client of any backend.
#[derive(Clone, Debug)]
pub enum AnyClient {
    /// A CPU device's client.
    Cpu(ComputeClient<CpuRuntime>),
    /// A CUDA device's client.
    #[cfg(feature = "cuda")]
    Cuda(ComputeClient<cubert_cuda::CudaRuntime>),
    /// A wgpu device's client.
    #[cfg(feature = "wgpu")]
    Wgpu(ComputeClient<cubert_wgpu::WgpuRuntime>),
}

impl AnyClient {
    /// The client of device `index` of `backend`.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the backend isn't built in or can't run here (the reason
    /// says why: no driver, no device); the device's start error.
    pub fn new(backend: Backend, index: u32) -> Result<Self, ServerError> {
        match backend {
            Backend::Cpu => Ok(AnyClient::Cpu(CpuRuntime::client(&CpuDevice::new(index))?)),
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                let status = cubert_cuda::driver_status();
                if !status.is_available() {
                    return Err(ServerError::generic(format!(
                        "the CUDA backend can't run here: {}",
                        status.describe()
                    )));
                }
                let device = cubert_cuda::CudaDevice::new(index);
                Ok(AnyClient::Cuda(cubert_cuda::CudaRuntime::client(&device)?))
            }
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda => Err(ServerError::generic(
                "the CUDA backend isn't built in (enable cubert's `cuda` feature)",
            )),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => {
                let device = cubert_wgpu::WgpuDevice::new(index);
                Ok(AnyClient::Wgpu(cubert_wgpu::WgpuRuntime::client(&device)?))
            }
            #[cfg(not(feature = "wgpu"))]
            Backend::Wgpu => Err(ServerError::generic(
                "the wgpu backend isn't built in (enable cubert's `wgpu` feature)",
            )),
        }
    }

    /// The backend of this client.
    pub fn backend(&self) -> Backend {
        match self {
            AnyClient::Cpu(_) => Backend::Cpu,
            #[cfg(feature = "cuda")]
            AnyClient::Cuda(_) => Backend::Cuda,
            #[cfg(feature = "wgpu")]
            AnyClient::Wgpu(_) => Backend::Wgpu,
        }
    }

    /// Runs `job` on this client's device.
    pub fn run<J: ClientJob>(&self, job: J) -> J::Output {
        match self {
            AnyClient::Cpu(client) => job.run(client),
            #[cfg(feature = "cuda")]
            AnyClient::Cuda(client) => job.run(client),
            #[cfg(feature = "wgpu")]
            AnyClient::Wgpu(client) => job.run(client),
        }
    }
}

/// The client of device 0 of the [configured backend](configured_backend).
///
/// # Errors
/// As [`AnyClient::new`]: a configured CUDA backend that can't run here is an error (ask
/// for `auto` to fall back to the CPU).
pub fn best_client() -> Result<AnyClient, ServerError> {
    AnyClient::new(configured_backend(), 0)
}
