//! Tensors and layouts: `create_tensor*`, `create_tensors*`, `empty_tensor*`, pitched rows,
//! `read_tensor*` with the returned and with other strides.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{SeededRng, bytes_of, client_with};
use cubert_runtime::future::block_on;
use cubert_runtime::{Bytes, CopyDescriptor, ElemType, MemoryLayoutDescriptor, Strides, ops};

const PITCH: u64 = 256;

fn pitched<B: TestBackend>() -> Client<B> {
    client_with::<B>(&ClientOptions::new().with_pitch_alignment(PITCH))
}

fn dense<B: TestBackend>() -> Client<B> {
    client_with::<B>(&ClientOptions::new().with_pitch_alignment(1))
}

/// With a pitch alignment of 1, `create_tensor` lays tensors out dense and row-major.
pub fn create_tensor_without_pitch_is_dense_row_major<B: TestBackend>() {
    let client = dense::<B>();
    let values = SeededRng::new(10).f32s(2 * 3 * 4, 5.0);
    let layout = client
        .create_tensor(Bytes::from_slice(&values), [2, 3, 4], 4)
        .unwrap();
    assert_eq!(layout.strides.as_slice(), &[12, 4, 1]);
    assert_eq!(layout.memory.size(), 96);
    assert_eq!(
        client.read_one(layout.memory).unwrap().to_elems::<f32>(),
        values
    );
}

/// A pitched tensor's rows start at multiples of the pitch alignment in device memory, and
/// `read_tensor` with the returned strides gives back the dense rows.
pub fn read_of_pitched_tensor_returns_dense_rows<B: TestBackend>() {
    let client = pitched::<B>();
    let (rows, cols) = (3usize, 5usize);
    let values = SeededRng::new(11).f32s(rows * cols, 5.0);
    let layout = client
        .create_tensor(Bytes::from_slice(&values), [rows, cols], 4)
        .unwrap();
    let pitch_elems = layout.strides[0];
    assert_eq!(layout.strides[1], 1);
    assert!(pitch_elems >= cols, "strides {:?}", layout.strides);
    assert_eq!(
        (pitch_elems as u64 * 4) % PITCH,
        0,
        "rows are not aligned: strides {:?}",
        layout.strides
    );
    assert!(layout.memory.size() >= ((rows - 1) * pitch_elems + cols) as u64 * 4);
    let descriptor = layout
        .memory
        .clone()
        .copy_descriptor([rows, cols], layout.strides.clone(), 4);
    let dense_rows = client.read_one_tensor(descriptor).unwrap();
    assert_eq!(dense_rows.to_elems::<f32>(), values);
    // The raw bytes hold each row at its pitch.
    let raw = client.read_one(layout.memory).unwrap().to_elems::<f32>();
    for row in 0..rows {
        assert_eq!(
            &raw[row * pitch_elems..row * pitch_elems + cols],
            &values[row * cols..(row + 1) * cols],
            "row {row}"
        );
    }
}

/// Rank-3 pitched tensors pad only the innermost rows; outer strides multiply through.
pub fn pitched_rank_three_tensor_round_trips<B: TestBackend>() {
    let client = pitched::<B>();
    let shape = [2usize, 3, 5];
    let values = SeededRng::new(12).f64s(30, 3.0);
    let layout = client
        .create_tensor_from_slice(&bytes_of(&values), shape, 8)
        .unwrap();
    let strides = layout.strides.clone();
    assert_eq!(strides[2], 1);
    assert_eq!((strides[1] as u64 * 8) % PITCH, 0, "{strides:?}");
    assert_eq!(strides[0], strides[1] * 3, "{strides:?}");
    let read = client
        .read_one_tensor(layout.memory.copy_descriptor(shape, strides, 8))
        .unwrap();
    assert_eq!(read.to_elems::<f64>(), values);
}

/// Rank-1 tensors and contiguous descriptors are never pitched.
pub fn rank_one_and_contiguous_tensors_are_never_pitched<B: TestBackend>() {
    let client = pitched::<B>();
    let values = SeededRng::new(13).f32s(7, 1.0);
    let vector = client
        .create_tensor(Bytes::from_slice(&values), [7], 4)
        .unwrap();
    assert_eq!(vector.strides.as_slice(), &[1]);
    assert_eq!(vector.memory.size(), 28);
    let matrix = SeededRng::new(14).f32s(15, 1.0);
    let layouts = client
        .create_tensors(vec![(
            MemoryLayoutDescriptor::contiguous([3, 5], 4),
            Bytes::from_slice(&matrix),
        )])
        .unwrap();
    assert_eq!(layouts[0].strides.as_slice(), &[5, 1]);
    assert_eq!(layouts[0].memory.size(), 60);
    assert_eq!(
        client
            .read_one(layouts[0].memory.clone())
            .unwrap()
            .to_elems::<f32>(),
        matrix
    );
}

