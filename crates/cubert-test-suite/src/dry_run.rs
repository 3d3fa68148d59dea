//! Dry runs mirror this backend's device: the same workload reaches the same memory peaks
//! and makes the same device allocations on a dry run of the device
//! (`DryRunTarget::like`) as on the device itself.

use crate::backend::TestBackend;
use crate::support::client;
use cubert_runtime::dry_run::{self, DryRunTarget};
use cubert_runtime::memory::MemoryReport;
use cubert_runtime::{ComputeClient, Runtime};

/// A training-like loop: buffers of varying sizes in the small and the large pools, a
/// large activation per step whose size changes, most buffers freed at the end of a step
/// in reverse order, a few kept.
fn training_steps<R: Runtime>(client: &ComputeClient<R>) -> MemoryReport {
    let mut kept = Vec::new();
    for step in 0..8u64 {
        let scale = 1 + step % 3;
        let mut live: Vec<_> = (0..24u64)
            .map(|i| client.empty(((i * 37_001 + 513) * scale) as usize).unwrap())
            .collect();
        live.push(
            client
                .empty(((24 << 20) * scale + step * 4096) as usize)
                .unwrap(),
        );
        client.sync().unwrap();
        while live.len() > 2 {
            live.pop();
        }
        kept.append(&mut live);
        client.sync().unwrap();
    }
    drop(kept);
    client.sync().unwrap();
    client.memory_report().unwrap()
}

/// The device's peaks (reserved and in use) and its count of device allocations are
/// reached exactly by a dry run of it.
pub fn a_dry_run_of_the_device_reaches_its_memory_peaks<B: TestBackend>() {
    let device = client::<B>();
    let target = DryRunTarget::like(&device).unwrap();
    let dry = dry_run::client(target).unwrap();
    let real = training_steps(&device);
    let mirrored = training_steps(&dry);
    assert!(real.peak_bytes_in_use > 24 << 20, "{real}");
    assert_eq!(mirrored.peak_bytes_in_use, real.peak_bytes_in_use);
    assert_eq!(mirrored.peak_bytes_reserved, real.peak_bytes_reserved);
    assert_eq!(mirrored.storage_allocations, real.storage_allocations);
}
