//! Writing into existing memory: `write` (a handle or view), `write_range` (a byte range)
//! and `write_tensor` (a strided region), ordered on the client's stream like launches;
//! bad writes are refused before anything is queued and change nothing. `copy` moves one
//! handle's bytes into another of the same device, ordered the same way.

use crate::backend::TestBackend;
use crate::support::client;
use cubert_runtime::{Bytes, ElemType, IoError, ops};

/// A write replaces a handle's bytes and is ordered with launches on the stream: a fill
/// before it is overwritten, a fill after it overwrites it.
pub fn write_replaces_the_bytes_in_stream_order<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.create(Bytes::from_elems(vec![1u32; 64])).unwrap();
    let data: Vec<u32> = (0..64).collect();
    ops::fill(&client, &handle, 64, 7u32).unwrap();
    client
        .write(&handle, Bytes::from_elems(data.clone()))
        .unwrap();
    assert_eq!(
        client.read_one(handle.clone()).unwrap().to_elems::<u32>(),
        data
    );
    client
        .write(&handle, Bytes::from_elems(vec![5u32; 64]))
        .unwrap();
    ops::fill(&client, &handle, 64, 9u32).unwrap();
    assert_eq!(
        client.read_one(handle).unwrap().to_elems::<u32>(),
        vec![9u32; 64]
    );
}

/// Writing a view or a byte range changes only those bytes.
pub fn write_to_a_view_or_range_changes_only_those_bytes<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.create(Bytes::from_elems(vec![0u8; 32])).unwrap();
    let view = handle.view(8, 4).unwrap();
    client
        .write(&view, Bytes::from_elems(vec![1u8, 2, 3, 4]))
        .unwrap();
    client
        .write_range(&handle, 30, Bytes::from_elems(vec![9u8, 9]))
        .unwrap();
    let mut want = vec![0u8; 32];
    want[8..12].copy_from_slice(&[1, 2, 3, 4]);
    want[30..].copy_from_slice(&[9, 9]);
    assert_eq!(client.read_one(handle).unwrap().to_vec(), want);
}

/// `write_tensor` fills a strided region (a 2 x 3 block of a 4 x 5 matrix of `u32`) and
/// leaves the rest alone.
pub fn write_tensor_fills_a_strided_region<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.create(Bytes::from_elems(vec![0u32; 20])).unwrap();
    // Rows 1..3, columns 2..5: starts at element 1 * 5 + 2.
    let block = handle.view(7 * 4, (20 - 7) * 4).unwrap();
    let descriptor = block.copy_descriptor([2, 3], [5, 1], 4);
    client
        .write_tensor(descriptor, Bytes::from_elems(vec![1u32, 2, 3, 4, 5, 6]))
        .unwrap();
    let mut want = vec![0u32; 20];
    want[7..10].copy_from_slice(&[1, 2, 3]);
    want[12..15].copy_from_slice(&[4, 5, 6]);
    assert_eq!(client.read_one(handle).unwrap().to_elems::<u32>(), want);
}

