//! Storage faults: every allocation site of the memory manager fails (1, 2 and 3 attempts in
//! a row), random storage failures under a random workload, handles whose memory is gone,
//! and an allocation mode that survives a failed allocation.

use crate::support::*;
use cubert_cpu::fault::{FaultPlan, StorageEvent};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::{Bytes, ElemType, Handle, MemoryAllocationMode, StreamId, ops};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The allocation sites of the memory manager (`MemoryManager::reserve_in` and
/// `allocate_segment` in cubert-runtime's `memory/manager.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Site {
    /// The small pool's first segment.
    SmallFirstSegment,
    /// A new segment of a small pool whose segments are full.
    SmallNewSegment,
    /// A shared mid-size segment of the large pool.
    LargeSharedSegment,
    /// A dedicated segment of the large pool.
    LargeDedicatedSegment,
    /// An exact-size block of the persistent pool.
    PersistentBlock,
    /// The second try, after every cached free segment was given back.
    RetryAfterCleanup,
    /// The third try, with a segment of exactly the rounded request.
    ExactSizeRetry,
}

/// One allocation request and what the storage is expected to be asked for.
struct Request {
    site: Site,
    size: usize,
    persistent: bool,
    /// Bytes of the segment the first attempt asks for.
    segment: u64,
    /// The request rounded to the allocation granularity (512 bytes).
    rounded: u64,
    /// Creates the buffers that put the pools in the state the site needs; they stay
    /// alive during the fault and are checked after it.
    setup: fn(&Client) -> Vec<Kept>,
    /// Size of the buffer made and dropped before the fault (cached, so the cleanup before
    /// the retry has something to give back), and whether it is persistent.
    garbage: (usize, bool),
}

/// Two 1 MiB small-pool buffers fill the small pool's 2 MiB segment.
fn fill_small_segment(client: &Client) -> Vec<Kept> {
    vec![Kept::create(client, 11, MIB), Kept::create(client, 12, MIB)]
}

/// A small buffer, so the request under test isn't the small pool's first segment.
fn small_keeper(client: &Client) -> Vec<Kept> {
    vec![Kept::create(client, 13, 5000)]
}

/// A large-pool buffer (its own 20 MiB mid-size segment).
fn large_keeper(client: &Client) -> Vec<Kept> {
    vec![Kept::create(client, 14, MIB + MIB / 2)]
}

fn requests() -> Vec<Request> {
    vec![
        Request {
            site: Site::SmallFirstSegment,
            size: 1000,
            persistent: false,
            segment: 2 * MIB as u64,
            rounded: 1024,
            setup: large_keeper,
            garbage: (4 * KIB, true),
        },
        Request {
            site: Site::SmallNewSegment,
            size: 1000,
            persistent: false,
            segment: 2 * MIB as u64,
            rounded: 1024,
            setup: fill_small_segment,
            garbage: (4 * KIB, true),
        },
        Request {
            site: Site::LargeSharedSegment,
            size: 3 * MIB,
            persistent: false,
            segment: 20 * MIB as u64,
            rounded: 3 * MIB as u64,
            setup: small_keeper,
            garbage: (4 * KIB, true),
        },
        Request {
            site: Site::LargeDedicatedSegment,
            size: 11 * MIB + 1,
            persistent: false,
            segment: 12 * MIB as u64,
            rounded: 11 * MIB as u64 + 512,
            setup: small_keeper,
            garbage: (4 * KIB, true),
        },
        Request {
            site: Site::PersistentBlock,
            size: 3000,
            persistent: true,
            segment: 3072,
            rounded: 3072,
            setup: small_keeper,
            garbage: (2 * MIB, false),
        },
    ]
}

/// Faults injected and recovered, and the sites hit, over a test.
#[derive(Default)]
struct Tally {
    injected: u64,
    recovered: u64,
    errors_returned: u64,
    absorbed: u64,
    sites: BTreeMap<Site, u64>,
}

fn create_request(client: &Client, request: &Request, bytes: &[u8]) -> Handle {
    if request.persistent {
        client
            .memory_persistent_allocation(bytes, |bytes| client.create_from_slice(bytes))
            .unwrap()
            .unwrap()
    } else {
        client.create_from_slice(bytes).unwrap()
    }
}

