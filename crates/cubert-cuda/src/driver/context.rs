//! Contexts: the device's primary context, which context is current on a thread, and peer
//! access between contexts.
//!
//! Calls that take a context handle are `unsafe`: the driver can't tell a destroyed
//! context from a live one, so the caller vouches that it is alive.

use super::{Context as _, DriverFailure};
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUresult};

/// Retains the primary context of `dev` (`cuDevicePrimaryCtxRetain`); balance it with
/// [`primary_release`].
///
/// # Errors
/// The driver's error.
pub fn primary_retain(dev: CUdevice) -> Result<CUcontext, DriverFailure> {
    let mut context: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out pointer; a device handle is an index the driver validates.
    unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, dev) }
        .during("cuDevicePrimaryCtxRetain")?;
    Ok(context)
}

/// Releases a retain of `dev`'s primary context (`cuDevicePrimaryCtxRelease`); the context
/// is destroyed with its last retain.
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// Balances one [`primary_retain`] of the caller, once; everything the caller created in
/// the context is gone.
pub unsafe fn primary_release(dev: CUdevice) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) }.during("cuDevicePrimaryCtxRelease")
}

/// The context current on the calling thread, null if none (`cuCtxGetCurrent`).
///
/// # Errors
/// The driver's error.
pub fn current() -> Result<CUcontext, DriverFailure> {
    let mut current: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out pointer.
    unsafe { sys::cuCtxGetCurrent(&mut current) }.during("cuCtxGetCurrent")?;
    Ok(current)
}

/// Makes `context` current on the calling thread (`cuCtxSetCurrent`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `context` is a live context (or null, for none).
pub unsafe fn set_current(context: CUcontext) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuCtxSetCurrent(context) }.during("cuCtxSetCurrent")
}

/// Pushes `context` on the calling thread's context stack, making it current
/// (`cuCtxPushCurrent`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `context` is a live context.
pub unsafe fn push_current(context: CUcontext) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuCtxPushCurrent_v2(context) }.during("cuCtxPushCurrent")
}

/// Pops the current context off the calling thread's context stack and returns it
/// (`cuCtxPopCurrent`).
///
/// # Errors
/// The driver's error.
pub fn pop_current() -> Result<CUcontext, DriverFailure> {
    let mut popped: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out pointer.
    unsafe { sys::cuCtxPopCurrent_v2(&mut popped) }.during("cuCtxPopCurrent")?;
    Ok(popped)
}

/// Lets the current context access `peer`'s memory (`cuCtxEnablePeerAccess`). Access that
/// is already enabled counts as success.
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `peer` is a live context.
pub unsafe fn enable_peer_access(peer: CUcontext) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    match unsafe { sys::cuCtxEnablePeerAccess(peer, 0) } {
        CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        result => result.during("cuCtxEnablePeerAccess"),
    }
}
