//! Streams: creation, host-side waits and device-side waits on events.
//!
//! Calls on a stream handle are `unsafe`: the driver can't tell a destroyed handle from a
//! live one, so the caller vouches that the stream (and event) are alive.

use super::{Context as _, DriverFailure};
use cudarc::driver::result::stream::StreamKind;
use cudarc::driver::sys::{self, CUevent, CUstream};

/// Creates a non-blocking stream in the current context (`cuStreamCreate`).
///
/// # Errors
/// The driver's error.
pub fn create_non_blocking() -> Result<CUstream, DriverFailure> {
    cudarc::driver::result::stream::create(StreamKind::NonBlocking).during("cuStreamCreate")
}

/// Waits on the host until everything queued on `stream` is done (`cuStreamSynchronize`).
///
/// # Errors
/// The driver's error (a device fault shows up here).
///
/// # Safety
/// `stream` is a live stream.
pub unsafe fn synchronize(stream: CUstream) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuStreamSynchronize(stream) }.during("cuStreamSynchronize")
}

/// Destroys `stream` (`cuStreamDestroy`); work still queued on it completes.
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `stream` came from [`create_non_blocking`], is destroyed once and not used after.
pub unsafe fn destroy(stream: CUstream) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuStreamDestroy_v2(stream) }.during("cuStreamDestroy")
}

/// Makes `stream` wait on the device for `event`'s last record (`cuStreamWaitEvent`). The
/// wait is captured now: the event may be recorded again or reused right after.
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `stream` and `event` are live (the event may belong to another context).
pub unsafe fn wait_event(stream: CUstream, event: CUevent) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuStreamWaitEvent(stream, event, 0) }.during("cuStreamWaitEvent")
}
