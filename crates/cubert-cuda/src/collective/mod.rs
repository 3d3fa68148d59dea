//! Collectives on the CUDA backend: NCCL, in one process or across processes.
//!
//! - [`communicator`]: one set of NCCL communicators per device set, for the process
//!   (`ncclCommInitAll` for the GPUs of this process; rendezvous + `ncclCommInitRank` for a
//!   process group).
//! - [`launch`]: how a complete instance is launched: by each runner thread for its own
//!   device, or by the last device to call for everyone in one NCCL group.
//! - this file: a server's side — its collective stream, per communicator its rank and the
//!   done event of its last call, and the calls still waiting for their peers
//!   ([`CudaCollectives`], the server's part). The server checks its health, binds its
//!   context and resolves the buffers (ordered on the caller's stream) itself, then lends
//!   the part what a call needs of it ([`Caller`]: context, device, streams, error state).
//!
//! **Design.** Every device of a set makes the same call on its own server. A call records
//! "inputs ready" on the caller's stream and queues itself in the set's group; the call that
//! completes an instance launches it for all on their collective streams, each followed by a
//! *done* event (see [`launch`]). The caller's stream then waits for its done event, so work
//! queued after the collective (or using its buffers on any stream, through the handles'
//! cross-stream ordering) runs after it, while work queued before it, or on other streams,
//! keeps running. Only events order the streams: the device never waits for the host.
//!
//! Until the peers have called there is no done event to wait for, and the caller's stream
//! must not run later work. So:
//! - on a runner thread (threaded handles) the call waits on the host for the peers' calls
//!   (made from their own runner threads; `CUBERT_COLLECTIVE_TIMEOUT` bounds the wait), not
//!   for the device;
//! - with an inline handle (or inside `exclusive`/`profile`, where the device's work runs
//!   on the caller's thread) that thread may be the one that must make the peers' calls, so
//!   the call returns at once and is *held*. Further collective calls queue behind it (the
//!   collective stream keeps their order). Any other operation first settles it (its stream
//!   waits for the done event); if the peers still haven't called after [`HELD_GRACE`]
//!   (time for calls already submitted to their runner threads to arrive) the operation is
//!   refused with an error — make every device's call of a collective before anything else
//!   on those devices.
//!
//! In a process group each process has one rank: its calls launch at once (NCCL matches them
//! with the other processes'), through the same path.

pub mod communicator;
pub mod launch;

use crate::completion::Shared;
use crate::context::CudaContext;
use crate::device::CudaDevice;
use crate::driver;
use crate::nccl;
use crate::streams::{EventPool, Streams};
use communicator::Communicators;
use cubert_runtime::distributed::{ProcessGroup, collective_timeout};
use cubert_runtime::server::local_group::{CallKind, Finished, LocalGroup, Ticket};
use cubert_runtime::server::{
    DeviceSet, ReduceOperation, check_collective_type, check_in_place_or_disjoint, check_part_sizes,
};
use cubert_runtime::thread_role::on_runner_thread;
use cubert_runtime::{Binding, Device, DeviceId, ElemType, IoError, ServerError, StreamId};
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUstream};
use launch::{CudaCall, NcclLauncher};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::time::Duration;

/// How long an operation of an inline handle waits for the peers of a held collective call
/// before it is refused: long enough for calls already submitted to other devices' runner
/// threads to arrive, short enough that a thread that must make those calls itself learns
/// it at once.
pub const HELD_GRACE: Duration = Duration::from_secs(2);

/// A server's membership in one communicator.
struct Slot {
    communicators: Arc<Communicators>,
    rank: usize,
    /// The done event of the last call settled (for `sync_collective` on other streams).
    last_done: Option<CUevent>,
}

/// An inline handle's call still waiting for its peers.
struct Held {
    stream: StreamId,
    key: u64,
    group: Arc<LocalGroup<CudaCall>>,
    ticket: Ticket,
}

/// A server's collective state. See the module docs.
#[derive(Default)]
pub struct CudaCollectives {
    stream: Option<CUstream>,
    slots: HashMap<u64, Slot>,
    held: Vec<Held>,
}

// SAFETY: the raw stream and events belong to the owning server's context and are only used
// by that server (and, for queued calls, by launches it outlives).
unsafe impl Send for CudaCollectives {}

