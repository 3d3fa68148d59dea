//! The CPU backend running a vector add written in the kernel language, next to plain Rust
//! loops over the same data, in the same run.
//!
//! ```text
//! cargo bench -p cubert-cpu --bench language_vector_add
//! ```
//!
//! The requirement this measures: "CPU vector add written in the language reaches >= 80 % of
//! a plain Rust loop over slices on the same machine". For n = 1 Mi and 16 Mi f32 elements,
//! group `language_vector_add_f32_<n>` holds:
//!
//! - `language_cpu`: the `#[kernel]` below, `out[i] = a[i] + b[i]` per unit, launched on CPU
//!   device 0 over `n / 256` cubes of 256 units, then `sync`. The buffers are created once,
//!   outside the timing loop, so an iteration is one launch (bounds-checked, as every
//!   `#[kernel]` launch is) and one round trip to the device's runner;
//! - `language_cpu_queued`: the same launches back to back, one `sync` after the last
//!   (criterion's iteration count of them), so an iteration is one launch's share of the
//!   work without the round trip to the caller: the kernel's throughput, as a GPU
//!   benchmark's device time measures it;
//! - `standard_add_queued`: `ops::add` the same way, the standard add (written in the
//!   language with a grid-stride loop, correct for any grid, launched one unit per element
//!   so that it runs as a map);
//! - `rust_loop_1_thread`: `for i in 0..n { out[i] = a[i] + b[i] }` over `&[f32]`s on the
//!   calling thread (the compiler hoists the bounds checks and vectorizes it);
//! - `rust_loop_<t>_threads`: the same loop over 64 Ki-element chunks with rayon's
//!   `par_chunks_mut`, on a pool of as many threads as the device has workers (`t`).
//!
//! The backend runs cubes on all its worker threads, so the threaded loop is the fair peer;
//! the single-thread loop shows what one core does. At these sizes (12 MiB and 192 MiB per
//! add) the add is bound by memory bandwidth, not by arithmetic.
//!
//! Throughput counts 3 × n × 4 bytes per add (two reads, one write). Before measuring, the
//! kernel's result is checked bit for bit against the plain loop's; a mismatch or a runtime
//! error ends the bench with exit code 1.

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cubert_cpu::{CpuDevice, CpuRuntime};
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{Bytes, ComputeClient, CubeCount, CubeDim, Handle};
use rayon::prelude::*;
use std::fmt::Display;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Units per cube of the language launch.
const CUBE: u32 = 256;
/// Elements per rayon task of the threaded loop.
const CHUNK: usize = 1 << 16;

/// `out[i] = a[i] + b[i]`, one element per unit.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn vector_add(a: &Array<f32>, b: &Array<f32>, out: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    if i < out.len() {
        out[i] = a[i] + b[i];
    }
}

/// Prints what failed and ends the bench with exit code 1.
fn fail(what: &str, error: impl Display) -> ! {
    common::fail("language_vector_add", what, error)
}

/// `out[i] = a[i] + b[i]` on the calling thread, indexed as a kernel would.
#[allow(clippy::needless_range_loop)] // the indexed loop is the point of the comparison
fn add_loop(a: &[f32], b: &[f32], out: &mut [f32]) {
    let n = out.len();
    let (a, b) = (&a[..n], &b[..n]);
    for i in 0..n {
        out[i] = a[i] + b[i];
    }
}

/// `out[i] = a[i] + b[i]` over chunks on `pool`.
fn add_threads(pool: &rayon::ThreadPool, a: &[f32], b: &[f32], out: &mut [f32]) {
    pool.install(|| {
        out.par_chunks_mut(CHUNK)
            .zip(a.par_chunks(CHUNK))
            .zip(b.par_chunks(CHUNK))
            .for_each(|((o, x), y)| add_loop(x, y, o));
    });
}

/// The client and the device copies of the inputs and the output.
struct OnDevice {
    client: ComputeClient<CpuRuntime>,
    len: usize,
    a: Handle,
    b: Handle,
    out: Handle,
}

