//! Which work the CPU backend runs on an idle device's calling thread
//! (`ComputeServer::CALLER_WORK`): syncs, allocations and small uploads, never launches nor
//! reads, since a CPU launch runs the kernel and a CPU read makes the copy, and the caller
//! would lose the overlap the runner gives (a lazy read's, for one).

#![allow(clippy::unwrap_used)]

use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::ComputeClient;
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::server::CallerWork;
use cubert_test_suite::support::runs_on_caller;

#[test]
fn an_idle_cpu_device_runs_all_but_launches_and_reads_on_the_caller() {
    let server = CpuServer::new(CpuDevice::new(0), &CubertConfig::default()).unwrap();
    let client: ComputeClient<CpuRuntime> =
        ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap();
    assert!(runs_on_caller(&client, CallerWork::Sync, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Allocation, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Upload, 100_000));
    assert!(!runs_on_caller(&client, CallerWork::Launch, 1_000));
    assert!(!runs_on_caller(&client, CallerWork::Read, 1_000));
}
