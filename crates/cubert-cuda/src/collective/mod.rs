//! Collectives on the CUDA backend: NCCL, in one process or across processes.
//!
//! - [`communicator`]: one set of NCCL communicators per device set, for the process
//!   (`ncclCommInitAll` for the GPUs of this process; rendezvous + `ncclCommInitRank` for a
//!   process group).
//! - [`launch`]: how a device's call is gated on its stream and how the last device to call
//!   launches everyone's NCCL work in one group.
//! - this file: a server's side — its collective stream, and per communicator its rank, its
//!   gate flag and the sequence number of its last call.
//!
//! **Design.** Every device of a set makes the same call on its own server. None of them
//! waits for the others on the host: a call records "inputs ready" on the caller's stream,
//! gates that stream on a flag, and queues itself in the set's group; the call that
//! completes an instance launches it for all (see [`launch`]). So it works the same from one
//! runner thread per device (threaded handles) and from a single thread making every
//! device's call in turn (inline handles), where waiting would deadlock. NCCL work runs on
//! each server's own collective stream; work queued before the call, or on other streams,
//! keeps running alongside, and work queued after it on the caller's stream (or using its
//! buffers anywhere, through the handles' cross-stream ordering) runs after it.
//!
//! In a process group each process has one rank: its calls launch at once (NCCL matches them
//! with the other processes'), through the same path.

pub mod communicator;
pub mod launch;

use crate::context::CudaContext;
use crate::driver::Context as _;
use crate::nccl;
use crate::server::CudaServer;
use communicator::Communicators;
use cubert_runtime::distributed::ProcessGroup;
use cubert_runtime::server::local_group::CallKind;
use cubert_runtime::server::{DeviceSet, ReduceOperation, check_collective_type};
use cubert_runtime::{Binding, Device, DeviceId, ElemType, IoError, ServerError, StreamId};
use cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use launch::{CudaCall, Gate, NcclLauncher};
use std::collections::HashMap;
use std::sync::Arc;

/// A server's membership in one communicator.
struct Slot {
    communicators: Arc<Communicators>,
    rank: usize,
    /// A `u32` in device memory: the sequence number of the last call done.
    flag: CUdeviceptr,
    /// The sequence number of the last call made.
    issued: u32,
}

/// A server's collective state. See the module docs.
#[derive(Default)]
pub struct CudaCollectives {
    stream: Option<CUstream>,
    slots: HashMap<u64, Slot>,
}

// SAFETY: the raw stream and device memory belong to the owning server's context and are
// only used by that server (and, for queued calls, by launches it outlives).
unsafe impl Send for CudaCollectives {}

/// What one call moves.
struct Transfer {
    kind: CallKind,
    send: CUdeviceptr,
    recv: CUdeviceptr,
    count: usize,
    dtype: ElemType,
    op: ReduceOperation,
}

impl CudaServer {
    /// A key unique among live servers: the address of the server's utilities.
    pub(crate) fn collective_owner(&self) -> usize {
        Arc::as_ptr(&self.utilities) as usize
    }

    fn collective_stream(&mut self) -> Result<CUstream, ServerError> {
        if let Some(stream) = self.collectives.stream {
            return Ok(stream);
        }
        let stream = cudarc::driver::result::stream::create(
            cudarc::driver::result::stream::StreamKind::NonBlocking,
        )
        .during("cuStreamCreate")?;
        self.collectives.stream = Some(stream);
        Ok(stream)
    }

    fn new_flag(&self) -> Result<CUdeviceptr, ServerError> {
        let mut flag: CUdeviceptr = 0;
        // SAFETY: valid out pointer; the context is current (callers went through `enter`).
        unsafe { sys::cuMemAlloc_v2(&mut flag, 4) }.during("cuMemAlloc")?;
        // SAFETY: `flag` holds 4 bytes just allocated.
        if let Err(failure) = unsafe { sys::cuMemsetD32_v2(flag, 0, 1) }.during("cuMemsetD32") {
            // SAFETY: allocated above, freed once.
            unsafe { sys::cuMemFree_v2(flag) };
            return Err(failure.into());
        }
        Ok(flag)
    }

    fn check_collective_ordinal(&self) -> Result<(), ServerError> {
        let ordinal = self.context.ordinal();
        if ordinal != self.device.index {
            return Err(ServerError::generic(format!(
                "collectives run device i on GPU i, but this server of {:?} runs on GPU \
                 {ordinal}",
                self.device.to_id()
            )));
        }
        Ok(())
    }

