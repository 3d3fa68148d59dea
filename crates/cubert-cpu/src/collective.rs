//! Collectives among the virtual CPU devices of one process.
//!
//! The calls of the devices meet in the runtime's `local_group` (one group per set of
//! devices). No server ever touches another server's memory during a collective: each
//! device copies its input into its call when it arrives, the last device to arrive
//! computes the results into buffers owned by the calls, and each device writes its own
//! result into its own memory:
//!
//! - on a runner thread (threaded device handle) an early device waits for its peers inside
//!   its task, so later work on the device sees the result without anything else to do;
//! - with an inline handle the caller's thread may be the one that must make the next
//!   device's call, so an early device doesn't wait: its result lands at its next
//!   `sync_collective` (or next collective call), which reports calls still missing their
//!   peers instead of waiting for them.
//!
//! The arithmetic is in `reduction`. Process groups (several processes) are NCCL's
//! business: the CPU backend refuses them.
//!
//! The functions take any server whose memory is host memory (the CPU server, the only
//! one), so that this module doesn't use `server`: the server calls in, and forgets its
//! groups with [`leave_all`] when it drops.

use crate::reduction::reduce_in_place;
use crate::storage::HostStorage;
use cubert_runtime::copy::CopyDescriptor;
use cubert_runtime::distributed::collective_timeout;
use cubert_runtime::server::ComputeServer;
use cubert_runtime::server::local_group::{
    Call, CallKind, Finished, Launcher, LocalGroup, local_group,
};
use cubert_runtime::server::{
    DeviceSet, ReduceOperation, check_collective_type, check_in_place_or_disjoint, check_part_sizes,
};
use cubert_runtime::thread_role::on_runner_thread;
use cubert_runtime::{Binding, DeviceId, ElemType, IoError, ServerError, StreamId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// What one device's call carries.
pub struct CpuCall {
    /// The device's input (all-reduce, all-gather, reduce-scatter, the root's broadcast,
    /// send), copied when it arrived.
    input: Vec<u8>,
    /// Where the device's result goes (all-reduce, all-gather, reduce-scatter, broadcast
    /// except at the root, recv).
    target: Option<Binding>,
    /// The result the launch left for the device.
    output: Option<Arc<Vec<u8>>>,
}

/// Computes results on the host.
struct HostLauncher;

impl Launcher<CpuCall> for HostLauncher {
    fn launch(&mut self, calls: &mut [Call<CpuCall>]) -> Result<(), ServerError> {
        let Some(first) = calls.first() else {
            return Ok(());
        };
        match first.kind {
            CallKind::AllReduce { dtype, op, .. } => {
                let Some((first, rest)) = calls.split_first_mut() else {
                    return Ok(());
                };
                let mut acc = std::mem::take(&mut first.payload.input);
                let others: Vec<&[u8]> = rest.iter().map(|c| c.payload.input.as_slice()).collect();
                reduce_in_place(&mut acc, &others, dtype, op)?;
                let output = Arc::new(acc);
                for call in calls.iter_mut() {
                    call.payload.input = Vec::new();
                    call.payload.output = Some(output.clone());
                }
            }
            CallKind::AllGather { .. } => {
                let mut gathered = Vec::new();
                for call in calls.iter_mut() {
                    gathered.append(&mut call.payload.input);
                }
                let output = Arc::new(gathered);
                for call in calls.iter_mut() {
                    call.payload.output = Some(output.clone());
                }
            }
            CallKind::ReduceScatter { bytes, dtype, op } => {
                let Some((first, rest)) = calls.split_first_mut() else {
                    return Ok(());
                };
                let mut acc = std::mem::take(&mut first.payload.input);
                let others: Vec<&[u8]> = rest.iter().map(|c| c.payload.input.as_slice()).collect();
                reduce_in_place(&mut acc, &others, dtype, op)?;
                let part = usize::try_from(bytes).unwrap_or(usize::MAX);
                for call in calls.iter_mut() {
                    let start = call.rank.saturating_mul(part).min(acc.len());
                    let end = start.saturating_add(part).min(acc.len());
                    call.payload.input = Vec::new();
                    call.payload.output = Some(Arc::new(acc[start..end].to_vec()));
                }
            }
            CallKind::Broadcast { root, .. } => {
                let sent = calls
                    .iter_mut()
                    .find(|c| c.rank == root)
                    .map(|c| Arc::new(std::mem::take(&mut c.payload.input)));
                for call in calls.iter_mut().filter(|c| c.rank != root) {
                    call.payload.output = sent.clone();
                }
            }
            CallKind::Send { .. } | CallKind::Recv { .. } => {
                let sent = calls
                    .iter_mut()
                    .find(|c| matches!(c.kind, CallKind::Send { .. }))
                    .map(|c| Arc::new(std::mem::take(&mut c.payload.input)));
                for call in calls.iter_mut() {
                    if matches!(call.kind, CallKind::Recv { .. }) {
                        call.payload.output = sent.clone();
                    }
                }
            }
        }
        Ok(())
    }

    fn abandon(&mut self, _calls: &mut [Call<CpuCall>], error: &ServerError) {
        tracing::warn!("CPU collective abandoned: {error}");
    }
}

/// A group a server joined, with its rank there.
type Joined = (Arc<LocalGroup<CpuCall>>, usize);

/// The groups each server (by owner key) has joined, so `sync_collective` finds its results.
fn joined() -> &'static Mutex<HashMap<usize, Vec<Joined>>> {
    static JOINED: OnceLock<Mutex<HashMap<usize, Vec<Joined>>>> = OnceLock::new();
    JOINED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// One server's side of the collectives: its device, its key, and its memory.
struct Member<'a, S> {
    server: &'a mut S,
    device: DeviceId,
    owner: usize,
}

