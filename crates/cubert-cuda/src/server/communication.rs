//! The CUDA server's [`ServerCommunication`]: peer copies (`peer`) and NCCL collectives
//! (`collective`), in one process and across processes.
//!
//! Each call checks the server's health, binds its context, resolves the memory it moves
//! and orders it on the stream (the server's core, hence a child module of `server`), then
//! hands the rest to `peer`'s steps or to the collectives part ([`CudaCollectives`]) with
//! what they need of the server.
//!
//! [`CudaCollectives`]: crate::collective::CudaCollectives

use super::CudaServer;
use crate::CudaDevice;
use crate::collective::Operands;
use crate::peer::{self, DevicePeerReceipt, DevicePeerSource, peer_copy_supported};
use cubert_runtime::copy::CopyDescriptor;
use cubert_runtime::distributed::ProcessGroup;
use cubert_runtime::server::{ReduceOperation, ServerCommunication, ServerUtilities};
use cubert_runtime::{Binding, Device, DeviceId, ElemType, Handle, IoError, ServerError, StreamId};
use cudarc::driver::sys::CUdeviceptr;

impl CudaServer {
    /// Step 1 of a peer copy, on the source: `None` for layouts other than dense or
    /// row-pitched.
    fn peer_source_of(
        &mut self,
        descriptor: CopyDescriptor,
        stream: StreamId,
        reader: DeviceId,
    ) -> Result<Option<DevicePeerSource>, ServerError> {
        self.enter()?;
        self.shared.take_errors(stream)?;
        self.refuse_if_capturing(stream)?;
        let Some(layout) = peer::source_layout(&descriptor)? else {
            return Ok(None);
        };
        self.drain_releases();
        self.use_on(descriptor.handle.id(), stream)?;
        let ptr = self.resolve(&descriptor.handle)?.ptr;
        // Page-mapped memory is granted per device. Ungranted, the driver stages the copy:
        // the same bytes at a tenth of the speed, so a refusal slows the copy, not fails it.
        let reader = CudaDevice::from_id(reader).index;
        if let Err(refusal) = self.memory.manager().storage().grant_reader(reader) {
            tracing::warn!(
                "GPU {reader} was not granted GPU {}'s mapped memory; peer copies from it \
                 are staged by the driver: {refusal}",
                self.context.ordinal()
            );
        }
        DevicePeerSource::record(
            &self.context,
            &mut self.streams,
            stream,
            ptr,
            layout,
            descriptor.handle,
        )
        .map(Some)
    }

    /// Step 2 of a peer copy, on the destination: the copy into `target` on `stream`.
    fn peer_pull_into(
        &mut self,
        source: DevicePeerSource,
        target: Binding,
        stream: StreamId,
    ) -> Result<DevicePeerReceipt, ServerError> {
        self.enter()?;
        // A failed allocation of the target is queued on the stream: report it here.
        self.shared.take_errors(stream)?;
        self.use_on(target.id(), stream)?;
        let dst = self.resolve(&target)?;
        peer::pull(source, &dst, &self.context, &mut self.streams, stream)
    }

    /// [`CudaServer::enter`] for a collective call, which may queue behind held ones.
    fn enter_collective(&mut self) -> Result<(), ServerError> {
        self.shared.health()?;
        self.context.bind()?;
        self.settle_held_collectives(true)
    }

    /// The device address of a whole binding, ordered on `stream`.
    fn collective_buffer(
        &mut self,
        binding: &Binding,
        stream: StreamId,
    ) -> Result<CUdeviceptr, ServerError> {
        self.use_on(binding.id(), stream)?;
        Ok(self.resolve(binding)?.ptr)
    }

    /// Resolves the buffers of `operands` on `stream` and queues the call with its peers'.
    fn collective_call(
        &mut self,
        mut operands: Operands,
        device_ids: Vec<DeviceId>,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        operands.resolve(|binding| self.collective_buffer(binding, stream))?;
        let (collectives, mut caller) = self.collective_parts();
        collectives.call(&mut caller, device_ids, stream, operands)
    }

    /// Makes `stream` wait for every collective call this server made, and returns the
    /// errors queued on it.
    ///
    /// # Errors
    /// A call of an inline handle still waiting for its peers, a collective's error, or the
    /// driver's.
    fn collective_sync(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        self.collectives.wait_all(&mut self.streams, stream)?;
        self.shared.take_errors(stream)
    }
}

