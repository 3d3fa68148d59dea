//! Launching matched collective calls on the devices, with CUDA-visible ordering only.
//!
//! A device's call ([`CudaCall`]) is prepared on its own server: an event recorded on the
//! caller's stream after the work that wrote the inputs, the raw buffers, and the bindings
//! that keep them alive. The call then meets its peers' in the device set's `LocalGroup`;
//! the last call to arrive (on whatever thread) launches them all ([`NcclLauncher`]):
//!
//! 1. each device's collective stream waits for its call's event (inputs written);
//! 2. the NCCL calls of every participant go in one `ncclGroupStart`/`ncclGroupEnd`, which
//!    is how one thread drives several GPUs without NCCL waiting on the host;
//! 3. each device's collective stream records a *done* event after its NCCL work.
//!
//! When every call of an instance was made on a runner thread (threaded handles), each of
//! those threads is waiting for the instance anyway, so the launcher leaves the calls to
//! their owners ([`CudaCall::awaiting_owner`]): each runner launches its own device's NCCL
//! call ([`CudaCall::launch_alone`]) as soon as the instance is complete, all devices in
//! parallel, instead of one thread launching them one after the other (on four H200s that
//! serial launch was most of a small all-reduce's time). The order of the NCCL kernels on
//! each device is still the order in which instances completed: a runner can't arrive at
//! its next call before it has launched this one.
//!
//! The caller's server then makes its stream wait for the done event (see the parent
//! module), so work queued after the collective runs after it. Nothing on the device ever
//! waits for something the host has yet to do: an earlier design held the caller's stream
//! with `cuStreamWaitValue32` until a flag written after the NCCL work, and that deadlocked
//! on two H200s — a stream blocked on a memory wait holds its hardware queue, and the NCCL
//! kernel queued later on another stream that shares the queue never started (the driver
//! documents that such waits must also be expressed with events). Calls abandoned instead
//! of launched (mismatched, timed out, their server dropped) keep their error for their
//! caller. One process-wide lock orders every group launch, so the NCCL kernels of different
//! communicators are queued in one order on every GPU.

use super::communicator::Comm;
use crate::context::CudaContext;
use crate::driver;
use crate::nccl;
use crate::streams::EventPool;
use cubert_runtime::server::local_group::{Call, CallKind, Launcher};
use cubert_runtime::{Binding, ServerError};
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUstream};
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t};
use std::sync::{Arc, Mutex, PoisonError};

/// Orders the launches of every communicator of the process.
static LAUNCH: Mutex<()> = Mutex::new(());

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
    /// Recorded on the collective stream after the NCCL work, by the launch.
    pub done: Option<CUevent>,
    /// Where `ready` and `done` go back (the device's pool).
    pub events: Arc<EventPool>,
    /// Input (the buffer of a broadcast or send).
    pub send: CUdeviceptr,
    /// Output (the buffer of a broadcast or recv).
    pub recv: CUdeviceptr,
    /// Elements: NCCL's count (per rank for an all-gather's input and a reduce-scatter's
    /// output).
    pub count: usize,
    /// NCCL's element type.
    pub dtype: ncclDataType_t,
    /// NCCL's reduction (all-reduce).
    pub op: ncclRedOp_t,
    /// Made on a runner thread that waits for the instance: its owner can launch it.
    pub by_owner: bool,
    /// Set by the launcher when it left this call to its owner (see the module docs):
    /// nothing is queued on the device yet.
    pub awaiting_owner: bool,
    /// The bindings of `send` and `recv`: their memory stays allocated until the caller's
    /// stream waits for `done` and this call is dropped.
    #[expect(dead_code, reason = "held, never read: it keeps the buffers allocated")]
    pub buffers: Vec<Binding>,
}

// SAFETY: the raw handles (context, streams, events, device memory, communicator) may be
// used from any thread once the owning context is bound, which the launcher does first;
// the owning server keeps them alive until its calls are launched or abandoned (its drop
// abandons them under the group's lock before freeing anything), and `buffers` keeps the
// memory allocated.
unsafe impl Send for CudaCall {}

impl Drop for CudaCall {
    fn drop(&mut self) {
        for event in [self.ready.take(), self.done.take()].into_iter().flatten() {
            self.events.give_back(event);
        }
    }
}

impl CudaCall {
    /// Makes the collective stream wait for the inputs (once).
    fn wait_for_inputs(&mut self) -> Result<(), ServerError> {
        let Some(ready) = self.ready.take() else {
            return Ok(());
        };
        self.context.bind()?;
        // SAFETY: live stream and event of this context; the wait is captured now, so the
        // event can be reused at once.
        let waited = unsafe { driver::stream::wait_event(self.stream, ready) };
        self.events.give_back(ready);
        waited.map_err(Into::into)
    }

    /// Records `done` on the collective stream, after the work queued there so far.
    fn record_done(&mut self) -> Result<(), ServerError> {
        self.context.bind()?;
        let event = self.events.take()?;
        // SAFETY: live event and stream of this context (bound above).
        let recorded = unsafe { driver::event::record(event, self.stream) };
        match recorded {
            Ok(()) => {
                if let Some(old) = self.done.replace(event) {
                    self.events.give_back(old);
                }
                Ok(())
            }
            Err(failure) => {
                self.events.give_back(event);
                Err(failure.into())
            }
        }
    }

