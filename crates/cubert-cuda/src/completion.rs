//! The completion thread: resolves futures when the device reaches an event.
//!
//! The runner thread never blocks on the device for a read, a sync or a profile: it records
//! an event after the work and sends a [`Job`] here. This thread waits for the events in
//! order (`cuEventSynchronize`), turns status counters into out-of-bounds errors, and
//! resolves the job's future: read bytes, a sync result, a profile duration, or simply the
//! release of buffers that had to live until a copy finished. When it has nothing queued, a
//! read or sync is instead waited for by its caller (`direct_wait`), which hands its event
//! here only when polled by an async executor or dropped early.
//!
//! A driver error while waiting means a device fault: the shared state is marked unhealthy
//! and every later operation of the server reports it.

use crate::context::CudaContext;
use crate::driver::{self, DriverFailure};
use crate::status::StatusBlock;
use crate::streams::EventPool;
use cubert_runtime::future::OneshotSender;
use cubert_runtime::profile::ProfileTicks;
use cubert_runtime::server::StreamErrors;
use cubert_runtime::spin::{recv_spinning, spinning_helps};
use cubert_runtime::{Bytes, ProfileError, ServerError, StreamId};
use cudarc::driver::sys::CUevent;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// State shared by the runner and the completion thread.
#[derive(Default)]
pub struct Shared {
    errors: Mutex<StreamErrors>,
    unhealthy: Mutex<Option<ServerError>>,
    /// Set once `unhealthy` holds the fault: the check every entry point makes reads this
    /// flag, not the mutex.
    faulted: AtomicBool,
}

impl Shared {
    /// Records a device fault if `error` is one, and returns it.
    pub fn observe(&self, error: ServerError) -> ServerError {
        if matches!(error, ServerError::ServerUnhealthy { .. }) {
            self.set_unhealthy(error.clone());
        }
        error
    }

    /// Queues an error on a stream (a device fault also marks the server unhealthy).
    pub fn push_error(&self, stream: StreamId, error: ServerError) {
        let error = self.observe(error);
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(stream, error);
    }

    /// Takes the errors of a stream (the first one), or the device fault.
    ///
    /// # Errors
    /// The device fault, else the first error queued on the stream.
    pub fn take_errors(&self, stream: StreamId) -> Result<(), ServerError> {
        self.health()?;
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(stream)
    }

    /// The device fault, if one happened.
    ///
    /// # Errors
    /// `ServerError::ServerUnhealthy` after a device fault.
    pub fn health(&self) -> Result<(), ServerError> {
        if !self.faulted.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self
            .unhealthy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// Records a device fault.
    pub fn set_unhealthy(&self, error: ServerError) {
        let mut unhealthy = self
            .unhealthy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if unhealthy.is_none() {
            tracing::error!("CUDA device fault: {error}");
            *unhealthy = Some(error);
            self.faulted.store(true, Ordering::Release);
        }
    }
}

/// What to do when a job's event completes.
pub enum Reply {
    /// Hand read bytes to the future.
    Read(Vec<Bytes>, OneshotSender<Result<Vec<Bytes>, ServerError>>),
    /// Resolve a sync.
    Sync(OneshotSender<Result<(), ServerError>>),
    /// Measure the time between a start event and the job's event.
    Profile {
        /// The start event (timing enabled).
        start: CUevent,
        /// Host time when the start event was recorded.
        started: Instant,
        /// Where the duration goes.
        reply: OneshotSender<Result<ProfileTicks, ProfileError>>,
    },
    /// Keep something alive until the event (staging buffers of a copy).
    Retire(Box<dyn Any + Send>),
    /// Only collect status checks.
    Status,
}

/// Status counters to read once a job's event completed.
pub enum Check {
    /// A stream's block: read, then freed.
    Block(StatusBlock, StreamId),
    /// A graph's block: read after each replay, kept.
    Graph(Arc<Mutex<StatusBlock>>, StreamId),
}

impl Check {
    /// Turns the counters into errors on the stream. Call once the launches are complete.
    pub fn report(self, shared: &Shared) {
        match self {
            Check::Block(mut block, stream) => {
                for error in block.take_errors() {
                    shared.push_error(stream, error);
                }
            }
            Check::Graph(block, stream) => {
                let errors = block
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .read_errors();
                for error in errors {
                    shared.push_error(stream, error);
                }
            }
        }
    }
}

/// Work for the completion thread.
pub struct Job {
    /// Completes when the device got there.
    pub event: CUevent,
    /// Whether `event` is a timing event (returned to the timing pool).
    pub timing_event: bool,
    /// The stream the job belongs to.
    pub stream: StreamId,
    /// Status counters to read once complete.
    pub checks: Vec<Check>,
    /// What to resolve.
    pub reply: Reply,
}

// SAFETY: CUevent handles may be used from any thread of the context; the rest is Send.
unsafe impl Send for Job {}

/// Handle to the completion thread; dropping it finishes the queued jobs and joins.
pub struct Completion {
    queue: CompletionQueue,
    thread: Option<JoinHandle<()>>,
}

/// A way to queue jobs for the completion thread from any thread (what a
/// [`crate::direct_wait::DirectWait`] hands its event to when it stops waiting itself), and
/// the count of jobs queued and not yet finished.
#[derive(Clone)]
pub struct CompletionQueue {
    /// Jobs; `None` stops the thread (sent when the server drops, so that a queue still
    /// held by a direct wait doesn't keep the thread alive).
    sender: Sender<Option<Job>>,
    pending: Arc<AtomicUsize>,
}

impl CompletionQueue {
    /// Queues a job.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the thread is gone.
    pub fn submit(&self, job: Job) -> Result<(), ServerError> {
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.sender.send(Some(job)).map_err(|_| {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            ServerError::generic("the CUDA completion thread has stopped")
        })
    }

