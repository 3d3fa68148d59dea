//! Reading device memory back, and resolving handles to storage resources.
//!
//! A read runs after everything queued before it on the client's stream. The `_async`
//! variants return a future; the others block the calling thread until the bytes are there.
//! Descriptors are checked before anything is queued: strides that don't fit the buffer,
//! or a handle of another device, are errors, never out-of-bounds reads.

use super::ComputeClient;
use super::lazy_read::LazyRead;
use crate::bytes::Bytes;
use crate::copy::CopyDescriptor;
use crate::error::{IoError, ServerError};
use crate::future::{DynFut, block_on, ready};
use crate::handle::Handle;
use crate::host_slice::HostSlice;
use crate::runtime::Runtime;
use crate::server::{CallerWork, ComputeServer};
use crate::storage::{ComputeStorage, ManagedResource};

impl<R: Runtime> ComputeClient<R> {
    fn check_device(&self, handle_device: crate::device::DeviceId) -> Result<(), ServerError> {
        if handle_device == self.device_id() {
            Ok(())
        } else {
            Err(ServerError::Io(IoError::not_found(format!(
                "the handle belongs to {handle_device:?}, not to this client's {:?}; \
                 move it with `to_client` first",
                self.device_id()
            ))))
        }
    }

    fn do_read(&self, descriptors: Vec<CopyDescriptor>) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        for descriptor in &descriptors {
            let checked = self
                .check_device(descriptor.handle.device())
                .and_then(|()| descriptor.validate().map_err(ServerError::Io));
            if let Err(error) = checked {
                return ready(Err(error));
            }
        }
        if let Err(error) = self.take_async_error() {
            return ready(Err(error));
        }
        let _span = crate::tracing_gate::listened(log::Level::Debug).then(|| {
            tracing::debug_span!(
                target: "cubert::transfer",
                "read",
                buffers = descriptors.len()
            )
            .entered()
        });
        let stream = self.stream_id();
        // On an idle device whose server queues reads on its callers, no hand-off.
        match self
            .device
            .submit_blocking_as(CallerWork::Read, move |server| {
                server.read(descriptors, stream)
            }) {
            Ok(future) => future,
            Err(error) => ready(Err(ServerError::from(error))),
        }
    }

    /// Reads every handle's bytes, as a future. The read is queued now, after the work
    /// queued before it on this stream; the future resolves when the bytes are there.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![5i32, -6]))?;
    /// let pending = client.read_async(vec![handle]); // `.await` it in async code
    /// let bytes = cubert_runtime::future::block_on(pending)?;
    /// assert_eq!(bytes[0].to_elems::<i32>(), vec![5, -6]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_async(&self, handles: Vec<Handle>) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        let descriptors = handles
            .into_iter()
            .map(|handle| CopyDescriptor::bytes(handle.binding()))
            .collect();
        self.do_read(descriptors)
    }

    /// Reads every handle's bytes lazily: the copies are queued now, in stream order, and
    /// the bytes are collected later with [`LazyRead::wait`] (or polled with
    /// [`LazyRead::is_ready`], or awaited) while the thread queues more work.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let loss = client.create(Bytes::from_elems(vec![0.25f32]))?;
    /// let pending = client.read_lazy(vec![loss.clone()]); // queued after the step's work
    /// // ... queue the next step here ...
    /// let bytes = pending.wait()?;
    /// assert_eq!(bytes[0].to_elems::<f32>(), vec![0.25]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_lazy(&self, handles: Vec<Handle>) -> LazyRead {
        LazyRead::new(self.read_async(handles))
    }

    /// Reads every handle's bytes, once the work queued before on this stream has run.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let a = client.create(Bytes::from_elems(vec![1u8, 2]))?;
    /// let b = client.create(Bytes::from_elems(vec![3u8]))?;
    /// let bytes = client.read(vec![a, b])?;
    /// assert_eq!(bytes[0].to_vec(), vec![1, 2]);
    /// assert_eq!(bytes[1].to_vec(), vec![3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The first error queued on this stream, or a [`ServerError::Io`] for a handle whose
    /// memory is gone or belongs to another device.
    pub fn read(&self, handles: Vec<Handle>) -> Result<Vec<Bytes>, ServerError> {
        block_on(self.read_async(handles))
    }

    /// Reads one handle's bytes (or a view's).
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![1.5f32, 2.5, 3.5]))?;
    /// assert_eq!(client.read_one(handle.clone())?.to_elems::<f32>(), vec![1.5, 2.5, 3.5]);
    /// assert_eq!(client.read_one(handle.view(4, 4)?)?.to_elems::<f32>(), vec![2.5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Self::read`].
    pub fn read_one(&self, handle: Handle) -> Result<Bytes, ServerError> {
        let mut bytes = self.read(vec![handle])?;
        bytes
            .pop()
            .ok_or_else(|| ServerError::generic("the server returned no bytes"))
    }

    /// Reads one handle's bytes, panicking on failure: for tests and examples, where a
    /// failed read is a bug. Everywhere else use [`Self::read_one`].
    ///
    /// # Panics
    /// If the read fails (the errors of [`Self::read`]), with the error's message.
    #[allow(clippy::panic)] // the `_unchecked` reads are the spec's panicking convenience
    pub fn read_one_unchecked(&self, handle: Handle) -> Bytes {
        match self.read_one(handle) {
            Ok(bytes) => bytes,
            Err(error) => panic!("read_one_unchecked: {error}"),
        }
    }

    /// Reads one tensor as dense bytes, panicking on failure (see
    /// [`Self::read_one_unchecked`]).
    ///
    /// # Panics
    /// If the read fails (the errors of [`Self::read_tensor`]), with the error's message.
    #[allow(clippy::panic)] // as `read_one_unchecked`
    pub fn read_one_unchecked_tensor(&self, descriptor: CopyDescriptor) -> Bytes {
        match self.read_one_tensor(descriptor) {
            Ok(bytes) => bytes,
            Err(error) => panic!("read_one_unchecked_tensor: {error}"),
        }
    }

    /// Reads tensors as dense row-major bytes, as a future. The strides must be those the
    /// tensor was created with (or any that stay inside its buffer).
    pub fn read_tensor_async(
        &self,
        descriptors: Vec<CopyDescriptor>,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        self.do_read(descriptors)
    }

    /// Reads tensors as dense row-major bytes.
    ///
    /// # Errors
    /// As [`Self::read`], and [`IoError::InvalidArgument`] for a descriptor whose shape and
    /// strides don't fit its buffer.
    pub fn read_tensor(&self, descriptors: Vec<CopyDescriptor>) -> Result<Vec<Bytes>, ServerError> {
        block_on(self.read_tensor_async(descriptors))
    }

    /// Reads one tensor as dense bytes, as a future.
    pub fn read_one_tensor_async(
        &self,
        descriptor: CopyDescriptor,
    ) -> DynFut<Result<Bytes, ServerError>> {
        let future = self.read_tensor_async(vec![descriptor]);
        Box::pin(async move {
            future
                .await?
                .pop()
                .ok_or_else(|| ServerError::generic("the server returned no bytes"))
        })
    }

    /// Reads one tensor as dense bytes.
    ///
    /// # Errors
    /// As [`Self::read_tensor`].
    pub fn read_one_tensor(&self, descriptor: CopyDescriptor) -> Result<Bytes, ServerError> {
        block_on(self.read_one_tensor_async(descriptor))
    }

    /// Reads `handle`'s bytes into `out`, a buffer the caller owns (a `Vec` kept from one
    /// step to the next, a memory-mapped file): no allocation per read. `out` must be as
    /// long as the handle; the read runs after everything queued before on this stream.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0]))?;
    /// let mut out = vec![0u8; 12];
    /// client.read_into(handle.clone(), &mut out)?;
    /// assert_eq!(Bytes::from_bytes_vec(out).to_elems::<f32>(), vec![1.0, 2.0, 3.0]);
    /// assert!(client.read_into(handle, &mut [0u8; 4]).is_err()); // not the handle's length
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Self::read`], and [`IoError::InvalidArgument`] when `out`'s length differs from
    /// the handle's (nothing is read then, `out` is untouched).
    pub fn read_into(&self, handle: Handle, out: &mut [u8]) -> Result<(), ServerError> {
        self.read_tensor_into(CopyDescriptor::bytes(handle.binding()), out)
    }

    /// Reads a tensor as dense row-major bytes into `out`, a buffer the caller owns, as
    /// [`Self::read_into`] does for a whole handle.
    ///
    /// # Errors
    /// As [`Self::read_tensor`], and [`IoError::InvalidArgument`] when `out`'s length
    /// differs from the tensor's dense length (nothing is read then).
    pub fn read_tensor_into(
        &self,
        descriptor: CopyDescriptor,
        out: &mut [u8],
    ) -> Result<(), ServerError> {
        self.check_device(descriptor.handle.device())?;
        let dense = descriptor.validate().map_err(ServerError::Io)?;
        if dense != out.len() {
            return Err(ServerError::Io(IoError::invalid(format!(
                "read_into: the destination holds {} bytes but the data is {dense} bytes",
                out.len()
            ))));
        }
        self.take_async_error()?;
        let stream = self.stream_id();
        let destination = HostSlice::new(out);
        // SAFETY: `out` stays borrowed by this call until the future below has resolved
        // (block_on) or been dropped (an error before it is made), so the server's writes
        // land in lent memory only.
        let future =
            self.call(move |server| unsafe { server.read_into(descriptor, destination, stream) })?;
        block_on(future)
    }

    /// The storage resource behind `handle` (a host or device pointer), kept alive while
    /// the returned value lives. Work queued before on this stream is flushed first, but not
    /// waited for: sync before touching the memory from outside the runtime.
    ///
    /// # Errors
    /// [`ServerError::Io`] if the memory is gone or belongs to another device.
    pub fn get_resource(
        &self,
        handle: Handle,
    ) -> Result<
        ManagedResource<<<R::Server as ComputeServer>::Storage as ComputeStorage>::Resource>,
        ServerError,
    > {
        self.check_device(handle.device())?;
        let stream = self.stream_id();
        let binding = handle.binding();
        self.call(move |server| server.get_resource(binding, stream))?
    }
}
