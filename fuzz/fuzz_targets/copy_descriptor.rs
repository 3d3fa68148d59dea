//! `CopyDescriptor::validate`, then `gather` and `scatter` on every descriptor it accepts,
//! compared with a naive element-by-element reference.
//!
//! Properties: validation never panics (any shape, strides, element size, buffer size,
//! overflowing ones included); on a validated descriptor `gather` and `scatter` stay inside
//! both buffers and agree with the reference; a contiguous descriptor gathers a prefix of
//! the buffer.

#![no_main]

use arbitrary::Arbitrary;
use cubert_runtime::copy::{gather, scatter};
use cubert_runtime::device::DeviceId;
use cubert_runtime::handle::{HandleFactory, ReleaseQueue};
use cubert_runtime::stream::StreamId;
use cubert_runtime::{CopyDescriptor, Shape, Strides};
use libfuzzer_sys::fuzz_target;

/// Largest dense buffer the target materializes.
const MAX_DENSE: usize = 1 << 20;

#[derive(Arbitrary, Debug)]
struct Input {
    buffer: u16,
    shape: Vec<u64>,
    strides: Vec<u64>,
    elem_size: u8,
    /// Small values make the interesting cases (dims of 0..8, strides of 0..16) frequent.
    small: bool,
}

fn reference_offsets(shape: &[usize], strides: &[usize], out: &mut Vec<usize>) {
    let count: usize = shape.iter().product();
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        out.push(index.iter().zip(strides).map(|(i, s)| i * s).sum());
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

fuzz_target!(|input: Input| {
    let fold = |value: u64, modulo: u64| {
        if input.small {
            (value % modulo) as usize
        } else {
            value as usize
        }
    };
    let shape: Vec<usize> = input.shape.iter().take(6).map(|d| fold(*d, 8)).collect();
    let strides: Vec<usize> = input.strides.iter().take(6).map(|s| fold(*s, 16)).collect();
    let elem_size = usize::from(input.elem_size % 17);
    let size = u64::from(input.buffer);
    let binding = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new())
        .mint(StreamId::new(0), size)
        .binding();
    let descriptor = CopyDescriptor::new(
        binding,
        Shape::from(shape.clone()),
        Strides::from(strides.clone()),
        elem_size,
    );
    let Ok(dense) = descriptor.validate() else {
        return;
    };
    assert_eq!(Some(dense), descriptor.dense_len());
    if dense > MAX_DENSE {
        return;
    }
    let source: Vec<u8> = (0..size as usize).map(|i| (i * 31 + 7) as u8).collect();

    let mut gathered = vec![0u8; dense];
    gather(&source, &shape, &strides, elem_size, &mut gathered);
    let mut offsets = Vec::new();
    reference_offsets(&shape, &strides, &mut offsets);
    let mut expected = vec![0u8; dense];
    for (n, offset) in offsets.iter().enumerate() {
        let at = offset * elem_size;
        expected[n * elem_size..(n + 1) * elem_size].copy_from_slice(&source[at..at + elem_size]);
    }
    assert_eq!(
        gathered, expected,
        "gather of {shape:?} / {strides:?} x {elem_size}"
    );
    if descriptor.is_contiguous() {
        assert_eq!(&gathered[..], &source[..dense]);
    }

    let dense_data: Vec<u8> = (0..dense).map(|i| (i * 13 + 1) as u8).collect();
    let mut target = vec![0u8; size as usize];
    scatter(&dense_data, &shape, &strides, elem_size, &mut target);
    let mut expected = vec![0u8; size as usize];
    for (n, offset) in offsets.iter().enumerate() {
        let at = offset * elem_size;
        expected[at..at + elem_size]
            .copy_from_slice(&dense_data[n * elem_size..(n + 1) * elem_size]);
    }
    assert_eq!(
        target, expected,
        "scatter of {shape:?} / {strides:?} x {elem_size}"
    );
});
