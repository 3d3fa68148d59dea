//! A sync or a read whose caller waits for the device itself.
//!
//! A sync or a read normally records an event and hands it to the completion thread, which
//! waits for it and wakes the caller: on an idle device that is two thread hand-offs after
//! the work is done (runner → completion thread → caller) on top of the launch's. When the
//! completion thread has nothing queued, no earlier job can still add an error for the
//! stream, so the caller may watch the event itself: [`DirectWait`] polls it
//! (`cuEventQuery`) each time it is polled, and once it completed reports the stream's
//! status counters, takes its errors and hands over the read's buffers (none for a sync),
//! as the completion thread would have.
//!
//! A caller that blocks (`client.sync()`, `client.read()`, through `block_on`) polls it in a
//! loop, so a short kernel or copy is seen done within a driver call. Past
//! [`DIRECT_WAIT`] (long work) such a caller waits for the event in the driver
//! (`cuEventSynchronize`, as the completion thread would, and as a synchronous
//! `cudaMemcpy` does): it is blocked either way, and this way no thread has to wake it
//! (on an H200 host the hand-off cost a 1 GiB read 0.7-1.1 % of its time). A future polled
//! by an async executor checks the event once and then hands it to the completion thread
//! at once, so the executor is never made to spin or block; so does a future dropped
//! before its event completed (the thread keeps a read's buffers alive until then).

use crate::completion::{Check, CompletionQueue, Job, Reply, Shared, wait_for};
use crate::context::CudaContext;
use crate::driver::{self, DriverFailure};
use crate::streams::EventPool;
use cubert_runtime::future::{OneshotReceiver, oneshot, polled_by_block_on};
use cubert_runtime::{Bytes, ServerError, StreamId};
use cudarc::driver::sys::CUevent;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How long a blocked caller polls the event before it waits for it in the driver.
pub const DIRECT_WAIT: Duration = Duration::from_micros(100);

/// What a future that waits for the server's events on its caller's thread needs of the
/// server ([`DirectWait`], [`crate::chunked_read::ChunkedRead`]): shared by all of them.
#[derive(Clone)]
pub struct DirectWaitParts {
    /// The server's context: made current around each query.
    pub context: Arc<CudaContext>,
    /// Errors and health shared with the completion thread.
    pub shared: Arc<Shared>,
    /// Where the event goes back.
    pub events: Arc<EventPool>,
    /// The completion thread, which takes over a long wait.
    pub queue: CompletionQueue,
}

/// The event of a sync or read and what to do once it completes.
struct Pending {
    event: CUevent,
    checks: Vec<Check>,
    /// The read's buffers, which the device fills before the event (empty for a sync).
    buffers: Vec<Bytes>,
}

// SAFETY: CUevent handles may be used from any thread of the context; checks are Send.
unsafe impl Send for Pending {}

enum State {
    /// The caller watches the event.
    Watching(Pending),
    /// The completion thread waits for the event and answers here.
    HandedOff(OneshotReceiver<Result<Vec<Bytes>, ServerError>>),
    /// Resolved.
    Done,
}

/// A sync or read of `stream` resolved by its caller's polls (see the module docs): the
/// read's buffers, or none for a sync.
pub struct DirectWait {
    parts: DirectWaitParts,
    stream: StreamId,
    started: Instant,
    state: State,
}

impl DirectWait {
    /// Watches `event`, recorded on `stream` after the work to wait for (a read's copies
    /// into `buffers`; none for a sync), then reports `checks` and resolves to `buffers`.
    /// Only valid while the completion thread has no job queued.
    pub fn new(
        parts: DirectWaitParts,
        stream: StreamId,
        event: CUevent,
        checks: Vec<Check>,
        buffers: Vec<Bytes>,
    ) -> Self {
        Self {
            parts,
            stream,
            started: Instant::now(),
            state: State::Watching(Pending {
                event,
                checks,
                buffers,
            }),
        }
    }

    /// Whether the event completed: `cuEventQuery` with the server's context current (made
    /// current for the query only where another one is: a push and a pop cost more than
    /// the query).
    fn query(&self, event: CUevent) -> Result<bool, DriverFailure> {
        let _scope = if self.parts.context.is_current() {
            None
        } else {
            Some(self.parts.context.scoped()?)
        };
        // SAFETY: the event was recorded on a stream of this context and is owned by this
        // future until it is given back.
        unsafe { driver::event::query(event) }
    }

    /// Blocks until the event completed (polled, then `cuEventSynchronize`), with the
    /// server's context current.
    fn block(&self, event: CUevent) -> Result<(), DriverFailure> {
        let _scope = if self.parts.context.is_current() {
            None
        } else {
            Some(self.parts.context.scoped()?)
        };
        wait_for(event)
    }

