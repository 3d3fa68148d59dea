//! Graphs: stream capture (`cuStreamBeginCapture`/`cuStreamEndCapture`), instantiation,
//! launch and destruction.

use super::{Context as _, DriverFailure};
use cudarc::driver::sys::{self, CUgraph, CUgraphExec, CUstream};

/// Starts capturing `stream` into a graph in relaxed mode (`cuStreamBeginCapture`).
///
/// # Errors
/// The driver's error (for instance when the stream is already capturing).
///
/// # Safety
/// `stream` is a live stream.
pub unsafe fn begin_capture(stream: CUstream) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe {
        sys::cuStreamBeginCapture_v2(
            stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )
    }
    .during("cuStreamBeginCapture")
}

/// Ends the capture of `stream` and returns the captured graph (`cuStreamEndCapture`).
///
/// # Errors
/// The driver's error (an invalidated capture, or none in progress).
///
/// # Safety
/// `stream` is a live stream.
pub unsafe fn end_capture(stream: CUstream) -> Result<CUgraph, DriverFailure> {
    let mut graph: CUgraph = std::ptr::null_mut();
    // SAFETY: valid out pointer; the caller vouches for `stream`.
    unsafe { sys::cuStreamEndCapture(stream, &mut graph) }.during("cuStreamEndCapture")?;
    Ok(graph)
}

/// Instantiates `graph` with default flags (`cuGraphInstantiate`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `graph` is a live graph.
pub unsafe fn instantiate(graph: CUgraph) -> Result<CUgraphExec, DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { cudarc::driver::result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) }
        .during("cuGraphInstantiate")
}

/// Queues `exec` on `stream` (`cuGraphLaunch`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `exec` and `stream` are live, of the same context; the memory the graph's work uses is
/// still allocated.
pub unsafe fn launch(exec: CUgraphExec, stream: CUstream) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuGraphLaunch(exec, stream) }.during("cuGraphLaunch")
}

/// Destroys `graph` (`cuGraphDestroy`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `graph` came from [`end_capture`] and is destroyed once.
pub unsafe fn destroy(graph: CUgraph) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuGraphDestroy(graph) }.during("cuGraphDestroy")
}

/// Destroys the executable graph `exec` (`cuGraphExecDestroy`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `exec` came from [`instantiate`], is destroyed once, and no queued launch of it is
/// pending.
pub unsafe fn destroy_exec(exec: CUgraphExec) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuGraphExecDestroy(exec) }.during("cuGraphExecDestroy")
}

/// Writes `graph` as a Graphviz DOT file at `path`, every node with its parameters
/// (`cuGraphDebugDotPrint`, verbose).
///
/// # Errors
/// The driver's error (an unwritable path).
///
/// # Safety
/// `graph` is a live graph.
pub unsafe fn write_dot(graph: CUgraph, path: &std::ffi::CStr) -> Result<(), DriverFailure> {
    let verbose = sys::CUgraphDebugDot_flags::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE as u32;
    // SAFETY: the caller vouches for `graph`; `path` is a NUL-terminated string.
    unsafe { sys::cuGraphDebugDotPrint(graph, path.as_ptr(), verbose) }
        .during("cuGraphDebugDotPrint")
}
