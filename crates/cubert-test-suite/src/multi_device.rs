//! Several devices: `to_client`, `to_client_tensor`, and memory that stays per device.
//! These tests need two devices and say so (and return) when the backend has one.

use crate::backend::{ClientOptions, TestBackend};
use crate::support::{SeededRng, read_elems, settled_usage, two_devices, upload};
use cubert_runtime::{Bytes, CopyDescriptor, ElemType, IoError, ServerError, Strides, ops};

/// `to_client` copies a handle's bytes to the other device; the copy belongs to that device
/// and the source is unchanged.
pub fn to_client_copies_bytes_to_the_other_device<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    assert_ne!(first.device_id(), second.device_id());
    let values = SeededRng::new(100).f32s(10_000, 100.0);
    let source = upload::<B, f32>(&first, &values);
    let copy = first
        .to_client(source.clone(), &second, ElemType::F32)
        .unwrap();
    assert_eq!(copy.device(), second.device_id());
    assert!(second.owns(&copy));
    assert_eq!(copy.size(), source.size());
    assert_eq!(read_elems::<B, f32>(&second, &copy), values);
    // The copy is usable by kernels on its device.
    let doubled = second.empty(10_000 * 4).unwrap();
    ops::add(&second, &copy, &copy, &doubled, 10_000, ElemType::F32).unwrap();
    let expected: Vec<f32> = values.iter().map(|v| v + v).collect();
    assert_eq!(read_elems::<B, f32>(&second, &doubled), expected);
    assert_eq!(read_elems::<B, f32>(&first, &source), values);
}

/// `to_client_tensor` of a pitched tensor arrives dense and contiguous on the other device.
pub fn to_client_tensor_of_pitched_tensor_arrives_dense<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new().with_pitch_alignment(256))
    else {
        return;
    };
    let (rows, cols) = (5usize, 7usize);
    let values = SeededRng::new(101).i32s(rows * cols, 1000);
    let layout = first
        .create_tensor(Bytes::from_slice(&values), [rows, cols], 4)
        .unwrap();
    assert!(
        layout.strides[0] > cols,
        "the source should be pitched: {:?}",
        layout.strides
    );
    let descriptor = layout
        .memory
        .clone()
        .copy_descriptor([rows, cols], layout.strides.clone(), 4);
    let copy = first
        .to_client_tensor(descriptor, &second, ElemType::I32)
        .unwrap();
    assert_eq!(copy.size(), (rows * cols * 4) as u64);
    assert_eq!(copy.device(), second.device_id());
    assert_eq!(read_elems::<B, i32>(&second, &copy), values);
}

/// `to_client_tensor` with a descriptor outside its buffer is `InvalidArgument` and creates
/// nothing on the destination.
pub fn to_client_tensor_with_bad_descriptor_is_invalid_argument<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    let handle = upload::<B, f32>(&first, &[1.0; 6]);
    let descriptor =
        CopyDescriptor::new(handle.to_binding(), [2, 3].into(), Strides::from([4, 1]), 4);
    let result = first.to_client_tensor(descriptor, &second, ElemType::F32);
    assert!(
        matches!(
            result,
            Err(ServerError::Io(IoError::InvalidArgument { .. }))
        ),
        "expected InvalidArgument, got {result:?}"
    );
    assert_eq!(settled_usage::<B>(&second).number_allocs, 0);
}

/// Each device has its own memory: allocations on one don't show in the other's usage.
pub fn devices_account_their_memory_separately<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    let first_baseline = settled_usage::<B>(&first);
    let _on_second: Vec<_> = (0..3)
        .map(|_| second.create_from_slice(&[1u8; 4096]).unwrap())
        .collect();
    assert_eq!(settled_usage::<B>(&second).number_allocs, 3);
    assert_eq!(settled_usage::<B>(&first), first_baseline);
}

/// A round trip device 0 -> device 1 -> device 0 returns the original bytes.
pub fn round_trip_between_devices_preserves_bytes<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    let data = SeededRng::new(102).bytes(100_003);
    let source = first.create_from_slice(&data).unwrap();
    let there = first.to_client(source, &second, ElemType::U8).unwrap();
    let back = second.to_client(there, &first, ElemType::U8).unwrap();
    assert_eq!(back.device(), first.device_id());
    assert!(first.read_one(back).unwrap()[..] == data[..]);
}
