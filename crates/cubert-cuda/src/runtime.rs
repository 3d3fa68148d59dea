//! The CUDA runtime: names the device and server types for the client, enumerates the
//! devices, and gives the standard kernels and the tuning fingerprint.

use crate::device::{CUDA_DEVICE_TYPE, CudaDevice, CudaInfo, device_count};
use crate::server::CudaServer;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::DeviceFingerprint;
use cubert_runtime::{DeviceId, LaunchError, Runtime};

/// The CUDA runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaRuntime;

impl Runtime for CudaRuntime {
    type Server = CudaServer;
    type Device = CudaDevice;

    fn name() -> &'static str {
        "cuda"
    }

    fn enumerate_devices(type_id: u16, _info: &CudaInfo) -> Vec<DeviceId> {
        if type_id != CUDA_DEVICE_TYPE {
            return Vec::new();
        }
        (0..device_count())
            .map(|index| DeviceId::new(CUDA_DEVICE_TYPE, index))
            .collect()
    }

    fn enumerate_all_devices(info: &CudaInfo) -> Vec<DeviceId> {
        Self::enumerate_devices(CUDA_DEVICE_TYPE, info)
    }

    /// Reduce-sum and matmul are the default entries of the backend's tables (of the
    /// language's kernels); the others come from the kernel language directly.
    fn standard_kernel(kernel: StandardKernel) -> Result<crate::CudaKernel, LaunchError> {
        match kernel {
            StandardKernel::ReduceSum(elem) => crate::standard_kernels::reduce_sum_variant(
                elem,
                cubert_runtime::kernel::StandardVariant::DEFAULT,
            ),
            StandardKernel::Matmul(elem) => crate::standard_kernels::matmul_variant(
                elem,
                cubert_runtime::kernel::StandardVariant::DEFAULT,
            ),
            other => cubert_runtime::kernel::standard::built_standard_kernel::<Self>(other),
        }
    }

    fn language_kernel(
        definition: &cubert_lang::KernelDefinition,
        cube_dim: cubert_runtime::CubeDim,
    ) -> Result<crate::CudaKernel, LaunchError> {
        crate::lang::language_kernel(definition, cube_dim)
    }

    fn standard_variants(
        kernel: StandardKernel,
        properties: &DeviceProperties,
    ) -> Vec<StandardVariant> {
        crate::standard_kernels::standard_variants(kernel, properties)
    }

    fn standard_kernel_variant(
        kernel: StandardKernel,
        variant: &str,
    ) -> Result<crate::CudaKernel, LaunchError> {
        crate::standard_kernels::variant_kernel(kernel, variant)
    }

    /// The properties (the name carries the GPU model; identical GPUs share results), the
    /// driver and NVRTC versions, and the backend's version (its kernels' code).
    fn tune_fingerprint(properties: &DeviceProperties, info: &CudaInfo) -> DeviceFingerprint {
        let driver = match crate::driver::driver_status() {
            crate::driver::DriverStatus::Available { version, .. } => {
                format!("driver {}.{}", version / 1000, (version % 1000) / 10)
            }
            other => other.describe(),
        };
        let nvrtc = info
            .nvrtc
            .map(|(major, minor)| format!(", nvrtc {major}.{minor}"))
            .unwrap_or_default();
        DeviceFingerprint::new(
            Self::name(),
            properties.checksum(),
            format!("{driver}{nvrtc}, cubert-cuda {}", env!("CARGO_PKG_VERSION")),
        )
    }
}
