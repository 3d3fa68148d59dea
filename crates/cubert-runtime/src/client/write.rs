//! Writing into memory that already exists: a whole handle or view ([`ComputeClient::write`]),
//! a byte range of it ([`ComputeClient::write_range`]), or a strided region
//! ([`ComputeClient::write_tensor`]).
//!
//! A write is queued on the client's stream like a launch: it runs after the work queued
//! before it and before the work queued after it, so a captured graph's inputs or a
//! training loop's parameters are refreshed in place, without a new allocation. The data is
//! checked on the caller's thread (its length against the region, the handle's device, the
//! strides against the memory) and a bad write is refused before anything is queued, the
//! memory untouched. A failure on the device (a fault) comes back from the next
//! `flush`/`sync`/`read`, as for every queued operation.

use super::ComputeClient;
use crate::bytes::Bytes;
use crate::copy::CopyDescriptor;
use crate::error::IoError;
use crate::handle::Handle;
use crate::runtime::Runtime;
use crate::server::ComputeServer;

impl<R: Runtime> ComputeClient<R> {
    /// Writes `data` over the bytes of `handle` (all of them; a view writes its range). The
    /// data goes through pinned staging where the backend has it, as `create` does.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![0u32; 4]))?;
    /// client.write(&handle, Bytes::from_elems(vec![1u32, 2, 3, 4]))?;
    /// client.write(&handle.view(0, 4)?, Bytes::from_elems(vec![9u32]))?; // a view: element 0
    /// assert_eq!(client.read_one(handle.clone())?.to_elems::<u32>(), vec![9, 2, 3, 4]);
    ///
    /// // Refused before anything is queued: 4 bytes for a handle of 16.
    /// assert!(client.write(&handle, Bytes::from_elems(vec![5u32])).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if `data` isn't exactly the handle's size;
    /// [`IoError::NotFound`] for a handle of another device. Nothing is written then.
    pub fn write(&self, handle: &Handle, data: Bytes) -> Result<(), IoError> {
        if data.len() as u64 != handle.size() {
            return Err(IoError::invalid(format!(
                "{} bytes of data for a handle of {} bytes: a write replaces the handle's \
                 bytes exactly (write a view for a part)",
                data.len(),
                handle.size()
            )));
        }
        self.write_tensor(CopyDescriptor::bytes(handle.clone().binding()), data)
    }

    /// Writes `data` to bytes `offset .. offset + data.len()` of `handle`.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![0u8; 6]))?;
    /// client.write_range(&handle, 2, Bytes::from_elems(vec![7u8, 8]))?;
    /// assert_eq!(client.read_one(handle.clone())?.to_vec(), vec![0, 0, 7, 8, 0, 0]);
    /// assert!(client.write_range(&handle, 5, Bytes::from_elems(vec![1u8, 2])).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if the range leaves the handle; as [`Self::write`].
    pub fn write_range(&self, handle: &Handle, offset: u64, data: Bytes) -> Result<(), IoError> {
        let view = handle.view(offset, data.len() as u64)?;
        self.write(&view, data)
    }

    /// Writes `data`, dense and row-major, into the strided region `descriptor` describes
    /// (its binding, shape, strides in elements and element size).
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if the descriptor is malformed or leaves its memory
    /// (`CopyDescriptor::validate`), or `data` isn't the region's dense size;
    /// [`IoError::NotFound`] for memory of another device. Nothing is written then.
    pub fn write_tensor(&self, descriptor: CopyDescriptor, mut data: Bytes) -> Result<(), IoError> {
        let _span = crate::tracing_gate::listened(log::Level::Debug).then(|| {
            tracing::debug_span!(target: "cubert::transfer", "write", bytes = data.len()).entered()
        });
        let device = descriptor.handle.device();
        if device != self.device_id() {
            return Err(IoError::not_found(format!(
                "the handle belongs to {device:?}, not to this client's {:?}; move it with \
                 `to_client` first",
                self.device_id()
            )));
        }
        let dense = descriptor.validate()?;
        if data.len() != dense {
            return Err(IoError::invalid(format!(
                "{} bytes of data for a region of {dense} bytes (shape {:?} of {}-byte elements)",
                data.len(),
                descriptor.shape.as_slice(),
                descriptor.elem_size
            )));
        }
        self.staging(std::iter::once(&mut data), false);
        let stream = self.stream_id();
        self.device
            .submit(move |server| server.write(vec![(descriptor, data)], stream));
        Ok(())
    }
}
