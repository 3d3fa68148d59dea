//! A sync whose caller waits for the device itself.
//!
//! A sync normally records an event and hands it to the completion thread, which waits for
//! it and wakes the caller: on an idle device that is two thread hand-offs after the work is
//! done (runner → completion thread → caller) on top of the launch's. When the completion
//! thread has nothing queued, no earlier job can still add an error for the stream, so the
//! caller may watch the event itself: [`DirectWait`] polls it (`cuEventQuery`) each time
//! it is polled, and once it completed reports the stream's status counters and takes
//! its errors, as the completion thread would have.
//!
//! A caller that blocks (`client.sync()`, through `block_on`) polls it in a loop, so a
//! short kernel is seen done within a driver call. The direct watch lasts
//! [`DIRECT_WAIT`]; past it (long work), or if the future is dropped first, the event and
//! the counters go to the completion thread as before, which then resolves the future, or
//! only releases them. A future polled by an async executor checks the event once and then
//! hands it over at once, so the executor is never made to spin.

use crate::completion::{Check, CompletionQueue, Job, Reply, Shared};
use crate::context::CudaContext;
use crate::driver::{self, DriverFailure};
use crate::streams::EventPool;
use cubert_runtime::future::{OneshotReceiver, oneshot, polled_by_block_on};
use cubert_runtime::{ServerError, StreamId};
use cudarc::driver::sys::CUevent;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How long a caller watches the event itself before the completion thread takes over.
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

/// The event of a sync and what to do once it completes.
struct Pending {
    event: CUevent,
    checks: Vec<Check>,
}

// SAFETY: CUevent handles may be used from any thread of the context; checks are Send.
unsafe impl Send for Pending {}

enum State {
    /// The caller watches the event.
    Watching(Pending),
    /// The completion thread waits for the event and answers here.
    HandedOff(OneshotReceiver<Result<(), ServerError>>),
    /// Resolved.
    Done,
}

/// A sync of `stream` resolved by its caller's polls (see the module docs).
pub struct DirectWait {
    parts: DirectWaitParts,
    stream: StreamId,
    started: Instant,
    state: State,
}

impl DirectWait {
    /// Watches `event`, recorded on `stream` after the work to sync, and then reports
    /// `checks`. Only valid while the completion thread has no job queued.
    pub fn new(
        parts: DirectWaitParts,
        stream: StreamId,
        event: CUevent,
        checks: Vec<Check>,
    ) -> Self {
        Self {
            parts,
            stream,
            started: Instant::now(),
            state: State::Watching(Pending { event, checks }),
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

    /// Hands the event and the checks to the completion thread, with `reply` to answer.
    fn hand_off(&self, pending: Pending, reply: Reply) -> Result<(), ServerError> {
        self.parts.queue.submit(Job {
            event: pending.event,
            timing_event: false,
            stream: self.stream,
            checks: pending.checks,
            reply,
        })
    }

    /// The sync's outcome once the event completed: the checks reported, the event given
    /// back, the stream's errors taken.
    fn finish(&self, pending: Pending) -> Result<(), ServerError> {
        for check in pending.checks {
            check.report(&self.parts.shared);
        }
        self.parts.events.give_back(pending.event);
        self.parts.shared.take_errors(self.stream)
    }
}

impl Future for DirectWait {
    type Output = Result<(), ServerError>;

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
                    // Only a caller blocked in `block_on` spins; an async executor is
                    // answered by the completion thread's wake-up instead.
                    Ok(false) if polled_by_block_on() && this.started.elapsed() < DIRECT_WAIT => {
                        this.state = State::Watching(pending);
                        // Polled again at once: a blocked caller spins on the event.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    Ok(false) => {
                        let (sender, receiver) = oneshot();
                        if let Err(error) = this.hand_off(pending, Reply::Sync(sender)) {
                            return Poll::Ready(Err(error));
                        }
                        this.state = State::HandedOff(receiver);
                    }
                    Err(failure) => {
                        let error = this.parts.shared.observe(failure.into_server_error());
                        // The event and the counters are released by the completion thread.
                        let _ = this.hand_off(pending, Reply::Status);
                        return Poll::Ready(Err(error));
                    }
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
            && let Err(error) = self.hand_off(pending, Reply::Status)
        {
            tracing::warn!("a dropped CUDA sync could not release its event: {error}");
        }
    }
}
