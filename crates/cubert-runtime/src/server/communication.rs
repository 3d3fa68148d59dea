//! Communication between servers: collectives and device-to-device transfers.
//!
//! Backends that can talk to each other directly (NCCL on CUDA, shared host memory between
//! virtual CPU devices) implement [`ServerCommunication`]. The defaults return
//! `ServerError::Unsupported`, never panic, so a client can always ask.

use crate::copy::CopyDescriptor;
use crate::device::DeviceId;
use crate::elem::ElemType;
use crate::error::ServerError;
use crate::handle::{Binding, Handle};
use crate::properties::fnv1a;
use crate::stream::StreamId;
use serde::{Deserialize, Serialize};

/// Identifies a communicator: the same for any ordering of the same set of devices.
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq, Serialize, Deserialize)]
pub struct CommunicationId {
    /// The id.
    pub id: u64,
}

impl From<Vec<DeviceId>> for CommunicationId {
    fn from(mut devices: Vec<DeviceId>) -> Self {
        devices.sort();
        devices.dedup();
        let mut bytes = Vec::with_capacity(devices.len() * 6);
        for device in devices {
            bytes.extend_from_slice(&device.type_id.to_le_bytes());
            bytes.extend_from_slice(&device.index_id.to_le_bytes());
        }
        CommunicationId { id: fnv1a(&bytes) }
    }
}

/// How `all_reduce` combines values.
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq, Serialize, Deserialize)]
pub enum ReduceOperation {
    /// Sum.
    Sum,
    /// Arithmetic mean.
    Mean,
}

/// Direct communication between servers. Every default returns
/// [`ServerError::Unsupported`].
pub trait ServerCommunication {
    /// Whether `to_client` should use `send`/`recv` instead of a host round trip.
    const SERVER_COMM_ENABLED: bool;

    /// Waits (on the device) for queued collective work before later work on `stream`.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn sync_collective(&mut self, _stream: StreamId) -> Result<(), ServerError> {
        Err(ServerError::unsupported("sync_collective", "this"))
    }

    /// Sets up communication among `device_ids`.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn comm_init(&mut self, _device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        Err(ServerError::unsupported("comm_init", "this"))
    }

    /// Reduces `src` over every device of `device_ids` into `dst` on each of them.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn all_reduce(
        &mut self,
        _src: Binding,
        _dst: Binding,
        _dtype: ElemType,
        _stream: StreamId,
        _op: ReduceOperation,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("all_reduce", "this"))
    }

    /// Sends the described data to `device_id_dst`.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn send(
        &mut self,
        _desc: CopyDescriptor,
        _dtype: ElemType,
        _stream: StreamId,
        _device_id_dst: DeviceId,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("send", "this"))
    }

    /// Receives data from `device_id_src` into `handle`.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] by default.
    fn recv(
        &mut self,
        _handle: Handle,
        _dtype: ElemType,
        _stream: StreamId,
        _device_id_src: DeviceId,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("recv", "this"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn communication_id_ignores_device_order() {
        let a = DeviceId::new(0, 0);
        let b = DeviceId::new(0, 1);
        assert_eq!(
            CommunicationId::from(vec![a, b]),
            CommunicationId::from(vec![b, a])
        );
        assert_ne!(
            CommunicationId::from(vec![a, b]),
            CommunicationId::from(vec![a])
        );
    }
}
