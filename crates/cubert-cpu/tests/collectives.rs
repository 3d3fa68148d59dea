//! CPU-specific collective behaviour: how an inline device handle delivers results (at
//! `sync_collective`, which reports calls still missing their peers instead of waiting for
//! them), what a threaded handle orders by itself, what a dropped server leaves behind, and
//! what the CPU refuses (process groups). The backend-generic collective tests are in the
//! behaviour suite (`collectives::`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::distributed::ProcessGroup;
use cubert_runtime::server::ReduceOperation;
use cubert_runtime::{ComputeClient, DeviceId, ElemType, ServerError};
use cubert_test_suite::collectives::collective_lock;

fn client(index: u32, mode: DeviceHandleMode) -> ComputeClient<CpuRuntime> {
    let mut config = CubertConfig::default();
    config.cpu.devices = 4;
    let server = CpuServer::new(CpuDevice::new(index), &config).unwrap();
    ComputeClient::from_server(server, mode).unwrap()
}

fn pair(mode: DeviceHandleMode) -> (ComputeClient<CpuRuntime>, ComputeClient<CpuRuntime>) {
    (client(0, mode), client(1, mode))
}

fn ids(clients: &[&ComputeClient<CpuRuntime>]) -> Vec<DeviceId> {
    clients.iter().map(|client| client.device_id()).collect()
}

fn sum_into_place(
    client: &ComputeClient<CpuRuntime>,
    handle: &cubert_runtime::Handle,
    devices: Vec<DeviceId>,
) {
    client
        .all_reduce(
            handle.clone(),
            handle.clone(),
            ElemType::I32,
            devices,
            ReduceOperation::Sum,
        )
        .unwrap();
}

/// Inline: the first device's call returns at once (the same thread must make the second
/// device's); `sync_collective` before the second call says what is missing, after it
/// writes the result.
#[test]
fn inline_results_land_at_sync_collective_once_every_device_called() {
    let _lock = collective_lock();
    let (a, b) = pair(DeviceHandleMode::Inline);
    let devices = ids(&[&a, &b]);
    let on_a = a
        .create_from_slice(bytemuck::cast_slice(&[1i32, 2]))
        .unwrap();
    let on_b = b
        .create_from_slice(bytemuck::cast_slice(&[10i32, 20]))
        .unwrap();
    sum_into_place(&a, &on_a, devices.clone());
    let early = a.sync_collective().unwrap_err();
    assert!(early.to_string().contains("still wait"), "{early}");
    sum_into_place(&b, &on_b, devices);
    // The last device to call ran the reduction and has its result at once.
    assert_eq!(b.read_one(on_b).unwrap().to_elems::<i32>(), vec![11, 22]);
    a.sync_collective().unwrap();
    assert_eq!(a.read_one(on_a).unwrap().to_elems::<i32>(), vec![11, 22]);
}

/// Threaded: a device's later work is ordered after the collective without
/// `sync_collective` (its runner waits for the peers inside the call).
#[test]
fn threaded_results_are_ordered_before_later_work_without_sync() {
    let _lock = collective_lock();
    let (a, b) = pair(DeviceHandleMode::Threaded);
    let devices = ids(&[&a, &b]);
    let on_a = a
        .create_from_slice(bytemuck::cast_slice(&[5i32; 64]))
        .unwrap();
    let on_b = b
        .create_from_slice(bytemuck::cast_slice(&[7i32; 64]))
        .unwrap();
    sum_into_place(&a, &on_a, devices.clone());
    sum_into_place(&b, &on_b, devices);
    assert_eq!(a.read_one(on_a).unwrap().to_elems::<i32>(), vec![12; 64]);
    assert_eq!(b.read_one(on_b).unwrap().to_elems::<i32>(), vec![12; 64]);
}

/// A server dropped while its call waits for a peer leaves nothing behind: a new server of
/// the same device and its peer reduce correctly.
#[test]
fn dropped_server_with_a_waiting_call_leaves_the_group_clean() {
    let _lock = collective_lock();
    let a = client(0, DeviceHandleMode::Inline);
    let b = client(1, DeviceHandleMode::Inline);
    let devices = ids(&[&a, &b]);
    let stale = a
        .create_from_slice(bytemuck::cast_slice(&[100i32; 8]))
        .unwrap();
    sum_into_place(&a, &stale, devices.clone());
    drop(stale);
    drop(a);
    let a = client(0, DeviceHandleMode::Inline);
    let on_a = a
        .create_from_slice(bytemuck::cast_slice(&[1i32; 8]))
        .unwrap();
    let on_b = b
        .create_from_slice(bytemuck::cast_slice(&[2i32; 8]))
        .unwrap();
    sum_into_place(&b, &on_b, devices.clone());
    sum_into_place(&a, &on_a, devices);
    b.sync_collective().unwrap();
    a.sync_collective().unwrap();
    assert_eq!(b.read_one(on_b).unwrap().to_elems::<i32>(), vec![3; 8]);
    assert_eq!(a.read_one(on_a).unwrap().to_elems::<i32>(), vec![3; 8]);
}

/// A collective over a set with devices of another backend, or the members of a process
/// group, is refused: the CPU reduces among its own virtual devices only.
#[test]
fn process_groups_and_foreign_devices_are_refused() {
    let a = client(0, DeviceHandleMode::Threaded);
    let group = ProcessGroup::new(0, 2, "127.0.0.1:1").unwrap();
    let error = a.init_process_group(&group).unwrap_err();
    assert!(matches!(error, ServerError::Unsupported { .. }), "{error}");
    let handle = a.create_from_slice(&[0u8; 16]).unwrap();
    let error = a
        .all_reduce(
            handle.clone(),
            handle,
            ElemType::U8,
            vec![a.device_id(), DeviceId::new(1, 0)],
            ReduceOperation::Sum,
        )
        .unwrap_err();
    assert!(error.to_string().contains("not a CPU device"), "{error}");
}

/// `to_client` between virtual CPU devices is a direct copy (no host round trip through a
/// read).
#[test]
fn to_client_between_virtual_devices_is_direct() {
    let (a, b) = pair(DeviceHandleMode::Threaded);
    assert!(a.peer_copy_supported(&b));
    let data: Vec<u8> = (0..=255).cycle().take(1 << 20).collect();
    let source = a.create_from_slice(&data).unwrap();
    let copy = a.to_client(source, &b, ElemType::U8).unwrap();
    assert_eq!(b.read_one(copy).unwrap().to_vec(), data);
}
