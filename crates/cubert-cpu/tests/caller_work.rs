//! Which work the CPU backend runs on an idle device's calling thread
//! (`ComputeServer::CALLER_WORK`): syncs, allocations and small uploads, never launches,
//! since a CPU launch runs the kernel and the caller would lose the overlap the runner gives.

#![allow(clippy::unwrap_used)]

use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::ComputeClient;
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::server::CallerWork;

#[test]
fn an_idle_cpu_device_runs_syncs_and_small_uploads_on_the_caller_and_launches_on_its_runner() {
    let server = CpuServer::new(CpuDevice::new(0), &CubertConfig::default()).unwrap();
    let client: ComputeClient<CpuRuntime> =
        ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap();
    let handle = client.device_handle();
    let caller = std::thread::current().id();
    let runs_here = |work| {
        handle
            .submit_blocking_as(work, |_| std::thread::current().id())
            .unwrap()
            == caller
    };
    // The runner counts a message handled just after answering it, so a sync finds it idle
    // within a few tries.
    assert!((0..100_000).any(|_| runs_here(CallerWork::Sync)));
    assert!((0..100_000).any(|_| runs_here(CallerWork::Upload)));
    assert!((0..1_000).all(|_| !runs_here(CallerWork::Launch)));
}
