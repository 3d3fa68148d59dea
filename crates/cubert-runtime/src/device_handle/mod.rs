//! The device handle: how work reaches a device's server, in order, from any thread.
//!
//! Two modes ([`DeviceHandleMode`]):
//!
//! - **Threaded**: one runner thread per device owns the server and runs submitted tasks in
//!   order. Every submit wakes the runner (no batching), so a lone submit never waits for a
//!   flush. `submit` returns at once; `submit_blocking` waits for the task's result;
//!   `allocate` (every allocation's way to `ComputeServer::allocate`) returns at once and
//!   queues only the id, no boxed closure.
//!
//!   **Work on the caller's thread.** A bare allocation, and the work submitted with
//!   `submit_as`/`submit_blocking_as` (launches, syncs), runs on the caller's thread
//!   instead when the runner is idle (every message sent to it has been handled, nothing
//!   deferred) and the server is free, if the server runs that kind of work on its callers
//!   (`ComputeServer::CALLER_WORK` and `runs_on_caller`, see `server::CallerWork`).
//!   Nothing earlier can still be waiting, so the order is the same; a launch-and-sync or
//!   allocate-and-drop loop then never crosses threads (the drops' releases are drained by
//!   the next allocation on the same thread).
//! - **Inline**: tasks run on the calling thread, serialized by a re-entrant gate. For
//!   single-threaded programs and tests.
//!
//! In both modes:
//!
//! - a panic inside a task is caught: a blocking call returns it as an error, a
//!   fire-and-forget task leaves it for the next `flush`/`sync`/`read`, and the device keeps
//!   serving;
//! - `exclusive(f)` runs `f` on the caller's thread with no other thread's work interleaved
//!   (the runner pauses, or the gate is held); calls `f` makes on the same device run inline;
//! - a call made from inside a running server task on the same device doesn't deadlock:
//!   `submit` runs right after the current task, `submit_blocking` returns
//!   [`CallError::Reentrant`].
//!
//! **Teardown.** The last handle of a threaded device closes the runner's channel and
//! joins the runner, so the server is dropped (its driver objects destroyed) when that drop
//! returns. A device still alive when the process exits (a registered client) is held by
//! an exit handler (`exit.rs`) once its running task ends, so no runner is inside a driver
//! while the driver tears itself down.

mod exit;
mod gate;
mod registry;

pub use crate::config::DeviceHandleMode;

use crate::device::DeviceId;
use crate::error::ServerError;
use crate::handle::MemoryId;
use crate::server::{CallerWork, ComputeServer, ServerUtilities};
use crate::stream::StreamId;
use crate::thread_role::{BorrowMark, OwnMark, is_borrowed, is_owned, mark_runner_thread};
use gate::ReentrantGate;

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, Weak};
use std::thread::JoinHandle;

/// Why a call to the device could not be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The runner thread is gone.
    Disconnected,
    /// The task panicked; the message is attached.
    Panicked(String),
    /// A blocking call was made from inside a task running on the same device.
    Reentrant,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Disconnected => f.write_str("the device's runner thread has stopped"),
            CallError::Panicked(message) => write!(f, "the task panicked: {message}"),
            CallError::Reentrant => f.write_str(
                "a blocking call was made from inside a task running on the same device; \
                 submit it instead, or call from outside the task",
            ),
        }
    }
}

impl From<CallError> for ServerError {
    fn from(value: CallError) -> Self {
        ServerError::generic(value.to_string())
    }
}

type Task<S> = Box<dyn FnOnce(&mut S) + Send>;

enum Message<S> {
    Task(Task<S>),
    /// `ComputeServer::allocate`, then `then` (the task that fills the memory, if any) in
    /// the same turn: the one way an allocation reaches the server. A bare allocation boxes
    /// no closure and allocates nothing on the caller's thread to be freed on the runner's.
    Allocate {
        id: MemoryId,
        size: u64,
        stream: StreamId,
        then: Option<Task<S>>,
    },
    Pause {
        paused: SyncSender<()>,
        resume: Receiver<()>,
    },
}

/// A counter on a cache line of its own: the handles' threads write `Core::sent`, the
/// runner `Core::handled`, and neither should take the other's line on every message.
#[repr(align(128))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

