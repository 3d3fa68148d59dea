//! Helpers of the fault tests: clients with and without a fault plan, deterministic data,
//! buffers that know what they must hold, error classifiers and a deadlock guard.

use cubert_cpu::fault::FaultPlan;
use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::{ComputeClient, Handle, IoError, LaunchError, ServerError};
use std::sync::mpsc;
use std::time::Duration;

pub type Client = ComputeClient<CpuRuntime>;

pub const KIB: usize = 1 << 10;
pub const MIB: usize = 1 << 20;

pub fn config() -> CubertConfig {
    let mut config = CubertConfig::default();
    config.cpu.devices = 4;
    config
}

pub fn faulty_client(plan: &FaultPlan, device: u32, mode: DeviceHandleMode) -> Client {
    let server = CpuServer::with_fault_plan(CpuDevice::new(device), &config(), plan.clone())
        .expect("a CPU server starts");
    ComputeClient::from_server(server, mode).expect("a CPU client starts")
}

pub fn clean_client(device: u32) -> Client {
    let server = CpuServer::new(CpuDevice::new(device), &config()).expect("a CPU server starts");
    ComputeClient::from_server(server, DeviceHandleMode::Threaded).expect("a CPU client starts")
}

/// `len` pseudo-random bytes from `seed`.
pub fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A buffer and the bytes it must hold.
pub struct Kept {
    pub handle: Handle,
    pub bytes: Vec<u8>,
}

impl Kept {
    pub fn create(client: &Client, seed: u64, len: usize) -> Self {
        let bytes = data(seed, len);
        let handle = client.create_from_slice(&bytes).unwrap();
        Self { handle, bytes }
    }

    pub fn check(&self, client: &Client, what: &str) {
        let read = client
            .read_one(self.handle.clone())
            .unwrap_or_else(|error| panic!("{what}: reading a live buffer failed: {error}"));
        assert!(
            read[..] == self.bytes[..],
            "{what}: a live buffer was corrupted"
        );
    }
}

pub fn is_out_of_memory(error: &ServerError) -> bool {
    matches!(error, ServerError::Io(IoError::OutOfMemory { .. }))
}

pub fn is_not_found(error: &ServerError) -> bool {
    matches!(
        error,
        ServerError::Io(IoError::NotFound { .. })
            | ServerError::Launch(LaunchError::IoError(IoError::NotFound { .. }))
    )
}

/// Runs `work` on its own thread; fails if it takes longer than `limit` (a deadlock).
pub fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    match receiver.recv_timeout(limit) {
        Ok(value) => {
            worker.join().unwrap();
            value
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => panic!("the worker ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("no result within {limit:?}: deadlock"),
    }
}