/// What a collective call uses of the server making it, lent by the server for the call.
pub(crate) struct Caller<'a> {
    /// The server's context.
    pub(crate) context: &'a Arc<CudaContext>,
    /// The device the server presents itself as.
    pub(crate) device: CudaDevice,
    /// The server's streams.
    pub(crate) streams: &'a mut Streams,
    /// Where the errors of the server's streams wait.
    pub(crate) shared: &'a Shared,
    /// A key unique among live servers (the address of the server's utilities).
    pub(crate) owner: usize,
}

impl Caller<'_> {
    fn check_ordinal(&self) -> Result<(), ServerError> {
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
}

/// What one call moves: built (and checked) from the caller's arguments, then given the
/// device addresses of its buffers ([`Operands::resolve`]).
pub(crate) struct Operands {
    operation: &'static str,
    kind: CallKind,
    send: CUdeviceptr,
    recv: CUdeviceptr,
    count: usize,
    dtype: ElemType,
    op: ReduceOperation,
    buffers: Vec<Binding>,
}

impl Operands {
    /// An all-reduce of `src` into `dst`.
    ///
    /// # Errors
    /// A type NCCL can't reduce, or buffers of different sizes (or not whole elements).
    pub(crate) fn all_reduce(
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        op: ReduceOperation,
    ) -> Result<Self, ServerError> {
        check_collective_type(dtype, "all_reduce", "cuda")?;
        if src.size() != dst.size() || !src.size().is_multiple_of(dtype.size() as u64) {
            return Err(IoError::invalid(format!(
                "all_reduce from {} bytes into {} bytes of {dtype}",
                src.size(),
                dst.size()
            ))
            .into());
        }
        Ok(Self {
            operation: "all_reduce",
            kind: CallKind::AllReduce {
                bytes: src.size(),
                dtype,
                op,
            },
            send: 0,
            recv: 0,
            count: (src.size() / dtype.size() as u64) as usize,
            dtype,
            op,
            buffers: vec![src, dst],
        })
    }

    /// An all-gather of `src` into `dst` among `device_ids` (`dst` holds `src` × ranks).
    ///
    /// # Errors
    /// A type NCCL can't move, or buffers whose sizes don't fit.
    pub(crate) fn all_gather(
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        device_ids: &[DeviceId],
    ) -> Result<Self, ServerError> {
        check_collective_type(dtype, "all_gather", "cuda")?;
        let bytes = src.size();
        check_part_sizes("all_gather", bytes, dst.size(), dtype, device_ids)?;
        Ok(Self {
            operation: "all_gather",
            kind: CallKind::AllGather { bytes, dtype },
            send: 0,
            recv: 0,
            count: (bytes / dtype.size() as u64) as usize,
            dtype,
            op: ReduceOperation::Sum,
            buffers: vec![src, dst],
        })
    }

    /// A reduce-scatter of `src` into `dst` among `device_ids` (`src` holds `dst` × ranks).
    ///
    /// # Errors
    /// A type NCCL can't reduce, or buffers whose sizes don't fit.
    pub(crate) fn reduce_scatter(
        src: Binding,
        dst: Binding,
        dtype: ElemType,
        op: ReduceOperation,
        device_ids: &[DeviceId],
    ) -> Result<Self, ServerError> {
        check_collective_type(dtype, "reduce_scatter", "cuda")?;
        let bytes = dst.size();
        check_part_sizes("reduce_scatter", bytes, src.size(), dtype, device_ids)?;
        Ok(Self {
            operation: "reduce_scatter",
            kind: CallKind::ReduceScatter { bytes, dtype, op },
            send: 0,
            recv: 0,
            count: (bytes / dtype.size() as u64) as usize,
            dtype,
            op,
            buffers: vec![src, dst],
        })
    }

