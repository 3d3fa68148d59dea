//! `to_client` ordering: the copy reads the source after the work queued before it on the
//! source stream, later work on the source can't change the copy, and the new handle is
//! ready for any stream of the destination. On backends with direct copies (GPUs with peer
//! access, virtual CPU devices) these exercise the three-step peer handshake; elsewhere the
//! host round trip.

use crate::backend::{ClientOptions, TestBackend};
use crate::support::{SeededRng, bytes_of, read_elems, two_devices, upload, with_timeout};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::{ElemType, StreamId, ops};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

in_both_modes!(
    /// A kernel queued on the source stream just before `to_client` (nothing synced) has
    /// written what arrives on the other device.
    to_client_sees_the_kernels_queued_before_it_threaded,
    to_client_sees_the_kernels_queued_before_it_inline => queued_before_generic
);

fn queued_before_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new().with_mode(mode)) else {
        return;
    };
    with_timeout(LIMIT, "to_client after a kernel", move || {
        let len = 1 << 20;
        let source = first.empty(len * 4).unwrap();
        ops::fill(&first, &source, len, 7.5f32).unwrap();
        let copy = first.to_client(source, &second, ElemType::F32).unwrap();
        let values = read_elems::<B, f32>(&second, &copy);
        assert!(values.iter().all(|v| *v == 7.5), "the copy missed the fill");
    });
}

in_both_modes!(
    /// Rewriting the source right after `to_client` returns (a kernel queued on the source
    /// stream, nothing synced) leaves the copy with the bytes from before.
    source_rewritten_after_to_client_leaves_the_copy_intact_threaded,
    source_rewritten_after_to_client_leaves_the_copy_intact_inline => rewritten_generic
);

fn rewritten_generic<B: TestBackend>(mode: DeviceHandleMode) {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new().with_mode(mode)) else {
        return;
    };
    with_timeout(LIMIT, "rewrite after to_client", move || {
        let values = SeededRng::new(300).f32s(4 << 20, 1000.0);
        let source = upload::<B, f32>(&first, &values);
        let copy = first
            .to_client(source.clone(), &second, ElemType::F32)
            .unwrap();
        ops::fill(&first, &source, values.len(), -1.0f32).unwrap();
        drop(source);
        // Memory freed by the drop may be reused at once by new work on the source.
        let reuse = first.empty(values.len() * 4).unwrap();
        ops::fill(&first, &reuse, values.len(), -2.0f32).unwrap();
        assert_eq!(read_elems::<B, f32>(&second, &copy), values);
        assert!(
            read_elems::<B, f32>(&first, &reuse)
                .iter()
                .all(|v| *v == -2.0)
        );
    });
}

/// The copy is ready for work on a stream of the destination other than the one it
/// arrived on, and for a copy back to the source device.
pub fn copy_is_ready_on_every_stream_of_the_destination<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    let arrival = second.with_stream(StreamId::new((1 << 41) + 1));
    let other = second.with_stream(StreamId::new((1 << 41) + 2));
    let values: Vec<u32> = (0..(3u32 << 20))
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let source = first.create_from_slice(&bytes_of(&values)).unwrap();
    let copy = first.to_client(source, &arrival, ElemType::U32).unwrap();
    let doubled = other.empty(copy.size() as usize).unwrap();
    ops::add(&other, &copy, &copy, &doubled, values.len(), ElemType::U32).unwrap();
    let want: Vec<u32> = values.iter().map(|v| v.wrapping_add(*v)).collect();
    assert_eq!(read_elems::<B, u32>(&other, &doubled), want);
    let back = other.to_client(doubled, &first, ElemType::U32).unwrap();
    assert_eq!(read_elems::<B, u32>(&first, &back), want);
}