/// What the runner and the handles share.
struct Core<S> {
    key: u64,
    device_id: DeviceId,
    server: Mutex<S>,
    deferred: Mutex<VecDeque<Task<S>>>,
    has_deferred: AtomicBool,
    async_errors: Mutex<Vec<ServerError>>,
    /// Messages sent to the runner (counted before each send).
    sent: PaddedCounter,
    /// Messages the runner has handled (counted after each).
    handled: PaddedCounter,
}

struct HandleInner<S: ComputeServer> {
    core: Arc<Core<S>>,
    utilities: Arc<ServerUtilities<S>>,
    mode: DeviceHandleMode,
    sender: Option<Sender<Message<S>>>,
    /// The runner thread (threaded mode), joined when the last handle goes.
    runner: Option<JoinHandle<()>>,
    /// Whether the exit handler holds the server (`exit.rs`).
    held_at_exit: AtomicBool,
    gate: ReentrantGate,
}

/// The last handle of a threaded device closes the runner's channel and waits for the
/// runner to finish what was queued and drop the server, so the server's teardown (a
/// driver's device, its pipelines) is over when the drop returns. Left to run on its own,
/// that teardown raced the process's exit when the last handle went at the end of `main`:
/// NVIDIA's Vulkan driver crashed (SIGSEGV in `vkDestroyPipelineCache` on the runner
/// thread) in most runs of a one-test binary on an H200. A handle dropped by a task on the
/// runner itself leaves the runner to end on its own.
impl<S: ComputeServer> exit::HoldAtExit for HandleInner<S> {
    fn hold(&self, deadline: std::time::Instant) -> bool {
        if self.held_at_exit.load(Ordering::SeqCst) {
            return true;
        }
        loop {
            let guard = match self.core.server.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    if std::time::Instant::now() >= deadline {
                        return false;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
            };
            // Locked for the rest of the process: no thread reaches the driver through
            // this server while the exit tears the driver down.
            std::mem::forget(guard);
            self.held_at_exit.store(true, Ordering::SeqCst);
            return true;
        }
    }
}

impl<S: ComputeServer> Drop for HandleInner<S> {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(runner) = self.runner.take()
            && runner.thread().id() != std::thread::current().id()
        {
            // The runner catches every task's panic; a join error is a panic in the
            // server's own drop, which has nobody left to report to.
            let _ = runner.join();
        }
    }
}

/// A handle to a device's server. Clones share the device.
pub struct DeviceHandle<S: ComputeServer> {
    inner: Arc<HandleInner<S>>,
}

impl<S: ComputeServer> Clone for DeviceHandle<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S: ComputeServer> fmt::Debug for DeviceHandle<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceHandle")
            .field("device", &self.inner.core.device_id)
            .field("mode", &self.inner.mode)
            .finish()
    }
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-text payload".to_string()
    }
}

impl<S> Core<S> {
    /// The next task submitted from inside a running task, if any (a flag check when none).
    fn next_deferred(&self) -> Option<Task<S>> {
        if !self.has_deferred.load(Ordering::Acquire) {
            return None;
        }
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        let next = deferred.pop_front();
        if deferred.is_empty() {
            self.has_deferred.store(false, Ordering::Release);
        }
        next
    }

    fn defer(&self, task: Task<S>) {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(task);
        self.has_deferred.store(true, Ordering::Release);
    }

    fn push_error(&self, error: ServerError) {
        self.async_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(error);
    }