/// `create_tensors` packs every tensor into one allocation: views of one id, at aligned,
/// non-overlapping offsets; `read_tensor` returns each tensor's dense data.
pub fn create_tensors_packs_aligned_views_of_one_allocation<B: TestBackend>() {
    let client = pitched::<B>();
    let mut rng = SeededRng::new(15);
    let a = rng.f32s(12, 2.0);
    let b = rng.bytes(5);
    let c = rng.f64s(4, 2.0);
    let layouts = client
        .create_tensors(vec![
            (
                MemoryLayoutDescriptor::optimized([4, 3], 4),
                Bytes::from_slice(&a),
            ),
            (
                MemoryLayoutDescriptor::contiguous([5], 1),
                Bytes::from_slice(&b),
            ),
            (
                MemoryLayoutDescriptor::optimized([2, 2], 8),
                Bytes::from_slice(&c),
            ),
        ])
        .unwrap();
    assert_eq!(layouts.len(), 3);
    let alignment = client.properties().memory.alignment;
    for pair in layouts.windows(2) {
        assert_eq!(pair[0].memory.id(), pair[1].memory.id());
        assert!(pair[0].memory.offset_end() <= pair[1].memory.offset_start());
    }
    for layout in &layouts {
        assert_eq!(layout.memory.offset_start() % alignment, 0);
    }
    let shapes: [(&[usize], usize); 3] = [(&[4, 3], 4), (&[5], 1), (&[2, 2], 8)];
    let descriptors = layouts
        .iter()
        .zip(shapes)
        .map(|(layout, (shape, elem))| {
            layout
                .memory
                .clone()
                .copy_descriptor(shape, layout.strides.clone(), elem)
        })
        .collect();
    let read = client.read_tensor(descriptors).unwrap();
    assert_eq!(read[0].to_elems::<f32>(), a);
    assert_eq!(read[1].to_vec(), b);
    assert_eq!(read[2].to_elems::<f64>(), c);
}

/// `create_tensors_from_slices` uploads every slice into its tensor.
pub fn create_tensors_from_slices_round_trips<B: TestBackend>() {
    let client = pitched::<B>();
    let mut rng = SeededRng::new(16);
    let a = rng.i32s(6 * 7, 1000);
    let b = rng.f32s(9, 4.0);
    let (a_bytes, b_bytes) = (bytes_of(&a), bytes_of(&b));
    let layouts = client
        .create_tensors_from_slices(vec![
            (MemoryLayoutDescriptor::optimized([6, 7], 4), &a_bytes[..]),
            (MemoryLayoutDescriptor::optimized([9], 4), &b_bytes[..]),
        ])
        .unwrap();
    let read_a = client
        .read_one_tensor(layouts[0].memory.clone().copy_descriptor(
            [6, 7],
            layouts[0].strides.clone(),
            4,
        ))
        .unwrap();
    let read_b = client
        .read_one_tensor(layouts[1].memory.clone().copy_descriptor(
            [9],
            layouts[1].strides.clone(),
            4,
        ))
        .unwrap();
    assert_eq!(read_a.to_elems::<i32>(), a);
    assert_eq!(read_b.to_elems::<f32>(), b);
}

/// An empty tensor filled by a kernel reads back as the fill value in every element.
pub fn empty_tensor_then_fill_reads_the_fill_value<B: TestBackend>() {
    let client = pitched::<B>();
    let layout = client.empty_tensor([4, 6], 4).unwrap();
    assert_eq!(layout.strides[1], 1);
    let elems = (layout.memory.size() / 4) as usize;
    ops::fill(&client, &layout.memory, elems, 7.25f32).unwrap();
    let read = client
        .read_one_tensor(
            layout
                .memory
                .clone()
                .copy_descriptor([4, 6], layout.strides, 4),
        )
        .unwrap();
    assert_eq!(read.to_elems::<f32>(), vec![7.25; 24]);
}

