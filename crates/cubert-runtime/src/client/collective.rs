//! Collectives: `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `send`/`recv`,
//! `sync_collective`, and process groups.
//!
//! A collective runs among a set of devices named by their [`DeviceId`]s: devices of this
//! process (each with its own client), or the members of a process group
//! ([`ComputeClient::init_process_group`] returns their ids). Every device of the set makes
//! the same calls in the same order, each through its own client; the call returns at once
//! in both device-handle modes (one thread may make every device's call, one after the
//! other: nothing waits for the others on the caller's thread).
//!
//! Ordering: a collective reads its input after the work queued before it on the client's
//! stream. Its output is ordered before later work on that stream on the CUDA backend and
//! on the CPU backend with a threaded device handle. Portable code calls
//! [`ComputeClient::sync_collective`] on each device after the calls of every device, before
//! using the results: it is required with an inline CPU device handle (which has no queue
//! to hold later work back), and reports the errors of collectives that failed.
//!
//! Element types are those NCCL reduces (`server::COLLECTIVE_TYPES`); others are refused
//! with [`ServerError::Unsupported`] before anything is queued, on every backend.

use super::ComputeClient;
use crate::device::DeviceId;
use crate::distributed::ProcessGroup;
use crate::elem::ElemType;
use crate::error::{IoError, ServerError};
use crate::handle::Handle;
use crate::runtime::Runtime;
use crate::server::{
    CommunicationId, DeviceSet, ReduceOperation, ServerCommunication, check_collective_type,
    check_in_place_or_disjoint, check_part_sizes,
};
use std::sync::PoisonError;

impl<R: Runtime> ComputeClient<R> {
    /// Sets up communication among `device_ids` once per set of devices (later calls cost a
    /// lookup).
    ///
    /// # Errors
    /// The backend's error ([`ServerError::Unsupported`] where collectives don't exist), or
    /// [`IoError::InvalidArgument`] if this client's device is not in the set.
    pub fn ensure_init_collective(&self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        self.ensure_collective(&device_ids).map(|_| ())
    }

    /// [`Self::ensure_init_collective`], returning this device's rank in the set, without a
    /// copy of the ids when the set is known (every call after the first).
    fn ensure_collective(&self, device_ids: &[DeviceId]) -> Result<usize, ServerError> {
        let id = CommunicationId::of(device_ids);
        if let Some(rank) = self.collective_rank(id) {
            return Ok(rank);
        }
        let set = DeviceSet::new(device_ids.to_vec());
        let device_ids = device_ids.to_vec();
        let Some(rank) = set.rank_of(self.device_id()) else {
            // The backend explains best (a process group not joined yet, collectives it
            // lacks); a set without this device is refused here otherwise.
            self.call(move |server| server.comm_init(device_ids))??;
            return set.require_rank(self.device_id(), "comm_init");
        };
        self.call(move |server| server.comm_init(device_ids))??;
        self.remember_collective(id, rank);
        Ok(rank)
    }

    /// This device's rank in communicator `id`, if it was set up.
    fn collective_rank(&self, id: CommunicationId) -> Option<usize> {
        self.utilities
            .initialized_comms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .copied()
    }