    /// The slot of `device_ids`, joining its communicators on first use.
    fn slot(
        &mut self,
        device_ids: Vec<DeviceId>,
        operation: &str,
    ) -> Result<&mut Slot, ServerError> {
        let set = DeviceSet::new(device_ids);
        let key = set.id().id;
        if !self.collectives.slots.contains_key(&key) {
            if set.is_process_group() {
                return Err(ServerError::generic(format!(
                    "{operation}: this device hasn't joined the process group of {} ranks; \
                     call init_process_group first",
                    set.len()
                )));
            }
            let rank = set.require_rank(self.device.to_id(), operation)?;
            self.check_collective_ordinal()?;
            let communicators = communicator::local(&set)?;
            self.context.bind()?;
            let flag = self.new_flag()?;
            self.collectives.slots.insert(
                key,
                Slot {
                    communicators,
                    rank,
                    flag,
                    issued: 0,
                },
            );
        }
        self.collectives
            .slots
            .get_mut(&key)
            .ok_or_else(|| ServerError::generic("a collective slot vanished"))
    }

    /// Creates (once) the communicators of `device_ids` and this device's place there.
    pub(crate) fn collective_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        self.enter()?;
        self.slot(device_ids, "comm_init").map(|_| ())
    }

    /// Joins `group` as its rank `group.rank()`.
    pub(crate) fn collective_join(&mut self, group: ProcessGroup) -> Result<(), ServerError> {
        self.enter()?;
        let key = DeviceSet::new(group.members()).id().id;
        if self.collectives.slots.contains_key(&key) {
            return Ok(());
        }
        let communicators = communicator::process(&group)?;
        self.context.bind()?;
        let flag = self.new_flag()?;
        self.collectives.slots.insert(
            key,
            Slot {
                communicators,
                rank: group.rank() as usize,
                flag,
                issued: 0,
            },
        );
        Ok(())
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

    /// Prepares this device's call and queues it with its peers'. See the module docs.
    fn collective_call(
        &mut self,
        device_ids: Vec<DeviceId>,
        stream: StreamId,
        transfer: Transfer,
        operation: &str,
    ) -> Result<(), ServerError> {
        let dtype = nccl::data_type(transfer.dtype)?;
        let op = nccl::reduce_op(transfer.op);
        let collective_stream = self.collective_stream()?;
        let owner = self.collective_owner();
        let caller = self.streams.raw(stream)?;
        let ready = self.streams.record(stream)?;
        let context: Arc<CudaContext> = self.context.clone();
        let events = self.streams.events().clone();
        let shared = self.shared.clone();
        let slot = match self.slot(device_ids, operation) {
            Ok(slot) => slot,
            Err(error) => {
                events.give_back(ready);
                return Err(error);
            }
        };
        let rank = slot.rank;
        let Some(comm) = slot.communicators.comm(rank) else {
            events.give_back(ready);
            return Err(ServerError::generic("this rank has no communicator here"));
        };
        if let CallKind::Send { peer, .. } | CallKind::Recv { peer, .. } = transfer.kind
            && (peer == rank || peer >= slot.communicators.ranks())
        {
            events.give_back(ready);
            return Err(IoError::invalid(format!(
                "{operation}: rank {rank} can't exchange with rank {peer}"
            ))
            .into());
        }
        let value = slot.issued.wrapping_add(1);
        let gate = Gate {
            flag: slot.flag,
            value,
        };
        let group = slot.communicators.group.clone();
        // The gate: later work on the caller's stream waits until the call is done.
        // SAFETY: live stream of this context; the flag is device memory of this context.
        let gated = unsafe {
            sys::cuStreamWaitValue32_v2(
                caller,
                gate.flag,
                gate.value,
                sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
            )
        }
        .during("cuStreamWaitValue32");
        if let Err(failure) = gated {
            events.give_back(ready);
            return Err(failure.into());
        }
        slot.issued = value;
        self.streams.bump(stream);
        let call = CudaCall {
            context,
            stream: collective_stream,
            comm,
            ready: Some(ready),
            events,
            send: transfer.send,
            recv: transfer.recv,
            count: transfer.count,
            dtype,
            op,
            gate,
            shared,
            caller: stream,
        };
        let arrived = group.arrive(rank, owner, transfer.kind, call, false, &mut NcclLauncher);
        // NCCL and the launcher bound other devices' contexts on this thread.
        self.context.bind()?;
        arrived.map(|_| ())
    }

    /// This device's part of an all-reduce.
    pub(crate) fn collective_all_reduce(
        &mut self,
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        stream: StreamId,
        op: ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.enter()?;
        self.refuse_if_capturing(stream)?;
        check_collective_type(dtype, "all_reduce", "cuda")?;
        if src.size() != dst.size() || !src.size().is_multiple_of(dtype.size() as u64) {
            return Err(IoError::invalid(format!(
                "all_reduce from {} bytes into {} bytes of {dtype}",
                src.size(),
                dst.size()
            ))
            .into());
        }
        let send = self.collective_buffer(&src, stream)?;
        let recv = self.collective_buffer(&dst, stream)?;
        let transfer = Transfer {
            kind: CallKind::AllReduce {
                bytes: src.size(),
                dtype,
                op,
            },
            send,
            recv,
            count: (src.size() / dtype.size() as u64) as usize,
            dtype,
            op,
        };
        self.collective_call(device_ids, stream, transfer, "all_reduce")
    }

    /// This device's send (`to_peer`) or receive (`from_peer`) of `binding`.
    pub(crate) fn collective_point_to_point(
        &mut self,
        binding: Binding,
        dtype: ElemType,
        stream: StreamId,
        peer: DeviceId,
        device_ids: Vec<DeviceId>,
        sending: bool,
    ) -> Result<(), ServerError> {
        let operation = if sending { "send" } else { "recv" };
        self.enter()?;
        self.refuse_if_capturing(stream)?;
        check_collective_type(dtype, operation, "cuda")?;
        let peer = DeviceSet::new(device_ids.clone()).require_rank(peer, operation)?;
        let bytes = binding.size();
        let buffer = self.collective_buffer(&binding, stream)?;
        let kind = if sending {
            CallKind::Send { peer, bytes }
        } else {
            CallKind::Recv { peer, bytes }
        };
        let transfer = Transfer {
            kind,
            send: buffer,
            recv: buffer,
            count: (bytes / dtype.size() as u64) as usize,
            dtype,
            op: ReduceOperation::Sum,
        };
        self.collective_call(device_ids, stream, transfer, operation)
    }

    /// Makes `stream` wait for every collective call this server made, and returns the
    /// errors queued on it.
    pub(crate) fn collective_sync(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        let raw = self.streams.raw(stream)?;
        for slot in self.collectives.slots.values() {
            if slot.issued == 0 {
                continue;
            }
            // SAFETY: live stream and flag of this context.
            unsafe {
                sys::cuStreamWaitValue32_v2(
                    raw,
                    slot.flag,
                    slot.issued,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                )
            }
            .during("cuStreamWaitValue32")?;
        }
        self.streams.bump(stream);
        self.shared.take_errors(stream)
    }

    /// Whether a call of this server still waits for its peers (its gate is closed).
    pub(crate) fn collective_pending(&self) -> bool {
        self.collectives
            .slots
            .values()
            .any(|slot| slot.communicators.group.pending(slot.rank) > 0)
    }

    /// Abandons the calls still waiting for their peers (opening their gates), waits for
    /// the collective stream, and frees the flags. For the server's drop.
    pub(crate) fn collective_shutdown(&mut self) {
        let owner = self.collective_owner();
        for slot in self.collectives.slots.values() {
            slot.communicators
                .group
                .abandon_owner(owner, &mut NcclLauncher);
        }
        if self.context.bind().is_err() {
            return;
        }
        if let Some(stream) = self.collectives.stream.take() {
            // SAFETY: the collective stream of this server, synchronized then destroyed
            // once; no queued call refers to it any more (abandoned above).
            unsafe {
                sys::cuStreamSynchronize(stream);
                sys::cuStreamDestroy_v2(stream);
            }
        }
    }

    /// Frees the gate flags (after every stream of the server is idle).
    pub(crate) fn collective_free_flags(&mut self) {
        for (_, slot) in self.collectives.slots.drain() {
            // SAFETY: allocated by `new_flag`, freed once, after the streams that wait on
            // it or write it were synchronized.
            unsafe { sys::cuMemFree_v2(slot.flag) };
        }
    }
}