impl OnDevice {
    fn new(client: &ComputeClient<CpuRuntime>, a: &[f32], b: &[f32]) -> Self {
        let create = |data: &[f32]| {
            client
                .create(Bytes::from_slice(data))
                .unwrap_or_else(|error| fail("create", error))
        };
        let (a_handle, b_handle) = (create(a), create(b));
        let out = client
            .empty(a.len() * 4)
            .unwrap_or_else(|error| fail("empty", error));
        Self {
            client: client.clone(),
            len: a.len(),
            a: a_handle,
            b: b_handle,
            out,
        }
    }

    /// One launch of the language kernel, and `sync`.
    fn add(&self) {
        self.launch();
        if let Err(error) = self.client.sync() {
            fail("sync", error);
        }
    }

    /// `count` launches back to back, then one `sync`.
    fn add_queued(&self, count: u64) {
        for _ in 0..count {
            self.launch();
        }
        if let Err(error) = self.client.sync() {
            fail("sync", error);
        }
    }

    /// `count` launches of `ops::add` back to back, then one `sync`.
    fn standard_add_queued(&self, count: u64) {
        for _ in 0..count {
            if let Err(error) = cubert_runtime::ops::add(
                &self.client,
                &self.a,
                &self.b,
                &self.out,
                self.len,
                cubert_runtime::ElemType::F32,
            ) {
                fail("ops::add", error);
            }
        }
        if let Err(error) = self.client.sync() {
            fail("sync", error);
        }
    }

    /// One launch of the language kernel.
    fn launch(&self) {
        let cubes = u32::try_from(self.len.div_ceil(CUBE as usize))
            .unwrap_or_else(|error| fail("cube count", error));
        if let Err(error) = vector_add::launch::<CpuRuntime>(
            &self.client,
            CubeCount::Static(cubes, 1, 1),
            CubeDim::new_1d(CUBE),
            &self.a,
            &self.b,
            &self.out,
        ) {
            fail("launch", error);
        }
    }

    /// Checks the kernel's sum against `want`, bit for bit.
    fn check(&self, want: &[f32]) {
        self.add();
        let got = self
            .client
            .read_one(self.out.clone())
            .unwrap_or_else(|error| fail("read", error))
            .to_elems::<f32>();
        common::check_sum("language_vector_add", &got, want);
    }
}

fn language_vector_add(c: &mut Criterion) {
    let client = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0))
        .unwrap_or_else(|error| fail("can't start CPU device 0", error));
    let threads = client
        .properties()
        .hardware
        .num_cpu_cores
        .unwrap_or(1)
        .max(1) as usize;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap_or_else(|error| fail("can't start the rayon pool", error));

    for (label, len) in [("1M", 1usize << 20), ("16M", 16 << 20)] {
        let (a, b) = (common::input(len, 0xa), common::input(len, 0xb));
        let mut out = vec![0.0f32; len];
        add_loop(&a, &b, &mut out);
        let device = OnDevice::new(&client, &a, &b);
        device.check(&out);

        let mut group = c.benchmark_group(format!("language_vector_add_f32_{label}"));
        group.throughput(Throughput::Bytes(3 * len as u64 * 4));
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(3));
        group.bench_function("language_cpu", |bench| bench.iter(|| device.add()));
        group.bench_function("language_cpu_queued", |bench| {
            bench.iter_custom(|iterations| {
                let start = Instant::now();
                device.add_queued(iterations);
                start.elapsed()
            })
        });
        group.bench_function("standard_add_queued", |bench| {
            bench.iter_custom(|iterations| {
                let start = Instant::now();
                device.standard_add_queued(iterations);
                start.elapsed()
            })
        });
        group.bench_function("rust_loop_1_thread", |bench| {
            bench.iter(|| add_loop(black_box(&a), black_box(&b), black_box(&mut out)))
        });
        group.bench_function(format!("rust_loop_{threads}_threads"), |bench| {
            bench.iter(|| add_threads(&pool, black_box(&a), black_box(&b), black_box(&mut out)))
        });
        group.finish();
    }
}

criterion_group!(benches, language_vector_add);
criterion_main!(benches);