    /// Runs `work` on `server` (locked by the caller); a panic is logged and queued as an
    /// error.
    fn run_guarded(&self, server: &mut S, work: impl FnOnce(&mut S)) {
        let _mark = BorrowMark::new(self.key);
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| work(server))) {
            let message = panic_message(payload.as_ref());
            tracing::error!("a task on {:?} panicked: {message}", self.device_id);
            self.push_error(ServerError::generic(format!(
                "a task on {:?} panicked: {message} (the device keeps serving)",
                self.device_id
            )));
        }
    }

    /// Runs `work` with the server locked; a panic is logged and queued as an error.
    fn run_locked(&self, work: impl FnOnce(&mut S)) {
        let mut server = self.server.lock().unwrap_or_else(PoisonError::into_inner);
        self.run_guarded(&mut server, work);
    }

    /// Runs every task deferred by the tasks that ran (submitted from inside them).
    fn run_deferred(&self) {
        if let Some(task) = self.next_deferred() {
            self.run(task);
        }
    }

    /// Runs `task` with the server locked, then every task it deferred.
    fn run(&self, task: Task<S>) {
        let mut next = Some(task);
        while let Some(task) = next {
            self.run_locked(task);
            next = self.next_deferred();
        }
    }

    /// Runs `ComputeServer::allocate` then `then` with the server locked, as one task, then
    /// every task they deferred.
    fn allocate(&self, id: MemoryId, size: u64, stream: StreamId, then: Option<Task<S>>)
    where
        S: ComputeServer,
    {
        let server = self.server.lock().unwrap_or_else(PoisonError::into_inner);
        self.run_claimed(server, |server| {
            server.allocate(id, size, stream);
            if let Some(then) = then {
                then(server);
            }
        });
    }

    /// The server, locked, if the runner is idle (every message sent to it has been handled
    /// and the server is free) and the server runs `work` on this thread
    /// (`ComputeServer::CALLER_WORK`, then `ComputeServer::runs_on_caller`). Work run under
    /// the guard then comes after everything submitted before (by any thread), as if the
    /// runner had run it.
    fn claim_idle(&self, work: CallerWork) -> Option<MutexGuard<'_, S>>
    where
        S: ComputeServer,
    {
        let idle = || self.is_idle();
        if !S::CALLER_WORK.contains(&work) || !idle() {
            return None;
        }
        let server = match self.server.try_lock() {
            Ok(server) => server,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        // A message sent before the lock was taken is run first, by the runner.
        (idle() && server.runs_on_caller(work)).then_some(server)
    }

    /// Whether the runner is idle now: every message sent to it has been handled and no task
    /// waits deferred.
    fn is_idle(&self) -> bool {
        self.sent.0.load(Ordering::SeqCst) == self.handled.0.load(Ordering::SeqCst)
            && !self.has_deferred.load(Ordering::SeqCst)
    }

    /// Runs `work` with `server` (locked, by [`Self::allocate`] or [`Self::claim_idle`]) on
    /// the caller's thread, then every task it deferred.
    fn run_claimed(&self, mut server: MutexGuard<'_, S>, work: impl FnOnce(&mut S)) {
        self.run_guarded(&mut server, work);
        drop(server);
        self.run_deferred();
    }

    /// Runs `task` on `server` (locked, by [`Self::call`] or [`Self::claim_idle`]) and
    /// returns its result, catching a panic; then every task it deferred.
    fn call_on<R>(
        &self,
        mut server: MutexGuard<'_, S>,
        task: impl FnOnce(&mut S) -> R,
    ) -> Result<R, CallError> {
        let result = {
            let _mark = BorrowMark::new(self.key);
            catch_unwind(AssertUnwindSafe(|| task(&mut server)))
                .map_err(|payload| CallError::Panicked(panic_message(payload.as_ref())))
        };
        drop(server);
        self.run_deferred();
        result
    }

    /// Runs `task` with the server locked and returns its result, catching a panic.
    fn call<R>(&self, task: impl FnOnce(&mut S) -> R) -> Result<R, CallError> {
        let server = self.server.lock().unwrap_or_else(PoisonError::into_inner);
        self.call_on(server, task)
    }
}

fn runner_loop<S: ComputeServer>(core: Arc<Core<S>>, receiver: Receiver<Message<S>>) {
    mark_runner_thread();
    while let Ok(message) = recv_spinning(&receiver) {
        // Counted once handled (below), whatever the message did.
        struct Handled<'a>(&'a AtomicU64);
        impl Drop for Handled<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let _handled = Handled(&core.handled.0);
        match message {
            Message::Task(task) => core.run(task),
            Message::Allocate {
                id,
                size,
                stream,
                then,
            } => core.allocate(id, size, stream, then),
            Message::Pause { paused, resume } => {
                if paused.send(()).is_ok() {
                    // Ends when the exclusive section sends or drops its sender.
                    let _ = resume.recv();
                }
            }
        }
    }
}

/// Ends an exclusive section of a threaded device: resumes the runner.
struct Resume {
    _resume: SyncSender<()>,
    _mark: OwnMark,
}