/// Fails the first `depth` storage attempts of `request` and checks the outcome, the sites
/// the storage saw, the other work, and that the same request succeeds afterwards.
fn inject(request: &Request, depth: u64, tally: &mut Tally) {
    let what = format!("{:?} with {depth} failed attempt(s)", request.site);
    let plan = FaultPlan::new();
    let client = faulty_client(&plan, 0, DeviceHandleMode::Threaded);
    let other_stream = client.with_stream(StreamId::new((5 << 40) + 1));
    let other_client = clean_client(1);
    let kept = (request.setup)(&client);
    // In the persistent pool, so it doesn't change what the request under test needs.
    let on_other_stream = other_stream
        .memory_persistent_allocation((), |()| Kept::create(&other_stream, 21, 640))
        .unwrap();
    let (garbage_size, garbage_persistent) = request.garbage;
    let garbage = if garbage_persistent {
        client
            .memory_persistent_allocation((), |()| client.empty(garbage_size))
            .unwrap()
    } else {
        client.empty(garbage_size)
    }
    .unwrap();
    // Reserved before it is dropped (a handle `empty` made and dropped at once may be
    // released before its reservation runs, which then reserves nothing).
    client.sync().unwrap();
    drop(garbage);
    client.sync().unwrap();
    other_stream.sync().unwrap();
    plan.take_events();

    // The fault.
    let bytes = data(depth + 100, request.size);
    plan.fail_next(depth);
    let handle = create_request(&client, request, &bytes);
    let outcome = client.sync();
    plan.disarm();
    let events = plan.take_events();

    // What the storage was asked for: the first attempt, the retry after cleanup (with the
    // cleanup's deallocations before it), then the exact-size retry.
    let attempts: Vec<(u64, bool)> = events
        .iter()
        .filter_map(|event| match *event {
            StorageEvent::Alloc { size, injected, .. } => Some((size, injected)),
            StorageEvent::Dealloc { .. } => None,
        })
        .collect();
    let has_exact = request.rounded < request.segment;
    let available = if has_exact { 3 } else { 2 };
    let mut expected = vec![request.segment, request.segment];
    if has_exact {
        expected.push(request.rounded);
    }
    let tried = (depth as usize + 1).min(available);
    let expected: Vec<(u64, bool)> = expected
        .into_iter()
        .take(tried)
        .enumerate()
        .map(|(i, size)| (size, (i as u64) < depth))
        .collect();
    assert_eq!(attempts, expected, "{what}: storage attempts {events:?}");
    let first_alloc = events
        .iter()
        .position(|e| matches!(e, StorageEvent::Alloc { .. }))
        .unwrap();
    let retry = events
        .iter()
        .skip(first_alloc + 1)
        .position(|e| matches!(e, StorageEvent::Alloc { .. }))
        .map(|i| i + first_alloc + 1);
    if let Some(retry) = retry {
        // The manager gives cached free segments back before the retry (and, when it
        // compacts before growing, before the first attempt already).
        assert!(
            events[..retry]
                .iter()
                .any(|e| matches!(e, StorageEvent::Dealloc { .. })),
            "{what}: the cached segment was not given back before the retry: {events:?}"
        );
    }
    let sites = [request.site, Site::RetryAfterCleanup, Site::ExactSizeRetry];
    let sites = if has_exact { &sites[..] } else { &sites[..2] };
    for (site, (_, injected)) in sites.iter().zip(&attempts) {
        if *injected {
            *tally.sites.entry(*site).or_default() += 1;
            tally.injected += 1;
        }
    }

    // The answer: absorbed by a retry, or OutOfMemory with the handle reading as NotFound.
    if depth as usize >= available {
        let error = outcome.expect_err(&what);
        assert!(is_out_of_memory(&error), "{what}: {error:?}");
        let read = client.read_one(handle.clone()).unwrap_err();
        assert!(is_not_found(&read), "{what}: {read:?}");
        ops::fill(&client, &handle, 4, 1u8).unwrap();
        let launch = client.sync().unwrap_err();
        assert!(is_not_found(&launch), "{what}: {launch:?}");
        tally.errors_returned += 1;
    } else {
        outcome.unwrap_or_else(|error| panic!("{what}: a retry should succeed: {error}"));
        assert!(client.read_one(handle.clone()).unwrap()[..] == bytes[..]);
        tally.absorbed += 1;
    }
    drop(handle);

    // Everything else is intact and served.
    for buffer in &kept {
        buffer.check(&client, &what);
    }
    on_other_stream.check(&other_stream, &what);
    Kept::create(&other_client, 22, 4096).check(&other_client, &what);
    Kept::create(&other_stream, 23, 999).check(&other_stream, &what);

    // The same request now succeeds and round-trips.
    let again = create_request(&client, request, &bytes);
    client.sync().unwrap();
    assert!(client.read_one(again).unwrap()[..] == bytes[..], "{what}");
    tally.recovered += attempts.iter().filter(|(_, injected)| *injected).count() as u64;

    drop(kept);
    drop(on_other_stream);
    client.memory_cleanup();
    let usage = client.memory_usage().unwrap();
    assert_eq!(usage.number_allocs, 0, "{what}: {usage:?}");
    assert_eq!(usage.bytes_reserved, 0, "{what}: {usage:?}");
    assert_eq!(plan.injected(), depth.min(available as u64), "{what}");
}

