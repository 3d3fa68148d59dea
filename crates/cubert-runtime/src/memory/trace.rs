//! Allocation traces: `alloc ID SIZE` / `free ID` lines, to replay an application's
//! allocation pattern against the memory manager and measure fragmentation.
//!
//! Blank lines and lines starting with `#` are ignored. Parsing never panics: a malformed
//! line, a duplicate live id, a free of an unknown id or a zero size is an error naming the
//! line. [`AllocationTrace::peak_live_bytes`] is the largest sum of live requested sizes
//! over the trace (saturated at `u64::MAX`): the floor any allocator's peak reservation is
//! compared with.
//!
//! [`AllocationTrace::read`] takes a file from the user: only a regular file of at most
//! [`MAX_TRACE_BYTES`] is read (`/dev/zero` or a FIFO is refused before any byte is read,
//! so it can neither grow memory without limit nor block forever), and an error quotes at
//! most [`MAX_QUOTED_CHARS`] characters of a malformed word.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Largest trace file [`AllocationTrace::read`] accepts: 1 GiB (the anchor trace is a few MB).
pub const MAX_TRACE_BYTES: u64 = 1 << 30;
/// Most characters of a malformed word an error message quotes.
pub const MAX_QUOTED_CHARS: usize = 40;

/// `word`, shortened for an error message.
fn quoted(word: &str) -> String {
    match word.char_indices().nth(MAX_QUOTED_CHARS) {
        None => word.to_string(),
        Some((end, _)) => format!("{}... ({} bytes)", &word[..end], word.len()),
    }
}

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

/// A parse error, with the 1-based line number (0: the file itself can't be read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// Line of the error; 0 when the file as a whole is refused.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => f.write_str(&self.reason),
            line => write!(f, "line {line}: {}", self.reason),
        }
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
    /// The trace as text [`Self::parse`] reads back: one `alloc ID SIZE` or `free ID` line
    /// per event.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut text = String::with_capacity(self.events.len() * 20);
        for event in &self.events {
            let _ = match event {
                TraceEvent::Alloc { id, size } => writeln!(text, "alloc {id} {size}"),
                TraceEvent::Free { id } => writeln!(text, "free {id}"),
            };
        }
        text
    }

    /// Reads and parses the trace file at `path` (see the module docs for what is refused).
    ///
    /// # Errors
    /// [`TraceError`] with line 0 if the file can't be opened, is not a regular file, is
    /// larger than [`MAX_TRACE_BYTES`] or is not UTF-8; else as [`Self::parse`].
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let refuse = |reason: String| TraceError {
            line: 0,
            reason: format!("{}: {reason}", path.display()),
        };
        let not_regular = || {
            refuse("not a regular file (a device, a FIFO or a directory can't be a trace)".into())
        };
        // Looked at before opening: opening a FIFO for reading blocks until a writer comes.
        let metadata = std::fs::metadata(path).map_err(|error| refuse(error.to_string()))?;
        if !metadata.is_file() {
            return Err(not_regular());
        }
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            // Should the path be swapped for a FIFO after the look, the open still returns.
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NONBLOCK);
        }
        let file = options
            .open(path)
            .map_err(|error| refuse(error.to_string()))?;
        let metadata = file.metadata().map_err(|error| refuse(error.to_string()))?;
        if !metadata.is_file() {
            return Err(not_regular());
        }
        if metadata.len() > MAX_TRACE_BYTES {
            return Err(refuse(format!(
                "{} bytes is larger than the {MAX_TRACE_BYTES} bytes a trace may have",
                metadata.len()
            )));
        }
        // The limit holds even if the file grows while it is read.
        let mut bytes = Vec::new();
        file.take(MAX_TRACE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| refuse(error.to_string()))?;
        if bytes.len() as u64 > MAX_TRACE_BYTES {
            return Err(refuse(
                "the file grew past the size limit while it was read".into(),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|error| {
            refuse(format!(
                "not UTF-8 text (first bad byte at offset {})",
                error.utf8_error().valid_up_to()
            ))
        })?;
        Self::parse(&text)
    }

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
                word.parse::<u64>().map_err(|_| {
                    error(format!(
                        "{what} `{}` is not a non-negative integer",
                        quoted(word)
                    ))
                })
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
                        "unknown event `{}` (expected `alloc ID SIZE` or `free ID`)",
                        quoted(other)
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
    fn devices_fifos_and_directories_are_refused_before_reading() {
        for path in ["/dev/zero", "/dev/null", "/"] {
            let error = AllocationTrace::read(Path::new(path)).unwrap_err();
            assert_eq!(error.line, 0, "{path}");
            assert!(error.reason.contains("not a regular file"), "{error}");
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|status| status.success()) {
            // Opening a FIFO for reading would block until a writer comes: refused first.
            let error = AllocationTrace::read(&fifo).unwrap_err();
            assert!(error.reason.contains("not a regular file"), "{error}");
        }
    }

    #[test]
    fn long_malformed_words_are_quoted_shortened() {
        let token = "x".repeat(10 << 20);
        let error = AllocationTrace::parse(&format!("alloc 1 {token}\n")).unwrap_err();
        assert!(error.reason.len() < 200, "{} bytes", error.reason.len());
        assert!(error.reason.contains("10485760 bytes"), "{}", error.reason);
        let error = AllocationTrace::parse(&format!("{token} 1 2\n")).unwrap_err();
        assert!(error.reason.len() < 200);
    }

    #[test]
    fn a_regular_file_is_read_and_parsed() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "alloc 1 100\nfree 1\n").unwrap();
        let trace = AllocationTrace::read(file.path()).unwrap();
        assert_eq!(trace.events.len(), 2);
        assert_eq!(trace.peak_live_bytes, 100);
    }

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
