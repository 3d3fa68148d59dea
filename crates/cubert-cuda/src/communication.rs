//! The CUDA server's [`ServerCommunication`]: peer copies (`peer`) and NCCL collectives
//! (`collective`), in one process and across processes.

use crate::peer::{DevicePeerReceipt, DevicePeerSource, peer_copy_supported};
use crate::server::CudaServer;
use cubert_runtime::copy::CopyDescriptor;
use cubert_runtime::distributed::ProcessGroup;
use cubert_runtime::server::{ReduceOperation, ServerCommunication, ServerUtilities};
use cubert_runtime::{Binding, DeviceId, ElemType, Handle, IoError, ServerError, StreamId};

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
    ) -> Result<Option<DevicePeerSource>, ServerError> {
        self.peer_source_of(descriptor, stream)
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
        self.peer_release_after(receipt, stream);
    }

    fn sync_collective(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.collective_sync(stream)
            .map_err(|error| self.shared.observe(error))
    }

    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        self.collective_init(device_ids)
    }

    fn comm_init_process_group(&mut self, group: ProcessGroup) -> Result<(), ServerError> {
        self.collective_join(group)
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
        self.collective_all_reduce(src, dst, dtype, stream, op, device_ids)
            .map_err(|error| self.shared.observe(error))
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
            .map_err(|error| self.shared.observe(error))
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
        .map_err(|error| self.shared.observe(error))
    }
}
