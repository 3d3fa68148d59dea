//! Which work the wgpu backend runs on an idle device's calling thread
//! (`ComputeServer::CALLER_WORK`): allocations, syncs and reads, host bookkeeping and a
//! submit, and the first launch after a sync (so that a launch + sync round trip stays on the
//! caller); never uploads (a write of partial words waits for the GPU, which `create` must
//! not make its caller do) nor the launches after the first. Ignored by default like the
//! behaviour suite (it needs a wgpu adapter; CI runs it on lavapipe).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cubert_runtime::ComputeClient;
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::server::CallerWork;
use cubert_test_suite::support::{
    assert_first_launch_after_a_wait_runs_on_the_caller, runs_on_caller,
};
use cubert_wgpu::{WgpuDevice, WgpuRuntime, WgpuServer};

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn an_idle_wgpu_device_runs_allocations_syncs_reads_and_a_first_launch_on_the_caller_and_uploads_on_its_runner()
 {
    let server = WgpuServer::new(WgpuDevice::new(0), &CubertConfig::default()).expect("an adapter");
    let client: ComputeClient<WgpuRuntime> =
        ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap();
    assert!(runs_on_caller(&client, CallerWork::Allocation, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Sync, 100_000));
    assert!(!runs_on_caller(&client, CallerWork::Upload, 1_000));
    assert!(runs_on_caller(&client, CallerWork::Read, 100_000));
    assert_first_launch_after_a_wait_runs_on_the_caller(&client);
    // And the allocations made there serve uploads and reads as before.
    let data: Vec<u8> = (0..=255).collect();
    let empty = client.empty(1 << 20).unwrap();
    let handle = client.create_from_slice(&data).unwrap();
    client.sync().unwrap();
    assert_eq!(client.read_one(handle).unwrap().to_vec(), data);
    drop(empty);
}