/// Every allocation site of the memory manager fails at least once (1, 2 and 3 failed
/// attempts in a row for each pool site): a failure absorbed by a retry is invisible, one
/// that exhausts the retries is `OutOfMemory` at the next sync with the handle reading as
/// `NotFound`; live buffers, other streams and other clients are untouched, and the same
/// request succeeds afterwards.
#[test]
fn every_allocation_site_fails_and_the_runtime_recovers() {
    let mut tally = Tally::default();
    for request in requests() {
        for depth in 1..=3 {
            inject(&request, depth, &mut tally);
        }
    }
    let every = [
        Site::SmallFirstSegment,
        Site::SmallNewSegment,
        Site::LargeSharedSegment,
        Site::LargeDedicatedSegment,
        Site::PersistentBlock,
        Site::RetryAfterCleanup,
        Site::ExactSizeRetry,
    ];
    for site in every {
        assert!(
            tally.sites.get(&site).is_some_and(|n| *n > 0),
            "{site:?} was never failed: {:?}",
            tally.sites
        );
    }
    assert_eq!(tally.recovered, tally.injected);
    eprintln!(
        "allocation sites: {} faults injected at {} sites {:?}; {} absorbed by a retry, {} \
         returned OutOfMemory; {} recovered (same request served afterwards), 0 bytes lost",
        tally.injected,
        tally.sites.len(),
        tally.sites,
        tally.absorbed,
        tally.errors_returned,
        tally.recovered
    );
}

/// Random storage failures (one attempt in four, seeded) under a random workload of
/// creates, reads, adds and drops: every failed create is `OutOfMemory` at its sync and
/// reads as `NotFound`, every live buffer always reads back exactly, and a clean client on
/// another device, working in parallel, never sees an error.
#[test]
fn random_storage_faults_never_corrupt_live_data() {
    const STEPS: usize = 4000;
    let figures = within(Duration::from_secs(300), || {
        let plan = FaultPlan::new();
        let client = faulty_client(&plan, 0, DeviceHandleMode::Threaded);
        let stop = Arc::new(AtomicBool::new(false));
        let bystander = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let clean = clean_client(1);
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let kept = Kept::create(&clean, rounds, 1 + (rounds as usize * 37) % 5000);
                    kept.check(&clean, "bystander");
                    rounds += 1;
                }
                rounds
            })
        };
        plan.fail_randomly(0x5eed, 4);
        let mut live: Vec<(Handle, Vec<i32>)> = Vec::new();
        let mut failed: Vec<Handle> = Vec::new();
        let (mut errors, mut reads, mut absorbed) = (0u64, 0u64, 0u64);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for step in 0..STEPS {
            let roll = next() % 100;
            if live.len() < 2 || roll < 30 {
                let len = match next() % 16 {
                    0 => 262_145 + (next() % 4096) as usize,
                    1..4 => 1 + (next() % 100_000) as usize,
                    _ => 1 + (next() % 2000) as usize,
                };
                let values: Vec<i32> = (0..len).map(|_| next() as i32).collect();
                let before = plan.injected();
                let handle = if next() % 8 == 0 {
                    client
                        .memory_persistent_allocation(&values, |values| {
                            client.create(Bytes::from_slice(values))
                        })
                        .unwrap()
                } else {
                    client.create(Bytes::from_slice(&values))
                }
                .unwrap();
                match client.sync() {
                    Ok(()) => {
                        absorbed += u64::from(plan.injected() > before);
                        live.push((handle, values));
                    }
                    Err(error) => {
                        assert!(is_out_of_memory(&error), "step {step}: {error:?}");
                        assert!(plan.injected() > before, "step {step}: OOM without a fault");
                        errors += 1;
                        failed.push(handle);
                    }
                }
            } else if roll < 60 {
                let (handle, values) = &live[(next() % live.len() as u64) as usize];
                let read = client.read_one(handle.clone()).unwrap().to_elems::<i32>();
                assert!(read == *values, "step {step}: a live buffer was corrupted");
                reads += 1;
            } else if roll < 80 {
                let n = live.len() as u64;
                let (a, b, c) = (
                    (next() % n) as usize,
                    (next() % n) as usize,
                    (next() % n) as usize,
                );
                let len = live[a].1.len().min(live[b].1.len()).min(live[c].1.len());
                ops::add(
                    &client,
                    &live[a].0,
                    &live[b].0,
                    &live[c].0,
                    len,
                    ElemType::I32,
                )
                .unwrap();
                let sum: Vec<i32> = (0..len)
                    .map(|i| live[a].1[i].wrapping_add(live[b].1[i]))
                    .collect();
                live[c].1[..len].copy_from_slice(&sum);
            } else if roll < 95 {
                live.swap_remove((next() % live.len() as u64) as usize);
            } else if let Some(handle) = failed.pop() {
                let error = client.read_one(handle).unwrap_err();
                assert!(is_not_found(&error), "step {step}: {error:?}");
            } else {
                client.memory_cleanup();
            }
        }
        plan.disarm();
        for (handle, values) in &live {
            let read = client.read_one(handle.clone()).unwrap().to_elems::<i32>();
            assert!(read == *values, "final: a live buffer was corrupted");
        }
        stop.store(true, Ordering::Relaxed);
        let rounds = bystander.join().unwrap();
        drop(live);
        drop(failed);
        client.memory_cleanup();
        let usage = client.memory_usage().unwrap();
        assert_eq!(usage.number_allocs, 0, "{usage:?}");
        (
            plan.injected(),
            plan.attempts(),
            errors,
            absorbed,
            reads,
            rounds,
        )
    });
    let (injected, attempts, errors, absorbed, reads, rounds) = figures;
    assert!(injected > 20 && errors > 5, "too few faults: {figures:?}");
    eprintln!(
        "random storage faults: {STEPS} steps, {attempts} storage attempts, {injected} faults \
         injected; {absorbed} creates absorbed them by a retry, {errors} returned OutOfMemory, \
         all recovered; {reads} reads of live buffers exact; bystander client: {rounds} round \
         trips, 0 errors; 0 bytes lost"
    );
}

