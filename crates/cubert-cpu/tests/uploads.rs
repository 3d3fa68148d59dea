//! When `create_from_slice` returns on the CPU backend, which has no pinned memory: a small
//! slice is copied on the caller's thread and the call returns while the device is still
//! busy; a slice of `HEAP_COPIED_BELOW` bytes or more is read in place, so the call waits
//! for the device's queue to reach it. On an idle device uploads are written on the
//! caller's thread (`CallerWork::Upload`); mixed with queued ones from several threads,
//! every upload still reads back what was uploaded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cubert_cpu::{CpuKernel, CpuRuntime};
use cubert_runtime::client::HEAP_COPIED_BELOW;
use cubert_runtime::{ComputeClient, CubeCount, CubeDim, Handle, KernelArguments, Runtime};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A client whose device runs a kernel that blocks until the returned sender sends.
fn busy_device() -> (ComputeClient<CpuRuntime>, Sender<()>) {
    let client = CpuRuntime::client(&Default::default()).unwrap();
    let (release, released): (Sender<()>, Receiver<()>) = mpsc::channel();
    let released = Arc::new(Mutex::new(released));
    let kernel = CpuKernel::new("blocks", CubeDim::new_single(), move |_ctx| {
        let _ = released
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(60));
        Ok(())
    });
    let out = client.empty(4).unwrap();
    client
        .launch(
            kernel,
            CubeCount::new_single(),
            KernelArguments::new().with_buffers(vec![out.to_binding()]),
        )
        .unwrap();
    (client, release)
}

/// Starts `create_from_slice(data)` on another thread; the receiver gets its handle when
/// the call returns.
fn upload(client: &ComputeClient<CpuRuntime>, data: Vec<u8>) -> Receiver<Handle> {
    let (done, returned) = mpsc::channel();
    let client = client.clone();
    std::thread::spawn(move || {
        let _ = done.send(client.create_from_slice(&data).unwrap());
    });
    returned
}

#[test]
fn a_small_slice_upload_returns_while_the_device_is_busy() {
    let (client, release) = busy_device();
    let data: Vec<u8> = (0..100).collect();
    let returned = upload(&client, data.clone()).recv_timeout(Duration::from_secs(30));
    release.send(()).unwrap();
    let handle = returned.expect("the upload waited for the busy device");
    assert_eq!(client.read_one(handle).unwrap().to_vec(), data);
}

#[test]
fn a_large_slice_upload_waits_for_the_device_to_read_it() {
    let (client, release) = busy_device();
    let data = vec![5u8; HEAP_COPIED_BELOW];
    let returned = upload(&client, data.clone());
    assert!(
        returned.recv_timeout(Duration::from_millis(300)).is_err(),
        "the caller's memory is read in place, after the busy kernel"
    );
    release.send(()).unwrap();
    let handle = returned.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(client.read_one(handle).unwrap().to_vec(), data);
}

#[test]
fn uploads_written_on_the_caller_and_queued_ones_read_back_exactly_from_many_threads() {
    let client = CpuRuntime::client(&Default::default()).unwrap();
    // Keeps the runner busy now and then, so that some uploads queue behind it.
    let spin = CpuKernel::new("spins", CubeDim::new_single(), |_ctx| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(50) {
            std::hint::spin_loop();
        }
        Ok(())
    });
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let client = client.clone();
            let spin = spin.clone();
            scope.spawn(move || {
                let out = client.empty(4).unwrap();
                for round in 0..300u32 {
                    if round % 3 == thread % 3 {
                        client
                            .launch(
                                spin.clone(),
                                CubeCount::new_single(),
                                KernelArguments::new().with_buffers(vec![out.to_binding()]),
                            )
                            .unwrap();
                    }
                    let len = 1 + ((round * 977 + thread * 131) % 3000) as usize;
                    let data: Vec<u8> = (0..len)
                        .map(|i| (i as u32 ^ round ^ (thread << 5)) as u8)
                        .collect();
                    let handle = if round % 2 == 0 {
                        client.create_from_slice(&data).unwrap()
                    } else {
                        client
                            .create(cubert_runtime::Bytes::from_bytes_vec(data.clone()))
                            .unwrap()
                    };
                    assert_eq!(
                        client.read_one(handle).unwrap().to_vec(),
                        data,
                        "{thread} {round}"
                    );
                }
            });
        }
    });
}
