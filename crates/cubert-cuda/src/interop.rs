//! Interop: device memory of cubert handles lent to code outside cubert (cuBLAS, another
//! CUDA library, your own driver calls) for the duration of a closure.
//!
//! [`with_device_buffers`] runs the closure on the device's runner thread, after the work
//! submitted before it, with the server's context bound. It gets each handle's device
//! address and size and the `CUstream` of the client's stream: everything it queues there
//! is ordered after the work queued before on that stream (and after the handles' last
//! uses on other streams), and before the work queued after, like a launch. The handles
//! stay allocated during the closure, and their memory is reused only after the stream's
//! work, the closure's included, so dropping a handle right after is safe. Don't keep the
//! addresses past the closure, and don't synchronize other streams from it.
//!
//! Errors already queued on the stream (a failed launch before) are returned first, as a
//! read returns them, and the closure doesn't run.

use crate::runtime::CudaRuntime;
use crate::server::CudaServer;
use cubert_runtime::{Binding, ComputeClient, Handle, ServerError};
use cudarc::driver::sys::{CUdeviceptr, CUstream};

/// A handle's device memory, lent to a closure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceBuffer {
    /// Device address of the handle's first byte.
    pub ptr: CUdeviceptr,
    /// The handle's size in bytes.
    pub size: u64,
}

/// Runs `task` with the device memory of `handles` (in order) and the raw stream of the
/// client's stream; see the module docs for the ordering.
///
/// # Errors
/// [`ServerError::Io`] for a handle of another device (or one that is gone), the errors
/// queued on the stream before, an error of the driver or of a stream captured into a
/// graph; `task` didn't run then.
pub fn with_device_buffers<T: Send + 'static>(
    client: &ComputeClient<CudaRuntime>,
    handles: &[&Handle],
    task: impl FnOnce(&[DeviceBuffer], CUstream) -> T + Send + 'static,
) -> Result<T, ServerError> {
    for handle in handles {
        if handle.device() != client.device_id() {
            return Err(cubert_runtime::IoError::not_found(format!(
                "interop: the handle belongs to {:?}, not to this client's {:?}",
                handle.device(),
                client.device_id()
            ))
            .into());
        }
    }
    let bindings: Vec<Binding> = handles.iter().map(|handle| handle.to_binding()).collect();
    let stream = client.stream_id();
    client.with_server(move |server: &mut CudaServer| server.lend(bindings, stream, task))?
}
