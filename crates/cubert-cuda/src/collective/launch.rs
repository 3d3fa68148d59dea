//! Launching matched collective calls on the devices, without the host ever waiting.
//!
//! A device's call ([`CudaCall`]) is prepared on its own server: an event recorded on the
//! caller's stream after the work that wrote the inputs, and a *gate* on that stream — a
//! `cuStreamWaitValue32` on a flag in device memory that holds later work on the stream back
//! until the flag reaches the call's sequence number. The call then meets its peers'
//! in the device set's `LocalGroup`; the last call to arrive (on whatever thread) launches
//! them all ([`NcclLauncher`]):
//!
//! 1. each device's collective stream waits for its call's event (inputs written);
//! 2. the NCCL calls of every participant go in one `ncclGroupStart`/`ncclGroupEnd`, which
//!    is how one thread drives several GPUs without NCCL waiting on the host;
//! 3. each device's collective stream writes its flag (`cuStreamWriteValue32`), opening the
//!    gate: work queued on the caller's stream after the collective runs after it, and work
//!    queued before it or on other streams keeps running meanwhile.
//!
//! The gate is what makes this order-safe although the NCCL work of an early device is
//! queued later (by another device's call): the caller's stream waits by value, not for an
//! event that doesn't exist yet. Calls abandoned instead of launched (mismatched, their
//! server dropped) still open their gate, so no stream waits forever, and their error is
//! queued on the caller's stream. One process-wide lock orders every launch, so the NCCL
//! kernels of different communicators are queued in one order on every GPU.

use super::communicator::Comm;
use crate::completion::Shared;
use crate::context::CudaContext;
use crate::driver::Context as _;
use crate::nccl;
use crate::streams::EventPool;
use cubert_runtime::server::local_group::{Call, CallKind, Launcher};
use cubert_runtime::{ServerError, StreamId};
use cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUstream};
use cudarc::nccl::sys::{self as nccl_sys, ncclDataType_t, ncclRedOp_t};
use std::sync::{Arc, Mutex, PoisonError};

/// Orders the launches of every communicator of the process.
static LAUNCH: Mutex<()> = Mutex::new(());

/// The gate of a call: the flag and the value that opens it.
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    /// A `u32` in device memory of the caller's device.
    pub flag: CUdeviceptr,
    /// The value written when the call is done.
    pub value: u32,
}

/// One device's part of a collective, as its server prepared it.
pub struct CudaCall {
    /// The device's context.
    pub context: Arc<CudaContext>,
    /// The device's collective stream (NCCL work goes there).
    pub stream: CUstream,
    /// The device's communicator.
    pub comm: Comm,
    /// Recorded on the caller's stream after the work that wrote the inputs.
    pub ready: Option<CUevent>,
    /// Where `ready` goes back.
    pub events: Arc<EventPool>,
    /// Input (all-reduce, send).
    pub send: CUdeviceptr,
    /// Output (all-reduce, recv).
    pub recv: CUdeviceptr,
    /// Elements.
    pub count: usize,
    /// NCCL's element type.
    pub dtype: ncclDataType_t,
    /// NCCL's reduction (all-reduce).
    pub op: ncclRedOp_t,
    /// The gate on the caller's stream.
    pub gate: Gate,
    /// Where errors of the call are queued.
    pub shared: Arc<Shared>,
    /// The caller's stream, for its errors.
    pub caller: StreamId,
}

// SAFETY: the raw handles (context, streams, events, device memory, communicator) may be
// used from any thread once the owning context is bound, which the launcher does first;
// the owning server keeps them alive until its calls are launched or abandoned (its drop
// abandons them under the group's lock before freeing anything).
unsafe impl Send for CudaCall {}

impl CudaCall {
    /// Makes the collective stream wait for the inputs (once).
    fn wait_for_inputs(&mut self) -> Result<(), ServerError> {
        let Some(ready) = self.ready.take() else {
            return Ok(());
        };
        self.context.bind()?;
        // SAFETY: live stream and event of this context; the wait is captured now, so the
        // event can be reused at once.
        let waited =
            unsafe { sys::cuStreamWaitEvent(self.stream, ready, 0) }.during("cuStreamWaitEvent");
        self.events.give_back(ready);
        waited.map_err(Into::into)
    }