    fn remember_collective(&self, id: CommunicationId, rank: usize) {
        self.utilities
            .initialized_comms
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, rank);
    }

    /// Joins this client's device to `group` (this process's rank in a world of processes,
    /// one device each) and returns the ids naming the members in collectives. Blocks until
    /// every rank has joined, or the group's timeout.
    ///
    /// # Errors
    /// A rendezvous error naming what was missing, the backend's error, or
    /// [`ServerError::Unsupported`] on backends without process groups (the CPU backend).
    pub fn init_process_group(&self, group: &ProcessGroup) -> Result<Vec<DeviceId>, ServerError> {
        let members = group.members();
        let id = CommunicationId::from(members.clone());
        if self.collective_rank(id).is_none() {
            let rank = group.rank() as usize;
            let group = group.clone();
            self.call(move |server| server.comm_init_process_group(group))??;
            self.remember_collective(id, rank);
        }
        Ok(members)
    }

    fn check_collective_handle(&self, handle: &Handle, operation: &str) -> Result<(), ServerError> {
        if handle.device() != self.device_id() {
            return Err(IoError::not_found(format!(
                "{operation}: the handle belongs to {:?}, not to this client's {:?}",
                handle.device(),
                self.device_id()
            ))
            .into());
        }
        Ok(())
    }

    fn check_elements(bytes: u64, dtype: ElemType, operation: &str) -> Result<(), ServerError> {
        if !bytes.is_multiple_of(dtype.size() as u64) {
            return Err(IoError::invalid(format!(
                "{operation}: {bytes} bytes is not a whole number of {dtype} elements"
            ))
            .into());
        }
        Ok(())
    }

    /// Makes later work on this client's stream wait for every collective this device took
    /// part in, and returns the first error of those that failed. With an inline CPU device
    /// handle this is where the results land (see the module docs).
    ///
    /// # Errors
    /// The first collective error, or [`ServerError::Unsupported`] where collectives don't
    /// exist.
    pub fn sync_collective(&self) -> Result<(), ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.sync_collective(stream))?
    }

    /// Reduces `src` across `device_ids` (this device among them) into `dst` with `op`.
    /// Every device of the set makes the same call; `src` and `dst` may be the same handle.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] for an element type collectives don't take (or a backend
    /// without collectives), [`IoError::InvalidArgument`] if `src` and `dst` differ in size,
    /// [`IoError::NotFound`] for a handle of another device, or the error of setting up the
    /// communicator. Errors of the reduction itself come back from `sync_collective` (and
    /// from the next `flush`/`sync`/`read` of the device).
    pub fn all_reduce(
        &self,
        src: Handle,
        dst: Handle,
        dtype: ElemType,
        device_ids: Vec<DeviceId>,
        op: ReduceOperation,
    ) -> Result<(), ServerError> {
        check_collective_type(dtype, "all_reduce", R::name())?;
        self.check_collective_handle(&src, "all_reduce")?;
        self.check_collective_handle(&dst, "all_reduce")?;
        if src.size() != dst.size() {
            return Err(IoError::invalid(format!(
                "all_reduce from {} bytes into {} bytes",
                src.size(),
                dst.size()
            ))
            .into());
        }
        Self::check_elements(src.size(), dtype, "all_reduce")?;
        check_in_place_or_disjoint("all_reduce", &src.to_binding(), &dst.to_binding(), 0)?;
        self.ensure_collective(&device_ids)?;
        let stream = self.stream_id();
        let (src, dst) = (src.binding(), dst.binding());
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.all_reduce(src, dst, dtype, stream, op, device_ids)
        });
        Ok(())
    }

    /// Checks the two buffers of an all-gather or reduce-scatter: `part` (one device's
    /// share) times the number of devices is `whole`, in whole elements.
    fn check_parts(
        &self,
        part: &Handle,
        whole: &Handle,
        dtype: ElemType,
        device_ids: &[DeviceId],
        operation: &str,
    ) -> Result<(), ServerError> {
        check_collective_type(dtype, operation, R::name())?;
        self.check_collective_handle(part, operation)?;
        self.check_collective_handle(whole, operation)?;
        check_part_sizes(operation, part.size(), whole.size(), dtype, device_ids).map(|_| ())
    }

    /// Gathers `src` from every device of `device_ids` (this device among them) into `dst`
    /// on each of them, in rank order: the part of the device of rank `r` (its position in
    /// the sorted set) lands at byte `r × src.size()` of `dst`, which holds `src.size()` ×
    /// the number of devices. Every device of the set makes the same call. In place, `src`
    /// is the view of `dst` at the caller's own part (as with NCCL).
    ///
    /// # Errors
    /// As [`Self::all_reduce`]; [`IoError::InvalidArgument`] if `dst` isn't `src.size()` ×
    /// the number of devices, or the buffers overlap other than in place.
    pub fn all_gather(
        &self,
        src: Handle,
        dst: Handle,
        dtype: ElemType,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        self.check_parts(&src, &dst, dtype, &device_ids, "all_gather")?;
        let rank = self.ensure_collective(&device_ids)?;
        let in_place = rank as u64 * src.size();
        check_in_place_or_disjoint("all_gather", &src.to_binding(), &dst.to_binding(), in_place)?;
        let stream = self.stream_id();
        let (src, dst) = (src.binding(), dst.binding());
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.all_gather(src, dst, dtype, stream, device_ids)
        });
        Ok(())
    }

    /// Reduces `src` over every device of `device_ids` (this device among them) with `op`
    /// and leaves part `r` of the result (`dst.size()` bytes from byte `r × dst.size()`) in
    /// `dst` of the device of rank `r`. `src` holds `dst.size()` × the number of devices.
    /// Every device of the set makes the same call. In place, `dst` is the view of `src` at
    /// the caller's own part (as with NCCL).
    ///
    /// # Errors
    /// As [`Self::all_gather`].
    pub fn reduce_scatter(
        &self,
        src: Handle,
        dst: Handle,
        dtype: ElemType,
        device_ids: Vec<DeviceId>,
        op: ReduceOperation,
    ) -> Result<(), ServerError> {
        self.check_parts(&dst, &src, dtype, &device_ids, "reduce_scatter")?;
        let rank = self.ensure_collective(&device_ids)?;
        let in_place = rank as u64 * dst.size();
        check_in_place_or_disjoint(
            "reduce_scatter",
            &dst.to_binding(),
            &src.to_binding(),
            in_place,
        )?;
        let stream = self.stream_id();
        let (src, dst) = (src.binding(), dst.binding());
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.reduce_scatter(src, dst, dtype, stream, op, device_ids)
        });
        Ok(())
    }

    /// Copies `buffer` of device `root` into `buffer` of every other device of `device_ids`
    /// (in place; every device's buffer has the same size). Every device of the set makes
    /// the same call, the root included.
    ///
    /// # Errors
    /// As [`Self::all_reduce`]; [`IoError::InvalidArgument`] if `root` is not in the set.
    pub fn broadcast(
        &self,
        buffer: Handle,
        dtype: ElemType,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        check_collective_type(dtype, "broadcast", R::name())?;
        self.check_collective_handle(&buffer, "broadcast")?;
        Self::check_elements(buffer.size(), dtype, "broadcast")?;
        DeviceSet::new(device_ids.clone()).require_rank(root, "broadcast")?;
        self.ensure_collective(&device_ids)?;
        let stream = self.stream_id();
        let buffer = buffer.binding();
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.broadcast(buffer, dtype, stream, root, device_ids)
        });
        Ok(())
    }

    /// Sends `src` to device `peer` of `device_ids`, which makes the matching
    /// [`Self::recv`] with as many bytes.
    ///
    /// # Errors
    /// As [`Self::all_reduce`].
    pub fn send(
        &self,
        src: Handle,
        dtype: ElemType,
        peer: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        check_collective_type(dtype, "send", R::name())?;
        self.check_collective_handle(&src, "send")?;
        Self::check_elements(src.size(), dtype, "send")?;
        self.ensure_collective(&device_ids)?;
        let stream = self.stream_id();
        let descriptor = crate::copy::CopyDescriptor::bytes(src.binding());
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.send(descriptor, dtype, stream, peer, device_ids)
        });
        Ok(())
    }

    /// Receives into `dst` what device `peer` of `device_ids` sends with [`Self::send`].
    ///
    /// # Errors
    /// As [`Self::all_reduce`].
    pub fn recv(
        &self,
        dst: Handle,
        dtype: ElemType,
        peer: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        check_collective_type(dtype, "recv", R::name())?;
        self.check_collective_handle(&dst, "recv")?;
        Self::check_elements(dst.size(), dtype, "recv")?;
        self.ensure_collective(&device_ids)?;
        let stream = self.stream_id();
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.recv(dst, dtype, stream, peer, device_ids)
        });
        Ok(())
    }
}
