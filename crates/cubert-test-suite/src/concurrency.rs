//! Streams and threads: `set_stream`/`with_stream`, per-stream errors, cross-stream data,
//! and the stress tests (many threads doing random create/read/launch/drop on one client,
//! or on the clients of several devices with `to_client` between them, every read checked
//! against a host model, every workload under a deadline so a deadlock fails the test).

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{
    SeededRng, client, client_with, launch_elementwise_unchecked, read_elems, settled_usage,
    upload, with_timeout,
};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::kernel::standard::{StandardKernel, encode_scalar};
use cubert_runtime::{
    Bytes, ComputeClient, ElemType, Handle, MemoryAllocationMode, ServerError, StreamId, ops,
};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a stress workload may take before it counts as a deadlock.
const STRESS_LIMIT: Duration = Duration::from_secs(120);
const STRESS_THREADS: usize = 8;
const STRESS_OPS: usize = 10_000;

/// A client's stream is the calling thread's by default; `set_stream` and `with_stream`
/// pin it; clones keep the pin.
pub fn with_stream_and_set_stream_pin_the_client<B: TestBackend>() {
    let client = client::<B>();
    assert_eq!(client.stream_id(), StreamId::current());
    let other_thread = {
        let client = client.clone();
        std::thread::spawn(move || client.stream_id())
            .join()
            .unwrap()
    };
    assert_ne!(
        other_thread,
        client.stream_id(),
        "each thread has its own stream"
    );
    let stream = StreamId::new((1 << 40) + 1);
    let pinned = client.with_stream(stream);
    assert_eq!(pinned.stream_id(), stream);
    assert_eq!(pinned.clone().stream_id(), stream);
    let from_thread = {
        let pinned = pinned.clone();
        std::thread::spawn(move || pinned.stream_id())
            .join()
            .unwrap()
    };
    assert_eq!(
        from_thread, stream,
        "a pinned client keeps its stream on any thread"
    );
    let mut set = client.clone();
    set.set_stream(StreamId::new((1 << 40) + 2));
    assert_eq!(set.stream_id(), StreamId::new((1 << 40) + 2));
    assert_eq!(
        client.stream_id(),
        StreamId::current(),
        "the original is unchanged"
    );
}

/// An error is queued on the stream that caused it: other streams sync cleanly.
pub fn errors_stay_on_the_stream_that_caused_them<B: TestBackend>() {
    let client = client::<B>();
    let faulty = client.with_stream(StreamId::new((1 << 40) + 10));
    let clean = client.with_stream(StreamId::new((1 << 40) + 11));
    let small = upload::<B, f32>(&faulty, &[1.0; 4]);
    launch_elementwise_unchecked::<B>(
        &faulty,
        StandardKernel::Fill(ElemType::F32),
        &[&small],
        vec![64, encode_scalar(2.0f32)],
    )
    .unwrap();
    let good = upload::<B, f32>(&clean, &[3.0; 4]);
    clean.sync().expect("the clean stream has no error");
    assert_eq!(read_elems::<B, f32>(&clean, &good), vec![3.0; 4]);
    let error = faulty.sync().unwrap_err();
    assert!(
        matches!(error, ServerError::OutOfBounds { .. }),
        "expected OutOfBounds on the faulty stream, got {error:?}"
    );
    faulty.sync().unwrap();
}

/// Data written on one stream is seen by work on another stream and read on a third.
pub fn data_written_on_one_stream_is_seen_on_another<B: TestBackend>() {
    let client = client::<B>();
    let writer = client.with_stream(StreamId::new((1 << 40) + 20));
    let worker = client.with_stream(StreamId::new((1 << 40) + 21));
    let reader = client.with_stream(StreamId::new((1 << 40) + 22));
    let values = SeededRng::new(60).i32s(5000, 1000);
    let source = upload::<B, i32>(&writer, &values);
    let target = writer.empty(5000 * 4).unwrap();
    ops::add(&worker, &source, &source, &target, 5000, ElemType::I32).unwrap();
    let expected: Vec<i32> = values.iter().map(|v| v * 2).collect();
    assert_eq!(read_elems::<B, i32>(&reader, &target), expected);
}

