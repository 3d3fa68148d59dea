//! Model-based property tests: proptest generates random sequences of create, empty, write,
//! read, launch (copy, add), `to_client`, drop, `memory_cleanup`, `allocation_mode` and sync
//! over 1–3 devices and 1–4 streams per device, and shrinks a failing one to a minimal
//! sequence. A plain Rust model holds the `i32` elements every live buffer must contain
//! (`None` where nothing was written yet: `empty` memory is uninitialized). Every read is
//! compared with the model, every operation must succeed, and after each case every device
//! is back to zero live allocations.
//!
//! Writes go through the server's `write` (the path `create` uses) on a view of the buffer,
//! so partial overwrites of live memory are covered too. Buffers are mostly small, sometimes
//! a few thousand elements, and sometimes just over 1 MiB so the large pool is used.
//!
//! Clients are opened once per test (one per device, pinned to 4 streams each) and shared by
//! every case, as a long-running application would; each case resets the allocation modes
//! it set. Configuration, from the environment:
//!
//! - `CUBERT_MODEL_CASES`: cases of the fast test (default [`FAST_CASES`]);
//! - `CUBERT_MODEL_OPERATIONS`: operations the long test runs at least (default
//!   [`LONG_OPERATIONS`]);
//! - `CUBERT_MODEL_SEED`: the seed (a number; `random` for a fresh one). The default is
//!   fixed, so CI runs are reproducible. The seed is printed with the figures.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{SeededRng, client_with};
use cubert_runtime::server::ComputeServer;
use cubert_runtime::{
    Bytes, CopyDescriptor, ElemType, Handle, MemoryAllocationMode, Shape, StreamId, Strides, ops,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::cell::Cell;
use std::time::Instant;

/// Cases the fast test (run in CI) generates.
pub const FAST_CASES: u32 = 2_000;
/// Operations the long test runs at least.
pub const LONG_OPERATIONS: u64 = 1_000_000;
/// Most operations in one case.
const MAX_OPS: usize = 64;
/// Most devices and streams per device a case uses.
const MAX_DEVICES: usize = 3;
const MAX_STREAMS: usize = 4;
/// Default seed of the fast and long tests.
const DEFAULT_SEED: u64 = 0x00c0_ffee_2026;

/// One step of a case. Indices are resolved against the live buffers when the step runs, so
/// shrinking keeps sequences valid.
#[derive(Clone, Debug)]
enum Op {
    Create {
        device: u8,
        stream: u8,
        len: usize,
        seed: u64,
    },
    Empty {
        device: u8,
        stream: u8,
        len: usize,
    },
    Write {
        slot: Index,
        stream: u8,
        start: Index,
        span: Index,
        seed: u64,
    },
    Read {
        slot: Index,
        stream: u8,
    },
    Copy {
        src: Index,
        dst: Index,
        stream: u8,
        len: Index,
    },
    Add {
        lhs: Index,
        rhs: Index,
        out: Index,
        stream: u8,
    },
    ToClient {
        slot: Index,
        device: u8,
        stream: u8,
    },
    Drop {
        slot: Index,
    },
    Cleanup {
        device: u8,
        stream: u8,
    },
    Mode {
        device: u8,
        stream: u8,
        persistent: bool,
    },
    Sync {
        device: u8,
        stream: u8,
    },
}

/// A generated case: how many devices and streams, and the steps.
#[derive(Clone, Debug)]
struct Case {
    devices: usize,
    streams: usize,
    ops: Vec<Op>,
}

fn length() -> impl Strategy<Value = usize> {
    prop_oneof![
        12 => 1usize..=64,
        6 => 65usize..=4096,
        // Just over 1 MiB of i32: served by the large pool.
        1 => 262_145usize..=270_000,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        15 => (any::<u8>(), any::<u8>(), length(), any::<u64>())
            .prop_map(|(device, stream, len, seed)| Op::Create { device, stream, len, seed }),
        5 => (any::<u8>(), any::<u8>(), length())
            .prop_map(|(device, stream, len)| Op::Empty { device, stream, len }),
        10 => (any::<Index>(), any::<u8>(), any::<Index>(), any::<Index>(), any::<u64>())
            .prop_map(|(slot, stream, start, span, seed)| Op::Write { slot, stream, start, span, seed }),
        20 => (any::<Index>(), any::<u8>()).prop_map(|(slot, stream)| Op::Read { slot, stream }),
        12 => (any::<Index>(), any::<Index>(), any::<u8>(), any::<Index>())
            .prop_map(|(src, dst, stream, len)| Op::Copy { src, dst, stream, len }),
        12 => (any::<Index>(), any::<Index>(), any::<Index>(), any::<u8>())
            .prop_map(|(lhs, rhs, out, stream)| Op::Add { lhs, rhs, out, stream }),
        5 => (any::<Index>(), any::<u8>(), any::<u8>())
            .prop_map(|(slot, device, stream)| Op::ToClient { slot, device, stream }),
        10 => any::<Index>().prop_map(|slot| Op::Drop { slot }),
        3 => (any::<u8>(), any::<u8>()).prop_map(|(device, stream)| Op::Cleanup { device, stream }),
        3 => (any::<u8>(), any::<u8>(), any::<bool>())
            .prop_map(|(device, stream, persistent)| Op::Mode { device, stream, persistent }),
        5 => (any::<u8>(), any::<u8>()).prop_map(|(device, stream)| Op::Sync { device, stream }),
    ]
}

fn case(max_devices: usize) -> impl Strategy<Value = Case> {
    (
        1..=max_devices,
        1..=MAX_STREAMS,
        prop::collection::vec(op(), 1..=MAX_OPS),
    )
        .prop_map(|(devices, streams, ops)| Case {
            devices,
            streams,
            ops,
        })
}

/// A live buffer, its device, and what it must hold.
struct Slot {
    device: usize,
    handle: Handle,
    model: Vec<Option<i32>>,
}

/// What the runs did, for the figures.
#[derive(Default)]
struct Counts {
    cases: Cell<u64>,
    operations: Cell<u64>,
    reads: Cell<u64>,
    elements_checked: Cell<u64>,
    launches: Cell<u64>,
    transfers: Cell<u64>,
}

impl Counts {
    fn bump(cell: &Cell<u64>, by: u64) {
        cell.set(cell.get() + by);
    }
}

/// The clients of the test: `[device][stream]`.
struct Clients<B: TestBackend> {
    streams: Vec<Vec<Client<B>>>,
}

impl<B: TestBackend> Clients<B> {
    fn open() -> Self {
        let devices = (B::device_count_for_tests() as usize).clamp(1, MAX_DEVICES);
        let streams = (0..devices)
            .map(|device| {
                let client = client_with::<B>(&ClientOptions::new().with_device(device as u32));
                (0..MAX_STREAMS)
                    .map(|stream| {
                        client.with_stream(StreamId::new(
                            (3 << 40) + (device * MAX_STREAMS + stream) as u64,
                        ))
                    })
                    .collect()
            })
            .collect();
        Self { streams }
    }

    fn devices(&self) -> usize {
        self.streams.len()
    }
}

fn values(seed: u64, len: usize) -> Vec<i32> {
    let mut rng = SeededRng::new(seed);
    (0..len).map(|_| rng.next_u64() as i32).collect()
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

/// Runs one case against the clients and the model.
struct Run<'a, B: TestBackend> {
    clients: &'a Clients<B>,
    devices: usize,
    streams: usize,
    slots: Vec<Slot>,
    counts: &'a Counts,
}

impl<B: TestBackend> Run<'_, B> {
    fn client(&self, device: usize, stream: u8) -> &Client<B> {
        &self.clients.streams[device][stream as usize % self.streams]
    }

    fn device(&self, device: u8) -> usize {
        device as usize % self.devices
    }

    /// Slot `pick`, and slot `other` among those of the same device.
    fn same_device(&self, first: usize, other: Index) -> usize {
        let device = self.slots[first].device;
        let candidates: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].device == device)
            .collect();
        candidates[other.index(candidates.len())]
    }

    fn read_and_check(&self, slot: &Slot, stream: u8, step: usize) -> Result<(), TestCaseError> {
        let client = self.client(slot.device, stream);
        let bytes = client
            .read_one(slot.handle.clone())
            .map_err(|error| fail(format!("step {step}: read failed: {error}")))?;
        let read = bytes.to_elems::<i32>();
        if read.len() != slot.model.len() {
            return Err(fail(format!(
                "step {step}: read {} elements, the buffer has {}",
                read.len(),
                slot.model.len()
            )));
        }
        let mismatch = read
            .iter()
            .zip(&slot.model)
            .position(|(actual, expected)| expected.is_some_and(|e| e != *actual));
        if let Some(index) = mismatch {
            return Err(fail(format!(
                "step {step}: element {index} of {} reads {}, the model says {:?}",
                slot.model.len(),
                read[index],
                slot.model[index]
            )));
        }
        Counts::bump(&self.counts.reads, 1);
        Counts::bump(&self.counts.elements_checked, read.len() as u64);
        Ok(())
    }

    /// Runs `op`; returns whether it did something (a step on no buffers is skipped).
    fn step(&mut self, step: usize, op: &Op) -> Result<bool, TestCaseError> {
        let launch_error = |error: cubert_runtime::LaunchError| {
            fail(format!("step {step}: launch refused: {error}"))
        };
        match op {
            Op::Create {
                device,
                stream,
                len,
                seed,
            } => {
                let device = self.device(*device);
                let data = values(*seed, *len);
                let handle = self
                    .client(device, *stream)
                    .create(Bytes::from_slice(&data))
                    .map_err(|error| fail(format!("step {step}: create failed: {error}")))?;
                self.slots.push(Slot {
                    device,
                    handle,
                    model: data.into_iter().map(Some).collect(),
                });
            }
            Op::Empty {
                device,
                stream,
                len,
            } => {
                let device = self.device(*device);
                let handle = self
                    .client(device, *stream)
                    .empty(len * 4)
                    .map_err(|error| fail(format!("step {step}: empty failed: {error}")))?;
                self.slots.push(Slot {
                    device,
                    handle,
                    model: vec![None; *len],
                });
            }
            _ if self.slots.is_empty() => return Ok(false),
            Op::Write {
                slot,
                stream,
                start,
                span,
                seed,
            } => {
                let index = slot.index(self.slots.len());
                let len = self.slots[index].model.len();
                let start = start.index(len);
                let count = 1 + span.index(len - start);
                let data = values(*seed, count);
                let slot = &self.slots[index];
                let view = slot
                    .handle
                    .view(start as u64 * 4, count as u64 * 4)
                    .map_err(|error| fail(format!("step {step}: view failed: {error}")))?;
                let descriptor = CopyDescriptor::new(
                    view.binding(),
                    Shape::from([count]),
                    Strides::from([1]),
                    4,
                );
                let client = self.client(slot.device, *stream);
                let target = client.stream_id();
                let bytes = Bytes::from_slice(&data);
                client.device_handle().submit(move |server| {
                    server.write(vec![(descriptor, bytes)], target);
                });
                let model = &mut self.slots[index].model[start..start + count];
                for (element, value) in model.iter_mut().zip(data) {
                    *element = Some(value);
                }
            }
            Op::Read { slot, stream } => {
                let slot = &self.slots[slot.index(self.slots.len())];
                self.read_and_check(slot, *stream, step)?;
            }
            Op::Copy {
                src,
                dst,
                stream,
                len,
            } => {
                let src = src.index(self.slots.len());
                let dst = self.same_device(src, *dst);
                let most = self.slots[src].model.len().min(self.slots[dst].model.len());
                let count = 1 + len.index(most);
                let client = self.client(self.slots[src].device, *stream);
                ops::copy(
                    client,
                    &self.slots[src].handle,
                    &self.slots[dst].handle,
                    count,
                    ElemType::I32,
                )
                .map_err(launch_error)?;
                let copied = self.slots[src].model[..count].to_vec();
                self.slots[dst].model[..count].copy_from_slice(&copied);
                Counts::bump(&self.counts.launches, 1);
            }
            Op::Add {
                lhs,
                rhs,
                out,
                stream,
            } => {
                let lhs = lhs.index(self.slots.len());
                let rhs = self.same_device(lhs, *rhs);
                let out = self.same_device(lhs, *out);
                let count = self.slots[lhs]
                    .model
                    .len()
                    .min(self.slots[rhs].model.len())
                    .min(self.slots[out].model.len());
                let client = self.client(self.slots[lhs].device, *stream);
                ops::add(
                    client,
                    &self.slots[lhs].handle,
                    &self.slots[rhs].handle,
                    &self.slots[out].handle,
                    count,
                    ElemType::I32,
                )
                .map_err(launch_error)?;
                let sum: Vec<Option<i32>> = (0..count)
                    .map(|i| {
                        let (a, b) = (self.slots[lhs].model[i], self.slots[rhs].model[i]);
                        a.zip(b).map(|(a, b)| a.wrapping_add(b))
                    })
                    .collect();
                self.slots[out].model[..count].copy_from_slice(&sum);
                Counts::bump(&self.counts.launches, 1);
            }
            Op::ToClient {
                slot,
                device,
                stream,
            } => {
                let index = slot.index(self.slots.len());
                let target = self.device(*device);
                let source = &self.slots[index];
                let from = self.client(source.device, *stream);
                let to = self.client(target, stream.wrapping_add(1));
                let handle = from
                    .to_client(source.handle.clone(), to, ElemType::I32)
                    .map_err(|error| fail(format!("step {step}: to_client failed: {error}")))?;
                if handle.device() != to.device_id() {
                    return Err(fail(format!(
                        "step {step}: to_client returned a handle of {:?}, not {:?}",
                        handle.device(),
                        to.device_id()
                    )));
                }
                let model = source.model.clone();
                self.slots.push(Slot {
                    device: target,
                    handle,
                    model,
                });
                Counts::bump(&self.counts.transfers, 1);
            }
            Op::Drop { slot } => {
                let index = slot.index(self.slots.len());
                self.slots.swap_remove(index);
            }
            Op::Cleanup { device, stream } => {
                self.client(self.device(*device), *stream).memory_cleanup();
            }
            Op::Mode {
                device,
                stream,
                persistent,
            } => {
                let mode = if *persistent {
                    MemoryAllocationMode::Persistent
                } else {
                    MemoryAllocationMode::Auto
                };
                self.client(self.device(*device), *stream)
                    .allocation_mode(mode);
            }
            Op::Sync { device, stream } => {
                self.client(self.device(*device), *stream)
                    .sync()
                    .map_err(|error| fail(format!("step {step}: sync failed: {error}")))?;
            }
        }
        Ok(true)
    }

    /// Reads every live buffer once more, drops them all, and checks that every device is
    /// back to zero live allocations with no error queued on any stream.
    fn finish(mut self) -> Result<(), TestCaseError> {
        let end = usize::MAX;
        for slot in &self.slots {
            self.read_and_check(slot, 0, end)?;
        }
        self.slots.clear();
        for device in 0..self.devices {
            for client in &self.clients.streams[device] {
                client.allocation_mode(MemoryAllocationMode::Auto);
                client
                    .sync()
                    .map_err(|error| fail(format!("final sync failed: {error}")))?;
            }
            let usage = self.clients.streams[device][0]
                .memory_usage()
                .map_err(|error| fail(format!("memory_usage failed: {error}")))?;
            if usage.number_allocs != 0 || usage.bytes_in_use != 0 {
                return Err(fail(format!(
                    "device {device} still holds memory after every buffer was dropped: \
                     {usage:?}"
                )));
            }
        }
        Ok(())
    }
}

