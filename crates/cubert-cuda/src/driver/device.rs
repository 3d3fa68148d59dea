//! Devices: handles by ordinal, their attributes, name and memory, whether two can reach
//! each other, and the driver's version.
//!
//! A `CUdevice` is a plain index the driver validates (`CUDA_ERROR_INVALID_DEVICE`), so
//! these calls are safe.

use super::{Context as _, DriverFailure};
use cudarc::driver::result::device;
use cudarc::driver::sys::{self, CUdevice, CUdevice_attribute};

/// The device of `ordinal` (`cuDeviceGet`).
///
/// # Errors
/// The driver's error (`CUDA_ERROR_INVALID_DEVICE` for an ordinal with no device).
pub fn get(ordinal: u32) -> Result<CUdevice, DriverFailure> {
    let ordinal = i32::try_from(ordinal).map_err(|_| DriverFailure {
        operation: "cuDeviceGet",
        error: cudarc::driver::result::DriverError(sys::CUresult::CUDA_ERROR_INVALID_DEVICE),
    })?;
    device::get(ordinal).during("cuDeviceGet")
}

/// An attribute of `dev` (`cuDeviceGetAttribute`).
///
/// # Errors
/// The driver's error.
pub fn attribute(dev: CUdevice, attribute: CUdevice_attribute) -> Result<i32, DriverFailure> {
    // SAFETY: a device handle is an index the driver validates.
    unsafe { device::get_attribute(dev, attribute) }.during("cuDeviceGetAttribute")
}

/// The name of `dev` (`cuDeviceGetName`).
///
/// # Errors
/// The driver's error.
pub fn name(dev: CUdevice) -> Result<String, DriverFailure> {
    device::get_name(dev).during("cuDeviceGetName")
}

/// Bytes of memory on `dev` (`cuDeviceTotalMem`).
///
/// # Errors
/// The driver's error.
pub fn total_memory(dev: CUdevice) -> Result<usize, DriverFailure> {
    // SAFETY: a device handle is an index the driver validates.
    unsafe { device::total_mem(dev) }.during("cuDeviceTotalMem")
}

/// Whether `dev` can access the memory of `peer` directly (`cuDeviceCanAccessPeer`).
///
/// # Errors
/// The driver's error.
pub fn can_access_peer(dev: CUdevice, peer: CUdevice) -> Result<bool, DriverFailure> {
    let mut can = 0;
    // SAFETY: valid out pointer; device handles are indices the driver validates.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, dev, peer) }.during("cuDeviceCanAccessPeer")?;
    Ok(can == 1)
}

/// The driver's version as `major * 1000 + minor * 10` (`cuDriverGetVersion`).
///
/// # Errors
/// The driver's error.
pub fn driver_version() -> Result<i32, DriverFailure> {
    let mut version = 0;
    // SAFETY: valid out pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }.during("cuDriverGetVersion")?;
    Ok(version)
}
