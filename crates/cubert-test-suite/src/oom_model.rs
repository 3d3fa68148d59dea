//! Out of memory under concurrency, checked against a model.
//!
//! Several threads share one client whose memory cap is low enough that some of their
//! allocations fail. Allocation failures are asynchronous: `create` and `empty` return a
//! handle at once, and a failure comes back from the next `sync`, `flush` or `read` on the
//! thread's stream. The rule this test holds the runtime to (documented on
//! `ComputeClient::sync`): **an error at sync invalidates exactly the handles whose
//! allocation failed** (they read as `NotFound` from then on) and the launches that bound
//! one of them (they did not run: their outputs keep their old contents); every other
//! handle keeps its bytes.
//!
//! Each thread works on its own stream and keeps a log of what it queued since its last
//! successful sync: creates (with their data) and `ops::add` launches. At a sync it learns
//! which handles of the log exist: all of them if the sync returned `Ok`; otherwise it reads
//! each handle created since (a failed one answers `NotFound`, any other handle its bytes).
//! Then it replays the log on its model: a create is valid if its handle exists, a launch ran
//! if every handle it bound exists. Every read must equal the model; an error other than
//! `OutOfMemory`/`NotFound` fails the test; and at the end the client holds no allocation.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{SeededRng, client_with, settled_usage, with_timeout};
use cubert_runtime::{ElemType, Handle, IoError, LaunchError, ServerError, ops};
use std::collections::HashMap;
use std::time::Duration;

const THREADS: usize = 4;
const CAP: u64 = 6 << 20;

/// What a thread queued since its last successful sync.
enum Logged {
    Create { key: usize, data: Vec<i32> },
    Add { lhs: usize, rhs: usize, out: usize },
}

/// Whether `error` is one an allocation failure explains.
fn is_allocation_failure(error: &ServerError) -> bool {
    matches!(
        error,
        ServerError::Io(IoError::OutOfMemory { .. } | IoError::NotFound { .. })
            | ServerError::Launch(LaunchError::IoError(
                IoError::OutOfMemory { .. } | IoError::NotFound { .. }
            ))
    )
}

fn read_i32s<B: TestBackend>(client: &Client<B>, handle: &Handle) -> Result<Vec<i32>, ServerError> {
    client
        .read_one(handle.clone())
        .map(|bytes| bytes.to_elems::<i32>())
}

/// One thread's workload: returns (operations, allocations that failed).
fn worker<B: TestBackend>(client: Client<B>, seed: u64, operations: usize) -> (usize, usize) {
    let mut rng = SeededRng::new(seed);
    // Confirmed handles and their contents; pending ones (created since the last sync).
    let mut handles: HashMap<usize, Handle> = HashMap::new();
    let mut model: HashMap<usize, Vec<i32>> = HashMap::new();
    let mut log: Vec<Logged> = Vec::new();
    let mut next_key = 0usize;
    let mut failures = 0usize;
    for _ in 0..operations {
        match rng.below(10) {
            // Create: mostly small, sometimes a large share of the cap.
            0..=3 => {
                let len = if rng.below(4) == 0 {
                    (256 << 10) + rng.below(512 << 10)
                } else {
                    1 + rng.below(4096)
                };
                let data = rng.i32s(len, 1000);
                let handle = client
                    .create_from_slice(bytemuck::cast_slice(&data))
                    .unwrap();
                handles.insert(next_key, handle);
                log.push(Logged::Create {
                    key: next_key,
                    data,
                });
                next_key += 1;
            }
            // Add two buffers into a third (any of them may be pending).
            4..=6 => {
                let keys: Vec<usize> = handles.keys().copied().collect();
                if keys.is_empty() {
                    continue;
                }
                let pick = |rng: &mut SeededRng| keys[rng.below(keys.len())];
                let (lhs, rhs, out) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
                let len = handles[&out].size() as usize / 4;
                if handles[&lhs].size() < handles[&out].size()
                    || handles[&rhs].size() < handles[&out].size()
                {
                    continue;
                }
                ops::add(
                    &client,
                    &handles[&lhs],
                    &handles[&rhs],
                    &handles[&out],
                    len,
                    ElemType::I32,
                )
                .unwrap();
                log.push(Logged::Add { lhs, rhs, out });
            }
            // Drop a handle the log doesn't name (the log needs its handles to probe them).
            7 => {
                let named = |key: usize| {
                    log.iter().any(|entry| match entry {
                        Logged::Create { key: created, .. } => *created == key,
                        Logged::Add { lhs, rhs, out } => [*lhs, *rhs, *out].contains(&key),
                    })
                };
                let keys: Vec<usize> = handles.keys().copied().filter(|k| !named(*k)).collect();
                if keys.is_empty() {
                    continue;
                }
                let key = keys[rng.below(keys.len())];
                handles.remove(&key);
                model.remove(&key);
            }
            // Sync and learn what exists.
            8 => settle::<B>(&client, &mut handles, &mut model, &mut log, &mut failures),
            // Settle, then read a confirmed handle.
            _ => {
                settle::<B>(&client, &mut handles, &mut model, &mut log, &mut failures);
                let confirmed: Vec<usize> = model.keys().copied().collect();
                if confirmed.is_empty() {
                    continue;
                }
                let key = confirmed[rng.below(confirmed.len())];
                let got = read_i32s::<B>(&client, &handles[&key]).unwrap();
                assert_eq!(got, model[&key], "buffer {key}");
            }
        }
    }
    settle::<B>(&client, &mut handles, &mut model, &mut log, &mut failures);
    for (key, handle) in &handles {
        assert_eq!(
            read_i32s::<B>(&client, handle).unwrap(),
            model[key],
            "buffer {key}"
        );
    }
    (operations, failures)
}