fn run_case<B: TestBackend>(
    clients: &Clients<B>,
    counts: &Counts,
    case: Case,
) -> Result<(), TestCaseError> {
    let mut run = Run {
        clients,
        devices: case.devices.min(clients.devices()),
        streams: case.streams,
        slots: Vec::new(),
        counts,
    };
    for (step, op) in case.ops.iter().enumerate() {
        if run.step(step, op)? {
            Counts::bump(&counts.operations, 1);
        }
    }
    run.finish()?;
    Counts::bump(&counts.cases, 1);
    Ok(())
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(number) => Some(number),
        Err(_) => panic!("{name}={value} is not a number"),
    }
}

fn seed() -> u64 {
    match std::env::var("CUBERT_MODEL_SEED").as_deref() {
        Ok("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos() as u64)
            .unwrap_or(DEFAULT_SEED),
        Ok(_) => env_number("CUBERT_MODEL_SEED").unwrap_or(DEFAULT_SEED),
        Err(_) => DEFAULT_SEED,
    }
}

fn runner(cases: u32, seed: u64) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed ^ (i as u64).wrapping_mul(0x9e37_79b9)).to_le_bytes());
    }
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Runs batches of `cases` cases (new seed per batch) until at least `operations` operations
/// ran (one batch when `operations` is 0), and prints the figures.
fn run_model<B: TestBackend>(what: &str, cases: u32, operations: u64) {
    let clients = Clients::<B>::open();
    let counts = Counts::default();
    let seed = seed();
    let started = Instant::now();
    let mut batch = 0u64;
    loop {
        let mut runner = runner(cases, seed.wrapping_add(batch));
        let result = runner.run(&case(clients.devices()), |case| {
            run_case(&clients, &counts, case)
        });
        if let Err(error) = result {
            panic!(
                "{what}: the model and the device disagree (seed {seed}, batch {batch}; \
                 rerun with CUBERT_MODEL_SEED={seed}):\n{error}"
            );
        }
        batch += 1;
        if counts.operations.get() >= operations {
            break;
        }
    }
    eprintln!(
        "{what}: {} cases, {} operations ({} reads checking {} elements, {} launches, {} \
         to_client), 0 mismatches, 0 panics, {} device(s) x {MAX_STREAMS} streams, seed {seed}, \
         {:.1} s",
        counts.cases.get(),
        counts.operations.get(),
        counts.reads.get(),
        counts.elements_checked.get(),
        counts.launches.get(),
        counts.transfers.get(),
        clients.devices(),
        started.elapsed().as_secs_f64()
    );
    assert!(counts.reads.get() > 0, "{what}: no read was checked");
    assert!(
        counts.operations.get() >= operations,
        "{what}: only {} operations ran",
        counts.operations.get()
    );
}

/// Fast configuration (CI): [`FAST_CASES`] random sequences of up to 64 operations over up to
/// 3 devices × 4 streams, every read checked against the byte model, every device back to
/// zero allocations after each case.
pub fn random_sequences_match_the_model<B: TestBackend>() {
    let cases = env_number("CUBERT_MODEL_CASES").map_or(FAST_CASES, |n| n as u32);
    run_model::<B>("model (fast)", cases, 0);
}

/// Long configuration: the same property until at least [`LONG_OPERATIONS`] operations ran
/// (`CUBERT_MODEL_OPERATIONS` overrides). Run it in release mode: `cargo test --release -p
/// cubert-cpu --test behaviour -- --ignored long::model`.
pub fn a_million_random_operations_match_the_model<B: TestBackend>() {
    let operations = env_number("CUBERT_MODEL_OPERATIONS").unwrap_or(LONG_OPERATIONS);
    run_model::<B>("model (long)", 2_000, operations);
}