impl ServerCommunication for CudaServer {
    const SERVER_COMM_ENABLED: bool = true;
    type PeerSource = DevicePeerSource;
    type PeerReceipt = DevicePeerReceipt;

    fn peer_copy_supported(src: &ServerUtilities<Self>, dst: &ServerUtilities<Self>) -> bool {
        peer_copy_supported(&src.info, &dst.info)
    }

    fn peer_source(
        &mut self,
        descriptor: CopyDescriptor,
        stream: StreamId,
        reader: DeviceId,
    ) -> Result<Option<DevicePeerSource>, ServerError> {
        self.peer_source_of(descriptor, stream, reader)
            .map_err(|error| self.shared.observe(error))
    }

    fn peer_pull(
        &mut self,
        source: DevicePeerSource,
        target: Binding,
        stream: StreamId,
    ) -> Result<DevicePeerReceipt, ServerError> {
        self.peer_pull_into(source, target, stream)
            .map_err(|error| self.shared.observe(error))
    }

    fn peer_release(&mut self, receipt: DevicePeerReceipt, stream: StreamId) {
        let waited = self
            .enter()
            .and_then(|()| peer::release(receipt, &mut self.streams, stream));
        if let Err(error) = waited {
            self.shared.push_error(stream, error);
        }
    }

    fn sync_collective(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.collective_sync(stream)
            .map_err(|error| self.shared.observe(error))
    }

    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        self.enter_collective()?;
        let (collectives, caller) = self.collective_parts();
        collectives.init(&caller, device_ids)
    }

    fn comm_init_process_group(&mut self, group: ProcessGroup) -> Result<(), ServerError> {
        self.enter()?;
        self.collectives.join(&self.context, group)
    }

    fn all_reduce(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        stream: StreamId,
        op: ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.collective(stream, device_ids, |_| {
            Operands::all_reduce(src, dst, dtype, op)
        })
    }

    fn all_gather(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        stream: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.collective(stream, device_ids, |device_ids| {
            Operands::all_gather(src, dst, dtype, device_ids)
        })
    }

    fn reduce_scatter(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        stream: StreamId,
        op: ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.collective(stream, device_ids, |device_ids| {
            Operands::reduce_scatter(src, dst, dtype, op, device_ids)
        })
    }

    fn broadcast(
        &mut self,
        buffer: Binding,
        dtype: ElemType,
        stream: StreamId,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.collective(stream, device_ids, |device_ids| {
            Operands::broadcast(buffer, dtype, root, device_ids)
        })
    }

    fn send(
        &mut self,
        desc: CopyDescriptor,
        dtype: ElemType,
        stream: StreamId,
        device_id_dst: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        desc.validate()?;
        if !desc.is_contiguous() {
            return Err(IoError::invalid("send needs a contiguous descriptor").into());
        }
        self.collective_point_to_point(desc.handle, dtype, stream, device_id_dst, device_ids, true)
    }

    fn recv(
        &mut self,
        handle: Handle,
        dtype: ElemType,
        stream: StreamId,
        device_id_src: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.collective_point_to_point(
            handle.binding(),
            dtype,
            stream,
            device_id_src,
            device_ids,
            false,
        )
    }
}

impl CudaServer {
    /// One collective call of this device on `stream`: the server is healthy and the
    /// stream not captured, `operands` builds (and checks) what the call moves, then it
    /// joins its peers'. Errors are observed (a dead device marks the server unhealthy).
    fn collective(
        &mut self,
        stream: StreamId,
        device_ids: Vec<DeviceId>,
        operands: impl FnOnce(&[DeviceId]) -> Result<Operands, ServerError>,
    ) -> Result<(), ServerError> {
        self.enter_collective()
            .and_then(|()| self.refuse_if_capturing(stream))
            .and_then(|()| operands(&device_ids))
            .and_then(|operands| self.collective_call(operands, device_ids, stream))
            .map_err(|error| self.shared.observe(error))
    }

    /// This device's send (`to_peer`, `sending`) or receive (`from_peer`) of `binding`.
    fn collective_point_to_point(
        &mut self,
        binding: Binding,
        dtype: ElemType,
        stream: StreamId,
        peer: DeviceId,
        device_ids: Vec<DeviceId>,
        sending: bool,
    ) -> Result<(), ServerError> {
        self.collective(stream, device_ids, |device_ids| {
            Operands::point_to_point(binding, dtype, peer, device_ids, sending)
        })
    }
}
