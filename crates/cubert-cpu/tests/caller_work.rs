//! Which work the CPU backend runs on an idle device's calling thread
//! (`ComputeServer::CALLER_WORK`): syncs, allocations and small uploads, never launches,
//! since a CPU launch runs the kernel and the caller would lose the overlap the runner gives.

#![allow(clippy::unwrap_used)]

use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::ComputeClient;
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::server::CallerWork;
use cubert_test_suite::support::runs_on_caller;

#[test]
fn an_idle_cpu_device_runs_all_but_launches_on_the_caller() {
    let server = CpuServer::new(CpuDevice::new(0), &CubertConfig::default()).unwrap();
    let client: ComputeClient<CpuRuntime> =
        ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap();
    assert!(runs_on_caller(&client, CallerWork::Sync, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Allocation, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Upload, 100_000));
    assert!(!runs_on_caller(&client, CallerWork::Launch, 1_000));
}
