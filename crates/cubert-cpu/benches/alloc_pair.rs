//! The cost of one `client.empty(size)` and drop on the CPU backend, in a program with no
//! `tracing` subscriber next to the same with one.
//!
//! ```text
//! cargo bench -p cubert-cpu --bench alloc_pair
//! ```
//!
//! - `alloc_pair/{4KiB,64MiB}/no_listener`: no subscriber and no `log` logger, as in a
//!   library's user that set up neither;
//! - `alloc_pair/{4KiB,64MiB}/subscriber`: the same under a `tracing` subscriber that
//!   takes events of level `INFO` and above (`tracing_subscriber::fmt`'s default), so it
//!   filters the allocation's trace-level span out by its callsite;
//! - `alloc_pair/upload{16B,128KiB,256KiB,1MiB}/{no_listener,subscriber}`:
//!   `client.create_from_slice` of each size, and drop (the upload span is a debug-level
//!   one). The device is idle, so the caller allocates and writes the slice itself
//!   (`CallerWork::Upload`); on a busy device a slice below `HEAP_COPIED_BELOW`, 256 KiB,
//!   is copied on the caller's thread and a larger one read in place by the device's queue.
//!
//! The two should cost the same: cubert makes no span nobody listens to. Before it
//! checked, the first paid for a span built, recorded and logged to nowhere on every
//! allocation. The listener bench runs second because a subscriber, once set, counts as
//! a listener for the rest of the process.

use criterion::{Criterion, criterion_group, criterion_main};
use cubert_cpu::{CpuDevice, CpuRuntime};
use cubert_runtime::{ComputeClient, Runtime};
use std::hint::black_box;
use std::time::Duration;

/// Sizes measured: one from the small pool, one from the large pool.
const SIZES: [(usize, &str); 2] = [(4 << 10, "4KiB"), (64 << 20, "64MiB")];

/// Measures the pairs of every size under the name `listener`.
fn pairs(c: &mut Criterion, client: &ComputeClient<CpuRuntime>, listener: &str) {
    let mut group = c.benchmark_group("alloc_pair");
    group.measurement_time(Duration::from_secs(2));
    for (size, label) in SIZES {
        group.bench_function(format!("{label}/{listener}"), |b| {
            b.iter(|| match client.empty(black_box(size)) {
                Ok(handle) => drop(handle),
                Err(error) => {
                    eprintln!("alloc_pair bench: empty({size}) failed: {error}");
                    std::process::exit(1)
                }
            })
        });
    }
    for (len, label) in [
        (16, "16B"),
        (128 << 10, "128KiB"),
        (256 << 10, "256KiB"),
        (1 << 20, "1MiB"),
    ] {
        let data = vec![7u8; len];
        group.bench_function(format!("upload{label}/{listener}"), |b| {
            b.iter(|| match client.create_from_slice(black_box(&data)) {
                Ok(handle) => drop(handle),
                Err(error) => {
                    eprintln!("alloc_pair bench: create_from_slice failed: {error}");
                    std::process::exit(1)
                }
            })
        });
    }
    group.finish();
    if let Err(error) = client.sync() {
        eprintln!("alloc_pair bench: sync failed: {error}");
        std::process::exit(1)
    }
}

fn bench(c: &mut Criterion) {
    let client = match CpuRuntime::client(&CpuDevice::default()) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("alloc_pair bench: no CPU client: {error}");
            std::process::exit(1)
        }
    };
    pairs(c, &client, "no_listener");
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::sink)
        .finish();
    tracing::subscriber::with_default(subscriber, || pairs(c, &client, "subscriber"));
}

criterion_group!(benches, bench);
criterion_main!(benches);