/// Writes whose data doesn't fit, ranges past the end and strides leaving the memory are
/// refused with `InvalidArgument`, and the memory keeps its bytes.
pub fn bad_writes_are_refused_and_change_nothing<B: TestBackend>() {
    let client = client::<B>();
    let original: Vec<u32> = (100..116).collect();
    let handle = client.create(Bytes::from_elems(original.clone())).unwrap();
    let refused = |result: Result<(), IoError>, what: &str| match result {
        Err(IoError::InvalidArgument { .. }) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    refused(
        client.write(&handle, Bytes::from_elems(vec![0u32; 15])),
        "short data",
    );
    refused(
        client.write(&handle, Bytes::from_elems(vec![0u32; 17])),
        "long data",
    );
    refused(
        client.write_range(&handle, 60, Bytes::from_elems(vec![0u32; 2])),
        "a range past the end",
    );
    let past = handle.clone().copy_descriptor([4, 4], [8, 1], 4);
    refused(
        client.write_tensor(past, Bytes::from_elems(vec![0u32; 16])),
        "strides leaving the memory",
    );
    let fits = handle.clone().copy_descriptor([2, 2], [4, 1], 4);
    refused(
        client.write_tensor(fits, Bytes::from_elems(vec![0u32; 3])),
        "data of the wrong size for the region",
    );
    client.sync().unwrap();
    assert_eq!(client.read_one(handle).unwrap().to_elems::<u32>(), original);
}

/// A copy between two handles is ordered on the stream like a launch: it sees a fill
/// queued before it, and a launch queued after it sees the copied bytes; copies of views
/// change only the destination view. A large copy (48 MiB, the CPU's multi-threaded path,
/// wgpu's copy kernel) arrives whole, and so do large copies between two ranges of one
/// handle, on 16-byte boundaries and off them (wgpu: kernel and driver copy).
pub fn copy_moves_bytes_between_handles_in_stream_order<B: TestBackend>() {
    let client = client::<B>();
    let source = client.create(Bytes::from_elems(vec![1u32; 64])).unwrap();
    let destination = client.create(Bytes::from_elems(vec![0u32; 64])).unwrap();
    ops::fill(&client, &source, 64, 7u32).unwrap();
    client.copy(&source, &destination).unwrap();
    ops::add(
        &client,
        &destination,
        &destination,
        &source,
        64,
        ElemType::U32,
    )
    .unwrap();
    assert_eq!(
        client
            .read_one(destination.clone())
            .unwrap()
            .to_elems::<u32>(),
        vec![7u32; 64]
    );
    assert_eq!(
        client.read_one(source.clone()).unwrap().to_elems::<u32>(),
        vec![14u32; 64]
    );
    // Elements 8..16 of the source onto elements 0..8 of the destination.
    let numbers = client
        .create(Bytes::from_elems((0..64u32).collect::<Vec<_>>()))
        .unwrap();
    client
        .copy(
            &numbers.view(32, 32).unwrap(),
            &destination.view(0, 32).unwrap(),
        )
        .unwrap();
    let mut want = vec![7u32; 64];
    want[..8].copy_from_slice(&[8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(
        client.read_one(destination).unwrap().to_elems::<u32>(),
        want
    );
    let len = 12 << 20;
    let big: Vec<u32> = (0..len as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let big_source = client.create(Bytes::from_elems(big.clone())).unwrap();
    let big_destination = client.empty(len * 4).unwrap();
    ops::copy(&client, &big_source, &big_destination, len, ElemType::U32).unwrap();
    assert!(client.read_one(big_destination).unwrap().to_elems::<u32>() == big);
    // Words [0, 1 Mi) onto [2 Mi, 3 Mi), then words [1, 1 Mi + 2) onto [4 Mi + 1, 5 Mi + 3),
    // all in the one handle.
    let mi = 1usize << 20;
    let ranges = [(0, 2 * mi, mi), (1, 4 * mi + 1, mi + 2)];
    let mut want = big.clone();
    for (from, to, words) in ranges {
        client
            .copy(
                &big_source.view(from as u64 * 4, words as u64 * 4).unwrap(),
                &big_source.view(to as u64 * 4, words as u64 * 4).unwrap(),
            )
            .unwrap();
        want.copy_within(from..from + words, to);
    }
    assert!(client.read_one(big_source).unwrap().to_elems::<u32>() == want);
}

/// Copies between handles of different sizes or views that overlap without being the same
/// are refused with `InvalidArgument` before anything is queued; copying a view onto itself
/// does nothing; `ops::copy` between two apart ranges of one buffer copies them.
pub fn bad_copies_are_refused_and_change_nothing<B: TestBackend>() {
    let client = client::<B>();
    let original: Vec<u32> = (100..116).collect();
    let handle = client.create(Bytes::from_elems(original.clone())).unwrap();
    let other = client.create(Bytes::from_elems(vec![0u32; 8])).unwrap();
    let refused = |result: Result<(), IoError>, what: &str| match result {
        Err(IoError::InvalidArgument { .. }) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    refused(client.copy(&handle, &other), "sizes differ");
    refused(
        client.copy(&handle.view(0, 32).unwrap(), &handle.view(16, 32).unwrap()),
        "overlapping views",
    );
    client.copy(&handle, &handle).unwrap();
    client.sync().unwrap();
    assert_eq!(
        client.read_one(handle.clone()).unwrap().to_elems::<u32>(),
        original
    );
    assert_eq!(
        client.read_one(other).unwrap().to_elems::<u32>(),
        vec![0u32; 8]
    );
    // Elements 0..4 onto 8..12 of one buffer: apart, a memory copy.
    ops::copy(
        &client,
        &handle,
        &handle.view(32, 16).unwrap(),
        4,
        ElemType::U32,
    )
    .unwrap();
    let mut want = original.clone();
    want[8..12].copy_from_slice(&original[..4]);
    assert_eq!(client.read_one(handle).unwrap().to_elems::<u32>(), want);
}
