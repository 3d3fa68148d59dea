//! The `Runtime` trait: a backend seen from the client.
//!
//! A runtime names its server and device types, enumerates devices, and builds the
//! standard kernels (and their variants, for the autotuner) so backend-generic code (tests,
//! the CLI, benchmarks) can run the same workload everywhere.

// The two import circles left in this crate, both between this trait and code generic over
// it: `client` and `tune` use `Runtime`, and the trait names them back in its signatures,
// `Runtime::client` (a `ComputeClient`) and `Runtime::tune_fingerprint` (the tuner's
// `DeviceFingerprint`, which backends override). Both are public API; breaking the circles
// would move or remove them.
use crate::client::ComputeClient;
use crate::device::{Device, DeviceId};
use crate::error::{LaunchError, ServerError};
use crate::kernel::StandardVariant;
use crate::kernel::standard::StandardKernel;
use crate::properties::DeviceProperties;
use crate::server::ComputeServer;
use crate::tune::DeviceFingerprint;

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

    /// Builds a standard kernel. The default builds the kernel-language standard kernels
    /// ([`crate::kernel::standard::standard_kernel`]) through [`Self::language_kernel`];
    /// backends override it for reduce-sum and matmul, whose default variant each picks from
    /// its own table of the language's kernels.
    ///
    /// # Errors
    /// [`LaunchError`] if the backend doesn't support the kernel's element types, or
    /// can't build it.
    fn standard_kernel(
        kernel: StandardKernel,
    ) -> Result<<Self::Server as ComputeServer>::Kernel, LaunchError> {
        crate::kernel::standard::built_standard_kernel::<Self>(kernel)
    }

    /// The variants of `kernel` worth trying on a device with `properties`, the default
    /// ([`StandardVariant::DEFAULT`]) first. The autotuner picks among them. Backends without
    /// variants offer the default only.
    fn standard_variants(
        _kernel: StandardKernel,
        _properties: &DeviceProperties,
    ) -> Vec<StandardVariant> {
        vec![StandardVariant::default_with_tile((1, 1))]
    }

    /// Builds variant `variant` (a name from [`Self::standard_variants`]) of `kernel`.
    ///
    /// # Errors
    /// [`LaunchError`] for a variant the backend doesn't have, or element types it doesn't
    /// support.
    fn standard_kernel_variant(
        kernel: StandardKernel,
        variant: &str,
    ) -> Result<<Self::Server as ComputeServer>::Kernel, LaunchError> {
        if variant == StandardVariant::DEFAULT {
            Self::standard_kernel(kernel)
        } else {
            Err(LaunchError::unknown(format!(
                "the {} backend has no variant `{variant}` of `{kernel}`",
                Self::name()
            )))
        }
    }

    /// Builds the kernel of the language described by `definition` (a `#[kernel]`
    /// function specialized for its generic types and compile-time values) for cubes of
    /// `cube_dim` units. Clients cache the result per specialization and cube dim.
    ///
    /// # Errors
    /// [`LaunchError`] naming the kernel if this backend can't run the language or can't
    /// build this kernel (its code generator rejects the IR, the compile fails). The
    /// default: this backend has no code generator for the language.
    fn language_kernel(
        definition: &cubert_lang::KernelDefinition,
        _cube_dim: crate::kernel::CubeDim,
    ) -> Result<<Self::Server as ComputeServer>::Kernel, LaunchError> {
        Err(LaunchError::unknown(format!(
            "kernel `{}`: the {} backend can't run kernels of the language",
            definition.name(),
            Self::name()
        )))
    }

    /// What identifies a device's kind and software stack for the autotune cache: devices
    /// with equal fingerprints share tuning results (in memory and on disk). The default
    /// hashes the properties and names no driver; backends add their driver version and
    /// leave out what differs between identical devices (an index in the name).
    fn tune_fingerprint(
        properties: &DeviceProperties,
        _info: &<Self::Server as ComputeServer>::Info,
    ) -> DeviceFingerprint {
        DeviceFingerprint::new(Self::name(), properties.checksum(), "")
    }

    /// The client of `device` (the registered server, started on first use).
    ///
    /// # Errors
    /// The server's start error.
    fn client(device: &Self::Device) -> Result<ComputeClient<Self>, ServerError> {
        ComputeClient::load(device)
    }
}
