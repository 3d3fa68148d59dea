//! Moving data between devices: `to_client` and `to_client_tensor`.
//!
//! When the backend says the two devices reach each other
//! ([`ServerCommunication::peer_copy_supported`]: GPUs with peer access, virtual CPU devices)
//! the copy is direct, in three steps (see `server::communication`): the source hands out a
//! point on its stream, the destination allocates the new handle and pulls the bytes on its
//! own stream after that point, and the source stream then waits for the copy before
//! anything rewrites or reuses the source. Nothing blocks on the device: the destination
//! handle is ordered on the destination client's stream like an upload, and later work
//! there sees the bytes.
//!
//! Otherwise (no peer access, peer copies switched off, a layout the backend can't copy
//! directly) the bytes go through the host: the source reads them (into pinned memory where
//! the backend has it) and the destination creates the new handle from them.
//!
//! Either way the new handle is dense and contiguous. Errors queued on the source stream are
//! returned first, as a read returns them (and, for a direct copy, those queued on the
//! destination stream, where the copy is queued).

use super::ComputeClient;
use crate::copy::CopyDescriptor;
use crate::elem::ElemType;
use crate::error::{IoError, ServerError};
use crate::handle::Handle;
use crate::layout::{MemoryLayoutDescriptor, MemoryLayoutPolicy};
use crate::runtime::Runtime;
use crate::server::ServerCommunication;

impl<R: Runtime> ComputeClient<R> {
    /// Copies `src` (a handle of this client's device) to `dst`'s device and returns the new
    /// handle there. `dtype` is the element type of the data.
    ///
    /// ```
    /// use cubert_cpu::{CpuDevice, CpuRuntime};
    /// use cubert_runtime::config::{CubertConfig, set_global_config};
    /// use cubert_runtime::{Bytes, ComputeClient, ElemType, IoError, ServerError};
    ///
    /// // Two virtual CPU devices, as `[cpu] devices = 2` in `cubert.toml` would give.
    /// let mut config = CubertConfig::default();
    /// config.cpu.devices = 2;
    /// set_global_config(config).map_err(|_| "the configuration was already loaded")?;
    /// let first = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0))?;
    /// let second = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(1))?;
    ///
    /// let here = first.create(Bytes::from_elems(vec![1.0f32, 2.0]))?;
    /// let there = first.to_client(here.clone(), &second, ElemType::F32)?;
    /// assert_eq!(there.device(), second.device_id());
    /// assert_eq!(second.read_one(there)?.to_elems::<f32>(), vec![1.0, 2.0]);
    /// // A handle is only read by a client of its own device.
    /// let error = second.read_one(here).unwrap_err();
    /// assert!(matches!(error, ServerError::Io(IoError::NotFound { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The errors queued on this client's stream (and, for a direct copy, on `dst`'s), the
    /// read error on this device (a handle of another device or whose memory is gone is
    /// [`IoError::NotFound`]), or the allocation error on `dst`'s.
    pub fn to_client(
        &self,
        src: Handle,
        dst: &Self,
        dtype: ElemType,
    ) -> Result<Handle, ServerError> {
        let descriptor = CopyDescriptor::bytes(src.binding());
        self.to_client_tensor(descriptor, dst, dtype)
    }

    /// Copies the tensor `src_descriptor` describes to `dst`'s device as a dense, contiguous
    /// tensor, and returns its handle.
    ///
    /// # Errors
    /// As [`Self::to_client`], and [`IoError::InvalidArgument`] if the descriptor doesn't fit
    /// its buffer (nothing is created on `dst` then).
    pub fn to_client_tensor(
        &self,
        src_descriptor: CopyDescriptor,
        dst: &Self,
        _dtype: ElemType,
    ) -> Result<Handle, ServerError> {
        let _span = crate::tracing_gate::listened(log::Level::Debug).then(|| {
            tracing::debug_span!(
                target: "cubert::transfer",
                "to_client",
                from = ?self.device_id(),
                to = ?dst.device_id()
            )
            .entered()
        });
        src_descriptor.validate()?;
        let device = src_descriptor.handle.device();
        if device != self.device_id() {
            return Err(IoError::not_found(format!(
                "to_client: the handle belongs to {device:?}, not to this client's {:?}",
                self.device_id()
            ))
            .into());
        }
        if <R::Server as ServerCommunication>::peer_copy_supported(&self.utilities, &dst.utilities)
            && let Some(handle) = self.to_client_peer(src_descriptor.clone(), dst)?
        {
            return Ok(handle);
        }
        self.to_client_host(src_descriptor, dst)
    }

    /// Whether `to_client` from this client's device to `dst`'s copies directly (no host
    /// round trip) for contiguous data.
    pub fn peer_copy_supported(&self, dst: &Self) -> bool {
        <R::Server as ServerCommunication>::peer_copy_supported(&self.utilities, &dst.utilities)
    }

    /// The direct copy, or `None` when the source can't hand this layout out directly.
    fn to_client_peer(
        &self,
        descriptor: CopyDescriptor,
        dst: &Self,
    ) -> Result<Option<Handle>, ServerError> {
        self.take_async_error()?;
        let dense = descriptor.validate()?;
        let src_stream = self.stream_id();
        let dst_stream = dst.stream_id();
        let reader = dst.device_id();
        let Some(source) =
            self.call(move |server| server.peer_source(descriptor, src_stream, reader))??
        else {
            return Ok(None);
        };
        let (base, _) = dst.utilities.layout_policy.apply(
            dst_stream,
            &[MemoryLayoutDescriptor::contiguous([dense], 1)],
        )?;
        dst.device.allocate(base.id(), base.size(), dst_stream);
        let target = base.clone().binding();
        let receipt = dst.call(move |server| server.peer_pull(source, target, dst_stream))??;
        self.device
            .submit(move |server| server.peer_release(receipt, src_stream));
        Ok(Some(base))
    }

    /// Through the host: read here, create there.
    fn to_client_host(
        &self,
        descriptor: CopyDescriptor,
        dst: &Self,
    ) -> Result<Handle, ServerError> {
        let shape = descriptor.shape.clone();
        let elem_size = descriptor.elem_size;
        let bytes = self.read_one_tensor(descriptor)?;
        let layouts = dst.create_tensors(vec![(
            MemoryLayoutDescriptor::contiguous(shape, elem_size),
            bytes,
        )])?;
        layouts
            .into_iter()
            .next()
            .map(|layout| layout.memory)
            .ok_or_else(|| ServerError::generic("no handle was created on the destination"))
    }
}
