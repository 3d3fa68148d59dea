//! The dry-run backend: memory figures of the target, work checked and counted, nothing
//! run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_runtime::dry_run::{self, DryRunTarget};
use cubert_runtime::{Bytes, ElemType, IoError, ServerError, ops};

/// Reads give zeros of the requested length: no kernel ran, whatever was written.
#[test]
fn reads_give_zeros_of_the_requested_length() {
    let client = dry_run::client(DryRunTarget::with_memory(1 << 30)).unwrap();
    let a = client.create(Bytes::from_elems(vec![3u32; 100])).unwrap();
    let out = client.empty(400).unwrap();
    ops::add(&client, &a, &a, &out, 100, ElemType::U32).unwrap();
    assert_eq!(
        client.read_one(out).unwrap().to_elems::<u32>(),
        vec![0; 100]
    );
    let report = dry_run::report(&client).unwrap();
    assert_eq!(report.launches, 1);
    assert_eq!(report.allocations, 2);
    assert_eq!(report.bytes_written, 400);
    assert_eq!(report.bytes_read, 400);
}

/// An allocation past the target's memory fails at the next sync as on the device, and
/// the peak reports what was held before it.
#[test]
fn an_allocation_past_the_targets_memory_is_out_of_memory() {
    let client = dry_run::client(DryRunTarget::with_memory(64 << 20)).unwrap();
    let held = client.empty(48 << 20).unwrap();
    client.sync().unwrap();
    let over = client.empty(32 << 20).unwrap();
    assert!(matches!(
        client.sync(),
        Err(ServerError::Io(IoError::OutOfMemory { .. }))
    ));
    let report = dry_run::report(&client).unwrap();
    assert!(report.memory.peak_bytes_reserved <= 64 << 20);
    assert!(report.memory.peak_bytes_in_use >= 48 << 20);
    drop((held, over));
    // The device keeps working once memory is free.
    let again = client.empty(60 << 20).unwrap();
    client.sync().unwrap();
    drop(again);
}

/// The peak is what the live handles needed at most, not what was ever allocated: a loop
/// that frees what it allocates peaks at one step's worth, however many steps it runs.
#[test]
fn a_loop_that_frees_its_buffers_peaks_at_one_steps_worth() {
    let client = dry_run::client(DryRunTarget::with_memory(80 << 30)).unwrap();
    for _ in 0..50 {
        let activations: Vec<_> = (1..=8).map(|i| client.empty(i << 24).unwrap()).collect();
        client.sync().unwrap();
        drop(activations);
    }
    let report = dry_run::report(&client).unwrap();
    let step: u64 = (1..=8u64).map(|i| i << 24).sum();
    assert_eq!(report.memory.peak_bytes_in_use, step);
    assert!(report.memory.peak_bytes_reserved >= step);
    assert!(report.memory.peak_bytes_reserved < step + (64 << 20));
    assert_eq!(report.allocations, 400);
}

/// A launch with a handle of another device, or a copy between handles of different
/// sizes, fails at the next sync as it would on a device; the client keeps working.
#[test]
fn work_a_device_would_refuse_is_refused() {
    let client = dry_run::client(DryRunTarget::default()).unwrap();
    let other = dry_run::client(DryRunTarget::default()).unwrap();
    let foreign = other.empty(64).unwrap();
    let mine = client.empty(64).unwrap();
    assert!(
        client.copy(&foreign, &mine).is_err(),
        "checked by the client"
    );
    // Refused when queued, or at the next sync: never run.
    let launch = ops::add(&client, &foreign, &mine, &mine, 16, ElemType::F32);
    assert!(launch.is_err() || client.sync().is_err());
    let small = client.empty(32).unwrap();
    let copy = client.copy(&mine, &small);
    assert!(copy.is_err() || client.sync().is_err());
    assert_eq!(dry_run::report(&client).unwrap().launches, 0);
    ops::add(&client, &mine, &mine, &mine, 16, ElemType::F32).unwrap();
    client.sync().unwrap();
    assert_eq!(dry_run::report(&client).unwrap().launches, 1);
}

/// A dry run mirrors a live client's device: its properties, and its pool options.
#[test]
fn a_target_like_a_client_has_its_properties() {
    let cpu = cubert_cpu::default_client().unwrap();
    let target = DryRunTarget::like(&cpu).unwrap();
    assert_eq!(target.properties, *cpu.properties());
    assert_eq!(target.page_size, None, "the CPU has block pools only");
    let client = dry_run::client(target).unwrap();
    assert_eq!(
        client.properties().memory.total_memory,
        cpu.properties().memory.total_memory
    );
    assert!(client.properties().name.starts_with("dry run of"));
}
