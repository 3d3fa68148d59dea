//! Allocation throughput: `cubert_alloc_free_{4KiB,1MiB,64MiB,1GiB}` in ops/s.
//!
//! One op is `client.empty(size)` and dropping the handle. Ops run back to back in batches
//! until a count or a time limit is reached, then the stream is synced; the rate is ops over
//! the wall time including that sync (as `cudaMallocAsync` pairs are measured). Median of 3
//! runs after a warm-up. Check: after the runs every allocation was freed (the device's
//! live allocations and bytes in use are back where they were) and the cached memory grew
//! by at most one block's worth.

use super::recorder::Recorder;
use super::timing::median;
use super::units::{GIB, KIB, MIB, size_label};
use crate::error::CliResult;
use cubert::{ComputeClient, Runtime};
use std::time::{Duration, Instant};

/// Figures this group measures.
pub const FIGURES: u64 = 4;

const SIZES: [usize; 4] = [4 * KIB, MIB, 64 * MIB, GIB];
const BATCH: u64 = 100;
const REPS: usize = 3;

/// Measures every size.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let (max_ops, max_time) = if quick {
        (20_000, Duration::from_millis(50))
    } else {
        (200_000, Duration::from_millis(500))
    };
    let largest = client.properties().memory.max_allocation_size;
    for size in SIZES {
        let name = format!("cubert_alloc_free_{}", size_label(size));
        recorder.start(&name);
        if size as u64 > largest {
            recorder.not_measured(&[&name], &super::units::too_big(size, largest));
            continue;
        }
        client.sync()?;
        let before = client.memory_usage()?;
        drop(client.empty(size)?);
        client.sync()?;
        let mut rates = Vec::with_capacity(REPS);
        for _ in 0..REPS {
            let start = Instant::now();
            let mut ops = 0u64;
            while ops < max_ops && start.elapsed() < max_time {
                for _ in 0..BATCH {
                    drop(client.empty(size)?);
                }
                ops += BATCH;
            }
            client.sync()?;
            rates.push(ops as f64 / start.elapsed().as_secs_f64());
        }
        let after = client.memory_usage()?;
        let growth = after.bytes_reserved.saturating_sub(before.bytes_reserved);
        let allowed = 2 * size as u64 + 32 * MIB as u64;
        if after.number_allocs != before.number_allocs || after.bytes_in_use != before.bytes_in_use
        {
            recorder.skip(
                &name,
                &format!(
                    "allocations not freed: {} live / {} bytes in use before, {} / {} after",
                    before.number_allocs,
                    before.bytes_in_use,
                    after.number_allocs,
                    after.bytes_in_use
                ),
            );
        } else if growth > allowed {
            recorder.skip(
                &name,
                &format!(
                    "freed blocks are not reused: reserved memory grew by {growth} bytes \
                     (at most {allowed} expected)"
                ),
            );
        } else {
            recorder.emit(
                &name,
                median(&rates),
                "ops/s",
                &format!(
                    "client.empty + drop pairs, sync at end, median of {REPS} (every block freed)"
                ),
            );
        }
    }
    Ok(())
}
