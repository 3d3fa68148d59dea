//! Helpers shared by the tests: clients, deterministic pseudo-random data, typed reads,
//! tolerances and deadlock guards.

use crate::backend::{Client, ClientOptions, TestBackend};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::memory::MemoryUsage;
use cubert_runtime::server::CallerWork;
use cubert_runtime::{Bytes, Handle};
use cubert_runtime::{ComputeClient, Runtime};
use std::sync::mpsc;
use std::time::Duration;

/// Whether `client`'s device ran a task of kind `work` on the calling thread in any of
/// `tries` tries (`DeviceHandle::submit_blocking_as`). The runner counts a message handled
/// just after answering it, so a device that runs `work` on its callers is found idle
/// within a few tries; one that doesn't never runs it here.
pub fn runs_on_caller<R: Runtime>(
    client: &ComputeClient<R>,
    work: CallerWork,
    tries: usize,
) -> bool {
    let handle = client.device_handle();
    let caller = std::thread::current().id();
    (0..tries).any(|_| {
        handle
            .submit_blocking_as(work, |_| std::thread::current().id())
            .is_ok_and(|thread| thread == caller)
    })
}

/// Checks the rule by which CUDA and wgpu run launches on an idle device's caller: the
/// first launch after the caller waited for the device (a sync or a read) is the caller's;
/// once a kernel was launched, the launches after it go to the runner until the caller
/// waits again. Panics where the rule doesn't hold.
pub fn assert_first_launch_after_a_wait_runs_on_the_caller<R: Runtime>(client: &ComputeClient<R>) {
    let waits: [(&str, &dyn Fn()); 2] = [
        ("sync", &|| client.sync().unwrap()),
        ("read", &|| {
            let scalar = client.create_from_slice(&[7u8; 4]).unwrap();
            assert_eq!(client.read_one(scalar).unwrap().to_vec(), vec![7u8; 4]);
        }),
    ];
    for (name, wait) in waits {
        cubert_runtime::ops::noop(client).unwrap();
        assert!(
            !runs_on_caller(client, CallerWork::Launch, 1_000),
            "a launch behind a launch ran on the caller"
        );
        wait();
        assert!(
            runs_on_caller(client, CallerWork::Launch, 100_000),
            "the first launch after a {name} did not run on the caller"
        );
    }
}

/// Both device handle modes, threaded first.
pub const MODES: [DeviceHandleMode; 2] = [DeviceHandleMode::Threaded, DeviceHandleMode::Inline];

/// A fresh client of `B` with `options`; panics if the backend can't open the device.
pub fn client_with<B: TestBackend>(options: &ClientOptions) -> Client<B> {
    B::fresh_client(options)
        .unwrap_or_else(|| panic!("the backend under test can't open a client with {options:?}"))
}

/// A fresh client of `B` on device 0 with default options.
pub fn client<B: TestBackend>() -> Client<B> {
    client_with::<B>(&ClientOptions::new())
}

/// A fresh client of `B` on device 0 in `mode`.
pub fn client_in<B: TestBackend>(mode: DeviceHandleMode) -> Client<B> {
    client_with::<B>(&ClientOptions::new().with_mode(mode))
}

/// Two fresh clients on devices 0 and 1 (with `options` otherwise), or `None` (after saying
/// so on standard error) when the backend has a single device.
pub fn two_devices<B: TestBackend>(options: &ClientOptions) -> Option<(Client<B>, Client<B>)> {
    if B::device_count_for_tests() < 2 {
        eprintln!("skipped: this test needs 2 devices, the backend has 1");
        return None;
    }
    let first = client_with::<B>(&options.clone().with_device(0));
    let second = client_with::<B>(&options.clone().with_device(1));
    Some((first, second))
}

/// Deterministic pseudo-random test data: a seeded `fastrand` generator and the draws the
/// tests make from it.
#[derive(Clone, Debug)]
pub struct SeededRng {
    rng: fastrand::Rng,
}