    /// A broadcast of `buffer` from `root` among `device_ids`, in place.
    ///
    /// # Errors
    /// A type NCCL can't move, a root outside the set, or a size that isn't whole elements.
    pub(crate) fn broadcast(
        buffer: Binding,
        dtype: ElemType,
        root: DeviceId,
        device_ids: &[DeviceId],
    ) -> Result<Self, ServerError> {
        check_collective_type(dtype, "broadcast", "cuda")?;
        let root = DeviceSet::new(device_ids.to_vec()).require_rank(root, "broadcast")?;
        let bytes = buffer.size();
        if !bytes.is_multiple_of(dtype.size() as u64) {
            return Err(IoError::invalid(format!(
                "broadcast of {bytes} bytes: not a whole number of {dtype} elements"
            ))
            .into());
        }
        Ok(Self {
            operation: "broadcast",
            kind: CallKind::Broadcast { bytes, dtype, root },
            send: 0,
            recv: 0,
            count: (bytes / dtype.size() as u64) as usize,
            dtype,
            op: ReduceOperation::Sum,
            buffers: vec![buffer],
        })
    }

    /// Checks that the buffers are separate or exactly in place for the caller's `rank`
    /// (NCCL leaves other overlaps undefined).
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] for overlapping buffers.
    fn check_overlap(&self, rank: usize) -> Result<(), ServerError> {
        let [src, dst] = self.buffers.as_slice() else {
            return Ok(());
        };
        match self.kind {
            CallKind::AllReduce { .. } => check_in_place_or_disjoint(self.operation, src, dst, 0),
            CallKind::AllGather { bytes, .. } => {
                check_in_place_or_disjoint(self.operation, src, dst, rank as u64 * bytes)
            }
            CallKind::ReduceScatter { bytes, .. } => {
                check_in_place_or_disjoint(self.operation, dst, src, rank as u64 * bytes)
            }
            _ => Ok(()),
        }
    }

    /// A send of `binding` to `peer` (`sending`), or a receive into it from `peer`, among
    /// `device_ids`.
    ///
    /// # Errors
    /// A type NCCL can't move, or a peer outside the set.
    pub(crate) fn point_to_point(
        binding: Binding,
        dtype: ElemType,
        peer: DeviceId,
        device_ids: &[DeviceId],
        sending: bool,
    ) -> Result<Self, ServerError> {
        let operation = if sending { "send" } else { "recv" };
        check_collective_type(dtype, operation, "cuda")?;
        let peer = DeviceSet::new(device_ids.to_vec()).require_rank(peer, operation)?;
        let bytes = binding.size();
        let kind = if sending {
            CallKind::Send { peer, bytes }
        } else {
            CallKind::Recv { peer, bytes }
        };
        Ok(Self {
            operation,
            kind,
            send: 0,
            recv: 0,
            count: (bytes / dtype.size() as u64) as usize,
            dtype,
            op: ReduceOperation::Sum,
            buffers: vec![binding],
        })
    }

    /// Sets the device addresses of the buffers, in order, as `address` gives them (the
    /// whole binding, ordered on the caller's stream).
    ///
    /// # Errors
    /// `address`'s error.
    pub(crate) fn resolve(
        &mut self,
        mut address: impl FnMut(&Binding) -> Result<CUdeviceptr, ServerError>,
    ) -> Result<(), ServerError> {
        match self.buffers.as_slice() {
            [src, dst] => {
                self.send = address(src)?;
                self.recv = address(dst)?;
            }
            [buffer] => {
                self.send = address(buffer)?;
                self.recv = self.send;
            }
            _ => return Err(ServerError::generic("a collective call without buffers")),
        }
        Ok(())
    }
}

impl CudaCollectives {
    fn stream(&mut self) -> Result<CUstream, ServerError> {
        if let Some(stream) = self.stream {
            return Ok(stream);
        }
        let stream = driver::stream::create_non_blocking()?;
        self.stream = Some(stream);
        Ok(stream)
    }

    /// The slot of `device_ids`, joining its communicators on first use.
    fn slot(
        &mut self,
        caller: &Caller<'_>,
        device_ids: Vec<DeviceId>,
        operation: &str,
    ) -> Result<&mut Slot, ServerError> {
        let set = DeviceSet::new(device_ids);
        let vacant = match self.slots.entry(set.id().id) {
            Entry::Occupied(slot) => return Ok(slot.into_mut()),
            Entry::Vacant(vacant) => vacant,
        };
        if set.is_process_group() {
            return Err(ServerError::generic(format!(
                "{operation}: this device hasn't joined the process group of {} ranks; \
                 call init_process_group first",
                set.len()
            )));
        }
        let rank = set.require_rank(caller.device.to_id(), operation)?;
        caller.check_ordinal()?;
        let communicators = communicator::local(&set)?;
        caller.context.bind()?;
        Ok(vacant.insert(Slot {
            communicators,
            rank,
            last_done: None,
        }))
    }

