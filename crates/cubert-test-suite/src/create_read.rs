//! Uploading bytes and reading them back: `create`, `create_from_slice`, `read`,
//! `read_async`, `read_one`, views, and `get_resource`.

use crate::backend::{ClientOptions, TestBackend};
use crate::support::{SeededRng, client_in, client_with};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::future::block_on;
use cubert_runtime::{Bytes, ElemType, ops};

fn create_then_read_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let mut rng = SeededRng::new(1);
    let floats = rng.f32s(1000, 100.0);
    let odd = rng.bytes(13);
    let from_elems = client.create(Bytes::from_elems(floats.clone())).unwrap();
    let from_slice = client.create_from_slice(&odd).unwrap();
    assert_eq!(from_elems.size(), 4000, "{mode:?}");
    assert_eq!(from_slice.size(), 13, "{mode:?}");
    assert_eq!(from_elems.device(), client.device_id());
    assert!(client.owns(&from_slice));
    let read = client
        .read(vec![from_elems.clone(), from_slice.clone()])
        .unwrap();
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].to_elems::<f32>(), floats, "{mode:?}");
    assert_eq!(&read[1][..], &odd[..], "{mode:?}");
    let one = client.read_one(from_slice).unwrap();
    assert_eq!(one.to_vec(), odd, "{mode:?}");
}

in_both_modes!(
    /// `create` and `create_from_slice` upload exactly the given bytes; `read` and
    /// `read_one` return them.
    create_then_read_returns_the_same_bytes_threaded,
    create_then_read_returns_the_same_bytes_inline => create_then_read_in
);

fn read_async_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let mut rng = SeededRng::new(2);
    let data: Vec<Vec<u8>> = (0..4).map(|i| rng.bytes(100 + i * 37)).collect();
    let handles: Vec<_> = data
        .iter()
        .map(|bytes| client.create_from_slice(bytes).unwrap())
        .collect();
    // Every read is issued before any is awaited.
    let futures: Vec<_> = handles
        .iter()
        .map(|handle| client.read_async(vec![handle.clone()]))
        .collect();
    let all = client.read_async(handles.clone());
    for (future, expected) in futures.into_iter().zip(&data) {
        let bytes = block_on(future).unwrap();
        assert_eq!(bytes.len(), 1);
        assert_eq!(&bytes[0][..], &expected[..], "{mode:?}");
    }
    let all = block_on(all).unwrap();
    assert_eq!(all.len(), data.len());
    for (bytes, expected) in all.iter().zip(&data) {
        assert_eq!(&bytes[..], &expected[..], "{mode:?}");
    }
}

in_both_modes!(
    /// Several `read_async` futures issued before any is awaited all resolve to the right
    /// bytes, in the order of their handles.
    read_async_futures_resolve_to_the_created_bytes_threaded,
    read_async_futures_resolve_to_the_created_bytes_inline => read_async_in
);

fn reads_see_launches_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let mut rng = SeededRng::new(3);
    let input = rng.f32s(3000, 10.0);
    let source = client.create(Bytes::from_slice(&input)).unwrap();
    let target = client.empty(3000 * 4).unwrap();
    ops::fill(&client, &target, 3000, -1.5f32).unwrap();
    assert_eq!(
        client.read_one(target.clone()).unwrap().to_elems::<f32>(),
        vec![-1.5; 3000]
    );
    ops::copy(&client, &source, &target, 3000, ElemType::F32).unwrap();
    ops::add(&client, &target, &source, &target, 3000, ElemType::F32).unwrap();
    let expected: Vec<f32> = input.iter().map(|x| x + x).collect();
    assert_eq!(
        client.read_one(target).unwrap().to_elems::<f32>(),
        expected,
        "{mode:?}"
    );
}

in_both_modes!(
    /// A read runs after every launch queued before it on the stream: fill, copy and add
    /// issued without syncing are all visible.
    read_sees_every_launch_queued_before_it_threaded,
    read_sees_every_launch_queued_before_it_inline => reads_see_launches_in
);

