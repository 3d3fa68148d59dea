//! Streams: `StreamId`s mapped to non-blocking `CUstream`s, with the bookkeeping that
//! orders work across them.
//!
//! The first `max_streams` stream ids (`[runtime] max_streams`) each get their own
//! `CUstream`, created at `[runtime] stream_priority`; later ids share them round-robin
//! (sharing only adds ordering, never removes it). Every operation put on
//! a stream bumps its submission counter; events recorded at a counter value tell when the
//! device has passed it. That answers the memory manager's [`StreamOrdering`] questions: a
//! block freed at point (stream, n) is reusable by another stream once an event recorded at
//! n or later has completed, or at once if that stream is made to wait for the event.
//!
//! [`Streams::order`] inserts such a wait whenever memory last used on one stream is used
//! on another (`cuStreamWaitEvent`: a device-side wait, the host never blocks).

use crate::context::CudaContext;
use crate::driver::{self, DriverFailure};
use cubert_runtime::memory::FastMap;
use cubert_runtime::memory::{StreamOrdering, StreamPoint};
use cubert_runtime::{StreamId, StreamPriority, StreamSettings};
use cudarc::driver::sys::{self, CUevent, CUstream};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// Events without timing, shared with the completion thread (which returns them).
#[derive(Default)]
pub struct EventPool {
    free: Mutex<Vec<CUevent>>,
    timing: bool,
}

// SAFETY: CUevent handles may be used from any thread of the context.
unsafe impl Send for EventPool {}
// SAFETY: access to the list is behind a mutex.
unsafe impl Sync for EventPool {}

impl EventPool {
    /// A pool of events; `timing` selects events that can measure elapsed time.
    pub fn new(timing: bool) -> Arc<Self> {
        Arc::new(Self {
            free: Mutex::new(Vec::new()),
            timing,
        })
    }

    /// An event (the context must be current).
    ///
    /// # Errors
    /// The driver's error.
    pub fn take(&self) -> Result<CUevent, DriverFailure> {
        if let Some(event) = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
        {
            return Ok(event);
        }
        let flags = if self.timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        driver::event::create(flags)
    }

    /// Returns an event for reuse.
    pub fn give_back(&self, event: CUevent) {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }

    fn destroy_all(&self) {
        let events = std::mem::take(&mut *self.free.lock().unwrap_or_else(PoisonError::into_inner));
        for event in events {
            // SAFETY: each pooled event was created by `take` and is destroyed once.
            let _ = unsafe { driver::event::destroy(event) };
        }
    }
}

struct RawStream {
    stream: CUstream,
    seq: u64,
    completed: u64,
    recorded: VecDeque<(u64, CUevent)>,
    capturing: bool,
}

/// The streams of one server. See the module docs.
pub struct Streams {
    context: Arc<CudaContext>,
    raw: Vec<RawStream>,
    ids: FastMap<StreamId, usize>,
    events: Arc<EventPool>,
    /// The most `CUstream`s to create (at least 1).
    limit: usize,
    priority: StreamPriority,
}

impl Streams {
    /// No streams yet; up to `settings.max_streams` are created on first use, at
    /// `settings.priority`.
    pub fn new(
        context: Arc<CudaContext>,
        events: Arc<EventPool>,
        settings: StreamSettings,
    ) -> Self {
        Self {
            context,
            raw: Vec::new(),
            ids: FastMap::default(),
            events,
            limit: (settings.max_streams as usize).max(1),
            priority: settings.priority,
        }
    }

    /// Number of `CUstream`s created so far (at most `max_streams`).
    pub fn device_queues(&self) -> usize {
        self.raw.len()
    }

    /// The priority the `CUstream` of `id` was created with (creating it if needed).
    ///
    /// # Errors
    /// The driver's error.
    pub fn priority_of(&mut self, id: StreamId) -> Result<i32, DriverFailure> {
        let raw = self.raw(id)?;
        // SAFETY: a live stream of this server's context.
        unsafe { driver::stream::priority(raw) }
    }

    /// A new `CUstream` at the configured priority (the context is bound).
    fn create(&self) -> Result<CUstream, DriverFailure> {
        match self.priority {
            StreamPriority::Normal => driver::stream::create_non_blocking(),
            StreamPriority::High => {
                let (_, greatest) = driver::stream::priority_range()?;
                driver::stream::create_non_blocking_with_priority(greatest)
            }
        }
    }

    /// The event pool.
    pub fn events(&self) -> &Arc<EventPool> {
        &self.events
    }

    fn index(&mut self, id: StreamId) -> Result<usize, DriverFailure> {
        if let Some(index) = self.ids.get(&id) {
            return Ok(*index);
        }
        let index = if self.raw.len() < self.limit {
            self.context.bind()?;
            let stream = self.create()?;
            self.raw.push(RawStream {
                stream,
                seq: 0,
                completed: 0,
                recorded: VecDeque::new(),
                capturing: false,
            });
            self.raw.len() - 1
        } else {
            self.ids.len() % self.limit
        };
        self.ids.insert(id, index);
        Ok(index)
    }

    /// The `CUstream` of `id`, created on first use.
    ///
    /// # Errors
    /// The driver's error.
    pub fn raw(&mut self, id: StreamId) -> Result<CUstream, DriverFailure> {
        let index = self.index(id)?;
        Ok(self.raw[index].stream)
    }

    /// Counts one more operation submitted on `id`.
    pub fn bump(&mut self, id: StreamId) {
        if let Ok(index) = self.index(id) {
            self.raw[index].seq += 1;
        }
    }