    /// Creates (once) the communicators of `device_ids` and the caller's place there.
    pub(crate) fn init(
        &mut self,
        caller: &Caller<'_>,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.slot(caller, device_ids, "comm_init").map(|_| ())
    }

    /// Joins `group` as its rank `group.rank()` (`context` is the server's).
    pub(crate) fn join(
        &mut self,
        context: &CudaContext,
        group: ProcessGroup,
    ) -> Result<(), ServerError> {
        let key = DeviceSet::new(group.members()).id().id;
        if self.slots.contains_key(&key) {
            return Ok(());
        }
        let communicators = communicator::process(&group)?;
        context.bind()?;
        self.slots.insert(
            key,
            Slot {
                communicators,
                rank: group.rank() as usize,
                last_done: None,
            },
        );
        Ok(())
    }

    /// Prepares the caller's call (its buffers resolved) and queues it with its peers'.
    /// See the module docs.
    pub(crate) fn call(
        &mut self,
        caller: &mut Caller<'_>,
        device_ids: Vec<DeviceId>,
        stream: StreamId,
        operands: Operands,
    ) -> Result<(), ServerError> {
        let operation = operands.operation;
        let dtype = nccl::data_type(operands.dtype)?;
        let op = nccl::reduce_op(operands.op);
        let collective_stream = self.stream()?;
        let owner = caller.owner;
        let key = DeviceSet::new(device_ids.clone()).id().id;
        let (rank, comm, group, ranks) = {
            let slot = self.slot(caller, device_ids, operation)?;
            let comm = slot
                .communicators
                .comm(slot.rank)
                .ok_or_else(|| ServerError::generic("this rank has no communicator here"))?;
            (
                slot.rank,
                comm,
                slot.communicators.group.clone(),
                slot.communicators.ranks(),
            )
        };
        if let CallKind::Send { peer, .. } | CallKind::Recv { peer, .. } = operands.kind
            && (peer == rank || peer >= ranks)
        {
            return Err(IoError::invalid(format!(
                "{operation}: rank {rank} can't exchange with rank {peer}"
            ))
            .into());
        }
        operands.check_overlap(rank)?;
        let ready = caller.streams.record(stream)?;
        let call = CudaCall {
            context: caller.context.clone(),
            stream: collective_stream,
            comm,
            ready: Some(ready),
            done: None,
            events: caller.streams.events().clone(),
            send: operands.send,
            recv: operands.recv,
            count: operands.count,
            dtype,
            op,
            by_owner: on_runner_thread(),
            awaiting_owner: false,
            buffers: operands.buffers,
        };
        let arrived = group.arrive(rank, owner, operands.kind, call, true, &mut NcclLauncher);
        let ticket = match arrived {
            Ok(ticket) => ticket,
            Err(error) => {
                caller.context.bind()?;
                return Err(error);
            }
        };
        // A complete instance may be waiting for this thread to launch this device's part
        // (the peers' kernels already wait for it on their devices): settle before anything
        // else can return early.
        if let Some(finished) = group.take(ticket) {
            return self.settle_call(caller, stream, key, finished);
        }
        if on_runner_thread() {
            return match group.wait(ticket, collective_timeout(), &mut NcclLauncher) {
                Ok(finished) => self.settle_call(caller, stream, key, finished),
                Err(error) => {
                    caller.context.bind()?;
                    caller.shared.push_error(stream, error);
                    Ok(())
                }
            };
        }
        // NCCL and the launcher bound other devices' contexts on this thread.
        caller.context.bind()?;
        self.held.push(Held {
            stream,
            key,
            group,
            ticket,
        });
        Ok(())
    }

