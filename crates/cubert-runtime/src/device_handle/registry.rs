//! The process-wide registry of device handles: one server per (backend, device).
//!
//! `ComputeClient::load` finds the device's handle here, starting the server on first use.
//! The registry lock is not held while a server starts, so a slow start (driver
//! initialization) doesn't block other devices; if two threads race to start the same
//! device, the first registered wins and the other server is dropped.

use super::{DeviceHandle, DeviceHandleMode};
use crate::device::DeviceId;
use crate::error::ServerError;
use crate::server::ComputeServer;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

type Registry = Mutex<HashMap<(TypeId, DeviceId), Box<dyn Any + Send + Sync>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lookup<S: ComputeServer>(device_id: DeviceId) -> Option<DeviceHandle<S>> {
    let registry = registry().lock().unwrap_or_else(PoisonError::into_inner);
    registry
        .get(&(TypeId::of::<S>(), device_id))
        .and_then(|entry| entry.downcast_ref::<DeviceHandle<S>>())
        .cloned()
}

/// The registered handle of `device_id`, starting its server with `S::init` on first use.
///
/// # Errors
/// The server's start error.
pub fn get_or_init_device<S: ComputeServer>(
    device_id: DeviceId,
    mode: DeviceHandleMode,
) -> Result<DeviceHandle<S>, ServerError>
where
    DeviceHandle<S>: Send + Sync,
{
    if let Some(handle) = lookup::<S>(device_id) {
        return Ok(handle);
    }
    let server = S::init(device_id)?;
    let handle = DeviceHandle::new(server, mode)?;
    let mut registry = registry().lock().unwrap_or_else(PoisonError::into_inner);
    let entry = registry
        .entry((TypeId::of::<S>(), device_id))
        .or_insert_with(|| Box::new(handle.clone()));
    Ok(entry
        .downcast_ref::<DeviceHandle<S>>()
        .cloned()
        .unwrap_or(handle))
}

/// Registers `server` as the server of `device_id`.
///
/// # Errors
/// [`ServerError::Generic`] if the device already has a registered server.
pub fn register_device<S: ComputeServer>(
    device_id: DeviceId,
    server: S,
    mode: DeviceHandleMode,
) -> Result<DeviceHandle<S>, ServerError>
where
    DeviceHandle<S>: Send + Sync,
{
    let mut registry = registry().lock().unwrap_or_else(PoisonError::into_inner);
    let key = (TypeId::of::<S>(), device_id);
    if registry.contains_key(&key) {
        return Err(ServerError::generic(format!(
            "{device_id:?} already has a server; load its client instead of registering another"
        )));
    }
    let handle = DeviceHandle::new(server, mode)?;
    registry.insert(key, Box::new(handle.clone()));
    Ok(handle)
}
