//! The `Runtime` trait: a backend seen from the client.
//!
//! A runtime names its server and device types, enumerates devices, and builds the
//! standard kernels so backend-generic code (tests, the CLI, benchmarks) can run the same
//! workload everywhere.

use crate::client::ComputeClient;
use crate::device::{Device, DeviceId};
use crate::error::{LaunchError, ServerError};
use crate::kernel::standard::StandardKernel;
use crate::server::ComputeServer;

/// A backend: its server, its devices, its standard kernels.
pub trait Runtime: Sized + Send + Sync + 'static {
    /// The server owning one device.
    type Server: ComputeServer;
    /// The device type.
    type Device: Device;

    /// The backend's name (`cpu`, `cuda`).
    fn name() -> &'static str;

    /// Devices of kind `type_id` this runtime can use.
    fn enumerate_devices(
        type_id: u16,
        info: &<Self::Server as ComputeServer>::Info,
    ) -> Vec<DeviceId>;

    /// Every device this runtime can use.
    fn enumerate_all_devices(info: &<Self::Server as ComputeServer>::Info) -> Vec<DeviceId>;

    /// Builds a standard kernel.
    ///
    /// # Errors
    /// [`LaunchError`] if the backend doesn't support the kernel's element types.
    fn standard_kernel(
        kernel: StandardKernel,
    ) -> Result<<Self::Server as ComputeServer>::Kernel, LaunchError>;

    /// The client of `device` (the registered server, started on first use).
    ///
    /// # Errors
    /// The server's start error.
    fn client(device: &Self::Device) -> Result<ComputeClient<Self>, ServerError> {
        ComputeClient::load(device)
    }
}
