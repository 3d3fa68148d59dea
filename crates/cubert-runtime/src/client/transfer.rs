//! Moving data between devices, and collectives.
//!
//! `to_client` copies a handle's bytes to another client's device. Backends that talk to
//! each other directly (`ServerCommunication::SERVER_COMM_ENABLED`) send and receive on
//! their communication streams; the others go through the host: the source reads, the
//! destination creates. The destination handle is ordered on the destination client's
//! stream like any other upload.
//!
//! Collectives (`all_reduce`, `sync_collective`) need a backend that implements them; the
//! others answer `ServerError::Unsupported`, never panic, in both device-handle modes.

use super::ComputeClient;
use crate::copy::CopyDescriptor;
use crate::device::DeviceId;
use crate::elem::ElemType;
use crate::error::{IoError, ServerError};
use crate::handle::Handle;
use crate::layout::{MemoryLayoutDescriptor, MemoryLayoutPolicy};
use crate::runtime::Runtime;
use crate::server::{CommunicationId, ComputeServer, ReduceOperation, ServerCommunication};
use std::sync::PoisonError;

impl<R: Runtime> ComputeClient<R> {
    /// Copies `src` (a handle of this client's device) to `dst`'s device and returns the new
    /// handle there. `dtype` is the element type of the data (collective backends need it).
    ///
    /// # Errors
    /// The read error on this device, or the create error on `dst`'s.
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
    /// its buffer.
    pub fn to_client_tensor(
        &self,
        src_descriptor: CopyDescriptor,
        dst: &Self,
        dtype: ElemType,
    ) -> Result<Handle, ServerError> {
        src_descriptor.validate()?;
        if <R::Server as ServerCommunication>::SERVER_COMM_ENABLED {
            return self.to_client_direct(src_descriptor, dst, dtype);
        }
        let shape = src_descriptor.shape.clone();
        let elem_size = src_descriptor.elem_size;
        let bytes = self.read_one_tensor(src_descriptor)?;
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

    fn to_client_direct(
        &self,
        src_descriptor: CopyDescriptor,
        dst: &Self,
        dtype: ElemType,
    ) -> Result<Handle, ServerError> {
        let src_id = self.device_id();
        let dst_id = dst.device_id();
        let dense = src_descriptor.validate()?;
        let src_stream = self.stream_id();
        let dst_stream = dst.stream_id();
        let (base, _) = dst.utilities.layout_policy.apply(
            dst_stream,
            &[MemoryLayoutDescriptor::contiguous([dense], 1)],
        )?;
        let devices = vec![src_id, dst_id];
        self.ensure_init_collective(devices.clone())?;
        dst.ensure_init_collective(devices)?;
        let size = base.size();
        let received = base.clone();
        dst.device.submit(move |server| {
            server.initialize_memory(received, size, dst_stream);
        });
        self.call(move |server| server.send(src_descriptor, dtype, src_stream, dst_id))??;
        let target = base.clone();
        dst.call(move |server| {
            server.recv(target, dtype, dst_stream, src_id)?;
            server.sync_collective(dst_stream)
        })??;
        Ok(base)
    }

    /// Sets up communication among `device_ids` once per set of devices.
    ///
    /// # Errors
    /// The backend's error ([`ServerError::Unsupported`] where collectives don't exist).
    pub fn ensure_init_collective(&self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        let id = CommunicationId::from(device_ids.clone());
        let known = self
            .utilities
            .initialized_comms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id);
        if known {
            return Ok(());
        }
        self.call(move |server| server.comm_init(device_ids))??;
        self.utilities
            .initialized_comms
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
        Ok(())
    }

    /// Makes later work on this stream wait for queued collective work.
    ///
    /// # Errors
    /// The backend's error ([`ServerError::Unsupported`] where collectives don't exist).
    pub fn sync_collective(&self) -> Result<(), ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.sync_collective(stream))?
    }

    /// Reduces `src` across `device_ids` (this device among them) into `dst` with `op`.
    /// Every device of the set must make the same call.
    ///
    /// # Errors
    /// The backend's error ([`ServerError::Unsupported`] where collectives don't exist),
    /// or [`IoError::InvalidArgument`] if `src` and `dst` differ in size.
    pub fn all_reduce(
        &self,
        src: Handle,
        dst: Handle,
        dtype: ElemType,
        device_ids: Vec<DeviceId>,
        op: ReduceOperation,
    ) -> Result<(), ServerError> {
        if src.size() != dst.size() {
            return Err(IoError::invalid(format!(
                "all_reduce from {} bytes into {} bytes",
                src.size(),
                dst.size()
            ))
            .into());
        }
        self.ensure_init_collective(device_ids.clone())?;
        let stream = self.stream_id();
        let (src, dst) = (src.binding(), dst.binding());
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.all_reduce(src, dst, dtype, stream, op, device_ids)
        });
        Ok(())
    }
}