    /// Opens the gate after the work queued on the collective stream so far.
    fn open_gate(&self) -> Result<(), ServerError> {
        self.context.bind()?;
        // SAFETY: live stream; the flag is device memory of this context, alive while the
        // server is.
        unsafe { sys::cuStreamWriteValue32_v2(self.stream, self.gate.flag, self.gate.value, 0) }
            .during("cuStreamWriteValue32")
            .map_err(Into::into)
    }

    fn nccl_stream(&self) -> nccl_sys::cudaStream_t {
        self.stream.cast()
    }

    /// Queues this call's NCCL operation (inside a group). The buffers are device memory
    /// of this call's device holding `count` elements, kept alive by the caller's bindings
    /// until its stream passes the gate; the communicator and stream belong to this device.
    fn enqueue(&self, kind: CallKind, peer: i32) -> Result<(), ServerError> {
        let (send, recv) = (
            self.send as *const std::ffi::c_void,
            self.recv as *mut std::ffi::c_void,
        );
        let stream = self.nccl_stream();
        let result = match kind {
            // SAFETY: `send` and `recv` hold `count` elements of this device's memory (kept
            // alive until the caller's stream passes the gate); comm and stream are this
            // device's.
            CallKind::AllReduce { .. } => unsafe {
                nccl_sys::ncclAllReduce(
                    send,
                    recv,
                    self.count,
                    self.dtype,
                    self.op,
                    self.comm.0,
                    stream,
                )
            },
            // SAFETY: `send` holds `count` elements of this device's memory (kept alive until
            // the caller's stream passes the gate); comm and stream are this device's.
            CallKind::Send { .. } => unsafe {
                nccl_sys::ncclSend(send, self.count, self.dtype, peer, self.comm.0, stream)
            },
            // SAFETY: `recv` holds `count` elements of this device's memory (kept alive until
            // the caller's stream passes the gate); comm and stream are this device's.
            CallKind::Recv { .. } => unsafe {
                nccl_sys::ncclRecv(recv, self.count, self.dtype, peer, self.comm.0, stream)
            },
        };
        nccl::check(result, "an NCCL collective")
    }
}

/// Launches matched calls through NCCL. See the module docs.
pub struct NcclLauncher;

impl NcclLauncher {
    fn run(calls: &mut [Call<CudaCall>]) -> Result<(), ServerError> {
        for call in calls.iter_mut() {
            call.payload.wait_for_inputs()?;
        }
        nccl::check(
            // SAFETY: opens a group closed below on every path.
            unsafe { nccl_sys::ncclGroupStart() },
            "ncclGroupStart",
        )?;
        let mut queued = Ok(());
        for call in calls.iter() {
            let peer = match call.kind {
                CallKind::Send { peer, .. } | CallKind::Recv { peer, .. } => peer as i32,
                CallKind::AllReduce { .. } => 0,
            };
            if let Err(error) = call.payload.enqueue(call.kind, peer) {
                queued = Err(error);
                break;
            }
        }
        // SAFETY: closes the group opened above.
        let ended = nccl::check(unsafe { nccl_sys::ncclGroupEnd() }, "ncclGroupEnd");
        queued.and(ended)
    }
}

impl Launcher<CudaCall> for NcclLauncher {
    fn launch(&mut self, calls: &mut [Call<CudaCall>]) -> Result<(), ServerError> {
        let _order = LAUNCH.lock().unwrap_or_else(PoisonError::into_inner);
        let result = Self::run(calls);
        // Every gate opens, launched or not: no stream waits forever.
        let mut opened = Ok(());
        for call in calls.iter_mut() {
            if let Some(ready) = call.payload.ready.take() {
                call.payload.events.give_back(ready);
            }
            if let Err(error) = call.payload.open_gate() {
                opened = Err(error);
            }
            if let Err(error) = &result {
                call.payload
                    .shared
                    .push_error(call.payload.caller, error.clone());
            }
        }
        result.and(opened)
    }

    fn abandon(&mut self, calls: &mut [Call<CudaCall>], error: &ServerError) {
        let _order = LAUNCH.lock().unwrap_or_else(PoisonError::into_inner);
        for call in calls.iter_mut() {
            if let Some(ready) = call.payload.ready.take() {
                call.payload.events.give_back(ready);
            }
            if let Err(failure) = call.payload.open_gate() {
                log::error!("can't open the gate of an abandoned collective: {failure}");
            }
            call.payload
                .shared
                .push_error(call.payload.caller, error.clone());
        }
    }
}