impl<S: ComputeServer> DeviceHandle<S> {
    /// A handle over `server`, not registered for other clients to find.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the runner thread can't be started.
    pub fn new(server: S, mode: DeviceHandleMode) -> Result<Self, ServerError> {
        let device_id = server_device_id(&server);
        let utilities = server.utilities();
        let core = Arc::new(Core {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            device_id,
            server: Mutex::new(server),
            deferred: Mutex::new(VecDeque::new()),
            has_deferred: AtomicBool::new(false),
            async_errors: Mutex::new(Vec::new()),
            sent: PaddedCounter::default(),
            handled: PaddedCounter::default(),
        });
        let (sender, runner) = match mode {
            DeviceHandleMode::Inline => (None, None),
            DeviceHandleMode::Threaded => {
                let (sender, receiver) = mpsc::channel();
                let runner_core = core.clone();
                let runner = std::thread::Builder::new()
                    .name(format!(
                        "cubert-{}-{}",
                        device_id.type_id, device_id.index_id
                    ))
                    .spawn(move || runner_loop(runner_core, receiver))
                    .map_err(|error| {
                        ServerError::generic(format!(
                            "can't start the runner thread of {device_id:?}: {error}"
                        ))
                    })?;
                (Some(sender), Some(runner))
            }
        };
        let inner = Arc::new(HandleInner {
            core,
            utilities,
            mode,
            sender,
            runner,
            held_at_exit: AtomicBool::new(false),
            gate: ReentrantGate::default(),
        });
        if mode == DeviceHandleMode::Threaded {
            let weak: Weak<HandleInner<S>> = Arc::downgrade(&inner);
            exit::hold_at_exit(weak);
        }
        Ok(Self { inner })
    }

    /// The device.
    pub fn device_id(&self) -> DeviceId {
        self.inner.core.device_id
    }

    /// The mode.
    pub fn mode(&self) -> DeviceHandleMode {
        self.inner.mode
    }

    /// Whether work runs on the caller's thread (inline mode).
    pub fn is_blocking(&self) -> bool {
        self.inner.mode == DeviceHandleMode::Inline
    }

    /// Whether `work` submitted from this thread now would run on it rather than wait in
    /// the runner's queue: always in inline mode and on the runner's own thread, never from
    /// inside a task (it is deferred), and in threaded mode where the server runs `work` on
    /// its callers (`ComputeServer::CALLER_WORK`) and the runner is idle. A hint: other
    /// threads may queue work before this thread's call, which then queues too.
    pub fn would_run_on_caller(&self, work: CallerWork) -> bool {
        let core = &self.inner.core;
        if is_borrowed(core.key) {
            return false;
        }
        if is_owned(core.key) || self.inner.sender.is_none() {
            return true;
        }
        S::CALLER_WORK.contains(&work) && core.is_idle()
    }

    /// The server's utilities.
    pub fn utilities(&self) -> Arc<ServerUtilities<S>> {
        self.inner.utilities.clone()
    }

    fn key(&self) -> u64 {
        self.inner.core.key
    }

    /// Queues `task`. Returns at once in threaded mode.
    pub fn submit(&self, task: impl FnOnce(&mut S) + Send + 'static) {
        self.submit_with(None, task);
    }

    /// Queues `task`, a piece of `work`. Returns at once in threaded mode; when the runner
    /// is idle and the server runs `work` on its callers (`ComputeServer::CALLER_WORK`,
    /// `ComputeServer::runs_on_caller`), `task` runs on the caller's thread before this
    /// returns, in the same order (see the module docs). For short work only (a launch that
    /// queues a kernel): the caller waits for it.
    pub fn submit_as(&self, work: CallerWork, task: impl FnOnce(&mut S) + Send + 'static) {
        self.submit_with(Some(work), task);
    }

    fn submit_with(&self, work: Option<CallerWork>, task: impl FnOnce(&mut S) + Send + 'static) {
        let core = &self.inner.core;
        if is_borrowed(core.key) {
            core.defer(Box::new(task));
            return;
        }
        if is_owned(core.key) {
            core.run(Box::new(task));
            return;
        }
        match &self.inner.sender {
            Some(sender) => {
                if let Some(work) = work
                    && let Some(server) = core.claim_idle(work)
                {
                    core.run_claimed(server, task);
                    return;
                }
                core.sent.0.fetch_add(1, Ordering::SeqCst);
                if sender.send(Message::Task(Box::new(task))).is_err() {
                    core.push_error(CallError::Disconnected.into());
                }
            }
            None => {
                let _gate = self.inner.gate.enter();
                core.run(Box::new(task));
            }
        }
    }