/// Reading, launching with, or moving a handle whose memory is gone (its allocation failed,
/// or its server was dropped) is `NotFound`, never a crash or a read of other memory; the
/// client keeps working.
#[test]
fn handles_whose_memory_is_gone_are_not_found() {
    let mut refused = 0;
    // Never allocated: the storage refused it.
    let plan = FaultPlan::new();
    let client = faulty_client(&plan, 0, DeviceHandleMode::Threaded);
    let other = clean_client(1);
    let kept = Kept::create(&client, 61, 5000);
    client.sync().unwrap();
    plan.fail_next(u64::MAX);
    // 5 MiB needs a new large-pool segment (the small one `kept` made can't serve it).
    let gone = client.create_from_slice(&vec![1u8; 5 * MIB]).unwrap();
    assert!(is_out_of_memory(&client.sync().unwrap_err()));
    plan.disarm();
    let error = client.read_one(gone.clone()).unwrap_err();
    assert!(is_not_found(&error), "{error:?}");
    refused += 1;
    ops::copy(&client, &kept.handle, &gone, 16, ElemType::U8).unwrap();
    let error = client.sync().unwrap_err();
    assert!(is_not_found(&error), "{error:?}");
    refused += 1;
    let error = client.get_resource(gone.clone()).unwrap_err();
    assert!(is_not_found(&error), "{error:?}");
    refused += 1;
    let error = client
        .to_client(gone.clone(), &other, ElemType::U8)
        .unwrap_err();
    assert!(is_not_found(&error), "{error:?}");
    refused += 1;
    kept.check(&client, "after using a handle that was never allocated");

    // Its server is gone: a new server of the same device doesn't know it.
    let old = clean_client(2);
    let orphan = old.create_from_slice(&[9u8; 128]).unwrap();
    old.sync().unwrap();
    drop(old);
    let new = clean_client(2);
    let error = new.read_one(orphan.clone()).unwrap_err();
    assert!(is_not_found(&error), "{error:?}");
    refused += 1;
    let target = new.empty(128).unwrap();
    ops::copy(&new, &orphan, &target, 128, ElemType::U8).unwrap();
    let error = new.sync().unwrap_err();
    assert!(is_not_found(&error), "{error:?}");
    refused += 1;
    drop(orphan);
    Kept::create(&new, 62, 128).check(&new, "the new server");
    kept.check(&client, "the first client");
    eprintln!("handles whose memory is gone: {refused} uses refused with NotFound, 0 crashes");
}

/// The persistent allocation mode set on a stream survives an allocation failure in it:
/// later allocations of that stream still land in the persistent pool.
#[test]
fn allocation_mode_survives_a_failed_allocation() {
    let plan = FaultPlan::new();
    let client = faulty_client(&plan, 0, DeviceHandleMode::Threaded);
    client.allocation_mode(MemoryAllocationMode::Persistent);
    client.sync().unwrap();
    plan.fail_next(u64::MAX);
    let failed = client.empty(3000).unwrap();
    assert!(is_out_of_memory(&client.sync().unwrap_err()));
    plan.disarm();
    let kept = Kept::create(&client, 71, 3000);
    let report = client.memory_report().unwrap();
    let persistent = report
        .pools
        .iter()
        .find(|pool| pool.name == "persistent")
        .unwrap();
    assert_eq!(persistent.allocations, 1, "{report:?}");
    kept.check(&client, "persistent buffer");
    drop(failed);
}
