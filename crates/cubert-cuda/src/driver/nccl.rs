//! NCCL calls: whether the library is there, its version and errors, communicators, and
//! the collective operations, queued inside groups.
//!
//! Operations on device buffers are `unsafe`: NCCL reads and writes them on the device
//! after the call returns, so the caller vouches for the buffers, the communicator and the
//! stream.

use cubert_runtime::ServerError;
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use cudarc::nccl::sys::{
    self, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use std::ffi::{CStr, c_void};

/// An NCCL error with the operation that returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NcclFailure {
    /// The operation.
    pub operation: &'static str,
    /// NCCL's result.
    pub result: ncclResult_t,
}

/// `Ok` for success (and "in progress", which blocking communicators never return), else a
/// failure of `operation`.
///
/// # Errors
/// The failure.
pub fn check(result: ncclResult_t, operation: &'static str) -> Result<(), NcclFailure> {
    match result {
        ncclResult_t::ncclSuccess | ncclResult_t::ncclInProgress => Ok(()),
        result => Err(NcclFailure { operation, result }),
    }
}

/// NCCL's description of `result`.
pub fn describe(result: ncclResult_t) -> String {
    // SAFETY: NCCL returns a pointer to a static, NUL-terminated string (or null).
    let text = unsafe { sys::ncclGetErrorString(result) };
    if text.is_null() {
        return format!("{result:?}");
    }
    // SAFETY: non-null, NUL-terminated, static (see above).
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    format!("{result:?} ({text})")
}

/// The message of a failure of `operation` with `result`.
pub fn failure_message(operation: &str, result: ncclResult_t) -> String {
    format!(
        "{operation} failed: {} (NCCL_DEBUG=WARN says more)",
        describe(result)
    )
}

impl From<NcclFailure> for ServerError {
    fn from(failure: NcclFailure) -> Self {
        ServerError::generic(failure_message(failure.operation, failure.result))
    }
}

/// Whether one of the names cudarc opens NCCL by can be opened (a panic while probing
/// counts as no).
pub fn is_present() -> bool {
    // SAFETY: only probes whether one of the library names can be opened.
    std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// NCCL's version code, `major * 10000 + minor * 100 + patch` (`ncclGetVersion`). Ask
/// [`is_present`] first: cudarc panics when the library or the symbol is missing.
///
/// # Errors
/// NCCL's error.
pub fn version() -> Result<i32, NcclFailure> {
    cudarc::nccl::result::get_nccl_version().map_err(|error| NcclFailure {
        operation: "ncclGetVersion",
        result: error.0,
    })
}

/// A new unique id for a communicator spanning processes (`ncclGetUniqueId`).
///
/// # Errors
/// NCCL's error.
pub fn unique_id() -> Result<ncclUniqueId, NcclFailure> {
    cudarc::nccl::result::get_uniqueid().map_err(|error| NcclFailure {
        operation: "ncclGetUniqueId",
        result: error.0,
    })
}

/// One communicator per device of `ordinals`, rank `r` on GPU `ordinals[r]`, all made at
/// once (`ncclCommInitAll`; NCCL binds each device's primary context itself).
///
/// # Errors
/// NCCL's error.
pub fn comm_init_all(ordinals: &[i32]) -> Result<Vec<ncclComm_t>, NcclFailure> {
    const OPERATION: &str = "ncclCommInitAll";
    let count = i32::try_from(ordinals.len()).map_err(|_| NcclFailure {
        operation: OPERATION,
        result: ncclResult_t::ncclInvalidArgument,
    })?;
    let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); ordinals.len()];
    // SAFETY: `comms` has room for one communicator per device of `ordinals`, both of
    // `count` entries.
    let result = unsafe { sys::ncclCommInitAll(comms.as_mut_ptr(), count, ordinals.as_ptr()) };
    check(result, OPERATION)?;
    Ok(comms)
}

/// This process's communicator of rank `rank` among `world` ranks sharing `id`, on the
/// device whose context is current (`ncclCommInitRank`; returns once every rank joined).
///
/// # Errors
/// NCCL's error.
pub fn comm_init_rank(world: i32, id: ncclUniqueId, rank: i32) -> Result<ncclComm_t, NcclFailure> {
    let mut comm: ncclComm_t = std::ptr::null_mut();
    // SAFETY: `comm` is a valid out pointer; NCCL validates the id and ranks.
    let result = unsafe { sys::ncclCommInitRank(&mut comm, world, id, rank) };
    check(result, "ncclCommInitRank")?;
    Ok(comm)
}

/// Opens a group: the operations queued until [`group_end`] are launched together
/// (`ncclGroupStart`).
///
/// # Errors
/// NCCL's error.
pub fn group_start() -> Result<(), NcclFailure> {
    // SAFETY: no arguments; NCCL tracks the group per thread.
    check(unsafe { sys::ncclGroupStart() }, "ncclGroupStart")
}

/// Closes the group opened by [`group_start`] and launches its operations
/// (`ncclGroupEnd`).
///
/// # Errors
/// NCCL's error.
pub fn group_end() -> Result<(), NcclFailure> {
    // SAFETY: no arguments; NCCL checks that a group is open.
    check(unsafe { sys::ncclGroupEnd() }, "ncclGroupEnd")
}

