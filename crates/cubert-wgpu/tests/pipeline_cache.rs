//! The on-disk pipeline cache: a server saves the driver's pipelines into the
//! `[compilation]` cache directory, and a later server of the same adapter starts from
//! that file and runs the same kernels correctly. Ignored by default like the behaviour
//! suite (it needs a wgpu adapter); adapters without a pipeline cache (Metal, DX12) say so
//! and pass.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::{Bytes, ComputeClient, ElemType, ops};
use cubert_wgpu::{WgpuDevice, WgpuRuntime, WgpuServer};
use std::path::Path;

/// A client of adapter 0 whose kernel caches live in `dir`.
fn client_caching_in(dir: &Path) -> ComputeClient<WgpuRuntime> {
    let mut config = CubertConfig::default();
    config.compilation.cache_dir = Some(dir.to_path_buf());
    let server = WgpuServer::new(WgpuDevice::new(0), &config).expect("a wgpu adapter");
    ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap()
}

/// Adds two vectors on `client` and checks the sum.
fn add_and_check(client: &ComputeClient<WgpuRuntime>) {
    let lhs = client
        .create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0]))
        .unwrap();
    let rhs = client
        .create(Bytes::from_elems(vec![10.0f32, 20.0, 30.0]))
        .unwrap();
    let out = client.empty(12).unwrap();
    ops::add(client, &lhs, &rhs, &out, 3, ElemType::F32).unwrap();
    let sum = client.read_one(out).unwrap().to_elems::<f32>();
    assert_eq!(sum, vec![11.0, 22.0, 33.0]);
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn pipelines_are_saved_on_sync_and_loaded_by_the_next_server() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_caching_in(dir.path());
    let Some(path) = client.info().pipeline_cache.clone() else {
        eprintln!("this adapter has no pipeline cache: nothing is kept on disk");
        return;
    };
    assert!(
        path.starts_with(dir.path()),
        "{} is not under the cache dir",
        path.display()
    );
    assert!(
        !path.exists(),
        "a fresh cache directory holds no pipelines yet"
    );
    add_and_check(&client);
    client.sync().unwrap();
    let saved = std::fs::metadata(&path)
        .expect("the sync saved the cache")
        .len();
    assert!(saved > 0, "the saved cache is empty");
    drop(client);

    let again = client_caching_in(dir.path());
    assert_eq!(again.info().pipeline_cache.as_deref(), Some(path.as_path()));
    add_and_check(&again);
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn a_corrupt_cache_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let probe = client_caching_in(dir.path());
    let Some(path) = probe.info().pipeline_cache.clone() else {
        eprintln!("this adapter has no pipeline cache: nothing is kept on disk");
        return;
    };
    drop(probe);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"not a pipeline cache, and far too short").unwrap();
    let client = client_caching_in(dir.path());
    add_and_check(&client);
    client.sync().unwrap();
    assert!(
        std::fs::metadata(&path).unwrap().len() > 40,
        "the sync replaced the file"
    );
}

#[test]
#[ignore = "needs a wgpu adapter (scripts/setup-vulkan installs Mesa's lavapipe)"]
fn no_file_is_written_with_the_disk_cache_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CubertConfig::default();
    config.compilation.cache_dir = Some(dir.path().to_path_buf());
    config.compilation.disk_cache = false;
    let server = WgpuServer::new(WgpuDevice::new(0), &config).expect("a wgpu adapter");
    let client: ComputeClient<WgpuRuntime> =
        ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap();
    assert!(client.info().pipeline_cache.is_none());
    add_and_check(&client);
    client.sync().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
