//! Device-timed profiles: `start_profile` / `end_profile` measured with CUDA timing events.
//!
//! Starting a profile records a timing event on the stream and keeps it under a fresh token,
//! with the host time. Ending it records a second timing event and sends both to the
//! completion thread, which waits for the end event and resolves the profile's future with
//! the elapsed device time; the runner never waits for the device.
//!
//! [`Profiler`] is the server's part that owns the timing events and the profiles started.
//! The server binds its context and looks up the stream before calling it, and passes the
//! raw stream (and, to end a profile, its completion thread) in.

use crate::completion::{Completion, Job, Reply};
use crate::driver;
use crate::streams::EventPool;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::future::oneshot;
use cubert_runtime::profile::{ProfileDuration, ProfilingToken};
use cubert_runtime::properties::TimingMethod;
use cubert_runtime::{ProfileError, ServerError, StreamId};
use cudarc::driver::sys::{CUevent, CUstream};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A profile started and taken back by its token: its start event and host time.
pub(crate) struct Started {
    event: CUevent,
    at: Instant,
}

/// The server's part that times profiles on the device. See the module docs.
pub(crate) struct Profiler {
    timing_events: Arc<EventPool>,
    profiles: HashMap<u64, Started>,
    next_token: u64,
}

impl Profiler {
    /// A profiler taking its events from `timing_events` (the completion thread gives them
    /// back).
    pub(crate) fn new(timing_events: Arc<EventPool>) -> Self {
        Self {
            timing_events,
            profiles: HashMap::new(),
            next_token: 0,
        }
    }

    /// Starts a profile on raw stream `raw` (the context is bound).
    ///
    /// # Errors
    /// The driver's error.
    pub(crate) fn start(&mut self, raw: CUstream) -> Result<ProfilingToken, ServerError> {
        let event = self.timing_events.take()?;
        // SAFETY: live timing event and stream of this context.
        unsafe { driver::event::record(event, raw) }?;
        self.next_token += 1;
        let started = Started {
            event,
            at: Instant::now(),
        };
        self.profiles.insert(self.next_token, started);
        Ok(ProfilingToken {
            id: self.next_token,
        })
    }

    /// Takes back the profile of `token`.
    ///
    /// # Errors
    /// `ProfileError::NotRegistered` for a token this profiler didn't give (or already took).
    pub(crate) fn take(&mut self, token: &ProfilingToken) -> Result<Started, ProfileError> {
        self.profiles
            .remove(&token.id)
            .ok_or_else(|| ProfileError::NotRegistered {
                backtrace: BackTrace::capture(),
            })
    }

    /// Ends the profile `started` on raw stream `raw` of `stream` (the context is bound):
    /// the completion thread measures it once the device got there.
    ///
    /// # Errors
    /// The driver's error, or the completion thread stopped.
    pub(crate) fn end(
        &self,
        started: Started,
        raw: CUstream,
        stream: StreamId,
        completion: &Completion,
    ) -> Result<ProfileDuration, ServerError> {
        let end = self.timing_events.take()?;
        // SAFETY: live timing event and stream of this context.
        unsafe { driver::event::record(end, raw) }?;
        let (sender, receiver) = oneshot();
        completion.submit(Job {
            event: end,
            timing_event: true,
            stream,
            checks: Vec::new(),
            reply: Reply::Profile {
                start: started.event,
                started: started.at,
                reply: sender,
            },
        })?;
        Ok(ProfileDuration::new(
            Box::pin(async move {
                receiver.await.unwrap_or_else(|| {
                    Err(ProfileError::Unknown {
                        reason: "the CUDA completion thread stopped".into(),
                        backtrace: BackTrace::capture(),
                    })
                })
            }),
            TimingMethod::Device,
        ))
    }
}
