//! Reads into memory the caller owns: `read_into` (a whole handle or view) and
//! `read_tensor_into` (a strided region, gathered dense), ordered on the stream like
//! `read`; a destination of the wrong length is refused and left untouched. And reads
//! collected later: `read_lazy`.

use crate::backend::TestBackend;
use crate::support::client;
use cubert_runtime::{Bytes, IoError, ServerError, ops};

/// The bytes land in the caller's buffer after the work queued before the read, and the
/// same buffer serves the next read.
pub fn read_into_fills_the_callers_buffer_after_queued_work<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.create(Bytes::from_elems(vec![1u32; 1000])).unwrap();
    let mut out = vec![0u8; 4000];
    ops::fill(&client, &handle, 1000, 7u32).unwrap();
    client.read_into(handle.clone(), &mut out).unwrap();
    assert!(
        bytemuck::cast_slice::<u8, u32>(&out)
            .iter()
            .all(|&v| v == 7)
    );
    let data: Vec<u32> = (0..1000).collect();
    client
        .write(&handle, Bytes::from_elems(data.clone()))
        .unwrap();
    client.read_into(handle, &mut out).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, u32>(&out), data.as_slice());
}

/// A large read (48 MiB, copied on several threads where the backend copies) matches
/// `read_one`, and a view reads only its bytes.
pub fn read_into_of_a_large_buffer_or_a_view_matches_read_one<B: TestBackend>() {
    let client = client::<B>();
    let data: Vec<u32> = (0..12u32 << 20)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let handle = client.create(Bytes::from_elems(data)).unwrap();
    let mut out = vec![0u8; 48 << 20];
    client.read_into(handle.clone(), &mut out).unwrap();
    assert!(out == client.read_one(handle.clone()).unwrap().to_vec());
    let view = handle.view(4096, 100).unwrap();
    let mut small = vec![0u8; 100];
    client.read_into(view.clone(), &mut small).unwrap();
    assert_eq!(small, client.read_one(view).unwrap().to_vec());
}

/// `read_tensor_into` gathers a strided region (a 2 x 3 block of a 4 x 5 matrix) dense.
pub fn read_tensor_into_gathers_a_strided_region<B: TestBackend>() {
    let client = client::<B>();
    let handle = client
        .create(Bytes::from_elems((0..20u32).collect::<Vec<_>>()))
        .unwrap();
    let block = handle.view(7 * 4, (20 - 7) * 4).unwrap();
    let descriptor = block.copy_descriptor([2, 3], [5, 1], 4);
    let mut out = vec![0u8; 24];
    client.read_tensor_into(descriptor, &mut out).unwrap();
    assert_eq!(
        bytemuck::cast_slice::<u8, u32>(&out),
        &[7, 8, 9, 12, 13, 14]
    );
}

/// A destination shorter or longer than the data is refused before anything is read, and
/// keeps its bytes.
pub fn read_into_a_buffer_of_the_wrong_length_is_refused_and_untouched<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.create(Bytes::from_elems(vec![3u8; 64])).unwrap();
    for len in [0usize, 63, 65] {
        let mut out = vec![0xABu8; len];
        match client.read_into(handle.clone(), &mut out) {
            Err(ServerError::Io(IoError::InvalidArgument { .. })) => {}
            other => panic!("{len} bytes: expected InvalidArgument, got {other:?}"),
        }
        assert!(out.iter().all(|&b| b == 0xAB), "{len} bytes: written");
    }
    // The client still reads.
    let mut out = vec![0u8; 64];
    client.read_into(handle, &mut out).unwrap();
    assert_eq!(out, vec![3u8; 64]);
}

/// A lazy read sees the work queued before it and not the work queued after, though its
/// bytes are collected after both; `is_ready` turns true without waiting once the stream
/// has passed it, and the bytes come once.
pub fn lazy_read_is_ordered_when_made_and_collected_later<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.create(Bytes::from_elems(vec![0u32; 256])).unwrap();
    ops::fill(&client, &handle, 256, 7u32).unwrap();
    let mut pending = client.read_lazy(vec![handle.clone()]);
    ops::fill(&client, &handle, 256, 9u32).unwrap();
    client.sync().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !pending.is_ready() {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::yield_now();
    }
    let bytes = pending.wait().unwrap();
    assert_eq!(bytes[0].to_elems::<u32>(), vec![7u32; 256]);
    let later = client.read_lazy(vec![handle]);
    assert_eq!(later.wait().unwrap()[0].to_elems::<u32>(), vec![9u32; 256]);
}
