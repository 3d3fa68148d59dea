//! The wgpu runtime: ties wgpu's adapters to their servers and kernels.
//!
//! Every kernel is a kernel of the language. The standard elementwise kernels come from the
//! language directly; reduce-sum and matmul take one entry of the language's tables that
//! needs no plane operation (subgroup sizes differ between adapters): a unit per row for
//! reduce-sum, the shared-memory tiled matmul of CUDA's default tiling.

use crate::device::{BACKEND_NAME, WGPU_DEVICE_TYPE, WgpuDevice, WgpuInfo};
use crate::kernel::WgpuKernel;
use crate::server::WgpuServer;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::{
    MatmulTiling, RowSplit, StandardKernel, matmul_kernel, reduce_sum_kernel,
};
use cubert_runtime::{ComputeClient, CubeDim, DeviceId, LaunchError, Runtime, ServerError};

/// The reduce-sum of this backend: a unit per row, 32 partial sums, 64 rows per cube.
pub const DEFAULT_REDUCE: RowSplit = RowSplit::Unit {
    units: 64,
    wide: true,
};

/// The matmul of this backend: 64 × 64 tiles 16 deep in workgroup memory, 4 × 4 outputs
/// per unit (256 units, WebGPU's default limit), `rhs` read by lines of 4.
pub const DEFAULT_MATMUL: MatmulTiling = MatmulTiling::Tiled {
    block: (64, 64),
    depth: 16,
    unit: (4, 4),
    lines: true,
};

/// The wgpu runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct WgpuRuntime;

impl Runtime for WgpuRuntime {
    type Server = WgpuServer;
    type Device = WgpuDevice;

    fn name() -> &'static str {
        BACKEND_NAME
    }

    fn enumerate_devices(type_id: u16, info: &WgpuInfo) -> Vec<DeviceId> {
        if type_id != WGPU_DEVICE_TYPE {
            return Vec::new();
        }
        (0..info.device_count)
            .map(|index| DeviceId::new(WGPU_DEVICE_TYPE, index))
            .collect()
    }

    fn enumerate_all_devices(info: &WgpuInfo) -> Vec<DeviceId> {
        Self::enumerate_devices(WGPU_DEVICE_TYPE, info)
    }

    fn standard_kernel(kernel: StandardKernel) -> Result<WgpuKernel, LaunchError> {
        match kernel {
            StandardKernel::ReduceSum(elem) => {
                reduce_sum_kernel::<Self>(elem, StandardVariant::DEFAULT, DEFAULT_REDUCE)
            }
            StandardKernel::Matmul(elem) => {
                matmul_kernel::<Self>(elem, StandardVariant::DEFAULT, DEFAULT_MATMUL)
            }
            other => cubert_runtime::kernel::standard::built_standard_kernel::<Self>(other),
        }
    }

    fn standard_variants(
        kernel: StandardKernel,
        _properties: &cubert_runtime::properties::DeviceProperties,
    ) -> Vec<StandardVariant> {
        let tile = match kernel {
            StandardKernel::Matmul(_) => DEFAULT_MATMUL.tile(),
            _ => (1, 1),
        };
        vec![StandardVariant::default_with_tile(tile)]
    }

    fn language_kernel(
        definition: &cubert_lang::KernelDefinition,
        cube_dim: CubeDim,
    ) -> Result<WgpuKernel, LaunchError> {
        let ir = definition
            .ir()
            .map_err(|error| LaunchError::unknown(error.to_string()))?;
        Ok(WgpuKernel::new(
            definition.id(),
            definition.name(),
            ir.clone(),
            cube_dim,
        ))
    }
}

/// The client of wgpu device 0 (the first hardware adapter, else a software one).
///
/// # Errors
/// The server's start error (no adapter, a device wgpu refuses).
pub fn default_client() -> Result<ComputeClient<WgpuRuntime>, ServerError> {
    ComputeClient::load(&WgpuDevice::new(0))
}
