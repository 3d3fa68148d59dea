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

/// A non-blocking stream of the current context at `priority` (`cuStreamCreateWithPriority`;
/// lower numbers run first, within [`priority_range`]).
///
/// # Errors
/// The driver's error (no current context).
pub fn create_non_blocking_with_priority(priority: i32) -> Result<CUstream, DriverFailure> {
    let mut stream = std::ptr::null_mut();
    // SAFETY: `stream` is a valid out-pointer; the flag is a valid stream flag.
    unsafe {
        sys::cuStreamCreateWithPriority(
            &mut stream,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            priority,
        )
    }
    .during("cuStreamCreateWithPriority")?;
    Ok(stream)
}

/// The current context's stream priorities: `(least, greatest)`, the greatest being the
/// smaller number (`cuCtxGetStreamPriorityRange`; `(0, -5)` on Hopper).
///
/// # Errors
/// The driver's error (no current context).
pub fn priority_range() -> Result<(i32, i32), DriverFailure> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: both are valid out-pointers.
    unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }
        .during("cuCtxGetStreamPriorityRange")?;
    Ok((least, greatest))
}

/// The priority `stream` was created with (`cuStreamGetPriority`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `stream` is a live stream.
pub unsafe fn priority(stream: CUstream) -> Result<i32, DriverFailure> {
    let mut priority = 0;
    // SAFETY: the caller vouches for the stream; `priority` is a valid out-pointer.
    unsafe { sys::cuStreamGetPriority(stream, &mut priority) }.during("cuStreamGetPriority")?;
    Ok(priority)
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
