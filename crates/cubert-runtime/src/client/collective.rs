//! Collectives: `all_reduce`, `send`/`recv`, `sync_collective`, and process groups.
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
use crate::server::{CommunicationId, ReduceOperation, ServerCommunication, check_collective_type};
use std::sync::PoisonError;

impl<R: Runtime> ComputeClient<R> {
    /// Sets up communication among `device_ids` once per set of devices (later calls cost a
    /// lookup).
    ///
    /// # Errors
    /// The backend's error ([`ServerError::Unsupported`] where collectives don't exist).
    pub fn ensure_init_collective(&self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        let id = CommunicationId::of(&device_ids);
        if self.collective_known(id) {
            return Ok(());
        }
        self.call(move |server| server.comm_init(device_ids))??;
        self.remember_collective(id);
        Ok(())
    }

    /// [`Self::ensure_init_collective`] without a copy of the ids when the set is known
    /// (every call after the first).
    fn ensure_collective(&self, device_ids: &[DeviceId]) -> Result<(), ServerError> {
        if self.collective_known(CommunicationId::of(device_ids)) {
            return Ok(());
        }
        self.ensure_init_collective(device_ids.to_vec())
    }

    fn collective_known(&self, id: CommunicationId) -> bool {
        self.utilities
            .initialized_comms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    }

    fn remember_collective(&self, id: CommunicationId) {
        self.utilities
            .initialized_comms
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
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
        if !self.collective_known(id) {
            let group = group.clone();
            self.call(move |server| server.comm_init_process_group(group))??;
            self.remember_collective(id);
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
        self.ensure_collective(&device_ids)?;
        let stream = self.stream_id();
        let (src, dst) = (src.binding(), dst.binding());
        self.device.submit_fallible(move |server: &mut R::Server| {
            server.all_reduce(src, dst, dtype, stream, op, device_ids)
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