    /// Queues `ComputeServer::allocate(id, size, stream)`: binds allocation `id` to `size`
    /// bytes for `stream`. Returns at once in threaded mode. The cheapest way to queue work:
    /// no closure is boxed. Only the id is queued, so the allocation's handles may all be
    /// dropped before it runs (it then allocates nothing, see `ComputeServer::allocate`).
    pub fn allocate(&self, id: MemoryId, size: u64, stream: StreamId) {
        self.queue_allocation(id, size, stream, None, Some(CallerWork::Allocation));
    }

    /// Queues `ComputeServer::allocate(id, size, stream)` and `then` as one task: `then`
    /// runs right after the allocation (to fill the memory: `create` writes its data).
    /// Returns at once in threaded mode.
    pub fn allocate_then(
        &self,
        id: MemoryId,
        size: u64,
        stream: StreamId,
        then: impl FnOnce(&mut S) + Send + 'static,
    ) {
        self.queue_allocation(id, size, stream, Some(Box::new(then)), None);
    }

    /// Like [`Self::allocate_then`], for a `then` that only writes host data into the new
    /// memory (`create*`, which decides by size whether to call this): a server that runs
    /// [`CallerWork::Upload`] on its callers runs both on this thread while its runner is
    /// idle, and the call returns once the data is written; otherwise they are queued.
    pub fn allocate_then_write(
        &self,
        id: MemoryId,
        size: u64,
        stream: StreamId,
        then: impl FnOnce(&mut S) + Send + 'static,
    ) {
        self.queue_allocation(
            id,
            size,
            stream,
            Some(Box::new(then)),
            Some(CallerWork::Upload),
        );
    }

    /// Queues an allocation and the task `then` that fills it; `on_caller` is the kind of
    /// work they are, if the caller may run them while the runner is idle.
    fn queue_allocation(
        &self,
        id: MemoryId,
        size: u64,
        stream: StreamId,
        then: Option<Task<S>>,
        on_caller: Option<CallerWork>,
    ) {
        let core = &self.inner.core;
        if is_borrowed(core.key) {
            core.defer(Box::new(move |server: &mut S| {
                server.allocate(id, size, stream);
                if let Some(then) = then {
                    then(server);
                }
            }));
            return;
        }
        if is_owned(core.key) {
            core.allocate(id, size, stream, then);
            return;
        }
        match &self.inner.sender {
            Some(sender) => {
                if let Some(work) = on_caller
                    && let Some(server) = core.claim_idle(work)
                {
                    core.run_claimed(server, |server| {
                        server.allocate(id, size, stream);
                        if let Some(then) = then {
                            then(server);
                        }
                    });
                    return;
                }
                core.sent.0.fetch_add(1, Ordering::SeqCst);
                let message = Message::Allocate {
                    id,
                    size,
                    stream,
                    then,
                };
                if sender.send(message).is_err() {
                    core.push_error(CallError::Disconnected.into());
                }
            }
            None => {
                let _gate = self.inner.gate.enter();
                core.allocate(id, size, stream, then);
            }
        }
    }

    /// Queues `task`; if it returns an error, the error is returned by the next
    /// `flush`/`sync`/`read` of any client of this device.
    pub fn submit_fallible(
        &self,
        task: impl FnOnce(&mut S) -> Result<(), ServerError> + Send + 'static,
    ) {
        let core = self.inner.core.clone();
        self.submit(move |server| {
            if let Err(error) = task(server) {
                core.push_error(error);
            }
        });
    }

    /// Runs `task` after everything queued before it and returns its result.
    ///
    /// # Errors
    /// [`CallError`] if the task panicked, the runner is gone, or the call is made from
    /// inside a task of the same device.
    pub fn submit_blocking<R: Send + 'static>(
        &self,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, CallError> {
        self.submit_blocking_with(None, task)
    }

    /// Runs `task`, a piece of `work`, after everything queued before it and returns its
    /// result: on the caller's thread when the runner is idle and the server runs `work` on
    /// its callers (`ComputeServer::CALLER_WORK`, `ComputeServer::runs_on_caller`), on the
    /// runner otherwise.
    ///
    /// # Errors
    /// As [`Self::submit_blocking`].
    pub fn submit_blocking_as<R: Send + 'static>(
        &self,
        work: CallerWork,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, CallError> {
        self.submit_blocking_with(Some(work), task)
    }

