//! Events: created, recorded on streams, queried, waited for and timed.
//!
//! Calls on an event handle are `unsafe`: the driver can't tell a destroyed handle from a
//! live one, so the caller vouches that the event (and stream) are alive.

use super::{Context as _, DriverFailure};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{self, CUevent, CUevent_flags, CUresult, CUstream};

/// Creates an event in the current context (`cuEventCreate`).
///
/// # Errors
/// The driver's error.
pub fn create(flags: CUevent_flags) -> Result<CUevent, DriverFailure> {
    cudarc::driver::result::event::create(flags).during("cuEventCreate")
}

/// Destroys `event` (`cuEventDestroy`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `event` came from [`create`], is destroyed once and not used after.
pub unsafe fn destroy(event: CUevent) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuEventDestroy_v2(event) }.during("cuEventDestroy")
}

/// Records `event` on `stream`, after the work queued there so far (`cuEventRecord`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `event` and `stream` are live handles of the same context.
pub unsafe fn record(event: CUevent, stream: CUstream) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuEventRecord(event, stream) }.during("cuEventRecord")
}

/// Whether the device has passed `event`'s last record (`cuEventQuery`): `Ok(false)` while
/// it is not ready.
///
/// # Errors
/// The driver's error other than "not ready" (a device fault shows up here).
///
/// # Safety
/// `event` is a live event.
pub unsafe fn query(event: CUevent) -> Result<bool, DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    match unsafe { sys::cuEventQuery(event) } {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        error => Err(DriverFailure {
            operation: "cuEventQuery",
            error: DriverError(error),
        }),
    }
}

/// Waits on the host until the device has passed `event`'s last record
/// (`cuEventSynchronize`).
///
/// # Errors
/// The driver's error (a device fault shows up here).
///
/// # Safety
/// `event` is a live event.
pub unsafe fn synchronize(event: CUevent) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuEventSynchronize(event) }.during("cuEventSynchronize")
}

/// Milliseconds between the records of `start` and `end` (`cuEventElapsedTime`).
///
/// # Errors
/// The driver's error (for instance when an event was created without timing or isn't
/// complete).
///
/// # Safety
/// Both events are live.
pub unsafe fn elapsed_ms(start: CUevent, end: CUevent) -> Result<f32, DriverFailure> {
    let mut milliseconds = 0f32;
    // SAFETY: valid out pointer; the caller vouches for the events.
    unsafe { sys::cuEventElapsedTime_v2(&mut milliseconds, start, end) }
        .during("cuEventElapsedTime")?;
    Ok(milliseconds)
}
