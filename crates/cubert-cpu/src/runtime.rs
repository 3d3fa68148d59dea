//! The CPU runtime: ties the virtual CPU devices to their servers and kernels.
//!
//! [`CpuRuntime`] is what generic code names to run on the CPU; [`default_client`] is the
//! client of CPU device 0, the embedded default.

use crate::device::{BACKEND_NAME, CPU_DEVICE_TYPE, CpuDevice, CpuInfo};
use crate::server::CpuServer;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::DeviceFingerprint;
use cubert_runtime::{ComputeClient, DeviceId, LaunchError, Runtime, ServerError};

/// The CPU runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuRuntime;

impl Runtime for CpuRuntime {
    type Server = CpuServer;
    type Device = CpuDevice;

    fn name() -> &'static str {
        BACKEND_NAME
    }

    fn enumerate_devices(type_id: u16, info: &CpuInfo) -> Vec<DeviceId> {
        if type_id != CPU_DEVICE_TYPE {
            return Vec::new();
        }
        (0..info.device_count)
            .map(|index| DeviceId::new(CPU_DEVICE_TYPE, index))
            .collect()
    }

    fn enumerate_all_devices(info: &CpuInfo) -> Vec<DeviceId> {
        Self::enumerate_devices(CPU_DEVICE_TYPE, info)
    }

    /// Reduce-sum and matmul are the default entries of the backend's tables (of the
    /// language's kernels); the others come from the kernel language directly.
    fn standard_kernel(kernel: StandardKernel) -> Result<crate::CpuKernel, LaunchError> {
        use cubert_runtime::kernel::StandardVariant;
        match kernel {
            StandardKernel::ReduceSum(elem) => {
                crate::standard_kernels::reduce_sum_variant(elem, StandardVariant::DEFAULT)
            }
            StandardKernel::Matmul(elem) => {
                crate::standard_kernels::matmul_variant(elem, StandardVariant::DEFAULT)
            }
            other => cubert_runtime::kernel::standard::built_standard_kernel::<Self>(other),
        }
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
    ) -> Result<crate::CpuKernel, LaunchError> {
        crate::standard_kernels::variant_kernel(kernel, variant)
    }

    fn language_kernel(
        definition: &cubert_lang::KernelDefinition,
        cube_dim: cubert_runtime::CubeDim,
    ) -> Result<crate::CpuKernel, LaunchError> {
        Ok(crate::kernel::language_kernel(definition, cube_dim))
    }

    /// Virtual devices differ only by the index in their name: the fingerprint names the
    /// host's processor instead, and the backend's version (its kernels' code).
    fn tune_fingerprint(properties: &DeviceProperties, _info: &CpuInfo) -> DeviceFingerprint {
        let mut kind = properties.clone();
        kind.name = cpu_model();
        DeviceFingerprint::new(
            Self::name(),
            kind.checksum(),
            format!("cubert-cpu {}", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// The host processor's model (`/proc/cpuinfo`, read once), or the architecture if
/// unknown.
fn cpu_model() -> String {
    static MODEL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|text| {
                    text.lines()
                        .find(|line| line.starts_with("model name"))
                        .and_then(|line| line.split_once(':'))
                        .map(|(_, model)| model.trim().to_string())
                })
                .unwrap_or_else(|| std::env::consts::ARCH.to_string())
        })
        .clone()
}

/// The client of CPU device 0, the embedded default.
///
/// # Errors
/// The server's start error (worker threads that can't be spawned).
pub fn default_client() -> Result<ComputeClient<CpuRuntime>, ServerError> {
    ComputeClient::load(&CpuDevice::new(0))
}