    fn submit_blocking_with<R: Send + 'static>(
        &self,
        work: Option<CallerWork>,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, CallError> {
        let core = &self.inner.core;
        if is_borrowed(core.key) {
            return Err(CallError::Reentrant);
        }
        if is_owned(core.key) {
            return core.call(task);
        }
        match &self.inner.sender {
            Some(sender) => {
                if let Some(work) = work
                    && let Some(server) = core.claim_idle(work)
                {
                    return core.call_on(server, task);
                }
                let (reply, answer) = mpsc::sync_channel(1);
                let wrapped = move |server: &mut S| {
                    let result = catch_unwind(AssertUnwindSafe(|| task(server)))
                        .map_err(|payload| CallError::Panicked(panic_message(payload.as_ref())));
                    let _ = reply.send(result);
                };
                core.sent.0.fetch_add(1, Ordering::SeqCst);
                sender
                    .send(Message::Task(Box::new(wrapped)))
                    .map_err(|_| CallError::Disconnected)?;
                recv_spinning(&answer).map_err(|_| CallError::Disconnected)?
            }
            None => {
                let _gate = self.inner.gate.enter();
                core.call(task)
            }
        }
    }

    /// Runs `task` on the caller's thread with no other thread's work on this device
    /// interleaved. Work `task` submits to this device runs inline, in order.
    ///
    /// # Errors
    /// [`CallError`] if `task` panicked, the runner is gone, or the call is made from inside
    /// a task of the same device.
    pub fn exclusive<R>(&self, task: impl FnOnce() -> R) -> Result<R, CallError> {
        let key = self.key();
        if is_borrowed(key) {
            return Err(CallError::Reentrant);
        }
        let run = |task: Box<dyn FnOnce() -> R + '_>| {
            catch_unwind(AssertUnwindSafe(task))
                .map_err(|payload| CallError::Panicked(panic_message(payload.as_ref())))
        };
        if is_owned(key) {
            return run(Box::new(task));
        }
        match &self.inner.sender {
            Some(sender) => {
                let (paused_sender, paused) = mpsc::sync_channel(1);
                let (resume_sender, resume) = mpsc::sync_channel(1);
                self.inner.core.sent.0.fetch_add(1, Ordering::SeqCst);
                sender
                    .send(Message::Pause {
                        paused: paused_sender,
                        resume,
                    })
                    .map_err(|_| CallError::Disconnected)?;
                recv_spinning(&paused).map_err(|_| CallError::Disconnected)?;
                let _resume = Resume {
                    _resume: resume_sender,
                    _mark: OwnMark::new(key),
                };
                run(Box::new(task))
            }
            None => {
                let _gate = self.inner.gate.enter();
                let _mark = OwnMark::new(key);
                run(Box::new(task))
            }
        }
    }

    /// Takes the errors of fire-and-forget tasks that panicked or could not be delivered.
    pub fn take_async_errors(&self) -> Vec<ServerError> {
        std::mem::take(
            &mut *self
                .inner
                .core
                .async_errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Whether two handles reach the same device server.
    pub fn same_device(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner.core, &other.inner.core)
    }
}

fn server_device_id<S: ComputeServer>(server: &S) -> DeviceId {
    server.utilities().device_id
}

