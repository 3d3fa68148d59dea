//! Device identifiers.
//!
//! A [`DeviceId`] names one device of one backend: `type_id` says which kind of device
//! (backends define their own values), `index_id` which one of that kind.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifies a device: its kind and its index among devices of that kind.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId {
    /// The kind of device (defined by the backend).
    pub type_id: u16,
    /// The index among devices of that kind.
    pub index_id: u32,
}

impl DeviceId {
    /// A device id from its kind and index.
    pub const fn new(type_id: u16, index_id: u32) -> Self {
        Self { type_id, index_id }
    }
}

impl fmt::Debug for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device({}:{})", self.type_id, self.index_id)
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A device of a backend, convertible to and from a [`DeviceId`].
pub trait Device: Clone + Send + Sync + fmt::Debug + 'static {
    /// The id of this device.
    fn to_id(&self) -> DeviceId;
    /// The device with the given id.
    fn from_id(id: DeviceId) -> Self;
}
