//! The growable pool's policy on the generated training loops, replayed on a dry run of an
//! H200-sized GPU: the same pools, the same decisions and the same counts of device
//! allocations the device would see (`cubert bench --only trace` measures them there,
//! next to PyTorch's allocators on the same events).
//!
//! The bounds come from issue 18 and from PyTorch's caching allocator on the same traces
//! on an H200 (`docs/benchmarks.md`, 2026-11-28): peak reserved / peak live within the
//! issue's 1.02 where the pool reaches it, and at most twice PyTorch's device allocations
//! (transformer 191, mlp 56, convnet 72), counted over two replays: memory settles in
//! the first steps, and the second replay, on the warm pool, allocates next to nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_runtime::ComputeClient;
use cubert_runtime::dry_run::{self, DryRunRuntime, DryRunTarget};
use cubert_runtime::memory::MemoryReport;
use cubert_runtime::memory::trace::{AllocationTrace, TraceEvent};
use cubert_runtime::memory::training_trace::TrainingModel;
use std::collections::HashMap;

/// Replays `trace` in order (inside `exclusive`, as the bench does) and returns the
/// memory report after it.
fn replay(client: &ComputeClient<DryRunRuntime>, trace: &AllocationTrace) -> MemoryReport {
    client
        .exclusive(|| {
            let mut live = HashMap::new();
            for event in &trace.events {
                match *event {
                    TraceEvent::Alloc { id, size } => {
                        live.insert(id, client.empty(size as usize).unwrap());
                    }
                    TraceEvent::Free { id } => {
                        live.remove(&id);
                    }
                }
            }
            client.sync().unwrap();
        })
        .unwrap();
    dry_run::report(client).unwrap().memory
}

/// What one model's trace must stay within.
struct Bound {
    model: TrainingModel,
    reserved_over_live: f64,
    device_allocations: u64,
}

#[test]
fn training_loops_hold_little_past_their_live_peak_with_few_device_allocations() {
    let bounds = [
        Bound {
            model: TrainingModel::Transformer,
            reserved_over_live: 1.02,
            device_allocations: 2 * 191,
        },
        // The MLP's first optimizer step allocates Adam's moments while the activations'
        // chunks are still partly under gradients: 1.055 (PyTorch 1.164, its expandable
        // segments 1.063); issue 18's 1.02 is not reached.
        Bound {
            model: TrainingModel::Mlp,
            reserved_over_live: 1.06,
            device_allocations: 2 * 56,
        },
        Bound {
            model: TrainingModel::ConvNet,
            reserved_over_live: 1.02,
            device_allocations: 2 * 72,
        },
    ];
    for bound in bounds {
        let trace = bound.model.trace();
        let name = bound.model.name();
        // An H200's memory, with CUDA's growable pool of 2 MiB pages.
        let client = dry_run::client(DryRunTarget::with_memory(141 << 30)).unwrap();
        let cold = replay(&client, &trace);
        let ratio = cold.peak_bytes_reserved as f64 / trace.peak_live_bytes as f64;
        assert_eq!(cold.peak_bytes_in_use, trace.peak_live_bytes, "{name}");
        assert!(
            ratio <= bound.reserved_over_live,
            "{name}: peak reserved / peak live {ratio:.4} > {}",
            bound.reserved_over_live
        );
        // Both replays together, the second on the warm pool, within twice PyTorch's one.
        let warm = replay(&client, &trace);
        // The figures `docs/allocator.md` quotes (`-- --nocapture` shows them).
        println!(
            "{name}: peak reserved / peak live {ratio:.4}, device allocations {} cold, {} over two replays",
            cold.storage_allocations, warm.storage_allocations
        );
        assert!(
            warm.storage_allocations <= bound.device_allocations,
            "{name}: {} device allocations over two replays ({} in the first) > {}",
            warm.storage_allocations,
            cold.storage_allocations,
            bound.device_allocations
        );
        assert_eq!(warm.usage.bytes_in_use, 0, "{name}");
    }
}

#[test]
fn a_report_counts_the_chunks_moved_to_where_a_request_needed_them() {
    const MIB: usize = 1 << 20;
    let client = dry_run::client(DryRunTarget::with_memory(141 << 30)).unwrap();
    let first = client.empty(100 * MIB).unwrap();
    let _second = client.empty(100 * MIB).unwrap();
    client.sync().unwrap();
    let before = dry_run::report(&client).unwrap().memory;
    assert_eq!((before.storage_allocations, before.storage_remaps), (2, 0));
    // 150 MiB fit no hole; with 250 MiB live the pool may hold 316.5 MiB, so the first
    // block's chunk (free, its work complete) moves to the end instead of a new 150 MiB.
    drop(first);
    let _third = client.empty(150 * MIB).unwrap();
    client.sync().unwrap();
    let after = dry_run::report(&client).unwrap().memory;
    assert_eq!(after.storage_remaps, 1, "{after}");
    assert_eq!(
        after.storage_allocations, 3,
        "the 50 MiB still missing: {after}"
    );
    assert_eq!(after.peak_bytes_reserved, 250 * MIB as u64, "{after}");
    assert!(after.to_string().contains("remapped 1"), "{after}");
}
