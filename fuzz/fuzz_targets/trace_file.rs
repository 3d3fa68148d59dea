//! Allocation-trace files (`AllocationTrace::read`): the input's raw bytes are written to a
//! file (one per process, in a temporary directory, overwritten for every input) and read
//! back as a trace, as `cubert bench --trace FILE` does with a file from the user.
//!
//! Properties: reading never panics; bytes that are not UTF-8 are refused as a whole (line
//! 0), and UTF-8 text reads exactly as `AllocationTrace::parse` parses it (same trace, or
//! same error); an error's message stays short whatever the file holds (under
//! `MAX_MESSAGE` bytes plus the path: a huge token is quoted shortened, never echoed); and
//! the peak of an accepted trace equals the largest sum of live sizes recomputed from its
//! events (saturated at `u64::MAX`), whose frees only ever name live allocations.

#![no_main]

use cubert_runtime::memory::trace::{AllocationTrace, TraceEvent};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Longest error message allowed, not counting the path it names.
const MAX_MESSAGE: usize = 300;

/// The file every input is written to (its directory lives as long as the process): in
/// memory (`/dev/shm`) where there is one, since on ext4 rewriting a truncated file flushes
/// it to disk at every input.
fn trace_path() -> &'static Path {
    static FILE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = FILE.get_or_init(|| {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("a temporary directory");
        let path = dir.path().join("trace.txt");
        (dir, path)
    });
    path
}

/// The largest sum of live sizes over `events`, saturated at `u64::MAX`.
fn recomputed_peak(events: &[TraceEvent]) -> u64 {
    let mut live: HashMap<u64, u64> = HashMap::new();
    let (mut bytes, mut peak) = (0u128, 0u128);
    for event in events {
        match *event {
            TraceEvent::Alloc { id, size } => {
                assert!(size > 0, "an accepted allocation of 0 bytes");
                assert!(live.insert(id, size).is_none(), "id {id} live twice");
                bytes += u128::from(size);
                peak = peak.max(bytes);
            }
            TraceEvent::Free { id } => {
                let size = live.remove(&id).expect("a free of a live id");
                bytes -= u128::from(size);
            }
        }
    }
    u64::try_from(peak).unwrap_or(u64::MAX)
}

fuzz_target!(|data: &[u8]| {
    let path = trace_path();
    std::fs::write(path, data).expect("the trace file is written");
    let read = AllocationTrace::read(path);
    if let Err(error) = &read {
        let message = error.to_string();
        let limit = MAX_MESSAGE + path.as_os_str().len();
        assert!(
            message.len() < limit,
            "a {}-byte error message: {:?}",
            message.len(),
            &message[..message.floor_char_boundary(400)]
        );
    }
    match std::str::from_utf8(data) {
        Err(_) => {
            let error = read.expect_err("bytes that are not UTF-8 were accepted");
            assert_eq!(error.line, 0, "{error}");
        }
        Ok(text) => {
            assert_eq!(read, AllocationTrace::parse(text), "read and parse differ");
            if let Ok(trace) = read {
                assert_eq!(trace.peak_live_bytes, recomputed_peak(&trace.events));
            }
        }
    }
});
