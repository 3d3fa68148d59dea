//! Host-side buffers: `reserve_staging`, `staging`, the pinned uploads, and file-backed
//! (memory-mapped) bytes.

use crate::backend::TestBackend;
use crate::support::{SeededRng, bytes_of, client};
use cubert_runtime::{AllocationProperty, Bytes, MemoryLayoutDescriptor};
use std::io::Write;

/// `reserve_staging` returns one writable buffer per requested size (none for none), and
/// a filled staging buffer uploads like any other bytes.
pub fn reserve_staging_returns_usable_buffers_of_the_requested_sizes<B: TestBackend>() {
    let client = client::<B>();
    assert!(client.reserve_staging(&[]).unwrap().is_empty());
    let sizes = [16usize, 1000, 1 << 20];
    let mut buffers = client.reserve_staging(&sizes).unwrap();
    assert_eq!(buffers.len(), sizes.len());
    for (buffer, size) in buffers.iter().zip(sizes) {
        assert_eq!(buffer.len(), size);
    }
    let data = SeededRng::new(110).bytes(1000);
    buffers[1].copy_from_slice(&data);
    let staged = buffers.swap_remove(1);
    let handle = client.create(staged).unwrap();
    assert!(client.read_one(handle).unwrap()[..] == data[..]);
}

/// A staging request larger than the host's memory is an out-of-memory error, never an
/// abort (it used to go through the infallible `Bytes::zeroed`).
pub fn huge_staging_request_is_an_out_of_memory_error<B: TestBackend>() {
    let client = client::<B>();
    let error = client.reserve_staging(&[16, 1 << 46]).unwrap_err();
    assert!(
        matches!(error, cubert_runtime::IoError::OutOfMemory { .. }),
        "{error}"
    );
    // The client is still usable.
    assert_eq!(client.reserve_staging(&[64]).unwrap()[0].len(), 64);
}

/// `create_from_slice_pinned` uploads the slice exactly.
pub fn create_from_slice_pinned_round_trips<B: TestBackend>() {
    let client = client::<B>();
    let data = SeededRng::new(111).bytes(70_001);
    let handle = client.create_from_slice_pinned(&data).unwrap();
    assert_eq!(handle.size(), 70_001);
    assert!(client.read_one(handle).unwrap()[..] == data[..]);
}

/// `create_tensors_from_slices_pinned` uploads every tensor into its layout.
pub fn create_tensors_from_slices_pinned_round_trips<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(112);
    let a = rng.f32s(8 * 3, 2.0);
    let b = rng.i32s(10, 99);
    let (a_bytes, b_bytes) = (bytes_of(&a), bytes_of(&b));
    let layouts = client
        .create_tensors_from_slices_pinned(vec![
            (MemoryLayoutDescriptor::optimized([8, 3], 4), &a_bytes[..]),
            (MemoryLayoutDescriptor::contiguous([10], 4), &b_bytes[..]),
        ])
        .unwrap();
    let read = client
        .read_tensor(vec![
            layouts[0]
                .memory
                .clone()
                .copy_descriptor([8, 3], layouts[0].strides.clone(), 4),
            layouts[1]
                .memory
                .clone()
                .copy_descriptor([10], layouts[1].strides.clone(), 4),
        ])
        .unwrap();
    assert_eq!(read[0].to_elems::<f32>(), a);
    assert_eq!(read[1].to_elems::<i32>(), b);
}

/// `staging` keeps every buffer's contents (it may move them to pinned memory), with and
/// without `file_only`; pinned buffers stay pinned.
pub fn staging_keeps_buffer_contents<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(113);
    let (a, b) = (rng.bytes(333), rng.bytes(4096));
    let mut buffers = vec![
        Bytes::from_bytes_vec(a.clone()),
        Bytes::from_bytes_vec(b.clone()),
    ];
    client.staging(buffers.iter_mut(), true);
    assert_eq!(buffers[0].to_vec(), a);
    assert_eq!(
        buffers[0].property(),
        AllocationProperty::Native,
        "file_only leaves heap buffers alone"
    );
    client.staging(buffers.iter_mut(), false);
    assert_eq!(buffers[0].to_vec(), a);
    assert_eq!(buffers[1].to_vec(), b);
    for buffer in &buffers {
        assert!(
            matches!(
                buffer.property(),
                AllocationProperty::Native | AllocationProperty::Pinned
            ),
            "{buffer:?}"
        );
    }
    let handle = client.create(buffers.pop().unwrap()).unwrap();
    assert!(client.read_one(handle).unwrap()[..] == b[..]);
}

/// File-backed bytes upload exactly the mapped range of the file, and the file is never
/// modified (even when the mapping is written to or staged).
pub fn file_backed_bytes_upload_their_range_and_leave_the_file_unchanged<B: TestBackend>() {
    let client = client::<B>();
    let contents = SeededRng::new(114).bytes(10_000);
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&contents).unwrap();
    file.flush().unwrap();
    let mapped = Bytes::from_file(file.path(), 1234, 5000).unwrap();
    assert_eq!(mapped.property(), AllocationProperty::File);
    let handle = client.create(mapped).unwrap();
    assert!(client.read_one(handle).unwrap()[..] == contents[1234..6234]);
    let mut staged = vec![Bytes::from_file(file.path(), 0, 100).unwrap()];
    staged[0][0] ^= 0xff;
    client.staging(staged.iter_mut(), true);
    assert!(matches!(
        staged[0].property(),
        AllocationProperty::File | AllocationProperty::Pinned
    ));
    let mut expected = contents[..100].to_vec();
    expected[0] ^= 0xff;
    assert_eq!(staged[0].to_vec(), expected);
    let handle = client.create(staged.pop().unwrap()).unwrap();
    assert_eq!(client.read_one(handle).unwrap().to_vec(), expected);
    assert!(
        std::fs::read(file.path()).unwrap() == contents,
        "the file changed"
    );
    assert!(Bytes::from_file(file.path(), 9_000, 2_000).is_err());
}
