//! Memory cubert did not allocate (`ComputeClient::import_memory`): used in place by writes,
//! kernels, copies and reads; given back through its release callback exactly once, after
//! the last handle (or view) is gone and the device is done with it; never counted as
//! reserved; bad imports refused with the callback run. Where
//! `Features::memory_import` is false (wgpu), every import is `Unsupported`.

use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::memory::ForeignMemory;
use cubert_runtime::{Bytes, ElemType, IoError, ServerError, ops};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the calls of release callbacks.
#[derive(Clone, Default)]
struct Releases(Arc<AtomicUsize>);

impl Releases {
    fn callback(&self) -> Box<dyn FnOnce() + Send> {
        let count = self.0.clone();
        Box::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
        })
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Waits (up to 10 s) until `expected` releases happened, syncing `client` so that its
    /// server drains the releases: a backend may give memory back on a helper thread.
    fn wait_for<B: TestBackend>(&self, client: &Client<B>, expected: usize) {
        let start = Instant::now();
        while self.count() < expected && start.elapsed() < Duration::from_secs(10) {
            client.sync().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(self.count(), expected, "release callbacks run");
    }
}

/// `size` bytes of foreign memory of `client`'s device, or `None` after checking that the
/// backend refuses imports as its features say.
fn foreign<B: TestBackend>(
    client: &Client<B>,
    size: u64,
    releases: &Releases,
) -> Option<ForeignMemory> {
    if !client.features().memory_import {
        assert!(B::foreign_memory(client, size, releases.callback()).is_none());
        let before = releases.count();
        let memory = ForeignMemory::new(4096, size, releases.callback());
        // SAFETY: refused before anything touches the (made-up) address.
        let refused = unsafe { client.import_memory(memory) };
        assert!(
            matches!(refused, Err(ServerError::Unsupported { .. })),
            "{refused:?}"
        );
        assert_eq!(releases.count(), before + 1, "a refused import is released");
        return None;
    }
    Some(B::foreign_memory(client, size, releases.callback()).expect("the backend imports"))
}

/// An imported buffer is written, read, added into and copied into in place, like a handle
/// cubert allocated; once dropped, its memory is released exactly once, after that work.
pub fn imported_memory_is_used_in_place_and_released_after_its_last_use<B: TestBackend>() {
    let client = client::<B>();
    let releases = Releases::default();
    let len = 1000usize;
    let Some(memory) = foreign::<B>(&client, (len * 4) as u64, &releases) else {
        return;
    };
    // SAFETY: the test backend's foreign memory is valid until its callback frees it, and
    // only cubert uses it.
    let imported = unsafe { client.import_memory(memory) }.unwrap();
    assert_eq!(imported.size(), (len * 4) as u64);
    let values: Vec<u32> = (0..len as u32).collect();
    client
        .write(&imported, Bytes::from_elems(values.clone()))
        .unwrap();
    let ones = client.create(Bytes::from_elems(vec![1u32; len])).unwrap();
    let sum = client.empty(len * 4).unwrap();
    ops::add(&client, &imported, &ones, &sum, len, ElemType::U32).unwrap();
    // The sum back into the imported memory, by a copy.
    client.copy(&sum, &imported).unwrap();
    ops::add(&client, &imported, &ones, &sum, len, ElemType::U32).unwrap();
    let read = client.read_one(imported.clone()).unwrap().to_elems::<u32>();
    assert_eq!(read, values.iter().map(|v| v + 1).collect::<Vec<_>>());
    let twice = client.read_one(sum).unwrap().to_elems::<u32>();
    assert_eq!(twice, values.iter().map(|v| v + 2).collect::<Vec<_>>());
    assert_eq!(releases.count(), 0, "released while a handle lives");
    drop(imported);
    releases.wait_for::<B>(&client, 1);
    // Nothing is released twice, and the device keeps working.
    client.sync().unwrap();
    drop(client);
    assert_eq!(releases.count(), 1);
}

/// A view keeps the imported memory as a handle does: it is released only once both are
/// gone.
pub fn imported_memory_lives_while_a_view_of_it_does<B: TestBackend>() {
    let client = client::<B>();
    let releases = Releases::default();
    let Some(memory) = foreign::<B>(&client, 4096, &releases) else {
        return;
    };
    // SAFETY: as above.
    let imported = unsafe { client.import_memory(memory) }.unwrap();
    client
        .write(&imported, Bytes::from_elems(vec![7u8; 4096]))
        .unwrap();
    let view = imported.view(1024, 16).unwrap();
    drop(imported);
    client.sync().unwrap();
    assert_eq!(releases.count(), 0, "released while a view lives");
    assert_eq!(
        client.read_one(view.clone()).unwrap().to_vec(),
        vec![7u8; 16]
    );
    drop(view);
    releases.wait_for::<B>(&client, 1);
}

/// Imported bytes are not cubert's: reserved and in-use bytes don't change with an
/// import, and the cap on reserved memory doesn't refuse one.
pub fn imported_bytes_count_in_no_usage_figure<B: TestBackend>() {
    let client = client::<B>();
    let releases = Releases::default();
    let Some(memory) = foreign::<B>(&client, 8 << 20, &releases) else {
        return;
    };
    let before = client.memory_usage().unwrap();
    client.set_memory_cap(Some(1 << 20)).unwrap();
    // SAFETY: as above.
    let imported = unsafe { client.import_memory(memory) }.unwrap();
    client.sync().unwrap();
    let during = client.memory_usage().unwrap();
    assert_eq!(during.bytes_reserved, before.bytes_reserved);
    assert_eq!(during.bytes_in_use, before.bytes_in_use);
    client.set_memory_cap(None).unwrap();
    drop(imported);
    releases.wait_for::<B>(&client, 1);
}

/// A zero size or address, a misaligned address and (on CUDA) memory the driver doesn't
/// know as this device's are refused with `InvalidArgument` and released at once; the
/// client keeps working.
pub fn bad_imports_are_refused_and_released<B: TestBackend>() {
    let client = client::<B>();
    let releases = Releases::default();
    let refused = |memory: ForeignMemory| {
        // SAFETY: every one of these is refused before its address is used.
        let result = unsafe { client.import_memory(memory) };
        assert!(
            matches!(
                result,
                Err(ServerError::Io(IoError::InvalidArgument { .. }))
            ),
            "{result:?}"
        );
    };
    refused(ForeignMemory::new(4096, 0, releases.callback()));
    refused(ForeignMemory::new(0, 64, releases.callback()));
    assert_eq!(releases.count(), 2);
    let Some(memory) = foreign::<B>(&client, 4096, &releases) else {
        return;
    };
    refused(ForeignMemory::new(
        memory.address() + 1,
        64,
        releases.callback(),
    ));
    assert_eq!(releases.count(), 3);
    // The real memory still imports and works after the refusals.
    // SAFETY: as above.
    let imported = unsafe { client.import_memory(memory) }.unwrap();
    client
        .write(&imported, Bytes::from_elems(vec![3u16; 2048]))
        .unwrap();
    assert_eq!(
        client.read_one(imported.clone()).unwrap().to_elems::<u16>(),
        vec![3u16; 2048]
    );
    drop(imported);
    releases.wait_for::<B>(&client, 4);
}