    /// Launches this call alone, on its owner's thread, after the launcher left it there
    /// ([`Self::awaiting_owner`]): the collective stream waits for the inputs, NCCL queues
    /// the operation, the stream records `done` (even after a failure, so whatever NCCL
    /// queued is ordered before the caller's later work).
    ///
    /// # Errors
    /// The driver's or NCCL's error.
    pub fn launch_alone(&mut self, kind: CallKind) -> Result<(), ServerError> {
        self.awaiting_owner = false;
        let queued = self
            .context
            .bind()
            .map_err(ServerError::from)
            .and_then(|()| self.wait_for_inputs())
            .and_then(|()| self.enqueue(kind));
        let recorded = self.record_done();
        queued.and(recorded)
    }

    /// Queues this call's NCCL operation (inside a group). The buffers are device memory
    /// of this call's device holding `count` elements (`count` × ranks for an all-gather's
    /// output and a reduce-scatter's input, checked by the server), kept allocated by
    /// `buffers`; the communicator and stream belong to this device.
    fn enqueue(&self, kind: CallKind) -> Result<(), ServerError> {
        let (send, recv, stream) = (self.send, self.recv, self.stream);
        let peer = peer_of(kind);
        let result = match kind {
            // SAFETY: `send` and `recv` hold `count` elements of this device's memory (kept
            // allocated by `buffers`); comm and stream are this
            // device's.
            CallKind::AllReduce { .. } => unsafe {
                driver::nccl::all_reduce(
                    send,
                    recv,
                    self.count,
                    self.dtype,
                    self.op,
                    self.comm.0,
                    stream,
                )
            },
            // SAFETY: `send` holds `count` elements of this device's memory (kept allocated by
            // `buffers`); comm and stream are this device's.
            CallKind::Send { .. } => unsafe {
                driver::nccl::send(send, self.count, self.dtype, peer, self.comm.0, stream)
            },
            // SAFETY: `recv` holds `count` elements of this device's memory (kept allocated by
            // `buffers`); comm and stream are this device's.
            CallKind::Recv { .. } => unsafe {
                driver::nccl::recv(recv, self.count, self.dtype, peer, self.comm.0, stream)
            },
            // SAFETY: `send` holds `count` elements and `recv` `count` × ranks of this
            // device's memory (kept allocated by `buffers`); comm and stream are this
            // device's.
            CallKind::AllGather { .. } => unsafe {
                driver::nccl::all_gather(send, recv, self.count, self.dtype, self.comm.0, stream)
            },
            // SAFETY: `send` holds `count` × ranks elements and `recv` `count` of this
            // device's memory (kept allocated by `buffers`); comm and stream are this
            // device's.
            CallKind::ReduceScatter { .. } => unsafe {
                driver::nccl::reduce_scatter(
                    send,
                    recv,
                    self.count,
                    self.dtype,
                    self.op,
                    self.comm.0,
                    stream,
                )
            },
            // SAFETY: `send` and `recv` (one buffer: the broadcast is in place) hold `count`
            // elements of this device's memory (kept allocated by `buffers`); comm and stream
            // are this device's.
            CallKind::Broadcast { .. } => unsafe {
                driver::nccl::broadcast(
                    send,
                    recv,
                    self.count,
                    self.dtype,
                    peer,
                    self.comm.0,
                    stream,
                )
            },
        };
        // Every operation is reported as "an NCCL collective".
        result.or_else(|failure| nccl::check(failure.result, "an NCCL collective"))
    }
}

/// Launches matched calls through NCCL. See the module docs.
pub struct NcclLauncher;

impl NcclLauncher {
    fn run(calls: &mut [Call<CudaCall>]) -> Result<(), ServerError> {
        for call in calls.iter_mut() {
            call.payload.wait_for_inputs()?;
        }
        // Opens a group closed below on every path.
        driver::nccl::group_start()?;
        let mut queued = Ok(());
        for call in calls.iter() {
            if let Err(error) = call.payload.enqueue(call.kind) {
                queued = Err(error);
                break;
            }
        }
        // Closes the group opened above.
        let ended = driver::nccl::group_end().map_err(ServerError::from);
        queued.and(ended)
    }
}

/// The rank NCCL is given for `kind`: the peer of a send or receive, the root of a
/// broadcast (0 where it has none).
fn peer_of(kind: CallKind) -> i32 {
    match kind {
        CallKind::Send { peer, .. }
        | CallKind::Recv { peer, .. }
        | CallKind::Broadcast { root: peer, .. } => i32::try_from(peer).unwrap_or(i32::MAX),
        CallKind::AllReduce { .. }
        | CallKind::AllGather { .. }
        | CallKind::ReduceScatter { .. } => 0,
    }
}

impl Launcher<CudaCall> for NcclLauncher {
    fn launch(&mut self, calls: &mut [Call<CudaCall>]) -> Result<(), ServerError> {
        if calls.iter().all(|call| call.payload.by_owner) {
            for call in calls.iter_mut() {
                call.payload.awaiting_owner = true;
            }
            return Ok(());
        }
        let _order = LAUNCH.lock().unwrap_or_else(PoisonError::into_inner);
        let result = Self::run(calls);
        // `done` is recorded even after a failure: whatever NCCL queued before it failed is
        // then still ordered before the caller's later work and the buffers' release.
        let mut recorded = Ok(());
        for call in calls.iter_mut() {
            if let Some(ready) = call.payload.ready.take() {
                call.payload.events.give_back(ready);
            }
            if let Err(error) = call.payload.record_done() {
                recorded = Err(error);
            }
        }
        result.and(recorded)
    }

    fn abandon(&mut self, calls: &mut [Call<CudaCall>], _error: &ServerError) {
        // Nothing was queued on the devices; the error is kept with each call for its
        // caller, and the events go back when the calls are dropped.
        for call in calls.iter_mut() {
            if let Some(ready) = call.payload.ready.take() {
                call.payload.events.give_back(ready);
            }
        }
    }
}
