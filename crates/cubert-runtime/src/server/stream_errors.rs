//! Errors queued per stream until the next `flush`, `sync` or `read` on it.
//!
//! Fire-and-forget operations can't return their errors; servers push them here and the
//! next blocking call on the same stream takes them. Each stream keeps at most
//! [`MAX_QUEUED`] errors (the oldest are kept: the first error usually explains the rest);
//! the count of dropped ones is reported with the first.

use crate::error::ServerError;
use crate::stream::StreamId;
use std::collections::HashMap;

/// Most errors kept per stream.
pub const MAX_QUEUED: usize = 64;

#[derive(Default)]
struct Queue {
    errors: Vec<ServerError>,
    dropped: u64,
}

/// Errors waiting on each stream.
#[derive(Default)]
pub struct StreamErrors {
    streams: HashMap<StreamId, Queue>,
}

impl StreamErrors {
    /// Queues `error` on `stream`.
    pub fn push(&mut self, stream: StreamId, error: ServerError) {
        tracing::debug!("error queued on {stream:?}: {error}");
        let queue = self.streams.entry(stream).or_default();
        if queue.errors.len() < MAX_QUEUED {
            queue.errors.push(error);
        } else {
            queue.dropped += 1;
        }
    }

    /// Whether `stream` has errors waiting.
    pub fn has_errors(&self, stream: StreamId) -> bool {
        self.streams.contains_key(&stream)
    }

    /// Takes the errors of `stream`: `Ok` if there were none, else the first one (the
    /// others are logged).
    ///
    /// # Errors
    /// The first error queued on the stream.
    pub fn take(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let Some(queue) = self.streams.remove(&stream) else {
            return Ok(());
        };
        let mut errors = queue.errors.into_iter();
        let Some(first) = errors.next() else {
            return Ok(());
        };
        for later in errors {
            tracing::warn!("further error on {stream:?}: {later}");
        }
        if queue.dropped > 0 {
            tracing::warn!("{} more error(s) on {stream:?} were dropped", queue.dropped);
        }
        Err(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_error_is_returned_once() {
        let mut errors = StreamErrors::default();
        let stream = StreamId::new(1);
        errors.push(stream, ServerError::generic("first"));
        errors.push(stream, ServerError::generic("second"));
        assert!(errors.take(StreamId::new(2)).is_ok());
        let error = errors.take(stream).unwrap_err();
        assert!(error.to_string().contains("first"));
        assert!(errors.take(stream).is_ok());
    }
}