impl SeededRng {
    /// A generator seeded with `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.u64(..)
    }

    /// A value in `0..bound` (`bound` > 0; 0 is taken as 1).
    pub fn below(&mut self, bound: usize) -> usize {
        self.rng.usize(..bound.max(1))
    }

    /// A coin flip.
    pub fn coin(&mut self) -> bool {
        self.rng.bool()
    }

    /// A value in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.rng.f64()
    }

    /// `len` floats in `[-range, range)`, never all zero.
    pub fn f32s(&mut self, len: usize, range: f32) -> Vec<f32> {
        let mut values: Vec<f32> = (0..len)
            .map(|_| ((self.unit() * 2.0 - 1.0) as f32) * range)
            .collect();
        if let Some(first) = values.first_mut()
            && *first == 0.0
        {
            *first = range / 2.0;
        }
        values
    }

    /// `len` doubles in `[-range, range)`, never all zero.
    pub fn f64s(&mut self, len: usize, range: f64) -> Vec<f64> {
        let mut values: Vec<f64> = (0..len)
            .map(|_| (self.unit() * 2.0 - 1.0) * range)
            .collect();
        if let Some(first) = values.first_mut()
            && *first == 0.0
        {
            *first = range / 2.0;
        }
        values
    }

    /// `len` integers in `[-range, range]`, never all zero.
    pub fn i32s(&mut self, len: usize, range: i32) -> Vec<i32> {
        let span = (2 * i64::from(range) + 1) as u64;
        let mut values: Vec<i32> = (0..len)
            .map(|_| ((self.next_u64() % span) as i64 - i64::from(range)) as i32)
            .collect();
        if let Some(first) = values.first_mut()
            && *first == 0
        {
            *first = range.max(1);
        }
        values
    }

    /// `len` random bytes, never all zero.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut values: Vec<u8> = (0..len).map(|_| self.next_u64() as u8).collect();
        if let Some(first) = values.first_mut()
            && *first == 0
        {
            *first = 0xa5;
        }
        values
    }
}

/// Reads `handle` and views its bytes as elements of `T`.
pub fn read_elems<B: TestBackend, T: bytemuck::Pod>(client: &Client<B>, handle: &Handle) -> Vec<T> {
    client
        .read_one(handle.clone())
        .unwrap_or_else(|error| panic!("reading {handle:?} failed: {error}"))
        .to_elems::<T>()
}

/// Uploads `values` and returns the handle.
pub fn upload<B: TestBackend, T: bytemuck::Pod + Send + Sync>(
    client: &Client<B>,
    values: &[T],
) -> Handle {
    client
        .create(Bytes::from_slice(values))
        .unwrap_or_else(|error| panic!("uploading {} elements failed: {error}", values.len()))
}

/// Waits for queued work, then returns the memory usage.
pub fn settled_usage<B: TestBackend>(client: &Client<B>) -> MemoryUsage {
    client.sync().expect("sync before reading the memory usage");
    client.memory_usage().expect("memory_usage")
}

/// Asserts `|actual - expected| <= tolerance * scale` element by element, where `scale` is
/// given per element (the sum of magnitudes that went into it, for sums and products).
pub fn assert_close(actual: &[f64], expected: &[f64], scale: &[f64], tolerance: f64, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length differs");
    for (index, ((a, e), s)) in actual.iter().zip(expected).zip(scale).enumerate() {
        let allowed = tolerance * s.max(1e-30);
        assert!(
            (a - e).abs() <= allowed,
            "{what}: element {index} is {a}, expected {e} (allowed error {allowed})"
        );
    }
}

/// Runs `work` on its own thread and fails the test if it doesn't finish within `limit`
/// (a deadlock fails instead of hanging). A panic inside `work` is propagated.
pub fn with_timeout<T: Send + 'static>(
    limit: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    match receiver.recv_timeout(limit) {
        Ok(value) => {
            let _ = worker.join();
            value
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => panic!("{what}: the worker ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {limit:?}: deadlock or livelock")
        }
    }
}

/// Little-endian bytes of `values`.
pub fn bytes_of<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

/// Launches the standard elementwise `kernel` over `buffers` with the length word `len`
/// *without* the `ops` helpers' argument checks: how tests make a kernel run past its
/// buffers to exercise the device-side bounds checks.
pub fn launch_elementwise_unchecked<B: TestBackend>(
    client: &Client<B>,
    kernel: cubert_runtime::kernel::standard::StandardKernel,
    buffers: &[&Handle],
    info: Vec<u64>,
) -> Result<(), cubert_runtime::LaunchError> {
    use cubert_runtime::{CubeCount, KernelArguments, MetadataBindingInfo, Runtime};
    let kernel = B::R::standard_kernel(kernel)?;
    let arguments = KernelArguments::new()
        .with_buffers(buffers.iter().map(|handle| handle.to_binding()).collect())
        .with_info(MetadataBindingInfo::custom(info));
    client.launch(kernel, CubeCount::new_1d(4), arguments)
}
