//! The allocator's alloc + free path on a dry run of an H200-sized GPU (no device needed):
//! `client.empty(size)` and dropping the handle, `PAIRS` times (default 1,000,000) for each
//! of 4 KiB (the small pool), 1 MiB (the large block pool) and 64 MiB (the growable pool),
//! five times each, printing the median rate.
//!
//! Its rate moves with the machine; its instruction count doesn't. Under callgrind, the
//! difference between two pair counts is the instructions of the pairs alone:
//!
//! ```text
//! cargo build --release -p cubert-runtime --example dry_run_alloc_free
//! for n in 20000 40000; do valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \
//!     target/release/examples/dry_run_alloc_free $n; done
//! # instructions per pair = (Ir at 40000 - Ir at 20000) / (3 sizes x 5 runs x 20000)
//! ```
//!
//! `docs/benchmarks.md` (2026-12-01, "instructions per alloc + free pair") quotes it.

use cubert_runtime::dry_run::{self, DryRunTarget};
use std::error::Error;
use std::time::Instant;

const SIZES: [usize; 3] = [4 << 10, 1 << 20, 64 << 20];
const RUNS: usize = 5;

fn main() -> Result<(), Box<dyn Error>> {
    let pairs: u64 = match std::env::args().nth(1) {
        Some(count) => count.parse()?,
        None => 1_000_000,
    };
    let client = dry_run::client(DryRunTarget::with_memory(141 << 30))?;
    for size in SIZES {
        drop(client.empty(size)?);
        client.sync()?;
        let mut rates = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let start = Instant::now();
            for _ in 0..pairs {
                drop(client.empty(size)?);
            }
            client.sync()?;
            rates.push(pairs as f64 / start.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{size:>9} B: {:.2} M alloc + free pairs/s (median of {RUNS})",
            rates[RUNS / 2] / 1e6
        );
    }
    Ok(())
}
