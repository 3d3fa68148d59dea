//! Stream identifiers, and the policy that gives a client its stream.
//!
//! A stream is an ordered queue of work on a device. Work on one stream runs in submission
//! order; work on different streams may overlap. Which stream a client's work goes on is
//! the [`StreamPolicy`] of `[runtime] stream_policy`:
//!
//! - `per_thread` (the default): every OS thread gets its own stream (`StreamId::current`),
//!   so threads that share a client do not serialize on each other;
//! - `per_task`: every client value gets its own stream ([`StreamId::fresh`]) and every
//!   clone a new one, so a task given its own clone keeps its work on one stream whichever
//!   thread runs it (an async executor moves tasks between threads);
//! - `single`: every client of the device uses one stream ([`StreamId::SINGLE`]): all work
//!   runs in submission order.
//!
//! A client can still be pinned to a stream with `ComputeClient::set_stream`. How many
//! device queues the stream ids map to (`[runtime] max_streams`) and their priority
//! (`[runtime] stream_priority`) are the backend's business: CUDA creates up to that many
//! `CUstream`s at that priority; the CPU runs a device's work in one queue.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which stream a client's work goes on (`[runtime] stream_policy`). See the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamPolicy {
    /// One stream per OS thread.
    #[default]
    PerThread,
    /// One stream per client value: a clone gets a new stream.
    PerTask,
    /// One stream per device for every client.
    Single,
}

/// The priority of the device queues a backend creates for its streams
/// (`[runtime] stream_priority`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamPriority {
    /// The device's default priority.
    #[default]
    Normal,
    /// The device's highest priority: its work is scheduled ahead of normal streams' when
    /// both wait for the device (CUDA's greatest stream priority).
    High,
}

/// Identifies a stream of work on a device.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StreamId {
    /// The numeric value of the stream.
    pub value: u64,
}

/// How a device's streams are set up (the `[runtime]` stream keys of the configuration its
/// server was made with).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StreamSettings {
    /// Which stream a client's work goes on.
    pub policy: StreamPolicy,
    /// The most device queues the server creates; later stream ids share them.
    pub max_streams: u32,
    /// The priority of those queues.
    pub priority: StreamPriority,
}

impl StreamSettings {
    /// The settings `config` asks for.
    pub fn of(config: &crate::config::CubertConfig) -> Self {
        Self {
            policy: config.runtime.stream_policy,
            max_streams: config.runtime.max_streams,
            priority: config.runtime.stream_priority,
        }
    }
}

static NEXT_THREAD_STREAM: AtomicU64 = AtomicU64::new(0);

/// The first id [`StreamId::fresh`] hands out: far above the per-thread ids (counted from
/// 0) and the values the docs suggest for streams managed by hand (`1 << 32` and up).
const FIRST_FRESH_STREAM: u64 = 1 << 60;

static NEXT_FRESH_STREAM: AtomicU64 = AtomicU64::new(FIRST_FRESH_STREAM);

thread_local! {
    static THREAD_STREAM: StreamId = StreamId {
        value: NEXT_THREAD_STREAM.fetch_add(1, Ordering::Relaxed),
    };
}

impl StreamId {
    /// The stream of the calling OS thread (one per thread, assigned on first use).
    pub fn current() -> Self {
        THREAD_STREAM.with(|stream| *stream)
    }

    /// A stream with an explicit value. Values are shared with the per-thread streams, so
    /// prefer values above `1 << 32` for streams you manage yourself.
    pub const fn new(value: u64) -> Self {
        Self { value }
    }

    /// The one stream of every client under [`StreamPolicy::Single`].
    pub const SINGLE: Self = Self::new(u64::MAX);

    /// A stream no other call of this function returns, nor any thread's
    /// ([`StreamPolicy::PerTask`] gives one to each client value).
    pub fn fresh() -> Self {
        Self {
            value: NEXT_FRESH_STREAM.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream#{}", self.value)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_streams_are_distinct_from_each_other_and_from_threads() {
        let (a, b) = (StreamId::fresh(), StreamId::fresh());
        assert_ne!(a, b);
        assert!(a.value >= FIRST_FRESH_STREAM && b.value >= FIRST_FRESH_STREAM);
        assert!(StreamId::current().value < FIRST_FRESH_STREAM);
        assert_ne!(a, StreamId::SINGLE);
    }

    #[test]
    fn each_thread_gets_its_own_stream() {
        let here = StreamId::current();
        assert_eq!(here, StreamId::current());
        let there = std::thread::spawn(StreamId::current).join().unwrap();
        assert_ne!(here, there);
    }
}