/// `empty_tensors` places its tensors in one allocation without overlap: filling each view
/// with its own value leaves the others intact.
pub fn empty_tensors_are_disjoint_views_of_one_allocation<B: TestBackend>() {
    let client = pitched::<B>();
    let layouts = client
        .empty_tensors(vec![
            MemoryLayoutDescriptor::optimized([3, 3], 4),
            MemoryLayoutDescriptor::contiguous([10], 4),
            MemoryLayoutDescriptor::optimized([2, 5], 4),
        ])
        .unwrap();
    assert_eq!(layouts.len(), 3);
    assert!(
        layouts
            .iter()
            .all(|l| l.memory.id() == layouts[0].memory.id())
    );
    for (index, layout) in layouts.iter().enumerate() {
        let elems = (layout.memory.size() / 4) as usize;
        ops::fill(&client, &layout.memory, elems, index as i32 + 1).unwrap();
    }
    for (index, layout) in layouts.iter().enumerate() {
        let values = client
            .read_one(layout.memory.clone())
            .unwrap()
            .to_elems::<i32>();
        assert!(
            values.iter().all(|v| *v == index as i32 + 1),
            "tensor {index} was overwritten: {values:?}"
        );
    }
}

/// `read_tensor` with strides other than the creation ones reads that view: a transposed
/// read of a 2×3 matrix gives its 3×2 transpose.
pub fn read_tensor_with_transposed_strides_returns_the_transpose<B: TestBackend>() {
    let client = dense::<B>();
    let values: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let layout = client
        .create_tensor(Bytes::from_slice(&values), [2, 3], 4)
        .unwrap();
    let transposed = client
        .read_one_tensor(CopyDescriptor::new(
            layout.memory.to_binding(),
            [3, 2].into(),
            Strides::from([1, 3]),
            4,
        ))
        .unwrap();
    assert_eq!(
        transposed.to_elems::<f32>(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    // Every other column, as a strided innermost axis.
    let strided = client
        .read_one_tensor(CopyDescriptor::new(
            layout.memory.to_binding(),
            [2, 2].into(),
            Strides::from([3, 2]),
            4,
        ))
        .unwrap();
    assert_eq!(strided.to_elems::<f32>(), vec![1.0, 3.0, 4.0, 6.0]);
}

/// The async and single-tensor read variants return what `read_tensor` returns.
pub fn read_tensor_variants_agree<B: TestBackend>() {
    let client = pitched::<B>();
    let values = SeededRng::new(17).f32s(4 * 9, 9.0);
    let layout = client
        .create_tensor(Bytes::from_slice(&values), [4, 9], 4)
        .unwrap();
    let descriptor = || {
        layout
            .memory
            .clone()
            .copy_descriptor([4, 9], layout.strides.clone(), 4)
    };
    let many = client
        .read_tensor(vec![descriptor(), descriptor()])
        .unwrap();
    let many_async = block_on(client.read_tensor_async(vec![descriptor()])).unwrap();
    let one_async = block_on(client.read_one_tensor_async(descriptor())).unwrap();
    let one = client.read_one_tensor(descriptor()).unwrap();
    for bytes in many.iter().chain(&many_async).chain([&one_async, &one]) {
        assert_eq!(bytes.to_elems::<f32>(), values);
    }
    assert_eq!(many.len(), 2);
    assert_eq!(many_async.len(), 1);
}

/// Standard kernels see a pitched tensor's memory as one flat buffer: an add over the
/// whole buffer keeps every element at its pitched position.
pub fn kernels_on_pitched_buffers_keep_element_positions<B: TestBackend>() {
    let client = pitched::<B>();
    let values = SeededRng::new(18).i32s(3 * 5, 50);
    let source = client
        .create_tensor(Bytes::from_slice(&values), [3, 5], 4)
        .unwrap();
    let flat = (source.memory.size() / 4) as usize;
    let doubled = client.empty(source.memory.size() as usize).unwrap();
    ops::add(
        &client,
        &source.memory,
        &source.memory,
        &doubled,
        flat,
        ElemType::I32,
    )
    .unwrap();
    let read = client
        .read_one_tensor(doubled.copy_descriptor([3, 5], source.strides.clone(), 4))
        .unwrap();
    let expected: Vec<i32> = values.iter().map(|v| v * 2).collect();
    assert_eq!(read.to_elems::<i32>(), expected);
}
