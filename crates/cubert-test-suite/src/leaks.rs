//! Leaks: long runs of allocate/free cycles through the client (`empty` + drop, on two
//! streams, small, mid-size and large requests, some in persistent mode, a few handles kept
//! alive across cycles) leave `memory_usage` exactly at its baseline, and `memory_cleanup`
//! gives every reserved byte back.
//!
//! CI runs [`FAST_CYCLES`] (1,000,000) cycles: on the CPU that takes about a second even
//! in the test profile. The long test runs [`LONG_CYCLES`] (in release mode:
//! `cargo test --release -p cubert-cpu --test behaviour -- --ignored long::leaks`).
//! `CUBERT_LEAK_CYCLES` overrides both.

use crate::backend::TestBackend;
use crate::support::{SeededRng, client, settled_usage};
use cubert_runtime::{Handle, StreamId};
use std::time::Instant;

/// Cycles of the fast test.
pub const FAST_CYCLES: u64 = 1_000_000;
/// Cycles of the long test.
pub const LONG_CYCLES: u64 = 10_000_000;
/// Cycles between two syncs (bounds the queue of work not yet run).
const SYNC_EVERY: u64 = 4096;
/// Handles kept alive across cycles at most.
const KEPT: usize = 8;

fn cycles_from_env(default: u64) -> u64 {
    match std::env::var("CUBERT_LEAK_CYCLES") {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CUBERT_LEAK_CYCLES={value} is not a number")),
        Err(_) => default,
    }
}

fn size_of_cycle(rng: &mut SeededRng) -> usize {
    match rng.below(256) {
        // Large pool: mid-size shared segments and a dedicated one.
        0..2 => (1 << 20) + 1 + rng.below(3 << 20),
        2 => 12 << 20,
        // Small pool.
        _ => 1 + rng.below(8192),
    }
}

fn alloc_free_cycles<B: TestBackend>(what: &str, count: u64) {
    let client = client::<B>();
    let other = client.with_stream(StreamId::new((4 << 40) + 1));
    let baseline = settled_usage::<B>(&client);
    let started_report = client.memory_report().unwrap();
    let started = Instant::now();
    let mut rng = SeededRng::new(0x1ea4);
    let mut kept: Vec<Handle> = Vec::new();
    let mut persistent = 0u64;
    for cycle in 0..count {
        let target = if rng.below(8) == 0 { &other } else { &client };
        let size = size_of_cycle(&mut rng);
        let handle = if rng.below(64) == 0 {
            persistent += 1;
            target
                .memory_persistent_allocation(size, |size| target.empty(size))
                .unwrap()
        } else {
            target.empty(size)
        }
        .unwrap_or_else(|error| panic!("{what}: cycle {cycle}: empty({size}) failed: {error}"));
        if rng.below(32) == 0 {
            if kept.len() >= KEPT {
                kept.swap_remove(rng.below(kept.len()));
            }
            kept.push(handle);
        } else {
            drop(handle);
        }
        if rng.below(50_000) == 0 {
            target.memory_cleanup();
        }
        if cycle % SYNC_EVERY == SYNC_EVERY - 1 {
            client.sync().unwrap();
            other.sync().unwrap();
        }
    }
    drop(kept);
    other.sync().unwrap();
    let after = settled_usage::<B>(&client);
    let report = client.memory_report().unwrap();
    assert_eq!(
        after.number_allocs, baseline.number_allocs,
        "{what}: {after:?}"
    );
    assert_eq!(
        after.bytes_in_use, baseline.bytes_in_use,
        "{what}: {after:?}"
    );
    assert_eq!(
        after.bytes_padding, baseline.bytes_padding,
        "{what}: {after:?}"
    );
    client.memory_cleanup();
    let cleaned = client.memory_usage().unwrap();
    assert_eq!(
        cleaned.bytes_reserved, baseline.bytes_reserved,
        "{what}: memory_cleanup gives every cached segment back: {cleaned:?}"
    );
    let cleaned_report = client.memory_report().unwrap();
    let live_segments =
        |r: &cubert_runtime::memory::MemoryReport| r.storage_allocations - r.storage_deallocations;
    assert_eq!(
        live_segments(&cleaned_report),
        live_segments(&started_report),
        "{what}: device allocations still held: {cleaned_report:?}"
    );
    assert!(
        report.storage_allocations - started_report.storage_allocations < count / 10 + 64,
        "{what}: freed memory is not reused: {} device allocations for {count} cycles",
        report.storage_allocations - started_report.storage_allocations
    );
    eprintln!(
        "{what}: {count} alloc/free cycles ({persistent} persistent) in {:.1} s: {} device \
         allocations, peak reserved {} bytes, usage back to baseline ({} allocations, {} bytes \
         in use), {} bytes reserved after memory_cleanup",
        started.elapsed().as_secs_f64(),
        report.storage_allocations - started_report.storage_allocations,
        report.peak_bytes_reserved,
        after.number_allocs,
        after.bytes_in_use,
        cleaned.bytes_reserved,
    );
}

/// [`FAST_CYCLES`] (1,000,000) alloc/free cycles return `memory_usage` to its baseline;
/// after `memory_cleanup` nothing stays reserved.
pub fn alloc_free_cycles_return_usage_to_baseline<B: TestBackend>() {
    alloc_free_cycles::<B>("leaks (fast)", cycles_from_env(FAST_CYCLES));
}

/// The same with [`LONG_CYCLES`] (10,000,000) cycles.
pub fn ten_million_alloc_free_cycles_return_usage_to_baseline<B: TestBackend>() {
    alloc_free_cycles::<B>("leaks (long)", cycles_from_env(LONG_CYCLES));
}
