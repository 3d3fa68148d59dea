//! Copying one handle's bytes into another of the same device ([`ComputeClient::copy`]).
//!
//! A copy is queued on the client's stream like a launch and runs as a memory copy, not a
//! kernel: the driver's device-to-device copy on CUDA (what `cudaMemcpyAsync` does for
//! PyTorch's `copy_`), a multi-threaded `memcpy` on the CPU. The arguments are checked on
//! the caller's thread: both handles on this client's device, equal sizes, ranges that are
//! the same or apart; a bad copy is refused before anything is queued.

use super::ComputeClient;
use crate::error::IoError;
use crate::handle::Handle;
use crate::runtime::Runtime;
use crate::server::ComputeServer;

/// Whether two views of one device's memory share a byte without being the same view.
pub(crate) fn overlap_partly(a: &Handle, b: &Handle) -> bool {
    a.id() == b.id()
        && a.offset_start() < b.offset_end()
        && b.offset_start() < a.offset_end()
        && (a.offset_start(), a.size()) != (b.offset_start(), b.size())
}

impl<R: Runtime> ComputeClient<R> {
    /// Copies the bytes of `source` into `destination` (handles or views of this client's
    /// device, of one size), ordered on the client's stream: after the work queued before
    /// it, before the work queued after it. Copying a view onto itself does nothing.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let source = client.create(Bytes::from_elems(vec![1u32, 2, 3, 4]))?;
    /// let destination = client.empty(16)?;
    /// client.copy(&source, &destination)?;
    /// // The last two elements into the first two, through views.
    /// client.copy(&source.view(8, 8)?, &destination.view(0, 8)?)?;
    /// assert_eq!(client.read_one(destination.clone())?.to_elems::<u32>(), vec![3, 4, 3, 4]);
    /// // Sizes must match: refused before anything is queued.
    /// assert!(client.copy(&source, &destination.view(0, 8)?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] for handles of different sizes or views that overlap
    /// without being the same view; [`IoError::NotFound`] for a handle of another device.
    /// Nothing is queued then. A failure on the device comes back from the next
    /// `flush`/`sync`/`read`.
    pub fn copy(&self, source: &Handle, destination: &Handle) -> Result<(), IoError> {
        for (name, handle) in [("source", source), ("destination", destination)] {
            if handle.device() != self.device_id() {
                return Err(IoError::not_found(format!(
                    "the {name} belongs to {:?}, not to this client's {:?}; move it with \
                     `to_client` first",
                    handle.device(),
                    self.device_id()
                )));
            }
        }
        if source.size() != destination.size() {
            return Err(IoError::invalid(format!(
                "copying {} bytes into {} bytes: a copy moves whole views of one size (copy \
                 views for a part)",
                source.size(),
                destination.size()
            )));
        }
        if overlap_partly(source, destination) {
            return Err(IoError::invalid(format!(
                "the source (bytes {}..{}) and the destination (bytes {}..{}) of a copy overlap",
                source.offset_start(),
                source.offset_end(),
                destination.offset_start(),
                destination.offset_end()
            )));
        }
        let (source, destination) = (source.to_binding(), destination.to_binding());
        let stream = self.stream_id();
        self.device
            .submit(move |server| server.copy(source, destination, stream));
        Ok(())
    }
}
