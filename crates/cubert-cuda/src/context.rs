//! A CUDA context owned by one server.
//!
//! Each server creates its own context rather than sharing the device's primary context:
//! a device fault (illegal address, trap) poisons the context it happened in for good, and
//! with one context per server the fault stays with that client. Dropping the client and
//! creating a new one gives a fresh context on the same device.
//!
//! A context is current per thread. [`CudaContext::bind`] makes it current on the calling
//! thread (a cheap check when it already is); threads that don't
//! belong to the server (a client thread asking for pinned staging) use
//! [`CudaContext::scoped`], which restores the thread's previous context afterwards.

use crate::driver::{Context as _, DriverFailure, driver_status};
use cubert_runtime::ServerError;
use cudarc::driver::sys::{self, CUcontext, CUdevice};
use std::sync::Arc;

/// A CUDA context on one device. See the module docs.
pub struct CudaContext {
    context: CUcontext,
    device: CUdevice,
    ordinal: u32,
}

// SAFETY: a CUcontext handle may be used from any thread (made current there); the driver
// serializes access to the context itself.
unsafe impl Send for CudaContext {}
// SAFETY: as above.
unsafe impl Sync for CudaContext {}

impl std::fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaContext")
            .field("ordinal", &self.ordinal)
            .finish()
    }
}

impl CudaContext {
    /// A new context on device `ordinal`.
    ///
    /// # Errors
    /// Why CUDA can't be used (no library, no driver, no such device), or the driver's error.
    pub fn new(ordinal: u32) -> Result<Arc<Self>, ServerError> {
        let status = driver_status();
        if !status.is_available() {
            return Err(ServerError::generic(status.describe()));
        }
        let device = cudarc::driver::result::device::get(ordinal as i32)
            .during("cuDeviceGet")
            .map_err(|failure| {
                ServerError::generic(format!(
                    "there is no CUDA device {ordinal} ({}): {}",
                    status.describe(),
                    crate::driver::describe(failure.error)
                ))
            })?;
        // SAFETY: `device` is a valid device handle; the flags select automatic scheduling.
        let context =
            unsafe { cudarc::driver::result::ctx::create_v4(std::ptr::null_mut(), 0, device) }
                .during("cuCtxCreate")?;
        Ok(Arc::new(Self {
            context,
            device,
            ordinal,
        }))
    }

    /// The raw context.
    pub fn raw(&self) -> CUcontext {
        self.context
    }

    /// The raw device.
    pub fn device(&self) -> CUdevice {
        self.device
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Makes this context current on the calling thread.
    ///
    /// # Errors
    /// The driver's error.
    pub fn bind(&self) -> Result<(), DriverFailure> {
        let mut current: CUcontext = std::ptr::null_mut();
        // SAFETY: `current` is a valid out pointer.
        unsafe { sys::cuCtxGetCurrent(&mut current) }.during("cuCtxGetCurrent")?;
        if current == self.context {
            return Ok(());
        }
        // SAFETY: the context is alive (owned by self).
        unsafe { sys::cuCtxSetCurrent(self.context) }.during("cuCtxSetCurrent")
    }

    /// Makes this context current until the guard drops, then restores the thread's
    /// previous context.
    ///
    /// # Errors
    /// The driver's error.
    pub fn scoped(&self) -> Result<ScopedContext<'_>, DriverFailure> {
        // SAFETY: the context is alive (owned by self).
        unsafe { sys::cuCtxPushCurrent_v2(self.context) }.during("cuCtxPushCurrent")?;
        Ok(ScopedContext { _context: self })
    }
}

/// Restores the previous context of the thread when dropped.
pub struct ScopedContext<'a> {
    _context: &'a CudaContext,
}

impl Drop for ScopedContext<'_> {
    fn drop(&mut self) {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed by `scoped`.
        let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    }
}

impl Drop for CudaContext {
    fn drop(&mut self) {
        // SAFETY: the context was created by `new` and is destroyed once; every object
        // created in it (streams, memory, modules) belongs to the server that owns this
        // context and was dropped before it.
        let _ = unsafe { sys::cuCtxDestroy_v2(self.context) };
    }
}