pub use registry::{get_or_init_device, register_device};
// Old paths of what moved to the leaf modules `spin` and `thread_role` (backends import
// them from there).
pub use crate::spin::{SPIN, recv_spinning, spinning_helps};
pub use crate::thread_role::{TaskScope, TaskScopeGuard, on_runner_thread};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dry_run::DryRunServer;
    use crate::dry_run::{DryRunDevice, DryRunTarget};
    use crate::layout::MemoryLayoutPolicy;

    fn threaded() -> DeviceHandle<DryRunServer> {
        let server = DryRunServer::new(
            DryRunDevice { index: 77 },
            DryRunTarget::with_memory(1 << 30),
            crate::config::global_config(),
        );
        DeviceHandle::new(server, DeviceHandleMode::Threaded).unwrap()
    }

    fn bytes_in_use(handle: &DeviceHandle<DryRunServer>) -> u64 {
        handle
            .submit_blocking(|server| server.memory_usage(StreamId::new(0)))
            .unwrap()
            .unwrap()
            .bytes_in_use
    }

    #[test]
    fn an_allocation_on_an_idle_runner_is_bound_on_the_callers_thread() {
        let handle = threaded();
        let handles = handle.utilities().layout_policy.handles().clone();
        let kept: Vec<_> = (0..100)
            .map(|_| {
                let memory = handles.mint(StreamId::new(0), 4096);
                handle.allocate(memory.id(), 4096, StreamId::new(0));
                memory
            })
            .collect();
        // Bound before `allocate` returned: no message reached the runner.
        assert_eq!(handle.inner.core.sent.0.load(Ordering::SeqCst), 0);
        assert_eq!(bytes_in_use(&handle), 100 * 4096);
        drop(kept);
    }

    #[test]
    fn dropping_the_last_threaded_handle_waits_until_the_runner_dropped_the_server() {
        let handle = threaded();
        let core = Arc::downgrade(&handle.inner.core);
        // Still running when the handle goes: the drop has to wait for it.
        handle.submit(|_| std::thread::sleep(std::time::Duration::from_millis(50)));
        drop(handle);
        assert!(
            core.upgrade().is_none(),
            "the runner still held the server after the last handle's drop returned"
        );
    }

    #[test]
    fn a_last_handle_dropped_by_a_task_on_its_runner_does_not_wait_for_itself() {
        let handle = threaded();
        let last = handle.clone();
        let core = Arc::downgrade(&handle.inner.core);
        let (go, wait) = mpsc::channel::<()>();
        let (done, finished) = mpsc::channel();
        handle.submit(move |_| {
            let _ = wait.recv();
            // The last handle, dropped on the runner: joining would wait for itself.
            drop(last);
            let _ = done.send(());
        });
        drop(handle);
        go.send(()).unwrap();
        finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the task that dropped the last handle finished");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while core.upgrade().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the runner never ended"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn holding_a_device_at_exit_waits_for_the_running_task_then_keeps_the_server_locked() {
        use exit::HoldAtExit;
        let handle = threaded();
        let (started, running) = mpsc::channel();
        let ended = Arc::new(AtomicBool::new(false));
        let ended_in_task = ended.clone();
        handle.submit(move |_| {
            let _ = started.send(());
            std::thread::sleep(std::time::Duration::from_millis(30));
            ended_in_task.store(true, Ordering::SeqCst);
        });
        running.recv().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        assert!(handle.inner.hold(deadline));
        assert!(
            ended.load(Ordering::SeqCst),
            "held before the running task ended"
        );
        assert!(handle.inner.core.server.try_lock().is_err());
        // Its runner would wait for the held server forever: never dropped.
        std::mem::forget(handle);
    }

    #[test]
    fn holding_a_busy_device_at_exit_gives_up_at_the_deadline() {
        use exit::HoldAtExit;
        let handle = threaded();
        let (started, running) = mpsc::channel();
        let (release, wait) = mpsc::channel::<()>();
        handle.submit(move |_| {
            let _ = started.send(());
            let _ = wait.recv();
        });
        running.recv().unwrap();
        assert!(!handle.inner.hold(std::time::Instant::now()));
        release.send(()).unwrap();
        // Not held: the device keeps serving.
        assert_eq!(bytes_in_use(&handle), 0);
    }

    fn wait_until_idle(handle: &DeviceHandle<DryRunServer>) {
        // The runner counts a message after running its task, so a blocking call's reply
        // can arrive just before.
        let core = &handle.inner.core;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while core.sent.0.load(Ordering::SeqCst) != core.handled.0.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the runner never counted its messages handled"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn work_the_server_runs_on_callers_runs_on_an_idle_callers_thread() {
        let handle = threaded();
        let caller = std::thread::current().id();
        let (ran_on, where_) = mpsc::channel();
        handle.submit_as(CallerWork::Launch, move |_| {
            let _ = ran_on.send(std::thread::current().id());
        });
        // Ran before `submit_as` returned, here, without a message to the runner.
        assert_eq!(where_.try_recv(), Ok(caller));
        let synced_on = handle
            .submit_blocking_as(CallerWork::Sync, |_| std::thread::current().id())
            .unwrap();
        assert_eq!(synced_on, caller);
        assert_eq!(handle.inner.core.sent.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn work_behind_queued_work_runs_on_the_runner_after_it() {
        let handle = threaded();
        let caller = std::thread::current().id();
        let (release, blocked) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = order.clone();
        handle.submit(move |_| {
            let _ = started.send(());
            let _ = blocked.recv();
            first.lock().unwrap().push("queued");
        });
        running.recv().unwrap();
        let second = order.clone();
        let (ran_on, where_) = mpsc::channel();
        // The runner is busy: the launch is queued behind the task.
        handle.submit_as(CallerWork::Launch, move |_| {
            second.lock().unwrap().push("launch");
            let _ = ran_on.send(std::thread::current().id());
        });
        release.send(()).unwrap();
        handle.submit_blocking_as(CallerWork::Sync, |_| ()).unwrap();
        assert_ne!(where_.recv().unwrap(), caller);
        assert_eq!(*order.lock().unwrap(), ["queued", "launch"]);
        // Idle again: the next one is the caller's.
        wait_until_idle(&handle);
        let synced_on = handle
            .submit_blocking_as(CallerWork::Sync, |_| std::thread::current().id())
            .unwrap();
        assert_eq!(synced_on, caller);
    }

    #[test]
    fn a_panic_in_work_run_on_the_caller_is_an_error_and_the_device_keeps_serving() {
        let handle = threaded();
        handle.submit_as(CallerWork::Launch, |_| panic!("launch failed"));
        let errors = handle.take_async_errors();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("launch failed"));
        let answer =
            handle.submit_blocking_as(CallerWork::Sync, |_| -> u32 { panic!("sync failed") });
        assert!(matches!(answer, Err(CallError::Panicked(message)) if message == "sync failed"));
        assert_eq!(handle.submit_blocking(|_| 7).unwrap(), 7);
    }

    #[test]
    fn work_submitted_from_work_run_on_the_caller_runs_after_it() {
        let handle = threaded();
        let inner = handle.clone();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (outer_log, deferred_log) = (order.clone(), order.clone());
        handle.submit_as(CallerWork::Launch, move |_| {
            inner.submit(move |_| deferred_log.lock().unwrap().push("deferred"));
            outer_log.lock().unwrap().push("outer");
        });
        assert_eq!(*order.lock().unwrap(), ["outer", "deferred"]);
    }

    #[test]
    fn each_threads_work_runs_in_its_order_whichever_thread_runs_it() {
        // Threads mixing work the caller may run (launches, syncs) with work that always
        // goes to the runner: each thread's items must run in the order it submitted them,
        // whether the caller's thread or the runner ran each one.
        let handle = threaded();
        let log = Arc::new(Mutex::new(Vec::new()));
        let on_caller = Arc::new(AtomicU64::new(0));
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let (handle, log, on_caller) = (handle.clone(), log.clone(), on_caller.clone());
                scope.spawn(move || {
                    let me = std::thread::current().id();
                    for step in 0..2000u64 {
                        let entry = log.clone();
                        let counted = on_caller.clone();
                        let record = move |_: &mut DryRunServer| {
                            if std::thread::current().id() == me {
                                counted.fetch_add(1, Ordering::Relaxed);
                            }
                            entry.lock().unwrap().push((thread, step));
                        };
                        match step % 5 {
                            0 | 1 => handle.submit_as(CallerWork::Launch, record),
                            2 => handle.submit(record),
                            3 => handle.submit_blocking_as(CallerWork::Sync, record).unwrap(),
                            _ => handle.submit_blocking(record).unwrap(),
                        }
                    }
                });
            }
        });
        handle.submit_blocking(|_| ()).unwrap();
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 4 * 2000);
        for thread in 0..4u64 {
            let steps: Vec<u64> = log
                .iter()
                .filter(|(who, _)| *who == thread)
                .map(|(_, step)| *step)
                .collect();
            assert_eq!(
                steps,
                (0..2000).collect::<Vec<_>>(),
                "thread {thread}'s order"
            );
        }
        // Both ways were taken (the runner is idle after every blocking call).
        assert!(on_caller.load(Ordering::Relaxed) > 0);
        assert!(on_caller.load(Ordering::Relaxed) < 4 * 2000);
    }

    #[test]
    fn an_allocation_behind_queued_work_waits_for_it() {
        let handle = threaded();
        let handles = handle.utilities().layout_policy.handles().clone();
        let (release, blocked) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        handle.submit(move |_| {
            let _ = started.send(());
            let _ = blocked.recv();
        });
        running.recv().unwrap();
        // The runner is busy: the allocation is queued behind the task, in order.
        let memory = handles.mint(StreamId::new(0), 4096);
        handle.allocate(memory.id(), 4096, StreamId::new(0));
        assert_eq!(handle.inner.core.sent.0.load(Ordering::SeqCst), 2);
        release.send(()).unwrap();
        assert_eq!(bytes_in_use(&handle), 4096);
        // Once everything queued is handled, the runner is idle again.
        wait_until_idle(&handle);
        drop(memory);
    }
}
