//! Allocation traces: `alloc ID SIZE` / `free ID` lines, to replay an application's
//! allocation pattern against the memory manager and measure fragmentation.
//!
//! Blank lines and lines starting with `#` are ignored. Parsing never panics: a malformed
//! line, a duplicate live id, a free of an unknown id or a zero size is an error naming the
//! line. [`AllocationTrace::peak_live_bytes`] is the largest sum of live requested sizes
//! over the trace (saturated at `u64::MAX`): the floor any allocator's peak reservation is
//! compared with.

use std::collections::HashMap;
use std::fmt;

/// One event of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// Allocate `size` bytes under `id`.
    Alloc {
        /// The allocation's id (unique while it is live).
        id: u64,
        /// Bytes requested.
        size: u64,
    },
    /// Free the allocation `id`.
    Free {
        /// The allocation's id.
        id: u64,
    },
}

/// A parse error, with the 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// Line of the error.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for TraceError {}

/// A parsed, checked allocation trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocationTrace {
    /// The events in order.
    pub events: Vec<TraceEvent>,
    /// Largest sum of live requested sizes over the trace.
    pub peak_live_bytes: u64,
}

impl AllocationTrace {
    /// Parses a trace.
    ///
    /// # Errors
    /// [`TraceError`] for the first malformed or inconsistent line.
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut events = Vec::new();
        let mut live: HashMap<u64, u64> = HashMap::new();
        // u128: the sizes of live allocations can add up past u64::MAX.
        let (mut live_bytes, mut peak) = (0u128, 0u128);
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let error = |reason: String| TraceError { line, reason };
            let mut words = content.split_whitespace();
            let number = |word: Option<&str>, what: &str| -> Result<u64, TraceError> {
                let word = word.ok_or_else(|| error(format!("missing {what}")))?;
                word.parse::<u64>()
                    .map_err(|_| error(format!("{what} `{word}` is not a non-negative integer")))
            };
            let event = match words.next() {
                Some("alloc") => {
                    let id = number(words.next(), "id")?;
                    let size = number(words.next(), "size")?;
                    if size == 0 {
                        return Err(error("an allocation of 0 bytes".into()));
                    }
                    if live.insert(id, size).is_some() {
                        return Err(error(format!("id {id} is allocated twice")));
                    }
                    live_bytes += u128::from(size);
                    peak = peak.max(live_bytes);
                    TraceEvent::Alloc { id, size }
                }
                Some("free") => {
                    let id = number(words.next(), "id")?;
                    let size = live
                        .remove(&id)
                        .ok_or_else(|| error(format!("id {id} is freed but not allocated")))?;
                    live_bytes -= u128::from(size);
                    TraceEvent::Free { id }
                }
                Some(other) => {
                    return Err(error(format!(
                        "unknown event `{other}` (expected `alloc ID SIZE` or `free ID`)"
                    )));
                }
                None => continue,
            };
            if words.next().is_some() {
                return Err(error("trailing words after the event".into()));
            }
            events.push(event);
        }
        Ok(Self {
            events,
            peak_live_bytes: u64::try_from(peak).unwrap_or(u64::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_and_tracks_the_live_peak() {
        let trace = AllocationTrace::parse(
            "# header\nalloc 0 100\nalloc 1 50\nfree 0\n\nalloc 2 70\nfree 1\nfree 2\n",
        )
        .unwrap();
        assert_eq!(trace.events.len(), 6);
        assert_eq!(trace.events[0], TraceEvent::Alloc { id: 0, size: 100 });
        assert_eq!(trace.peak_live_bytes, 150);
    }

    /// Regression (fuzzing, `fuzz/seeds/trace/saturating`): live sizes adding up past
    /// `u64::MAX` used to saturate the running sum, and freeing them then underflowed it
    /// (a panic with overflow checks on).
    #[test]
    fn live_sizes_past_u64_max_saturate_the_peak_without_panicking() {
        let trace =
            AllocationTrace::parse("alloc 1 18446744073709551615\nalloc 2 5\nfree 1\nfree 2\n")
                .unwrap();
        assert_eq!(trace.peak_live_bytes, u64::MAX);
        let trace = AllocationTrace::parse(&format!(
            "alloc 1 {}\nalloc 2 {}\nfree 1\nalloc 3 7\nfree 2\nfree 3\n",
            u64::MAX - 1,
            u64::MAX - 1
        ))
        .unwrap();
        assert_eq!(trace.events.len(), 6);
        assert_eq!(trace.peak_live_bytes, u64::MAX);
    }

    #[test]
    fn malformed_lines_are_errors_with_their_line() {
        for (text, line) in [
            ("alloc 1", 1),
            ("alloc 1 10\nalloc 1 20", 2),
            ("free 9", 1),
            ("alloc x 10", 1),
            ("alloc 1 0", 1),
            ("grow 1 10", 1),
            ("alloc 1 10 extra", 1),
        ] {
            let error = AllocationTrace::parse(text).unwrap_err();
            assert_eq!(error.line, line, "{text}: {error}");
        }
    }
}