    /// Whether every job queued so far is finished: its checks reported, its reply sent.
    pub fn is_idle(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }
}

impl Completion {
    /// Starts the thread.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the thread can't be spawned.
    pub fn start(
        context: Arc<CudaContext>,
        shared: Arc<Shared>,
        events: Arc<EventPool>,
        timing_events: Arc<EventPool>,
    ) -> Result<Self, ServerError> {
        let (sender, receiver) = mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let name = format!("cubert-cuda{}-completion", context.ordinal());
        let finished = pending.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(context, shared, events, timing_events, receiver, finished))
            .map_err(|error| {
                ServerError::generic(format!("can't start the completion thread: {error}"))
            })?;
        Ok(Self {
            queue: CompletionQueue { sender, pending },
            thread: Some(thread),
        })
    }

    /// Queues a job.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the thread is gone.
    pub fn submit(&self, job: Job) -> Result<(), ServerError> {
        self.queue.submit(job)
    }

    /// Whether every job queued so far is finished.
    pub fn is_idle(&self) -> bool {
        self.queue.is_idle()
    }

    /// A queue to the thread that any thread may use.
    pub fn queue(&self) -> CompletionQueue {
        self.queue.clone()
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        // The jobs queued so far are finished first; a direct wait that hands off later is
        // told the thread has stopped.
        let _ = self.queue.sender.send(None);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Counts a job as finished when dropped (after its reply was sent).
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long the completion thread polls an event before blocking on it.
const POLL: Duration = Duration::from_micros(200);

/// Waits until `event` completes: polls it for [`POLL`] (short work finishes with no
/// thread wake-up), then blocks.
pub(crate) fn wait_for(event: CUevent) -> Result<(), DriverFailure> {
    if spinning_helps() {
        let start = Instant::now();
        while start.elapsed() < POLL {
            // SAFETY: the event was recorded on a stream of this context.
            if unsafe { driver::event::query(event) }? {
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }
    // SAFETY: the event was recorded on a stream of this context.
    unsafe { driver::event::synchronize(event) }
}

fn run(
    context: Arc<CudaContext>,
    shared: Arc<Shared>,
    events: Arc<EventPool>,
    timing_events: Arc<EventPool>,
    receiver: Receiver<Option<Job>>,
    pending: Arc<AtomicUsize>,
) {
    if let Err(failure) = context.bind() {
        shared.set_unhealthy(failure.into_server_error());
    }
    while let Ok(Some(job)) = recv_spinning(&receiver) {
        if let Err(failure) = wait_for(job.event) {
            shared.set_unhealthy(failure.into_server_error());
        }
        // The job counts as finished from here: its checks are reported before the reply.
        let _finished = Finished(&pending);
        for check in job.checks {
            check.report(&shared);
        }
        match job.reply {
            Reply::Read(buffers, reply) => {
                let result = shared.take_errors(job.stream).map(|()| buffers);
                reply.send(result);
            }
            Reply::Sync(reply) => reply.send(shared.take_errors(job.stream)),
            Reply::Profile {
                start,
                started,
                reply,
            } => {
                let result = shared
                    .health()
                    .map_err(|error| ProfileError::Server(Box::new(error)))
                    .and_then(|()| {
                        // SAFETY: both events are timing events recorded on the same stream,
                        // the end one complete.
                        let milliseconds = unsafe { driver::event::elapsed_ms(start, job.event) }
                            .map_err(|failure| ProfileError::Unknown {
                            reason: driver::describe(failure.error),
                            backtrace: cubert_runtime::backtrace::BackTrace::capture(),
                        })?;
                        let elapsed =
                            Duration::from_secs_f64(f64::from(milliseconds.max(0.0)) / 1e3);
                        Ok(ProfileTicks::from_duration(started, elapsed))
                    });
                timing_events.give_back(start);
                reply.send(result);
            }
            Reply::Retire(payload) => drop(payload),
            Reply::Status => {}
        }
        if job.timing_event {
            timing_events.give_back(job.event);
        } else {
            events.give_back(job.event);
        }
    }
}
