//! Durations of profiled work.
//!
//! A server hands out a [`ProfilingToken`] when a profile starts and a [`ProfileDuration`]
//! when it ends. The duration is a future: device timestamps (events) are only readable once
//! the device got there, and awaiting them must not block the runner thread. Tokens nest and
//! may overlap: each one measures from its own start to its own end.

use crate::error::ProfileError;
use crate::future::{DynFut, block_on, ready};
use crate::properties::TimingMethod;
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Identifies a profile in progress on a server.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub struct ProfilingToken {
    /// The token value.
    pub id: u64,
}

/// Start and end of profiled work, as host instants (device timestamps are mapped onto the
/// host clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileTicks {
    start: Instant,
    end: Instant,
}

impl ProfileTicks {
    /// Ticks from a start and an end instant (`end` before `start` gives a zero duration).
    pub fn new(start: Instant, end: Instant) -> Self {
        Self {
            start,
            end: end.max(start),
        }
    }

    /// Ticks of `duration` starting at `start`.
    pub fn from_duration(start: Instant, duration: Duration) -> Self {
        Self {
            start,
            end: start + duration,
        }
    }

    /// When the work started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// When the work ended.
    pub fn end(&self) -> Instant {
        self.end
    }

    /// How long the work took.
    pub fn duration(&self) -> Duration {
        self.end - self.start
    }

    /// Microseconds from the process epoch (first use of the profiler) to the start.
    pub fn start_micros_since_epoch(&self) -> f64 {
        self.start.saturating_duration_since(epoch()).as_secs_f64() * 1e6
    }
}

/// The instant profiling timestamps are measured from in traces.
pub fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The duration of profiled work, available once the device has finished it.
pub struct ProfileDuration {
    future: DynFut<Result<ProfileTicks, ProfileError>>,
    method: TimingMethod,
}

impl ProfileDuration {
    /// A duration that resolves when `future` does.
    pub fn new(future: DynFut<Result<ProfileTicks, ProfileError>>, method: TimingMethod) -> Self {
        Self { future, method }
    }

    /// A duration already known.
    pub fn from_ticks(ticks: ProfileTicks, method: TimingMethod) -> Self {
        Self::new(ready(Ok(ticks)), method)
    }

    /// How the duration is measured.
    pub fn timing_method(&self) -> TimingMethod {
        self.method
    }

    /// The ticks, as a future.
    pub fn resolve(self) -> DynFut<Result<ProfileTicks, ProfileError>> {
        self.future
    }

    /// The ticks, blocking the calling thread until they are known.
    ///
    /// # Errors
    /// The profile's error, if measuring failed.
    pub fn resolve_blocking(self) -> Result<ProfileTicks, ProfileError> {
        block_on(self.future)
    }
}

impl fmt::Debug for ProfileDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfileDuration")
            .field("method", &self.method)
            .finish()
    }
}

/// Profiles timed by the host clock, for servers whose work is complete once it ran (the
/// CPU, the dry run): `start` notes the time under a new token, `end` measures from it.
#[derive(Debug, Default)]
pub struct HostProfiles {
    started: std::collections::HashMap<u64, Instant>,
    next_token: u64,
}

impl HostProfiles {
    /// Starts a profile now.
    pub fn start(&mut self) -> ProfilingToken {
        self.next_token += 1;
        self.started.insert(self.next_token, Instant::now());
        ProfilingToken {
            id: self.next_token,
        }
    }

    /// The time since `token`'s start, by the host clock.
    ///
    /// # Errors
    /// [`ProfileError::NotRegistered`] for a token this never started (or already ended).
    pub fn end(&mut self, token: ProfilingToken) -> Result<ProfileDuration, ProfileError> {
        let start = self
            .started
            .remove(&token.id)
            .ok_or_else(|| ProfileError::NotRegistered {
                backtrace: crate::backtrace::BackTrace::capture(),
            })?;
        Ok(ProfileDuration::from_ticks(
            ProfileTicks::new(start, Instant::now()),
            TimingMethod::System,
        ))
    }
}
