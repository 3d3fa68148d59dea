//! The CPU backend's f32 vector add next to plain Rust loops over the same data, and its
//! launch overhead.
//!
//! ```text
//! cargo bench -p cubert-cpu --bench vector_add
//! ```
//!
//! - `vector_add_f32_16M/cubert_cpu`: `ops::add` of 16M f32 elements + `sync` on CPU device
//!   0 (its worker threads, one per core by default);
//! - `vector_add_f32_16M/rust_loop`: `out[i] = a[i] + b[i]` over the same `Vec<f32>`s on one
//!   thread (the compiler vectorizes it);
//! - `vector_add_f32_16M/rayon_par_chunks`: the same loop over 64 Ki-element chunks with
//!   rayon's `par_chunks`, so a multi-threaded runtime is compared with multi-threaded code;
//! - `launch/noop_sync`: one empty launch and `sync` (the round trip);
//! - `launch/noop_x1000_then_sync`: 1000 back-to-back empty launches, then one `sync` (divide
//!   the time by 1000 for the sustained cost of a launch).
//!
//! Throughput counts 3 × N × 4 bytes per add (two reads, one write), as `cubert bench` and
//! the anchors do. Before measuring, the backend's result is checked bit for bit against the
//! plain loop's; a mismatch or a runtime error ends the bench with exit code 1.

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cubert_cpu::{CpuDevice, CpuRuntime};
use cubert_runtime::{Bytes, ComputeClient, ElemType, Handle, ops};
use rayon::prelude::*;
use std::fmt::Display;
use std::hint::black_box;
use std::time::Duration;

/// Elements per vector (16 Mi, 64 MiB per vector).
const LEN: usize = 16 << 20;
/// Elements per rayon task.
const CHUNK: usize = 1 << 16;
/// Launches per iteration of the sustained-launch bench.
const LAUNCHES: u64 = 1000;

/// Prints what failed and ends the bench with exit code 1.
fn fail(what: &str, error: impl Display) -> ! {
    common::fail("vector_add", what, error)
}

/// `out[i] = a[i] + b[i]` on the calling thread.
fn add_loop(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

/// `out[i] = a[i] + b[i]` over chunks on rayon's global pool.
fn add_rayon(a: &[f32], b: &[f32], out: &mut [f32]) {
    out.par_chunks_mut(CHUNK)
        .zip(a.par_chunks(CHUNK))
        .zip(b.par_chunks(CHUNK))
        .for_each(|((o, x), y)| add_loop(x, y, o));
}

/// The client and the device copies of the inputs and the output.
struct OnDevice {
    client: ComputeClient<CpuRuntime>,
    a: Handle,
    b: Handle,
    out: Handle,
}

impl OnDevice {
    fn new(a: &[f32], b: &[f32]) -> Self {
        let client = ComputeClient::<CpuRuntime>::load(&CpuDevice::new(0))
            .unwrap_or_else(|error| fail("can't start CPU device 0", error));
        let create = |data: &[f32]| {
            client
                .create(Bytes::from_slice(data))
                .unwrap_or_else(|error| fail("create", error))
        };
        let (a, b) = (create(a), create(b));
        let out = client
            .empty(LEN * 4)
            .unwrap_or_else(|error| fail("empty", error));
        Self { client, a, b, out }
    }

    fn add(&self) {
        if let Err(error) = ops::add(
            &self.client,
            &self.a,
            &self.b,
            &self.out,
            LEN,
            ElemType::F32,
        ) {
            fail("ops::add", error);
        }
        self.sync();
    }

    fn sync(&self) {
        if let Err(error) = self.client.sync() {
            fail("sync", error);
        }
    }

    fn noop(&self) {
        if let Err(error) = ops::noop(&self.client) {
            fail("ops::noop", error);
        }
    }

    /// Checks the device's sum against `want`, bit for bit.
    fn check(&self, want: &[f32]) {
        self.add();
        let got = self
            .client
            .read_one(self.out.clone())
            .unwrap_or_else(|error| fail("read", error))
            .to_elems::<f32>();
        common::check_sum("vector_add", &got, want);
    }
}

fn vector_add(c: &mut Criterion) {
    let (a, b) = (common::input(LEN, 0xa), common::input(LEN, 0xb));
    let mut out = vec![0.0f32; LEN];
    add_loop(&a, &b, &mut out);
    let device = OnDevice::new(&a, &b);
    device.check(&out);

    let mut group = c.benchmark_group("vector_add_f32_16M");
    group.throughput(Throughput::Bytes(3 * LEN as u64 * 4));
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("cubert_cpu", |bench| bench.iter(|| device.add()));
    group.bench_function("rust_loop", |bench| {
        bench.iter(|| add_loop(black_box(&a), black_box(&b), black_box(&mut out)))
    });
    group.bench_function("rayon_par_chunks", |bench| {
        bench.iter(|| add_rayon(black_box(&a), black_box(&b), black_box(&mut out)))
    });
    group.finish();

    let mut group = c.benchmark_group("launch");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("noop_sync", |bench| {
        bench.iter(|| {
            device.noop();
            device.sync();
        })
    });
    group.throughput(Throughput::Elements(LAUNCHES));
    group.bench_function("noop_x1000_then_sync", |bench| {
        bench.iter(|| {
            for _ in 0..LAUNCHES {
                device.noop();
            }
            device.sync();
        })
    });
    group.finish();
}

criterion_group!(benches, vector_add);
criterion_main!(benches);