    /// Launches a call the launcher left to this server, then orders `stream` after it (its
    /// done event) and keeps that event as the slot's last; a call that failed or was
    /// abandoned queues its error on `stream`.
    fn settle_call(
        &mut self,
        caller: &mut Caller<'_>,
        stream: StreamId,
        key: u64,
        mut finished: Finished<CudaCall>,
    ) -> Result<(), ServerError> {
        if finished.payload.awaiting_owner {
            let launched = finished.payload.launch_alone(finished.kind);
            finished.result = finished.result.and(launched);
        }
        // NCCL and the launcher may have bound other devices' contexts on this thread.
        caller.context.bind()?;
        if let Err(error) = finished.result {
            caller.shared.push_error(stream, error);
        }
        let Some(done) = finished.payload.done.take() else {
            return Ok(());
        };
        let events = finished.payload.events.clone();
        let raw = match caller.streams.raw(stream) {
            Ok(raw) => raw,
            Err(failure) => {
                events.give_back(done);
                return Err(failure.into());
            }
        };
        // SAFETY: live stream and event of this context; the wait is captured now.
        let waited = unsafe { driver::stream::wait_event(raw, done) };
        caller.streams.bump(stream);
        match self.slots.get_mut(&key) {
            Some(slot) => {
                if let Some(old) = slot.last_done.replace(done) {
                    events.give_back(old);
                }
            }
            None => events.give_back(done),
        }
        // Dropping the payload now releases its bindings after the wait above.
        drop(finished.payload);
        waited.map_err(Into::into)
    }

    /// Settles the held calls of an inline handle whose peers have called since.
    ///
    /// Before a collective call (`queue_behind`), calls still waiting stay held: the new
    /// call queues behind them in the group, and the collective stream keeps their order.
    /// Before anything else, each waits up to [`HELD_GRACE`] for its peers' calls (already
    /// submitted to their runner threads, say) and is otherwise refused.
    ///
    /// # Errors
    /// A held call whose peers still haven't called (nothing else may run on this device
    /// before it: see the module docs), or the driver's error.
    pub(crate) fn settle_held(
        &mut self,
        caller: &mut Caller<'_>,
        queue_behind: bool,
    ) -> Result<(), ServerError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let mut first = Ok(());
        let mut still = Vec::new();
        for held in std::mem::take(&mut self.held) {
            let finished = match held.group.take(held.ticket) {
                Some(finished) => Some(finished),
                None if queue_behind => None,
                None => held.group.wait_taking(held.ticket, HELD_GRACE),
            };
            match finished {
                Some(finished) => {
                    let settled = self.settle_call(caller, held.stream, held.key, finished);
                    if first.is_ok() {
                        first = settled;
                    }
                }
                None => still.push(held),
            }
        }
        let waiting = still.len();
        self.held = still;
        first?;
        if waiting > 0 && !queue_behind {
            return Err(ServerError::generic(format!(
                "{:?} has {waiting} collective call(s) still waiting for the other devices' \
                 matching calls: with an inline device handle make every device's call of a \
                 collective before anything else on these devices",
                caller.device.to_id()
            )));
        }
        Ok(())
    }

    /// Makes `stream` wait for every collective call this server made (the context is
    /// bound).
    ///
    /// # Errors
    /// The driver's error.
    pub(crate) fn wait_all(
        &self,
        streams: &mut Streams,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let raw = streams.raw(stream)?;
        for slot in self.slots.values() {
            let Some(done) = slot.last_done else {
                continue;
            };
            // SAFETY: live stream and event of this context.
            unsafe { driver::stream::wait_event(raw, done) }?;
        }
        streams.bump(stream);
        Ok(())
    }

    /// Abandons the calls still waiting for their peers (those of server `owner`, whose
    /// context is `context`) and waits for the collective stream. For the server's drop.
    pub(crate) fn shutdown(&mut self, owner: usize, context: &CudaContext) {
        self.held.clear();
        for slot in self.slots.values() {
            slot.communicators
                .group
                .abandon_owner(owner, &mut NcclLauncher);
        }
        if context.bind().is_err() {
            return;
        }
        if let Some(stream) = self.stream.take() {
            // SAFETY: the collective stream of this server, synchronized then destroyed
            // once; no queued call refers to it any more (abandoned above).
            unsafe {
                let _ = driver::stream::synchronize(stream);
                let _ = driver::stream::destroy(stream);
            }
        }
    }

    /// Gives the slots' last done events back to `events` (after every stream of the server
    /// is idle).
    pub(crate) fn release_events(&mut self, events: &EventPool) {
        for (_, slot) in self.slots.drain() {
            if let Some(done) = slot.last_done {
                events.give_back(done);
            }
        }
    }
}