/// A read of a view returns exactly the view's bytes.
pub fn read_of_a_view_returns_only_its_bytes<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let data = SeededRng::new(4).bytes(256);
    let handle = client.create_from_slice(&data).unwrap();
    let view = handle.view(40, 100).unwrap();
    assert_eq!((view.offset_start(), view.offset_end()), (40, 140));
    assert_eq!(view.id(), handle.id());
    assert_eq!(
        client.read_one(view.clone()).unwrap().to_vec(),
        data[40..140].to_vec()
    );
    let inner = view.view(10, 5).unwrap();
    assert_eq!(
        client.read_one(inner).unwrap().to_vec(),
        data[50..55].to_vec()
    );
}

/// Buffers large enough for the large pool (and odd sizes) round-trip exactly.
pub fn large_and_odd_sized_buffers_round_trip<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let mut rng = SeededRng::new(5);
    for size in [1usize, 7, 511, 513, 4097, 3 << 20] {
        let data = rng.bytes(size);
        let handle = client.create(Bytes::from_bytes_vec(data.clone())).unwrap();
        assert_eq!(handle.size(), size as u64);
        let read = client.read_one(handle).unwrap();
        assert_eq!(read.len(), size);
        assert!(
            read[..] == data[..],
            "{size} bytes differ after a round trip"
        );
    }
}

/// `get_resource` resolves a handle (and a view) to storage covering exactly its bytes,
/// and the resource keeps the memory alive after the handle is dropped.
pub fn get_resource_covers_exactly_the_handle_bytes<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let handle = client
        .create_from_slice(&SeededRng::new(6).bytes(1000))
        .unwrap();
    let resource = client.get_resource(handle.clone()).unwrap();
    assert_eq!(B::resource_len(resource.resource()), 1000);
    let view = handle.view(100, 300).unwrap();
    let resource_of_view = client.get_resource(view).unwrap();
    assert_eq!(B::resource_len(resource_of_view.resource()), 300);
    drop(handle);
    let usage = crate::support::settled_usage::<B>(&client);
    assert_eq!(
        usage.number_allocs, 1,
        "the resources keep the allocation alive"
    );
    drop(resource);
    drop(resource_of_view);
    let usage = crate::support::settled_usage::<B>(&client);
    assert_eq!(
        usage.number_allocs, 0,
        "the allocation is freed with its last resource"
    );
}

/// The client methods work the same on a client built in either mode (sanity of the
/// options plumbing): `is_blocking` reports the mode.
pub fn is_blocking_reports_the_device_handle_mode<B: TestBackend>() {
    for mode in crate::support::MODES {
        let client = client_with::<B>(&ClientOptions::new().with_mode(mode));
        assert_eq!(client.is_blocking(), mode == DeviceHandleMode::Inline);
        assert_eq!(client.device_handle().mode(), mode);
    }
}

/// `read_one_unchecked` returns the bytes; its tensor form panics, naming the error, on a
/// descriptor that leaves the memory (the `_unchecked` reads panic instead of returning).
pub fn unchecked_reads_return_the_bytes_and_panic_on_failure<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let handle = client.create(Bytes::from_elems(vec![7u16; 10])).unwrap();
    assert_eq!(
        client.read_one_unchecked(handle.clone()).to_elems::<u16>(),
        vec![7u16; 10]
    );
    let outside = handle.copy_descriptor([4, 4], [8, 1], 2);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.read_one_unchecked_tensor(outside)
    }));
    let message = panicked.expect_err("a read outside the memory panics");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("read_one_unchecked_tensor"), "{text}");
    client.sync().unwrap();
}

/// `properties_mut` gives nothing while the properties are shared (the server holds them).
pub fn properties_mut_is_none_while_the_properties_are_shared<B: TestBackend>() {
    let mut client = crate::support::client::<B>();
    assert!(client.properties_mut().is_none());
}
