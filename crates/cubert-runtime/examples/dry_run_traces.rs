//! The growable pool on the training-loop traces and a trace file, on a dry run of an
//! H200-sized GPU (no device needed): peak reserved / peak live, the device allocations
//! of a first replay and of two, and the chunks remapped (moved) in each replay, for a
//! chunk-size cap (`[memory] growable_max_chunk`, in MiB; 0, the default, means none).
//!
//! ```text
//! cargo run --release -p cubert-runtime --example dry_run_traces -- [CAP_MIB ...] [--trace FILE]
//! cargo run --release -p cubert-runtime --example dry_run_traces -- 0 256 --trace ../shared/anchors/alloc_trace.txt
//! ```
//!
//! `docs/benchmarks.md` (2026-11-30, the 2-GPU host's driver calls) quotes it for caps of
//! 0 and 256 MiB. The device's own figures, times included, come from `cubert bench --only
//! trace`.

use cubert_runtime::ComputeClient;
use cubert_runtime::dry_run::{self, DryRunRuntime, DryRunTarget};
use cubert_runtime::memory::trace::{AllocationTrace, TraceEvent};
use cubert_runtime::memory::training_trace::TrainingModel;
use cubert_runtime::memory::{MemoryOptions, MemoryReport};
use std::collections::HashMap;
use std::error::Error;
use std::path::Path;

/// Replays `trace` in order, as `cubert bench --only trace` does, and returns the memory
/// report after it.
fn replay(
    client: &ComputeClient<DryRunRuntime>,
    trace: &AllocationTrace,
) -> Result<MemoryReport, Box<dyn Error>> {
    client.exclusive(|| -> Result<(), Box<dyn Error>> {
        let mut live = HashMap::new();
        for event in &trace.events {
            match *event {
                TraceEvent::Alloc { id, size } => {
                    live.insert(id, client.empty(size as usize)?);
                }
                TraceEvent::Free { id } => {
                    live.remove(&id);
                }
            }
        }
        client.sync()?;
        Ok(())
    })??;
    Ok(dry_run::report(client)?.memory)
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut caps = Vec::new();
    let mut traces: Vec<(String, AllocationTrace)> = TrainingModel::ALL
        .iter()
        .map(|model| (model.name().to_string(), model.trace()))
        .collect();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--trace" {
            let path = args.next().ok_or("--trace needs a file")?;
            traces.push((path.clone(), AllocationTrace::read(Path::new(&path))?));
        } else {
            caps.push(
                arg.parse::<u64>()
                    .map_err(|_| format!("not a cap in MiB: {arg}"))?,
            );
        }
    }
    if caps.is_empty() {
        caps.push(0);
    }
    for cap in caps {
        for (name, trace) in &traces {
            // An H200's memory; the dry run maps 2 MiB pages, as CUDA does.
            let client = dry_run::client(DryRunTarget::with_memory(141 << 30))?;
            client.install_memory_pools(MemoryOptions {
                growable_max_chunk: cap << 20,
                ..MemoryOptions::default()
            })?;
            let first = replay(&client, trace)?;
            let two = replay(&client, trace)?;
            let ratio = first.peak_bytes_reserved as f64 / trace.peak_live_bytes as f64;
            println!(
                "cap {cap} MiB, {name}: peak reserved / peak live {ratio:.4}, device allocations {} in the first replay, {} over two; remaps {} in the first, {} in the second",
                first.storage_allocations,
                two.storage_allocations,
                first.storage_remaps,
                two.storage_remaps - first.storage_remaps
            );
        }
    }
    Ok(())
}