    /// Hands the event, the checks and the buffers to the completion thread, which answers
    /// on the returned receiver.
    fn hand_off(
        &self,
        pending: Pending,
    ) -> Result<OneshotReceiver<Result<Vec<Bytes>, ServerError>>, ServerError> {
        let (sender, receiver) = oneshot();
        self.submit(
            pending.event,
            pending.checks,
            Reply::Read(pending.buffers, sender),
        )?;
        Ok(receiver)
    }

    /// Gives the event, the checks and the buffers to the completion thread with no one to
    /// answer: it reports the checks and drops the buffers once the device is done with
    /// them.
    fn release(&self, pending: Pending) -> Result<(), ServerError> {
        let reply = if pending.buffers.is_empty() {
            Reply::Status
        } else {
            Reply::Retire(Box::new(pending.buffers))
        };
        self.submit(pending.event, pending.checks, reply)
    }

    /// Queues a job for the completion thread. It fails only once the server is gone, and a
    /// server synchronizes its streams before its completion thread stops: a read's
    /// buffers, dropped with the failed job, are no longer written by the device then.
    fn submit(&self, event: CUevent, checks: Vec<Check>, reply: Reply) -> Result<(), ServerError> {
        self.parts.queue.submit(Job {
            event,
            timing_event: false,
            stream: self.stream,
            checks,
            reply,
        })
    }

    /// The outcome once the event completed: the checks reported, the event given back,
    /// the stream's errors taken, the buffers handed over.
    fn finish(&self, pending: Pending) -> Result<Vec<Bytes>, ServerError> {
        for check in pending.checks {
            check.report(&self.parts.shared);
        }
        self.parts.events.give_back(pending.event);
        self.parts
            .shared
            .take_errors(self.stream)
            .map(|()| pending.buffers)
    }

    /// A driver failure while watching: recorded (a fault marks the server unhealthy), the
    /// event and what it guards released by the completion thread.
    fn fail(&self, pending: Pending, failure: DriverFailure) -> ServerError {
        let error = self.parts.shared.observe(failure.into_server_error());
        if let Err(lost) = self.release(pending) {
            tracing::warn!("a failed CUDA wait could not release its event: {lost}");
        }
        error
    }
}

impl Future for DirectWait {
    type Output = Result<Vec<Bytes>, ServerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            match std::mem::replace(&mut this.state, State::Done) {
                State::Done => {
                    return Poll::Ready(Err(ServerError::generic(
                        "a CUDA sync was polled after it resolved",
                    )));
                }
                State::HandedOff(mut receiver) => {
                    return match Pin::new(&mut receiver).poll(cx) {
                        Poll::Ready(Some(result)) => Poll::Ready(result),
                        Poll::Ready(None) => Poll::Ready(Err(ServerError::generic(
                            "the CUDA completion thread stopped",
                        ))),
                        Poll::Pending => {
                            this.state = State::HandedOff(receiver);
                            Poll::Pending
                        }
                    };
                }
                State::Watching(pending) => match this.query(pending.event) {
                    Ok(true) => return Poll::Ready(this.finish(pending)),
                    // Only a caller blocked in `block_on` waits itself; an async executor
                    // is answered by the completion thread's wake-up instead.
                    Ok(false) if polled_by_block_on() => {
                        if this.started.elapsed() < DIRECT_WAIT {
                            this.state = State::Watching(pending);
                            // Polled again at once: a blocked caller spins on the event.
                            cx.waker().wake_by_ref();
                            return Poll::Pending;
                        }
                        // Long work: wait in the driver, as the completion thread would; a
                        // failed wait is a device fault there too, and `finish` reports it.
                        if let Err(failure) = this.block(pending.event) {
                            this.parts.shared.set_unhealthy(failure.into_server_error());
                        }
                        return Poll::Ready(this.finish(pending));
                    }
                    Ok(false) => match this.hand_off(pending) {
                        Ok(receiver) => this.state = State::HandedOff(receiver),
                        Err(error) => return Poll::Ready(Err(error)),
                    },
                    Err(failure) => return Poll::Ready(Err(this.fail(pending, failure))),
                },
            }
        }
    }
}

impl Drop for DirectWait {
    fn drop(&mut self) {
        // Dropped before the event completed: the counters may still be written by the
        // device, so the completion thread keeps them (and the event) until it has.
        if let State::Watching(pending) = std::mem::replace(&mut self.state, State::Done)
            && let Err(error) = self.release(pending)
        {
            tracing::warn!("a dropped CUDA wait could not release its event: {error}");
        }
    }
}
