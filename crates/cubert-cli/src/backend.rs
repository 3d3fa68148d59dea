//! Choosing the backend and getting a client of its default device.
//!
//! The backend comes from `--backend`, else from the configuration (`[runtime] backend`,
//! `CUBERT_BACKEND`). Commands that work on a device are written once, generic over
//! [`CliRuntime`] (a [`cubert::Runtime`] the CLI knows how to start), as a [`ClientJob`];
//! [`run_on_default_device`] picks the runtime with one match arm per backend, so a CUDA
//! backend plugs in with one more arm.

use crate::error::CliResult;
use cubert::{ComputeClient, CpuDevice, CpuRuntime, Runtime};
use std::fmt;

/// A backend the CLI knows about (defined with the command line).
pub use crate::args::Backend;

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 3] = [Backend::Cpu, Backend::Cuda, Backend::Wgpu];

    /// The lowercase name (`cpu`, `cuda`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Wgpu => "wgpu",
        }
    }

    /// The backend named `--backend`, else the configured default (`[runtime] backend`,
    /// `CUBERT_BACKEND`; `auto` picks CUDA when a device is usable, else the CPU).
    ///
    /// # Errors
    /// None today; kept fallible for backends a configuration may name but this build lacks.
    pub fn select(requested: Option<Backend>) -> CliResult<Backend> {
        if let Some(backend) = requested {
            return Ok(backend);
        }
        Ok(match cubert::configured_backend() {
            cubert::Backend::Cpu => Backend::Cpu,
            cubert::Backend::Cuda => Backend::Cuda,
            cubert::Backend::Wgpu => Backend::Wgpu,
        })
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A runtime the CLI can start servers of, besides the registered client of each device.
pub trait CliRuntime: Runtime {
    /// A client of a new server of device 0 that no other client shares (registered
    /// nowhere), so its memory report (peaks included) covers only what is done through it.
    /// `room` is the memory the work needs: the CPU backend raises its memory limit to at
    /// least that (its memory is host memory, and blocks that are reserved but never touched
    /// are never committed, so the limit may exceed physical memory); a GPU has the memory
    /// it has.
    ///
    /// # Errors
    /// The server's start error.
    fn isolated_client(room: u64) -> CliResult<ComputeClient<Self>>;

    /// The vendor library's f32 matmul on this runtime's handles, the peer `cubert bench
    /// tune --kernel matmul` times next to cubert's: cuBLAS on CUDA. `Ok(None)` where the
    /// backend has none; `Err` says why it can't be measured here.
    ///
    /// # Errors
    /// Why the library can't be used (not found, failed to start).
    fn vendor_matmul(_client: &ComputeClient<Self>) -> Result<Option<VendorMatmul<Self>>, String> {
        Ok(None)
    }

    /// The vendor library's tensor-core matmul of `elem` (bf16 in and out, or f32 as TF32;
    /// f32 compute), the peer of the tensor-core matmul in `cubert bench --only mma`:
    /// cuBLAS's `cublasGemmEx` on CUDA. `Ok(None)` where the backend has none.
    ///
    /// # Errors
    /// Why the library can't be used (not found, failed to start).
    fn vendor_tensor_core_matmul(
        _client: &ComputeClient<Self>,
        _elem: cubert::ElemType,
    ) -> Result<Option<VendorMatmul<Self>>, String> {
        Ok(None)
    }
}

/// A vendor library's matmul: `run(client, (lhs, rhs, out), (m, k, n))` computes row-major
/// `out = lhs × rhs` on the client's stream (f32, or the element type asked of
/// [`CliRuntime::vendor_tensor_core_matmul`]).
pub struct VendorMatmul<R: Runtime> {
    /// What it is (`cuBLAS 12.9.1 sgemm`).
    pub name: String,
    /// The product.
    #[allow(clippy::type_complexity)]
    pub run: Box<
        dyn Fn(
            &ComputeClient<R>,
            (&cubert::Handle, &cubert::Handle, &cubert::Handle),
            (usize, usize, usize),
        ) -> Result<(), cubert::ServerError>,
    >,
}

impl CliRuntime for CpuRuntime {
    fn isolated_client(room: u64) -> CliResult<ComputeClient<Self>> {
        let mut config = cubert::config::global_config().clone();
        let configured = cubert::cpu::properties::memory_limit(&config.cpu);
        config.cpu.memory_limit = configured.max(room);
        let server = cubert::cpu::CpuServer::new(CpuDevice::new(0), &config)?;
        Ok(ComputeClient::from_server(
            server,
            config.runtime.device_handle,
        )?)
    }
}

impl CliRuntime for cubert::CudaRuntime {
    fn isolated_client(_room: u64) -> CliResult<ComputeClient<Self>> {
        let config = cubert::config::global_config();
        let server = cubert::cuda::CudaServer::new(cubert::CudaDevice::new(0), config)?;
        Ok(ComputeClient::from_server(
            server,
            config.runtime.device_handle,
        )?)
    }

    fn vendor_matmul(client: &ComputeClient<Self>) -> Result<Option<VendorMatmul<Self>>, String> {
        use cubert::cuda::cublas::{Cublas, cublas_status};
        let version = cublas_status().clone()?;
        let cublas = Cublas::new(client).map_err(|error| error.to_string())?;
        Ok(Some(VendorMatmul {
            name: format!("cuBLAS {version} sgemm"),
            run: Box::new(move |client, handles, dims| cublas.sgemm(client, handles, dims)),
        }))
    }

    fn vendor_tensor_core_matmul(
        client: &ComputeClient<Self>,
        elem: cubert::ElemType,
    ) -> Result<Option<VendorMatmul<Self>>, String> {
        use cubert::cuda::cublas::{Cublas, cublas_status};
        let version = cublas_status().clone()?;
        let cublas = Cublas::new(client).map_err(|error| error.to_string())?;
        Ok(Some(match elem {
            cubert::ElemType::BF16 => VendorMatmul {
                name: format!("cuBLAS {version} bf16 GemmEx"),
                run: Box::new(move |client, handles, dims| cublas.gemm_bf16(client, handles, dims)),
            },
            cubert::ElemType::F32 => VendorMatmul {
                name: format!("cuBLAS {version} TF32 GemmEx"),
                run: Box::new(move |client, handles, dims| cublas.gemm_tf32(client, handles, dims)),
            },
            other => return Err(format!("no cuBLAS tensor-core matmul of {other} here")),
        }))
    }
}

impl CliRuntime for cubert::WgpuRuntime {
    fn isolated_client(_room: u64) -> CliResult<ComputeClient<Self>> {
        let config = cubert::config::global_config();
        let server = cubert::wgpu::WgpuServer::new(cubert::WgpuDevice::new(0), config)?;
        Ok(ComputeClient::from_server(
            server,
            config.runtime.device_handle,
        )?)
    }
}

/// Work that runs on one device of any runtime.
pub trait ClientJob {
    /// What the work produces.
    type Output;

    /// Runs the work on `client`'s device.
    ///
    /// # Errors
    /// Whatever the work reports.
    fn run<R: CliRuntime>(self, client: &ComputeClient<R>) -> CliResult<Self::Output>;
}

/// Runs `job` on the default device (index 0) of `backend`.
///
/// # Errors
/// A usage error (exit code 2) if the backend isn't built in; the device's start error; the
/// job's error.
pub fn run_on_default_device<J: ClientJob>(backend: Backend, job: J) -> CliResult<J::Output> {
    match backend {
        Backend::Cpu => {
            let client = CpuRuntime::client(&CpuDevice::new(0))
                .map_err(|error| anyhow::Error::from(error).context("can't start CPU device 0"))?;
            job.run(&client)
        }
        Backend::Cuda => {
            let status = cubert::cuda::driver_status();
            if !status.is_available() {
                return Err(crate::error::usage(format!(
                    "the CUDA backend can't run here: {}; pass `--backend cpu` or set \
                     CUBERT_BACKEND=cpu",
                    status.describe()
                )));
            }
            let client = cubert::CudaRuntime::client(&cubert::CudaDevice::new(0))
                .map_err(|error| anyhow::Error::from(error).context("can't start CUDA device 0"))?;
            job.run(&client)
        }
        Backend::Wgpu => {
            if cubert::wgpu::device_count() == 0 {
                return Err(crate::error::usage(
                    "the wgpu backend can't run here: wgpu finds no adapter (no Vulkan, Metal \
                     or DX12 driver); pass `--backend cpu` or set CUBERT_BACKEND=cpu",
                ));
            }
            let client = cubert::WgpuRuntime::client(&cubert::WgpuDevice::new(0))
                .map_err(|error| anyhow::Error::from(error).context("can't start wgpu device 0"))?;
            job.run(&client)
        }
    }
}
