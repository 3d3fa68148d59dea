//! Allocation-trace parsing (`AllocationTrace::parse`), then a replay of the parsed trace
//! against a memory manager over host storage.
//!
//! Properties: parsing never panics; a parsed trace prints back to text that parses to the
//! same events and peak; the peak is at least every single allocation; replaying it never
//! panics (requests too large are `BufferTooBig`/`OutOfMemory`), and once every allocation
//! is freed and the cache cleaned up the manager holds nothing.

#![no_main]

use cubert_cpu::storage::HostStorage;
use cubert_runtime::device::DeviceId;
use cubert_runtime::handle::{HandleFactory, ReleaseQueue};
use cubert_runtime::memory::trace::{AllocationTrace, TraceEvent};
use cubert_runtime::memory::{HostOrdering, MemoryLimits, MemoryManager, MemoryOptions};
use cubert_runtime::stream::StreamId;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;

/// Most events replayed per input (keeps every run fast).
const REPLAY_EVENTS: usize = 256;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(trace) = AllocationTrace::parse(&text) else {
        return;
    };
    let printed: String = trace
        .events
        .iter()
        .map(|event| match event {
            TraceEvent::Alloc { id, size } => format!("alloc {id} {size}\n"),
            TraceEvent::Free { id } => format!("free {id}\n"),
        })
        .collect();
    let again = AllocationTrace::parse(&printed).expect("a printed trace parses");
    assert_eq!(again, trace);
    for event in &trace.events {
        if let TraceEvent::Alloc { size, .. } = event {
            assert!(trace.peak_live_bytes >= *size);
        }
    }

    let mut manager = MemoryManager::new(
        HostStorage::default(),
        MemoryOptions::default(),
        MemoryLimits {
            max_allocation: 64 << 20,
            capacity: Some(256 << 20),
        },
    );
    let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
    let stream = StreamId::new(0);
    let mut live = HashMap::new();
    for event in trace.events.iter().take(REPLAY_EVENTS) {
        match *event {
            TraceEvent::Alloc { id, size } => {
                let handle = factory.mint(stream, size);
                if manager
                    .reserve(handle.id(), size, stream, &mut HostOrdering)
                    .is_ok()
                {
                    live.insert(id, handle);
                }
            }
            TraceEvent::Free { id } => {
                if let Some(handle) = live.remove(&id) {
                    assert!(manager.release(handle.id(), Vec::new()));
                }
            }
        }
    }
    for (_, handle) in live.drain() {
        assert!(manager.release(handle.id(), Vec::new()));
    }
    manager.cleanup(&mut HostOrdering);
    let usage = manager.usage();
    assert_eq!(usage.number_allocs, 0, "{usage:?}");
    assert_eq!(usage.bytes_in_use, 0, "{usage:?}");
    assert_eq!(usage.bytes_reserved, 0, "{usage:?}");
});