/// A key unique among live servers: the address of the server's utilities.
fn owner_of<S: ComputeServer>(server: &S) -> usize {
    Arc::as_ptr(&server.utilities()) as usize
}

impl<'a, S: ComputeServer<Storage = HostStorage>> Member<'a, S> {
    fn of(server: &'a mut S) -> Self {
        let utilities = server.utilities();
        Self {
            device: utilities.device_id,
            owner: Arc::as_ptr(&utilities) as usize,
            server,
        }
    }

    fn read(&mut self, binding: &Binding) -> Result<Vec<u8>, ServerError> {
        let resource = self
            .server
            .get_resource(binding.clone(), StreamId::new(0))?;
        let resource = resource.resource();
        // SAFETY: the resource covers the binding's live bytes; this server's task is the
        // only one touching its memory now.
        let bytes = unsafe { std::slice::from_raw_parts(resource.as_ptr(), resource.len()) };
        Ok(bytes.to_vec())
    }

    fn write(&mut self, binding: &Binding, data: &[u8]) -> Result<(), ServerError> {
        let resource = self
            .server
            .get_resource(binding.clone(), StreamId::new(0))?;
        let resource = resource.resource();
        if resource.len() != data.len() {
            return Err(IoError::invalid(format!(
                "a collective result of {} bytes for a buffer of {} bytes",
                data.len(),
                resource.len()
            ))
            .into());
        }
        // SAFETY: as in `read`; the binding is alive (the call holds it).
        let target = unsafe { std::slice::from_raw_parts_mut(resource.as_ptr(), resource.len()) };
        target.copy_from_slice(data);
        Ok(())
    }

    /// The group of `device_ids` and this device's rank in it.
    fn group(
        &self,
        device_ids: Vec<DeviceId>,
        operation: &str,
    ) -> Result<(Arc<LocalGroup<CpuCall>>, usize), ServerError> {
        let set = DeviceSet::new(device_ids);
        if set.is_process_group() {
            return Err(ServerError::unsupported(
                "process groups (collectives across processes run through NCCL)",
                "cpu",
            ));
        }
        if let Some(other) = set
            .devices()
            .iter()
            .find(|d| d.type_id != self.device.type_id)
        {
            return Err(
                IoError::invalid(format!("{operation}: {other:?} is not a CPU device")).into(),
            );
        }
        let rank = set.require_rank(self.device, operation)?;
        let group = local_group::<CpuCall>(set.id(), vec![true; set.len()])?;
        let mut joined = joined().lock().unwrap_or_else(PoisonError::into_inner);
        let mine = joined.entry(self.owner).or_default();
        if !mine.iter().any(|(g, _)| Arc::ptr_eq(g, &group)) {
            mine.push((group.clone(), rank));
        }
        Ok((group, rank))
    }

    /// Writes a call's result into this device's memory.
    fn apply(&mut self, finished: Finished<CpuCall>) -> Result<(), ServerError> {
        finished.result?;
        if let (Some(target), Some(output)) = (&finished.payload.target, &finished.payload.output) {
            self.write(target, output)?;
        }
        Ok(())
    }