    /// The current point of `id`: "everything submitted on it so far".
    pub fn point(&mut self, id: StreamId) -> StreamPoint {
        let seq = self.index(id).map(|i| self.raw[i].seq).unwrap_or(0);
        StreamPoint { stream: id, seq }
    }

    /// Whether `id` is being captured into a graph.
    pub fn is_capturing(&mut self, id: StreamId) -> bool {
        self.index(id)
            .map(|i| self.raw[i].capturing)
            .unwrap_or(false)
    }

    /// Marks `id` as captured (or not).
    pub fn set_capturing(&mut self, id: StreamId, capturing: bool) {
        if let Ok(index) = self.index(id) {
            self.raw[index].capturing = capturing;
        }
    }

    /// Records an event now on `id` and returns it (owned by the caller).
    ///
    /// # Errors
    /// The driver's error.
    pub fn record(&mut self, id: StreamId) -> Result<CUevent, DriverFailure> {
        let stream = self.raw(id)?;
        let event = self.events.take()?;
        // SAFETY: live event and stream of this context.
        if let Err(failure) = unsafe { driver::event::record(event, stream) } {
            self.events.give_back(event);
            return Err(failure);
        }
        Ok(event)
    }

    /// Makes `waiter` wait on the device for everything submitted on `on` so far. Nothing
    /// happens if both map to the same `CUstream` or either is being captured.
    ///
    /// # Errors
    /// The driver's error.
    pub fn order(&mut self, waiter: StreamId, on: StreamId) -> Result<(), DriverFailure> {
        let (w, o) = (self.index(waiter)?, self.index(on)?);
        if w == o || self.raw[w].capturing || self.raw[o].capturing {
            return Ok(());
        }
        let event = self.record(on)?;
        let waiter_stream = self.raw[w].stream;
        // SAFETY: live stream and event; the wait is captured at call time, so the event can
        // be reused right after.
        let waited = unsafe { driver::stream::wait_event(waiter_stream, event) };
        self.events.give_back(event);
        waited
    }

    /// Polls the events recorded on raw stream `index`, advancing its completed point.
    fn poll(&mut self, index: usize) {
        let raw = &mut self.raw[index];
        while let Some((seq, event)) = raw.recorded.front().copied() {
            // SAFETY: a live event recorded on this stream.
            match unsafe { driver::event::query(event) } {
                Ok(true) => {
                    raw.completed = raw.completed.max(seq);
                    raw.recorded.pop_front();
                    self.events.give_back(event);
                }
                _ => break,
            }
        }
    }

    /// Records that every stream has completed everything submitted so far (call after a
    /// context-wide synchronize).
    pub fn mark_all_complete(&mut self) {
        for raw in &mut self.raw {
            raw.completed = raw.seq;
            for (_, event) in raw.recorded.drain(..) {
                self.events.give_back(event);
            }
        }
    }

    /// Whether any stream is being captured into a graph.
    pub fn any_capturing(&self) -> bool {
        self.raw.iter().any(|raw| raw.capturing)
    }

    /// Waits on the host until everything submitted on every stream of this server is
    /// done (the first failure is returned after all were waited for). Streams being
    /// captured into a graph are skipped (waiting on them would break the capture).
    ///
    /// # Errors
    /// The driver's error (a device fault shows up here).
    pub fn synchronize_all(&mut self) -> Result<(), DriverFailure> {
        self.context.bind()?;
        let mut first = Ok(());
        for raw in self.raw.iter().filter(|raw| !raw.capturing) {
            // SAFETY: a live stream of this context.
            let result = unsafe { driver::stream::synchronize(raw.stream) };
            if first.is_ok() {
                first = result;
            }
        }
        first
    }

    /// Waits on the host until everything submitted on `id` is done.
    ///
    /// # Errors
    /// The driver's error (a device fault shows up here).
    pub fn synchronize(&mut self, id: StreamId) -> Result<(), DriverFailure> {
        let stream = self.raw(id)?;
        // SAFETY: a live stream of this context.
        unsafe { driver::stream::synchronize(stream) }?;
        let index = self.index(id)?;
        let raw = &mut self.raw[index];
        raw.completed = raw.seq;
        Ok(())
    }
}

impl StreamOrdering for Streams {
    fn is_complete(&mut self, point: StreamPoint) -> bool {
        let Ok(index) = self.index(point.stream) else {
            return false;
        };
        if point.seq <= self.raw[index].completed {
            return true;
        }
        self.poll(index);
        if point.seq <= self.raw[index].completed {
            return true;
        }
        // Make sure a later poll can see this point pass.
        let raw = &self.raw[index];
        let covered = raw
            .recorded
            .back()
            .is_some_and(|(seq, _)| *seq >= point.seq);
        if !covered && !raw.capturing {
            let seq = raw.seq;
            if let Ok(event) = self.record(point.stream) {
                self.raw[index].recorded.push_back((seq, event));
            }
        }
        false
    }

    fn wait_for(&mut self, waiter: StreamId, point: StreamPoint) -> bool {
        self.order(waiter, point.stream).is_ok()
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        if self.context.bind().is_err() {
            return;
        }
        for raw in &mut self.raw {
            for (_, event) in raw.recorded.drain(..) {
                // SAFETY: events recorded by this object, destroyed once.
                let _ = unsafe { driver::event::destroy(event) };
            }
            // SAFETY: streams created by this object, destroyed once.
            let _ = unsafe { driver::stream::destroy(raw.stream) };
        }
        self.events.destroy_all();
    }
}
