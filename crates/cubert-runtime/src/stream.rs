//! Stream identifiers.
//!
//! A stream is an ordered queue of work on a device. Work on one stream runs in submission
//! order; work on different streams may overlap. By default every OS thread gets its own
//! stream (`StreamId::current`), so threads that share a client do not serialize on each
//! other; a client can be pinned to a stream with `ComputeClient::set_stream`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifies a stream of work on a device.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StreamId {
    /// The numeric value of the stream.
    pub value: u64,
}

static NEXT_THREAD_STREAM: AtomicU64 = AtomicU64::new(0);

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
    fn each_thread_gets_its_own_stream() {
        let here = StreamId::current();
        assert_eq!(here, StreamId::current());
        let there = std::thread::spawn(StreamId::current).join().unwrap();
        assert_ne!(here, there);
    }
}
