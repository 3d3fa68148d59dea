//! The CUDA context of a server: the device's primary context.
//!
//! Every server of a device shares the device's primary context (retained when the server
//! starts, released when it drops), the one the CUDA runtime and libraries built on it use.
//! NCCL binds the primary context of each device it works on (`cudaSetDevice`) and launches
//! its kernels on the streams it is given, so streams and memory from a private context
//! (`cuCtxCreate`) would belong to another context than its kernels; peer access, which is
//! enabled per pair of contexts, is shared with NCCL the same way. A private context used to
//! confine a device fault to one client, but on the drivers seen here (580, CUDA 13.0) a
//! fault poisons CUDA for the whole process anyway (see the crate docs), so nothing is lost.
//!
//! A context is current per thread. [`CudaContext::bind`] makes it current on the calling
//! thread (a cheap check when it already is): the runner's, and a client thread that runs
//! work itself while the runner is idle, which the server allows only where this context
//! or none is current ([`CudaContext::suits_calling_thread`]). Other threads that don't
//! belong to the server (a client thread asking for pinned staging) use
//! [`CudaContext::scoped`], which restores the thread's previous context afterwards.

use crate::driver::{self, DriverFailure, driver_status};
use cubert_runtime::ServerError;
use cudarc::driver::sys::{CUcontext, CUdevice};
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
    /// The primary context of device `ordinal`, retained until the value drops.
    ///
    /// # Errors
    /// Why CUDA can't be used (no library, no driver, no such device), or the driver's error.
    pub fn new(ordinal: u32) -> Result<Arc<Self>, ServerError> {
        let status = driver_status();
        if !status.is_available() {
            return Err(ServerError::generic(status.describe()));
        }
        let device = driver::device::get(ordinal).map_err(|failure| {
            ServerError::generic(format!(
                "there is no CUDA device {ordinal} ({}): {}",
                status.describe(),
                driver::describe(failure.error)
            ))
        })?;
        // The retain is balanced by the release in `drop`.
        let context = driver::context::primary_retain(device)?;
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
        if driver::context::current()? == self.context {
            return Ok(());
        }
        // SAFETY: the context is alive (owned by self).
        unsafe { driver::context::set_current(self.context) }
    }

    /// Whether this context is current on the calling thread.
    pub fn is_current(&self) -> bool {
        matches!(driver::context::current(), Ok(current) if current == self.context)
    }

    /// Whether work on this context may run on the calling thread without disturbing
    /// another: this context is current there, or none is (then [`Self::bind`] makes this
    /// one current for good, as the CUDA runtime binds a device's primary context on a
    /// thread's first call). A thread that uses another context is left alone.
    pub fn suits_calling_thread(&self) -> bool {
        matches!(
            driver::context::current(),
            Ok(current) if current == self.context || current.is_null()
        )
    }

    /// Makes this context current until the guard drops, then restores the thread's
    /// previous context.
    ///
    /// # Errors
    /// The driver's error.
    pub fn scoped(&self) -> Result<ScopedContext<'_>, DriverFailure> {
        // SAFETY: the context is alive (owned by self).
        unsafe { driver::context::push_current(self.context) }?;
        Ok(ScopedContext { _context: self })
    }
}

/// Restores the previous context of the thread when dropped.
pub struct ScopedContext<'a> {
    _context: &'a CudaContext,
}

impl Drop for ScopedContext<'_> {
    fn drop(&mut self) {
        // Pops the context pushed by `scoped`.
        let _ = driver::context::pop_current();
    }
}

impl Drop for CudaContext {
    fn drop(&mut self) {
        // SAFETY: balances the retain of `new`, once; every object this server created in
        // the context (streams, memory, modules) was dropped before it. The context itself
        // lives on while other servers (or NCCL) hold it.
        let _ = unsafe { driver::context::primary_release(self.device) };
    }
}