/// Queues an all-reduce of `count` elements from `send` into `recv` on `stream`
/// (`ncclAllReduce`).
///
/// # Errors
/// NCCL's error.
///
/// # Safety
/// `send` and `recv` hold `count` elements of `dtype` in device memory of the
/// communicator's device, allocated until the operation completes; `comm` and `stream`
/// are live and belong to that device.
pub unsafe fn all_reduce(
    send: CUdeviceptr,
    recv: CUdeviceptr,
    count: usize,
    dtype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: CUstream,
) -> Result<(), NcclFailure> {
    // SAFETY: the caller upholds this function's contract.
    let result = unsafe {
        sys::ncclAllReduce(
            send as *const c_void,
            recv as *mut c_void,
            count,
            dtype,
            op,
            comm,
            stream.cast(),
        )
    };
    check(result, "ncclAllReduce")
}

/// Queues a send of `count` elements from `send` to rank `peer` on `stream` (`ncclSend`).
///
/// # Errors
/// NCCL's error.
///
/// # Safety
/// As [`all_reduce`], for `send`.
pub unsafe fn send(
    send: CUdeviceptr,
    count: usize,
    dtype: ncclDataType_t,
    peer: i32,
    comm: ncclComm_t,
    stream: CUstream,
) -> Result<(), NcclFailure> {
    // SAFETY: the caller upholds this function's contract.
    let result = unsafe {
        sys::ncclSend(
            send as *const c_void,
            count,
            dtype,
            peer,
            comm,
            stream.cast(),
        )
    };
    check(result, "ncclSend")
}

/// Queues a receive of `count` elements from rank `peer` into `recv` on `stream`
/// (`ncclRecv`).
///
/// # Errors
/// NCCL's error.
///
/// # Safety
/// As [`all_reduce`], for `recv`.
pub unsafe fn recv(
    recv: CUdeviceptr,
    count: usize,
    dtype: ncclDataType_t,
    peer: i32,
    comm: ncclComm_t,
    stream: CUstream,
) -> Result<(), NcclFailure> {
    // SAFETY: the caller upholds this function's contract.
    let result =
        unsafe { sys::ncclRecv(recv as *mut c_void, count, dtype, peer, comm, stream.cast()) };
    check(result, "ncclRecv")
}

/// Queues an all-gather of `count` elements from each rank's `send` into `recv` (which
/// holds `count` × ranks elements, rank `r`'s at element `r × count`) on `stream`
/// (`ncclAllGather`).
///
/// # Errors
/// NCCL's error.
///
/// # Safety
/// As [`all_reduce`], with `recv` holding `count` × the communicator's ranks elements.
pub unsafe fn all_gather(
    send: CUdeviceptr,
    recv: CUdeviceptr,
    count: usize,
    dtype: ncclDataType_t,
    comm: ncclComm_t,
    stream: CUstream,
) -> Result<(), NcclFailure> {
    // SAFETY: the caller upholds this function's contract.
    let result = unsafe {
        sys::ncclAllGather(
            send as *const c_void,
            recv as *mut c_void,
            count,
            dtype,
            comm,
            stream.cast(),
        )
    };
    check(result, "ncclAllGather")
}

/// Queues a reduce-scatter on `stream` (`ncclReduceScatter`): `send` holds `count` × ranks
/// elements; rank `r` receives in `recv` the reduction of elements `r × count ..`.
///
/// # Errors
/// NCCL's error.
///
/// # Safety
/// As [`all_reduce`], with `send` holding `count` × the communicator's ranks elements.
pub unsafe fn reduce_scatter(
    send: CUdeviceptr,
    recv: CUdeviceptr,
    count: usize,
    dtype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: CUstream,
) -> Result<(), NcclFailure> {
    // SAFETY: the caller upholds this function's contract.
    let result = unsafe {
        sys::ncclReduceScatter(
            send as *const c_void,
            recv as *mut c_void,
            count,
            dtype,
            op,
            comm,
            stream.cast(),
        )
    };
    check(result, "ncclReduceScatter")
}

/// Queues a broadcast of `count` elements from rank `root`'s `send` into every rank's
/// `recv` on `stream` (`ncclBroadcast`; `send` is only read on the root, and may be
/// `recv`).
///
/// # Errors
/// NCCL's error.
///
/// # Safety
/// As [`all_reduce`].
pub unsafe fn broadcast(
    send: CUdeviceptr,
    recv: CUdeviceptr,
    count: usize,
    dtype: ncclDataType_t,
    root: i32,
    comm: ncclComm_t,
    stream: CUstream,
) -> Result<(), NcclFailure> {
    // SAFETY: the caller upholds this function's contract.
    let result = unsafe {
        sys::ncclBroadcast(
            send as *const c_void,
            recv as *mut c_void,
            count,
            dtype,
            root,
            comm,
            stream.cast(),
        )
    };
    check(result, "ncclBroadcast")
}