    fn groups(&self) -> Vec<Joined> {
        joined()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&self.owner)
            .cloned()
            .unwrap_or_default()
    }

    /// Applies every result kept for this device; the first error is returned after all
    /// were applied.
    fn apply_kept(&mut self) -> Result<(), ServerError> {
        let mut first = Ok(());
        for (group, rank) in self.groups() {
            for (_, finished) in group.take_rank(rank, self.owner) {
                let applied = self.apply(finished);
                if first.is_ok() {
                    first = applied;
                }
            }
        }
        first
    }

    /// Writes the results of this device's earlier calls, so the next call reads what they
    /// wrote. An earlier call still waiting for its peers (only possible without a runner
    /// thread, where calls don't wait) is an error: the peers' calls come first.
    fn settle(&mut self) -> Result<(), ServerError> {
        let waiting: usize = self
            .groups()
            .iter()
            .map(|(group, rank)| group.pending(*rank))
            .sum();
        if waiting > 0 {
            return Err(ServerError::generic(format!(
                "{:?} has {waiting} collective call(s) still waiting for the other devices: \
                 with an inline device handle make every device's call of a collective before \
                 the next one",
                self.device
            )));
        }
        self.apply_kept()
    }

    /// Queues this device's call (its payload made by `make` once the earlier calls are
    /// done); runs it now if it completes an instance, waits for its peers on a runner
    /// thread, or leaves the result for later (inline).
    fn call(
        &mut self,
        device_ids: Vec<DeviceId>,
        operation: &str,
        kind: CallKind,
        make: impl FnOnce(&mut Self) -> Result<CpuCall, ServerError>,
    ) -> Result<(), ServerError> {
        let (group, rank) = self.group(device_ids, operation)?;
        self.settle()?;
        let payload = make(self)?;
        let ticket = group.arrive(rank, self.owner, kind, payload, true, &mut HostLauncher)?;
        if let Some(finished) = group.take(ticket) {
            return self.apply(finished);
        }
        if on_runner_thread() {
            let finished = group.wait(ticket, collective_timeout(), &mut HostLauncher)?;
            return self.apply(finished);
        }
        Ok(())
    }
}

/// Sets up the group of `device_ids` (nothing to connect on the host).
///
/// # Errors
/// A set this server's device isn't in, with devices of another kind, or of processes.
pub fn comm_init<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    Member::of(server)
        .group(device_ids, "comm_init")
        .map(|_| ())
}

/// This device's part of an all-reduce of `src` into `dst` over `device_ids`.
///
/// # Errors
/// A type collectives don't take, a bad set, memory that isn't here, a mismatch with the
/// other devices' calls, or a timeout waiting for them.
pub fn all_reduce<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    src: &Binding,
    dst: Binding,
    dtype: ElemType,
    op: ReduceOperation,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "all_reduce", "cpu")?;
    if src.size() != dst.size() {
        return Err(IoError::invalid(format!(
            "all_reduce from {} bytes into {} bytes",
            src.size(),
            dst.size()
        ))
        .into());
    }
    let mut member = Member::of(server);
    let kind = CallKind::AllReduce {
        bytes: src.size(),
        dtype,
        op,
    };
    member.call(device_ids, "all_reduce", kind, |member| {
        Ok(CpuCall {
            input: member.read(src)?,
            target: Some(dst),
            output: None,
        })
    })
}

/// This device's part of an all-gather of `src` into `dst` over `device_ids`: the parts of
/// every rank, in rank order.
///
/// # Errors
/// As [`all_reduce`]; [`IoError::InvalidArgument`] if `dst` isn't `src` × the number of
/// devices, or the buffers overlap other than in place.
pub fn all_gather<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    src: &Binding,
    dst: Binding,
    dtype: ElemType,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "all_gather", "cpu")?;
    let mut member = Member::of(server);
    let rank = check_parts(&member, src, &dst, dtype, &device_ids, "all_gather")?;
    check_in_place_or_disjoint("all_gather", src, &dst, rank as u64 * src.size())?;
    let kind = CallKind::AllGather {
        bytes: src.size(),
        dtype,
    };
    member.call(device_ids, "all_gather", kind, |member| {
        Ok(CpuCall {
            input: member.read(src)?,
            target: Some(dst),
            output: None,
        })
    })
}

/// This device's part of a reduce-scatter of `src` over `device_ids`: part `rank` of the
/// reduction lands in `dst`.
///
/// # Errors
/// As [`all_gather`].
pub fn reduce_scatter<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    src: &Binding,
    dst: Binding,
    dtype: ElemType,
    op: ReduceOperation,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "reduce_scatter", "cpu")?;
    let mut member = Member::of(server);
    let rank = check_parts(&member, &dst, src, dtype, &device_ids, "reduce_scatter")?;
    check_in_place_or_disjoint("reduce_scatter", &dst, src, rank as u64 * dst.size())?;
    let kind = CallKind::ReduceScatter {
        bytes: dst.size(),
        dtype,
        op,
    };
    member.call(device_ids, "reduce_scatter", kind, |member| {
        Ok(CpuCall {
            input: member.read(src)?,
            target: Some(dst),
            output: None,
        })
    })
}