/// Threads sharing one client work on their own streams concurrently; each sees its own
/// data, and memory returns to its baseline when they are done.
pub fn threads_sharing_a_client_see_their_own_data<B: TestBackend>() {
    let client = client::<B>();
    let results = with_timeout(STRESS_LIMIT, "four threads on one client", {
        let client = client.clone();
        move || {
            let workers: Vec<_> = (0..4u64)
                .map(|seed| {
                    let client = client.clone();
                    std::thread::spawn(move || {
                        let values = SeededRng::new(seed + 70).f32s(3000, 1.0);
                        let handle = client.create(Bytes::from_slice(&values)).unwrap();
                        let out = client.empty(3000 * 4).unwrap();
                        ops::mul(&client, &handle, &handle, &out, 3000, ElemType::F32).unwrap();
                        let read = client.read_one(out).unwrap().to_elems::<f32>();
                        let expected: Vec<f32> = values.iter().map(|v| v * v).collect();
                        read == expected
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap())
                .collect::<Vec<bool>>()
        }
    });
    assert_eq!(results, vec![true; 4]);
    assert_eq!(settled_usage::<B>(&client).number_allocs, 0);
}

/// A live buffer and the host copy of what it must hold.
struct Modeled {
    handle: Handle,
    model: Vec<i32>,
}

fn check_read(client: &ComputeClient<impl cubert_runtime::Runtime>, slot: &Modeled, what: &str) {
    let read = client
        .read_one(slot.handle.clone())
        .unwrap_or_else(|error| panic!("{what}: read failed: {error}"));
    let read = read.to_elems::<i32>();
    assert!(
        read == slot.model,
        "{what}: device bytes differ from the model at element {:?}",
        read.iter().zip(&slot.model).position(|(a, b)| a != b)
    );
}

/// Length of a new stress buffer: mostly tiny, sometimes a few thousand elements so that
/// kernels spread over several cubes (and worker threads).
fn stress_len(rng: &mut SeededRng) -> usize {
    if rng.below(16) == 0 {
        1025 + rng.below(3000)
    } else {
        1 + rng.below(96)
    }
}

/// One random step on a thread's own buffers. Returns whether it read something.
fn private_step<R: cubert_runtime::Runtime>(
    client: &ComputeClient<R>,
    rng: &mut SeededRng,
    slots: &mut Vec<Modeled>,
    what: &str,
) -> bool {
    const MAX_SLOTS: usize = 12;
    let choice = if slots.len() < 2 { 0 } else { rng.below(100) };
    match choice {
        0..25 => {
            if slots.len() >= MAX_SLOTS {
                slots.swap_remove(rng.below(slots.len()));
            }
            let len = stress_len(rng);
            let model = rng.i32s(len, 1 << 16);
            let handle = client.create(Bytes::from_slice(&model)).unwrap();
            slots.push(Modeled { handle, model });
            false
        }
        25..45 => {
            let slot = &slots[rng.below(slots.len())];
            check_read(client, slot, what);
            true
        }
        45..65 => {
            let (src, dst) = (rng.below(slots.len()), rng.below(slots.len()));
            let len = slots[src].model.len().min(slots[dst].model.len());
            ops::copy(
                client,
                &slots[src].handle,
                &slots[dst].handle,
                len,
                ElemType::I32,
            )
            .unwrap();
            let copied = slots[src].model[..len].to_vec();
            slots[dst].model[..len].copy_from_slice(&copied);
            false
        }
        65..85 => {
            let (lhs, rhs, out) = (
                rng.below(slots.len()),
                rng.below(slots.len()),
                rng.below(slots.len()),
            );
            let len = slots[lhs]
                .model
                .len()
                .min(slots[rhs].model.len())
                .min(slots[out].model.len());
            ops::add(
                client,
                &slots[lhs].handle,
                &slots[rhs].handle,
                &slots[out].handle,
                len,
                ElemType::I32,
            )
            .unwrap();
            let sum: Vec<i32> = (0..len)
                .map(|i| slots[lhs].model[i].wrapping_add(slots[rhs].model[i]))
                .collect();
            slots[out].model[..len].copy_from_slice(&sum);
            false
        }
        85..99 => {
            slots.swap_remove(rng.below(slots.len()));
            false
        }
        _ => {
            // Give back cached memory while other threads allocate and launch.
            client.memory_cleanup();
            let usage = client.memory_usage().unwrap();
            assert!(
                usage.number_allocs >= slots.len() as u64,
                "{what}: {usage:?}"
            );
            false
        }
    }
}

fn private_stress<B: TestBackend>(mode: DeviceHandleMode, threads: usize, ops_per_thread: usize) {
    let client = client_with::<B>(&ClientOptions::new().with_mode(mode));
    let reads = with_timeout(STRESS_LIMIT, "stress on private buffers", {
        let client = client.clone();
        move || {
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads)
                    .map(|thread| {
                        let client = client.clone();
                        scope.spawn(move || {
                            let mut rng = SeededRng::new(1000 + thread as u64);
                            let mut slots = Vec::new();
                            let mut reads = 0usize;
                            for step in 0..ops_per_thread {
                                let what = format!("{mode:?} thread {thread} step {step}");
                                reads +=
                                    usize::from(private_step(&client, &mut rng, &mut slots, &what));
                            }
                            for slot in &slots {
                                check_read(&client, slot, &format!("thread {thread} final"));
                            }
                            client.sync().unwrap();
                            reads + slots.len()
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| worker.join().unwrap())
                    .sum::<usize>()
            })
        }
    });
    assert!(
        reads >= threads * ops_per_thread / 10,
        "only {reads} reads were checked"
    );
    let usage = settled_usage::<B>(&client);
    assert_eq!(
        usage.number_allocs, 0,
        "every buffer was dropped: {usage:?}"
    );
}

/// Stress: 8 threads × 10,000 random create/read/launch (copy or add)/drop operations on one
/// shared client, each thread on its own stream, every read compared with a host model;
/// memory returns to its baseline. A deadlock fails after 120 s.
pub fn stress_random_ops_on_per_thread_streams_match_host_model<B: TestBackend>() {
    private_stress::<B>(DeviceHandleMode::Threaded, STRESS_THREADS, STRESS_OPS);
}

/// The same stress workload (8 threads × 2,500 operations) on an inline device handle.
pub fn stress_random_ops_in_inline_mode_match_host_model<B: TestBackend>() {
    private_stress::<B>(DeviceHandleMode::Inline, STRESS_THREADS, STRESS_OPS / 4);
}

type SharedSlots = Arc<Vec<Mutex<Option<Modeled>>>>;

fn lock(slots: &SharedSlots, index: usize) -> std::sync::MutexGuard<'_, Option<Modeled>> {
    slots[index].lock().unwrap_or_else(PoisonError::into_inner)
}

/// One random step on the shared buffers: the slots it touches are locked in index order,
/// the work is queued on this thread's stream and the model updated under the locks.
fn shared_step<R: cubert_runtime::Runtime>(
    client: &ComputeClient<R>,
    rng: &mut SeededRng,
    slots: &SharedSlots,
    what: &str,
) -> bool {
    let choice = rng.below(100);
    match choice {
        0..20 => {
            let index = rng.below(slots.len());
            let len = stress_len(rng);
            let model = rng.i32s(len, 1 << 16);
            let handle = client.create(Bytes::from_slice(&model)).unwrap();
            *lock(slots, index) = Some(Modeled { handle, model });
            false
        }
        20..40 => {
            let index = rng.below(slots.len());
            let slot = lock(slots, index);
            match slot.as_ref() {
                Some(slot) => {
                    check_read(client, slot, what);
                    true
                }
                None => false,
            }
        }
        40..90 => {
            let add = choice >= 65;
            let mut picked: Vec<usize> = (0..if add { 3 } else { 2 })
                .map(|_| rng.below(slots.len()))
                .collect();
            let roles = picked.clone();
            picked.sort_unstable();
            picked.dedup();
            let mut guards: Vec<(usize, std::sync::MutexGuard<'_, Option<Modeled>>)> =
                picked.iter().map(|&i| (i, lock(slots, i))).collect();
            let position = |index: usize| {
                picked
                    .iter()
                    .position(|&i| i == index)
                    .unwrap_or_else(|| panic!("slot {index} was not locked"))
            };
            if guards.iter().any(|(_, guard)| guard.is_none()) {
                return false;
            }
            let get = |guards: &Vec<(usize, std::sync::MutexGuard<'_, Option<Modeled>>)>,
                       index: usize| {
                let (_, guard) = &guards[position(index)];
                guard.as_ref().map(|m| (m.handle.clone(), m.model.clone()))
            };
            let Some((first, first_model)) = get(&guards, roles[0]) else {
                return false;
            };
            let Some((second, second_model)) = get(&guards, roles[1]) else {
                return false;
            };
            let (target_index, new_values) = if add {
                let Some((out, out_model)) = get(&guards, roles[2]) else {
                    return false;
                };
                let len = first_model
                    .len()
                    .min(second_model.len())
                    .min(out_model.len());
                ops::add(client, &first, &second, &out, len, ElemType::I32).unwrap();
                let sum: Vec<i32> = (0..len)
                    .map(|i| first_model[i].wrapping_add(second_model[i]))
                    .collect();
                (roles[2], sum)
            } else {
                let len = first_model.len().min(second_model.len());
                ops::copy(client, &first, &second, len, ElemType::I32).unwrap();
                (roles[1], first_model[..len].to_vec())
            };
            let target = position(target_index);
            if let Some(slot) = guards[target].1.as_mut() {
                slot.model[..new_values.len()].copy_from_slice(&new_values);
            }
            false
        }
        _ => {
            let index = rng.below(slots.len());
            lock(slots, index).take();
            false
        }
    }
}

/// Stress: 8 threads × 10,000 random operations on buffers shared by all threads, each
/// thread on its own stream, so buffers written on one stream are read and written on
/// others; every read is compared with a host model.
pub fn stress_threads_sharing_handles_across_streams_match_host_model<B: TestBackend>() {
    let client = client::<B>();
    let slots: SharedSlots = Arc::new((0..32).map(|_| Mutex::new(None)).collect());
    let reads = with_timeout(STRESS_LIMIT, "stress on shared buffers", {
        let client = client.clone();
        let slots = slots.clone();
        move || {
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..STRESS_THREADS)
                    .map(|thread| {
                        let client = client.clone();
                        let slots = slots.clone();
                        scope.spawn(move || {
                            let mut rng = SeededRng::new(5000 + thread as u64);
                            let mut reads = 0usize;
                            for step in 0..STRESS_OPS {
                                let what = format!("thread {thread} step {step}");
                                reads += usize::from(shared_step(&client, &mut rng, &slots, &what));
                            }
                            client.sync().unwrap();
                            reads
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| worker.join().unwrap())
                    .sum::<usize>()
            })
        }
    });
    assert!(
        reads >= STRESS_THREADS * STRESS_OPS / 10,
        "only {reads} reads were checked"
    );
    for index in 0..slots.len() {
        if let Some(slot) = lock(&slots, index).as_ref() {
            check_read(&client, slot, &format!("final slot {index}"));
        }
    }
    for index in 0..slots.len() {
        lock(&slots, index).take();
    }
    assert_eq!(settled_usage::<B>(&client).number_allocs, 0);
}

/// A thread's buffer on one of several devices.
struct OnDevice {
    device: usize,
    slot: Modeled,
}

/// One random step of a thread on buffers spread over `clients`' devices: create, read,
/// copy or add (on one device), `to_client` to another device, drop, `memory_cleanup`, or a
/// switch of this thread's allocation mode. Returns whether it read something.
fn multi_device_step<B: TestBackend>(
    clients: &[Client<B>],
    rng: &mut SeededRng,
    slots: &mut Vec<OnDevice>,
    what: &str,
) -> bool {
    const MAX_SLOTS: usize = 12;
    let choice = if slots.len() < 2 { 0 } else { rng.below(100) };
    match choice {
        0..20 => {
            if slots.len() >= MAX_SLOTS {
                slots.swap_remove(rng.below(slots.len()));
            }
            let device = rng.below(clients.len());
            let len = stress_len(rng);
            let model = rng.i32s(len, 1 << 16);
            let handle = clients[device]
                .create(Bytes::from_slice(&model))
                .unwrap_or_else(|error| panic!("{what}: create failed: {error}"));
            slots.push(OnDevice {
                device,
                slot: Modeled { handle, model },
            });
            false
        }
        20..38 => {
            let slot = &slots[rng.below(slots.len())];
            check_read(&clients[slot.device], &slot.slot, what);
            true
        }
        38..70 => {
            let first = rng.below(slots.len());
            let device = slots[first].device;
            let same: Vec<usize> = (0..slots.len())
                .filter(|&i| slots[i].device == device)
                .collect();
            let second = same[rng.below(same.len())];
            let third = same[rng.below(same.len())];
            let client = &clients[device];
            let (a, b, c) = (&slots[first].slot, &slots[second].slot, &slots[third].slot);
            if choice < 54 {
                let len = a.model.len().min(b.model.len());
                ops::copy(client, &a.handle, &b.handle, len, ElemType::I32)
                    .unwrap_or_else(|error| panic!("{what}: copy refused: {error}"));
                let copied = a.model[..len].to_vec();
                slots[second].slot.model[..len].copy_from_slice(&copied);
            } else {
                let len = a.model.len().min(b.model.len()).min(c.model.len());
                ops::add(client, &a.handle, &b.handle, &c.handle, len, ElemType::I32)
                    .unwrap_or_else(|error| panic!("{what}: add refused: {error}"));
                let sum: Vec<i32> = (0..len)
                    .map(|i| a.model[i].wrapping_add(b.model[i]))
                    .collect();
                slots[third].slot.model[..len].copy_from_slice(&sum);
            }
            false
        }
        70..82 => {
            let index = rng.below(slots.len());
            let target = rng.below(clients.len());
            let source = &slots[index];
            let handle = clients[source.device]
                .to_client(source.slot.handle.clone(), &clients[target], ElemType::I32)
                .unwrap_or_else(|error| panic!("{what}: to_client failed: {error}"));
            let model = source.slot.model.clone();
            if slots.len() >= MAX_SLOTS {
                slots.swap_remove(index);
            }
            slots.push(OnDevice {
                device: target,
                slot: Modeled { handle, model },
            });
            false
        }
        82..96 => {
            slots.swap_remove(rng.below(slots.len()));
            false
        }
        96..98 => {
            let mode = if rng.coin() {
                MemoryAllocationMode::Persistent
            } else {
                MemoryAllocationMode::Auto
            };
            clients[rng.below(clients.len())].allocation_mode(mode);
            false
        }
        _ => {
            clients[rng.below(clients.len())].memory_cleanup();
            false
        }
    }
}

/// `threads` threads share one client per device (up to 3 devices), each thread on its own
/// stream, `ops_per_thread` random steps each; every read is checked, every device ends at
/// zero allocations, and the whole workload must end within `limit`.
fn multi_device_stress<B: TestBackend>(
    what: &'static str,
    threads: usize,
    ops_per_thread: usize,
    limit: Duration,
) {
    let devices = B::device_count_for_tests().clamp(1, 3);
    let clients: Vec<Client<B>> = (0..devices)
        .map(|device| client_with::<B>(&ClientOptions::new().with_device(device)))
        .collect();
    let started = std::time::Instant::now();
    let reads = with_timeout(limit, what, {
        let clients = clients.clone();
        move || {
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads)
                    .map(|thread| {
                        let clients = clients.clone();
                        scope.spawn(move || {
                            let mut rng = SeededRng::new(9000 + thread as u64);
                            let mut slots = Vec::new();
                            let mut reads = 0usize;
                            for step in 0..ops_per_thread {
                                let what = format!("{what}: thread {thread} step {step}");
                                reads += usize::from(multi_device_step::<B>(
                                    &clients, &mut rng, &mut slots, &what,
                                ));
                            }
                            for slot in &slots {
                                let what = format!("{what}: thread {thread} final");
                                check_read(&clients[slot.device], &slot.slot, &what);
                            }
                            drop(slots);
                            for client in &clients {
                                client.allocation_mode(MemoryAllocationMode::Auto);
                                client.sync().unwrap();
                            }
                            reads
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| worker.join().unwrap())
                    .sum::<usize>()
            })
        }
    });
    assert!(
        reads >= threads * ops_per_thread / 10,
        "{what}: only {reads} reads were checked"
    );
    for client in &clients {
        let usage = settled_usage::<B>(client);
        assert_eq!(usage.number_allocs, 0, "{what}: {usage:?}");
    }
    eprintln!(
        "{what}: {threads} threads x {ops_per_thread} operations on {devices} device(s) = {} \
         operations, {reads} reads checked, 0 mismatches, no deadlock, {:.1} s",
        threads * ops_per_thread,
        started.elapsed().as_secs_f64()
    );
}

/// Stress over several devices: 12 threads × 2,500 random operations (create, read, copy,
/// add, `to_client`, drop, cleanup, allocation mode) on one shared client per device (up to
/// 3), each thread on its own stream; every read matches the host model, every device ends
/// at zero allocations; a deadlock fails after 120 s.
pub fn stress_threads_over_several_devices_match_host_model<B: TestBackend>() {
    multi_device_stress::<B>("stress (devices)", 12, 2_500, STRESS_LIMIT);
}

/// Long stress: 16 threads × 80,000 random operations over several devices (1,280,000
/// operations), under a 20-minute deadline.
pub fn long_stress_threads_over_several_devices_match_host_model<B: TestBackend>() {
    multi_device_stress::<B>(
        "stress (devices, long)",
        16,
        80_000,
        Duration::from_secs(1200),
    );
}
