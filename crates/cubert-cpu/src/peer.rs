//! Peer copies between virtual CPU devices: the destination reads the source memory
//! directly (one host copy), the source handle being kept alive by the caller for the
//! whole `to_client`.

use cubert_runtime::copy::{CopyDescriptor, gather};
use cubert_runtime::{IoError, ServerError};

/// The source of a peer copy: the source memory, kept alive by its binding.
pub struct HostSource {
    descriptor: CopyDescriptor,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer addresses host memory of the source server that the binding inside
// `descriptor` keeps allocated; the `to_client` caller holds the source client (so the
// server and its storage stay alive) until the copy is done.
unsafe impl Send for HostSource {}

impl HostSource {
    /// The source of `descriptor`, whose binding covers `len` bytes at `ptr`.
    pub fn new(descriptor: CopyDescriptor, ptr: *const u8, len: usize) -> Self {
        Self {
            descriptor,
            ptr,
            len,
        }
    }

    /// Copies the source, dense, into `target` (the destination's bytes).
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if `target` has another length than the dense source.
    pub fn copy_into(&self, target: &mut [u8]) -> Result<(), ServerError> {
        let dense = self.descriptor.validate()?;
        if dense != target.len() {
            return Err(IoError::invalid(format!(
                "peer copy of {dense} bytes into {} bytes",
                target.len()
            ))
            .into());
        }
        // SAFETY: `ptr` covers `len` live bytes of the source binding (see the `Send` impl),
        // and `validate` checked that the descriptor stays inside the binding.
        let source = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        gather(
            source,
            &self.descriptor.shape,
            &self.descriptor.strides,
            self.descriptor.elem_size,
            target,
        );
        Ok(())
    }
}