/// This device's part of a broadcast of `buffer` from `root` over `device_ids`.
///
/// # Errors
/// As [`all_reduce`]; [`IoError::InvalidArgument`] if `root` isn't in the set.
pub fn broadcast<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    buffer: Binding,
    dtype: ElemType,
    root: DeviceId,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "broadcast", "cpu")?;
    let set = DeviceSet::new(device_ids.clone());
    let root = set.require_rank(root, "broadcast")?;
    let mut member = Member::of(server);
    let sending = set.rank_of(member.device) == Some(root);
    let kind = CallKind::Broadcast {
        bytes: buffer.size(),
        dtype,
        root,
    };
    member.call(device_ids, "broadcast", kind, |member| {
        Ok(if sending {
            CpuCall {
                input: member.read(&buffer)?,
                target: None,
                output: None,
            }
        } else {
            CpuCall {
                input: Vec::new(),
                target: Some(buffer),
                output: None,
            }
        })
    })
}

/// Checks an all-gather's or reduce-scatter's buffers (`part` × ranks is `whole`) and
/// returns the caller's rank.
fn check_parts<S: ComputeServer<Storage = HostStorage>>(
    member: &Member<'_, S>,
    part: &Binding,
    whole: &Binding,
    dtype: ElemType,
    device_ids: &[DeviceId],
    operation: &str,
) -> Result<usize, ServerError> {
    let rank = DeviceSet::new(device_ids.to_vec()).require_rank(member.device, operation)?;
    check_part_sizes(operation, part.size(), whole.size(), dtype, device_ids)?;
    Ok(rank)
}

/// Sends the (contiguous) data of `desc` to `peer`.
///
/// # Errors
/// As [`all_reduce`], and [`IoError::InvalidArgument`] for a strided descriptor.
pub fn send<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    desc: &CopyDescriptor,
    dtype: ElemType,
    peer: DeviceId,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "send", "cpu")?;
    desc.validate()?;
    if !desc.is_contiguous() {
        return Err(IoError::invalid("send needs a contiguous descriptor").into());
    }
    let peer = DeviceSet::new(device_ids.clone()).require_rank(peer, "send")?;
    let bytes = desc.handle.size();
    Member::of(server).call(
        device_ids,
        "send",
        CallKind::Send { peer, bytes },
        |member| {
            Ok(CpuCall {
                input: member.read(&desc.handle)?,
                target: None,
                output: None,
            })
        },
    )
}

/// Receives what `peer` sends into `dst`.
///
/// # Errors
/// As [`all_reduce`].
pub fn recv<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
    dst: Binding,
    dtype: ElemType,
    peer: DeviceId,
    device_ids: Vec<DeviceId>,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "recv", "cpu")?;
    let peer = DeviceSet::new(device_ids.clone()).require_rank(peer, "recv")?;
    let bytes = dst.size();
    Member::of(server).call(device_ids, "recv", CallKind::Recv { peer, bytes }, |_| {
        Ok(CpuCall {
            input: Vec::new(),
            target: Some(dst),
            output: None,
        })
    })
}

/// Writes the results kept for this device, and reports calls still missing their peers
/// (an inline handle can't wait for them: the caller may be the one to make them).
///
/// # Errors
/// The first error of a kept call, or a call still waiting for its peers.
pub fn sync_collective<S: ComputeServer<Storage = HostStorage>>(
    server: &mut S,
) -> Result<(), ServerError> {
    let mut member = Member::of(server);
    let applied = member.apply_kept();
    let waiting: usize = member
        .groups()
        .iter()
        .map(|(group, rank)| group.pending(*rank))
        .sum();
    applied?;
    if waiting > 0 {
        return Err(ServerError::generic(format!(
            "sync_collective on {:?}: {waiting} collective call(s) of this device still wait for \
             the other devices' matching calls; make them before syncing",
            member.device
        )));
    }
    Ok(())
}

/// Abandons the collective calls of `server` still waiting for their peers and forgets its
/// groups, so a later server of the same device starts clean. The server calls it when it
/// drops.
pub fn leave_all<S: ComputeServer>(server: &S) {
    let owner = owner_of(server);
    let groups = joined()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&owner)
        .unwrap_or_default();
    for (group, _) in groups {
        group.abandon_owner(owner, &mut HostLauncher);
    }
}
