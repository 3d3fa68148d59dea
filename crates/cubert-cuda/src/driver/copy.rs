//! Copies: host to device, device to host, device to device (`cuMemcpy*`), pitched (`cuMemcpy2DAsync`), and
//! between the memory of two contexts (`cuMemcpyPeerAsync`, `cuMemcpy3DPeerAsync`).
//!
//! Every copy is `unsafe`: the driver reads and writes raw addresses, and an asynchronous
//! copy does so after the call returns, so the caller vouches for the ranges and for how
//! long they stay alive.

use super::{Context as _, DriverFailure};
use cudarc::driver::sys::{
    self, CUDA_MEMCPY2D, CUDA_MEMCPY3D_PEER, CUcontext, CUdeviceptr, CUstream,
};
use std::ffi::c_void;

/// Queues a copy of `bytes` from host `src` to device `dst` on `stream`
/// (`cuMemcpyHtoDAsync`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `src` holds `bytes` readable bytes and `dst` `bytes` bytes of device memory of the
/// current context; `stream` is live. A pinned `src` stays alive and unchanged until the
/// copy completes (a pageable one is consumed before the call returns).
pub unsafe fn htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream) }.during("cuMemcpyHtoDAsync")
}

/// Queues a copy of `bytes` from device `src` to host `dst` on `stream`
/// (`cuMemcpyDtoHAsync`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `src` holds `bytes` bytes of device memory of the current context and `dst` `bytes`
/// writable bytes that stay alive, and are not otherwise accessed, until the copy
/// completes; `stream` is live.
pub unsafe fn dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream) }.during("cuMemcpyDtoHAsync")
}

/// Queues a copy of `bytes` from device `src` to device `dst` of the current context on
/// `stream` (`cuMemcpyDtoDAsync`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `src` and `dst` each hold `bytes` bytes of device memory of the current context, the two
/// ranges don't overlap, both stay alive until the copy completes, and `stream` is live.
pub unsafe fn dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream) }.during("cuMemcpyDtoDAsync")
}

/// Copies `bytes` from device `src` to host `dst`, waiting for the copy (`cuMemcpyDtoH`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `src` holds `bytes` bytes of device memory of the current context and `dst` `bytes`
/// writable bytes.
pub unsafe fn dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpyDtoH_v2(dst, src, bytes) }.during("cuMemcpyDtoH")
}

/// Queues the pitched copy `copy` on `stream` (`cuMemcpy2DAsync`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// Both sides of `copy` hold its rows (`Height` rows of `WidthInBytes` bytes, `*Pitch`
/// apart) in live memory of the current context that stays alive until the copy
/// completes; `stream` is live.
pub unsafe fn copy_2d_async(copy: &CUDA_MEMCPY2D, stream: CUstream) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpy2DAsync_v2(copy, stream) }.during("cuMemcpy2DAsync")
}

/// Queues a copy of `bytes` from `src` in `src_context` to `dst` in `dst_context` on
/// `stream` (`cuMemcpyPeerAsync`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// Both ranges hold `bytes` bytes of live device memory of their contexts, alive until the
/// copy completes; both contexts and `stream` are live.
pub unsafe fn peer_async(
    dst: CUdeviceptr,
    dst_context: CUcontext,
    src: CUdeviceptr,
    src_context: CUcontext,
    bytes: usize,
    stream: CUstream,
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpyPeerAsync(dst, dst_context, src, src_context, bytes, stream) }
        .during("cuMemcpyPeerAsync")
}

/// Queues the pitched copy `copy` between two contexts on `stream`
/// (`cuMemcpy3DPeerAsync`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// Both sides of `copy` describe live memory of their (live) contexts holding the copied
/// region, alive until the copy completes; `stream` is live.
pub unsafe fn copy_3d_peer_async(
    copy: &CUDA_MEMCPY3D_PEER,
    stream: CUstream,
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemcpy3DPeerAsync(copy, stream) }.during("cuMemcpy3DPeerAsync")
}