/// Syncs; learns which logged handles exist; replays the log on the model.
fn settle<B: TestBackend>(
    client: &Client<B>,
    handles: &mut HashMap<usize, Handle>,
    model: &mut HashMap<usize, Vec<i32>>,
    log: &mut Vec<Logged>,
    failures: &mut usize,
) {
    let outcome = client.sync();
    let mut exists: HashMap<usize, bool> = HashMap::new();
    for entry in log.iter() {
        if let Logged::Create { key, .. } = entry {
            let alive = match &outcome {
                Ok(()) => true,
                Err(error) => {
                    assert!(is_allocation_failure(error), "unexpected error: {error:?}");
                    match read_i32s::<B>(client, &handles[key]) {
                        Ok(_) => true,
                        Err(ServerError::Io(IoError::NotFound { .. })) => false,
                        // A later failure of this stream is reported by this read instead.
                        Err(error) if is_allocation_failure(&error) => {
                            read_i32s::<B>(client, &handles[key]).is_ok()
                        }
                        Err(error) => panic!("probe of buffer {key}: {error:?}"),
                    }
                }
            };
            exists.insert(*key, alive);
        }
    }
    let is_live =
        |key: usize, exists: &HashMap<usize, bool>| exists.get(&key).copied().unwrap_or(true);
    for entry in log.drain(..) {
        match entry {
            Logged::Create { key, data } => {
                if exists[&key] {
                    model.insert(key, data);
                } else {
                    *failures += 1;
                    handles.remove(&key);
                    model.remove(&key);
                }
            }
            Logged::Add { lhs, rhs, out } => {
                if [lhs, rhs, out].iter().all(|key| is_live(*key, &exists)) {
                    let (a, b) = (model[&lhs].clone(), model[&rhs].clone());
                    let target = model.entry(out).or_default();
                    for (index, value) in target.iter_mut().enumerate() {
                        *value = a[index].wrapping_add(b[index]);
                    }
                }
            }
        }
    }
    // What the probes may have left queued is no error of the model's.
    while let Err(error) = client.sync() {
        assert!(is_allocation_failure(&error), "unexpected error: {error:?}");
    }
}

/// Threads sharing a capped client see some allocations fail; every handle that exists
/// holds what the model says, the failed ones read as `NotFound`, launches that bound one
/// didn't run, and the client ends holding nothing.
pub fn out_of_memory_under_concurrency_matches_the_model<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_memory_limit(CAP));
    let operations: usize = std::env::var("CUBERT_OOM_MODEL_OPERATIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(3_000);
    let results = with_timeout(Duration::from_secs(300), "OOM model", {
        let client = client.clone();
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let client = client.clone();
                    std::thread::spawn(move || {
                        worker::<B>(client, 7_000 + thread as u64, operations)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap())
                .collect::<Vec<_>>()
        }
    });
    let failures: usize = results.iter().map(|(_, failures)| failures).sum();
    assert!(
        failures > 0,
        "the cap of {CAP} bytes never made an allocation fail: the test tests nothing"
    );
    let usage = settled_usage::<B>(&client);
    assert_eq!(
        (usage.number_allocs, usage.bytes_in_use),
        (0, 0),
        "{usage:?}"
    );
    eprintln!(
        "OOM model: {THREADS} threads x {} operations, {failures} allocations failed, 0 mismatches",
        results[0].0
    );
}
