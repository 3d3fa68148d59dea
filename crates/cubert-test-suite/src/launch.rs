//! Launching kernels: `launch`, `launch_unchecked`, cube counts, and every standard kernel
//! through `cubert_runtime::ops`, checked against plain Rust references.

use crate::backend::{Client, TestBackend};
use crate::support::{SeededRng, assert_close, client, client_in, read_elems, upload};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::{
    CubeCount, CubeCountSelection, CubeDim, ElemType, Element, KernelArguments,
    MetadataBindingInfo, Runtime, ServerError, ops,
};

fn copy_arguments(
    src: &cubert_runtime::Handle,
    dst: &cubert_runtime::Handle,
    len: usize,
) -> KernelArguments {
    KernelArguments::new()
        .with_buffers(vec![src.to_binding(), dst.to_binding()])
        .with_info(MetadataBindingInfo::custom(vec![len as u64]))
}

fn launch_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let input = SeededRng::new(20).f32s(5000, 50.0);
    let src = upload::<B, f32>(&client, &input);
    let dst = client.empty(5000 * 4).unwrap();
    let kernel = B::R::standard_kernel(StandardKernel::Copy(ElemType::F32)).unwrap();
    let cubes = CubeCountSelection::new(&client, 3).cube_count();
    client
        .launch(kernel, cubes, copy_arguments(&src, &dst, 5000))
        .unwrap();
    client.sync().unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &dst), input, "{mode:?}");
}

in_both_modes!(
    /// `launch` of the standard copy kernel, bound by hand, writes the destination.
    launch_of_copy_kernel_writes_the_destination_threaded,
    launch_of_copy_kernel_writes_the_destination_inline => launch_in
);

fn launch_unchecked_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let mut rng = SeededRng::new(21);
    let lhs = rng.i32s(777, 1 << 20);
    let rhs = rng.i32s(777, 1 << 20);
    let (l, r) = (
        upload::<B, i32>(&client, &lhs),
        upload::<B, i32>(&client, &rhs),
    );
    let out = client.empty(777 * 4).unwrap();
    let kernel = B::R::standard_kernel(StandardKernel::Add(ElemType::I32)).unwrap();
    let arguments = KernelArguments::new()
        .with_buffers(vec![l.to_binding(), r.to_binding(), out.to_binding()])
        .with_info(MetadataBindingInfo::custom(vec![777]));
    // SAFETY: every buffer holds the 777 elements the kernel touches.
    unsafe { client.launch_unchecked(kernel, CubeCount::new_1d(2), arguments) }.unwrap();
    let expected: Vec<i32> = lhs.iter().zip(&rhs).map(|(a, b)| a + b).collect();
    assert_eq!(read_elems::<B, i32>(&client, &out), expected, "{mode:?}");
}

in_both_modes!(
    /// `launch_unchecked` of an in-bounds kernel computes the same result as a checked one.
    launch_unchecked_of_in_bounds_kernel_is_correct_threaded,
    launch_unchecked_of_in_bounds_kernel_is_correct_inline => launch_unchecked_in
);

fn chained_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let a = client.empty(1000 * 4).unwrap();
    let b = client.empty(1000 * 4).unwrap();
    ops::fill(&client, &a, 1000, 1.5f32).unwrap();
    ops::add(&client, &a, &a, &b, 1000, ElemType::F32).unwrap();
    ops::mul(&client, &b, &b, &a, 1000, ElemType::F32).unwrap();
    ops::copy(&client, &a, &b, 1000, ElemType::F32).unwrap();
    ops::add(&client, &a, &b, &a, 1000, ElemType::F32).unwrap();
    assert_eq!(
        read_elems::<B, f32>(&client, &a),
        vec![18.0; 1000],
        "{mode:?}"
    );
}

in_both_modes!(
    /// Dependent launches on one stream run in submission order (fill, add, mul, copy, add
    /// without a sync in between).
    dependent_launches_run_in_submission_order_threaded,
    dependent_launches_run_in_submission_order_inline => chained_in
);

/// The empty kernel launches and syncs without error.
pub fn noop_kernel_launches_and_syncs<B: TestBackend>() {
    let client = client::<B>();
    for _ in 0..10 {
        ops::noop(&client).unwrap();
    }
    client.sync().unwrap();
}

/// Thousands of launches recorded without a sync in between, each with its own arguments
/// (its slice of the output and its value), each see their own: backends that gather
/// launches' arguments per submission (wgpu's info arena) must not let a later
/// submission's arguments reach a launch still waiting to run.
pub fn launches_recorded_back_to_back_each_see_their_own_arguments<B: TestBackend>() {
    let client = client::<B>();
    let launches = 3000;
    let out = client.empty(launches * 4).unwrap();
    ops::fill(&client, &out, launches, u32::MAX).unwrap();
    client.sync().unwrap();
    for round in 0..2u32 {
        for i in 0..launches {
            let slot = out.view(4 * i as u64, 4).unwrap();
            ops::fill(&client, &slot, 1, round * 10_000 + i as u32).unwrap();
        }
        let read = read_elems::<B, u32>(&client, &out);
        let wrong: Vec<(usize, u32)> = (0..launches)
            .filter(|&i| read[i] != round * 10_000 + i as u32)
            .map(|i| (i, read[i]))
            .collect();
        assert!(
            wrong.is_empty(),
            "round {round}: {} of {launches} launches wrote another launch's value or none \
             (slot, value): {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
    }
}

/// A launch over zero cubes is accepted and does nothing.
pub fn launch_over_zero_cubes_does_nothing<B: TestBackend>() {
    let client = client::<B>();
    let src = upload::<B, f32>(&client, &[1.0; 64]);
    let dst = upload::<B, f32>(&client, &[2.0; 64]);
    let kernel = B::R::standard_kernel(StandardKernel::Copy(ElemType::F32)).unwrap();
    client
        .launch(
            kernel,
            CubeCount::new_3d(0, 4, 4),
            copy_arguments(&src, &dst, 64),
        )
        .unwrap();
    client.sync().unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &dst), vec![2.0; 64]);
}

/// A dynamic cube count is read from its buffer at launch time; elementwise kernels are
/// correct with any cube count.
pub fn dynamic_cube_count_is_read_from_its_buffer<B: TestBackend>() {
    let client = client::<B>();
    let input = SeededRng::new(22).f32s(4000, 3.0);
    let src = upload::<B, f32>(&client, &input);
    let dst = client.empty(4000 * 4).unwrap();
    let count = upload::<B, u32>(&client, &[3, 2, 1]);
    let kernel = B::R::standard_kernel(StandardKernel::Copy(ElemType::F32)).unwrap();
    client
        .launch(
            kernel,
            CubeCount::Dynamic(count.to_binding()),
            copy_arguments(&src, &dst, 4000),
        )
        .unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &dst), input);
}

fn fill_case<B: TestBackend, T: Element>(client: &Client<B>, value: T) {
    let len = 5003;
    let out = client.empty(len * T::ELEM.size() + 64).unwrap();
    ops::fill(client, &out, len, value).unwrap();
    let read: Vec<T> = read_elems::<B, T>(client, &out);
    assert!(
        read[..len].iter().all(|v| *v == value),
        "fill {} left other values",
        T::ELEM
    );
}

/// `fill` writes its value to every element, for f32, f64, i32 and u8.
pub fn fill_writes_the_value_to_every_element<B: TestBackend>() {
    let client = client::<B>();
    fill_case::<B, f32>(&client, -3.75);
    fill_case::<B, f64>(&client, 1.0e300);
    fill_case::<B, i32>(&client, -123_456_789);
    fill_case::<B, u8>(&client, 0xa5);
}

/// `copy` copies exactly `len` elements and leaves the rest of the destination alone.
pub fn copy_copies_exactly_len_elements<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(23);
    let source = rng.f64s(3000, 1e6);
    let before = rng.f64s(3000, 1.0);
    let src = upload::<B, f64>(&client, &source);
    let dst = upload::<B, f64>(&client, &before);
    ops::copy(&client, &src, &dst, 2001, ElemType::F64).unwrap();
    let mut expected = before.clone();
    expected[..2001].copy_from_slice(&source[..2001]);
    assert_eq!(read_elems::<B, f64>(&client, &dst), expected);
}

/// `cast` f32 -> i32 truncates toward zero and saturates; NaN becomes 0.
pub fn cast_f32_to_i32_truncates_and_saturates<B: TestBackend>() {
    let client = client::<B>();
    let mut values = vec![
        0.0f32,
        1.7,
        -1.7,
        2.5,
        -2.5,
        3.0e9,
        -3.0e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        2_147_483_520.0,
        -2_147_483_648.0,
    ];
    values.extend(SeededRng::new(24).f32s(1000, 1.0e5));
    let src = upload::<B, f32>(&client, &values);
    let dst = client.empty(values.len() * 4).unwrap();
    ops::cast(
        &client,
        &src,
        &dst,
        values.len(),
        ElemType::F32,
        ElemType::I32,
    )
    .unwrap();
    let expected: Vec<i32> = values.iter().map(|v| *v as i32).collect();
    let read = read_elems::<B, i32>(&client, &dst);
    assert_eq!(&read[..12], &expected[..12]);
    assert_eq!(
        &read[..12],
        &[
            0,
            1,
            -1,
            2,
            -2,
            i32::MAX,
            i32::MIN,
            i32::MAX,
            i32::MIN,
            0,
            2_147_483_520,
            i32::MIN
        ]
    );
    assert_eq!(read, expected);
}

/// `cast` f32 -> f64 is exact.
pub fn cast_f32_to_f64_is_exact<B: TestBackend>() {
    let client = client::<B>();
    let mut values = SeededRng::new(25).f32s(2500, 1.0e30);
    values.extend([f32::MIN_POSITIVE, f32::MAX, -0.0, 1.0e-40]);
    let src = upload::<B, f32>(&client, &values);
    let dst = client.empty(values.len() * 8).unwrap();
    ops::cast(
        &client,
        &src,
        &dst,
        values.len(),
        ElemType::F32,
        ElemType::F64,
    )
    .unwrap();
    let expected: Vec<f64> = values.iter().map(|v| f64::from(*v)).collect();
    let read = read_elems::<B, f64>(&client, &dst);
    assert_eq!(read.len(), expected.len());
    for (index, (a, e)) in read.iter().zip(&expected).enumerate() {
        assert_eq!(a.to_bits(), e.to_bits(), "element {index}: {a} vs {e}");
    }
}

fn binary_case<B: TestBackend, T: Element>(
    client: &Client<B>,
    lhs: &[T],
    rhs: &[T],
    add: bool,
    reference: impl Fn(T, T) -> T,
) {
    let len = lhs.len();
    let l = upload::<B, T>(client, lhs);
    let r = upload::<B, T>(client, rhs);
    let out = client.empty(len * T::ELEM.size()).unwrap();
    if add {
        ops::add(client, &l, &r, &out, len, T::ELEM).unwrap();
    } else {
        ops::mul(client, &l, &r, &out, len, T::ELEM).unwrap();
    }
    let expected: Vec<T> = lhs
        .iter()
        .zip(rhs)
        .map(|(a, b)| reference(*a, *b))
        .collect();
    let read = read_elems::<B, T>(client, &out);
    let name = if add { "add" } else { "mul" };
    assert!(
        read == expected,
        "{name} {} differs from the reference (first difference at {:?})",
        T::ELEM,
        read.iter().zip(&expected).position(|(a, e)| a != e)
    );
}

/// `add` is exact against the Rust reference for f32, f64 and i32.
pub fn add_matches_reference_for_f32_f64_i32<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(26);
    let len = 6007;
    binary_case::<B, f32>(
        &client,
        &rng.f32s(len, 1e3),
        &rng.f32s(len, 1e3),
        true,
        |a, b| a + b,
    );
    binary_case::<B, f64>(
        &client,
        &rng.f64s(len, 1e9),
        &rng.f64s(len, 1e-3),
        true,
        |a, b| a + b,
    );
    binary_case::<B, i32>(
        &client,
        &rng.i32s(len, i32::MAX),
        &rng.i32s(len, i32::MAX),
        true,
        i32::wrapping_add,
    );
}

/// `mul` is exact against the Rust reference for f32, f64 and i32.
pub fn mul_matches_reference_for_f32_f64_i32<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(27);
    let len = 6007;
    binary_case::<B, f32>(
        &client,
        &rng.f32s(len, 1e3),
        &rng.f32s(len, 1e3),
        false,
        |a, b| a * b,
    );
    binary_case::<B, f64>(
        &client,
        &rng.f64s(len, 1e9),
        &rng.f64s(len, 1e-3),
        false,
        |a, b| a * b,
    );
    binary_case::<B, i32>(
        &client,
        &rng.i32s(len, 40_000),
        &rng.i32s(len, 40_000),
        false,
        i32::wrapping_mul,
    );
}

/// `add` with the output bound to an input (in place) is correct.
pub fn add_in_place_into_an_input_is_correct<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(28);
    let (lhs, rhs) = (rng.f32s(2048, 10.0), rng.f32s(2048, 10.0));
    let l = upload::<B, f32>(&client, &lhs);
    let r = upload::<B, f32>(&client, &rhs);
    ops::add(&client, &l, &r, &l, 2048, ElemType::F32).unwrap();
    let expected: Vec<f32> = lhs.iter().zip(&rhs).map(|(a, b)| a + b).collect();
    assert_eq!(read_elems::<B, f32>(&client, &l), expected);
    assert_eq!(
        read_elems::<B, f32>(&client, &r),
        rhs,
        "the other input is untouched"
    );
}

/// `add` and `mul` of i32 and f32 are exact for lengths around multiples of the 4-element
/// lines GPUs move them by (a ragged tail takes the scalar kernel) and for views at offsets
/// that break the lines' 16-byte alignment (the scalar kernel throughout); elements past
/// `len` are untouched.
pub fn add_and_mul_are_exact_for_every_length_and_alignment<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(29);
    let total = 1040;
    let (a, b) = (rng.i32s(total, 1 << 20), rng.i32s(total, 1 << 20));
    let (x, y) = (rng.f32s(total, 10.0), rng.f32s(total, 10.0));
    let (ha, hb) = (upload::<B, i32>(&client, &a), upload::<B, i32>(&client, &b));
    let (hx, hy) = (upload::<B, f32>(&client, &x), upload::<B, f32>(&client, &y));
    for offset in [0usize, 1, 4] {
        for len in [1usize, 3, 4, 5, 8, 1023, 1024, 1027] {
            let bytes = |count: usize| (count * 4) as u64;
            let view =
                |handle: &cubert_runtime::Handle| handle.view(bytes(offset), bytes(len)).unwrap();
            let out_i = upload::<B, i32>(&client, &vec![-1; len + 2]);
            ops::add(&client, &view(&ha), &view(&hb), &out_i, len, ElemType::I32).unwrap();
            let mut want: Vec<i32> = (0..len)
                .map(|i| a[offset + i].wrapping_add(b[offset + i]))
                .collect();
            want.extend([-1, -1]);
            assert_eq!(
                read_elems::<B, i32>(&client, &out_i),
                want,
                "add i32 {offset}+{len}"
            );
            let out_f = upload::<B, f32>(&client, &vec![-1.0; len + 2]);
            ops::mul(&client, &view(&hx), &view(&hy), &out_f, len, ElemType::F32).unwrap();
            let mut want: Vec<f32> = (0..len).map(|i| x[offset + i] * y[offset + i]).collect();
            want.extend([-1.0, -1.0]);
            assert_eq!(
                read_elems::<B, f32>(&client, &out_f),
                want,
                "mul f32 {offset}+{len}"
            );
        }
    }
}

/// `reduce_sum` sums each row: within a relative tolerance for f32 (scaled by the sum of
/// magnitudes), tightly for f64, exactly for i32.
pub fn reduce_sum_matches_reference<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(29);
    let (rows, cols) = (37, 1001);
    let input = rng.f32s(rows * cols, 100.0);
    let handle = upload::<B, f32>(&client, &input);
    let out = client.empty(rows * 4).unwrap();
    ops::reduce_sum(&client, &handle, &out, rows, cols, ElemType::F32).unwrap();
    let read: Vec<f64> = read_elems::<B, f32>(&client, &out)
        .into_iter()
        .map(f64::from)
        .collect();
    let row = |r: usize| &input[r * cols..(r + 1) * cols];
    let expected: Vec<f64> = (0..rows)
        .map(|r| row(r).iter().map(|v| f64::from(*v)).sum())
        .collect();
    let scale: Vec<f64> = (0..rows)
        .map(|r| row(r).iter().map(|v| f64::from(v.abs())).sum())
        .collect();
    assert_close(&read, &expected, &scale, 5e-5, "reduce_sum f32");

    let input = rng.f64s(rows * cols, 100.0);
    let handle = upload::<B, f64>(&client, &input);
    let out = client.empty(rows * 8).unwrap();
    ops::reduce_sum(&client, &handle, &out, rows, cols, ElemType::F64).unwrap();
    let read = read_elems::<B, f64>(&client, &out);
    let expected: Vec<f64> = (0..rows)
        .map(|r| input[r * cols..(r + 1) * cols].iter().sum())
        .collect();
    let scale: Vec<f64> = (0..rows)
        .map(|r| {
            input[r * cols..(r + 1) * cols]
                .iter()
                .map(|v| v.abs())
                .sum()
        })
        .collect();
    assert_close(&read, &expected, &scale, 1e-12, "reduce_sum f64");

    let input = rng.i32s(rows * cols, 1 << 20);
    let handle = upload::<B, i32>(&client, &input);
    let out = client.empty(rows * 4).unwrap();
    ops::reduce_sum(&client, &handle, &out, rows, cols, ElemType::I32).unwrap();
    let expected: Vec<i32> = (0..rows)
        .map(|r| input[r * cols..(r + 1) * cols].iter().sum())
        .collect();
    assert_eq!(read_elems::<B, i32>(&client, &out), expected);
}

/// Every way the language's reduce-sum shares rows among units (a unit, a plane or a cube
/// per row; lines or elements), launched on this backend over grids smaller than, equal to
/// and larger than the rows, sums every row: exactly for integers (wrapping `i8`, full
/// `u64`), for halves as an `f32` accumulator sums them (4097 ones give 4096 once rounded
/// to `f16`; an `f16` accumulator would stop at 2048), and for rows that start anywhere
/// within a line.
pub fn reduce_sum_splits_sum_every_row_for_any_grid<B: TestBackend>() {
    use cubert_runtime::kernel::standard::{RowSplit, reduce_sum_definition};
    use cubert_runtime::kernel::{KernelArguments, MetadataBindingInfo};
    let client = client::<B>();
    let splits = [
        RowSplit::Unit {
            units: 1,
            wide: false,
        },
        RowSplit::Unit {
            units: 4,
            wide: true,
        },
        RowSplit::Plane {
            planes: 2,
            lines: false,
        },
        RowSplit::Plane {
            planes: 1,
            lines: true,
        },
        RowSplit::Cube {
            units: 64,
            lines: true,
        },
        RowSplit::Cube {
            units: 96,
            lines: false,
        },
    ];
    let run = |elem: ElemType,
               split: RowSplit,
               input: &cubert_runtime::Handle,
               rows: usize,
               cols: usize,
               cubes: u32| {
        let (definition, cube_dim) = reduce_sum_definition(elem, split, "reduce_sum_test").unwrap();
        let kernel = B::R::language_kernel(&definition, cube_dim).unwrap();
        let out = client.empty(rows * elem.size()).unwrap();
        let arguments = KernelArguments::new()
            .with_buffers(vec![input.to_binding(), out.to_binding()])
            .with_info(MetadataBindingInfo::custom(vec![rows as u64, cols as u64]));
        client
            .launch(kernel, CubeCount::new_1d(cubes), arguments)
            .unwrap();
        out
    };
    // The plane and cube splits fold planes of 32 lanes: they run where planes have 32
    // (CUDA, the CPU), not on wgpu adapters with other subgroup sizes, which don't offer them.
    let hardware = &client.properties().hardware;
    let planes_of_32 = hardware.plane_size_min == 32 && hardware.plane_size_max == 32;
    for split in splits
        .into_iter()
        .filter(|split| planes_of_32 || matches!(split, RowSplit::Unit { .. }))
    {
        for (rows, cols) in [(5, 13), (3, 100), (7, 1), (2, 67), (3, 2101)] {
            let values: Vec<i8> = (0..rows * cols).map(|i| (i * 37 % 255) as i8).collect();
            let input = upload::<B, i8>(&client, &values);
            let want: Vec<i8> = values
                .chunks(cols)
                .map(|row| row.iter().fold(0i8, |a, b| a.wrapping_add(*b)))
                .collect();
            let big: Vec<u64> = (0..rows * cols).map(|i| (i as u64) << 40).collect();
            let big_input = upload::<B, u64>(&client, &big);
            let big_want: Vec<u64> = big.chunks(cols).map(|row| row.iter().sum()).collect();
            for cubes in [1, 2, rows as u32, 3 * rows as u32] {
                let out = run(ElemType::I8, split, &input, rows, cols, cubes);
                assert_eq!(
                    read_elems::<B, i8>(&client, &out),
                    want,
                    "{split:?} {rows}x{cols} on {cubes} cubes"
                );
                let out = run(ElemType::U64, split, &big_input, rows, cols, cubes);
                assert_eq!(
                    read_elems::<B, u64>(&client, &out),
                    big_want,
                    "{split:?} u64"
                );
            }
        }
        // A row past the input's end (a launch built by hand, past `ops`' checks) is
        // summed up to the end and reported as out of bounds.
        let short = upload::<B, i8>(&client, &[1i8; 30]);
        let (definition, cube_dim) =
            reduce_sum_definition(ElemType::I8, split, "reduce_sum_short").unwrap();
        let kernel = B::R::language_kernel(&definition, cube_dim).unwrap();
        let out = client.empty(3).unwrap();
        let arguments = KernelArguments::new()
            .with_buffers(vec![short.to_binding(), out.to_binding()])
            .with_info(MetadataBindingInfo::custom(vec![3, 13]));
        client
            .launch(kernel, CubeCount::new_1d(2), arguments)
            .unwrap();
        assert!(
            matches!(client.sync(), Err(ServerError::OutOfBounds { .. })),
            "{split:?}: a row past the input's end is reported"
        );
        let ones = vec![half::f16::ONE; 2 * 4097];
        let input = upload::<B, half::f16>(&client, &ones);
        let out = run(ElemType::F16, split, &input, 2, 4097, 2);
        assert_eq!(
            read_elems::<B, half::f16>(&client, &out),
            vec![half::f16::from_f32(4097.0); 2],
            "{split:?} f16"
        );
    }
}

fn matmul_reference(
    lhs: &[f64],
    rhs: &[f64],
    (m, k, n): (usize, usize, usize),
) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; m * n];
    let mut scale = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                let term = lhs[i * k + p] * rhs[p * n + j];
                out[i * n + j] += term;
                scale[i * n + j] += term.abs();
            }
        }
    }
    (out, scale)
}

/// `matmul` of sizes that aren't multiples of any tile matches the reference within a
/// relative tolerance (f32 and f64).
pub fn matmul_matches_reference<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(30);
    let (m, k, n) = (67, 45, 39);
    let lhs = rng.f32s(m * k, 2.0);
    let rhs = rng.f32s(k * n, 2.0);
    let l = upload::<B, f32>(&client, &lhs);
    let r = upload::<B, f32>(&client, &rhs);
    let out = client.empty(m * n * 4).unwrap();
    ops::matmul(&client, &l, &r, &out, m, k, n, ElemType::F32).unwrap();
    let wide = |v: &[f32]| v.iter().map(|x| f64::from(*x)).collect::<Vec<f64>>();
    let (expected, scale) = matmul_reference(&wide(&lhs), &wide(&rhs), (m, k, n));
    let read = wide(&read_elems::<B, f32>(&client, &out));
    assert_close(&read, &expected, &scale, 1e-5, "matmul f32");

    let lhs = rng.f64s(m * k, 2.0);
    let rhs = rng.f64s(k * n, 2.0);
    let l = upload::<B, f64>(&client, &lhs);
    let r = upload::<B, f64>(&client, &rhs);
    let out = client.empty(m * n * 8).unwrap();
    ops::matmul(&client, &l, &r, &out, m, k, n, ElemType::F64).unwrap();
    let (expected, scale) = matmul_reference(&lhs, &rhs, (m, k, n));
    assert_close(
        &read_elems::<B, f64>(&client, &out),
        &expected,
        &scale,
        1e-12,
        "matmul f64",
    );
}

/// `count` small non-negative integers (0 to 4) for a matmul operand.
fn small_operand(count: usize, seed: usize) -> Vec<i64> {
    (0..count)
        .map(|i| ((i * 7 + seed * 3) % 5) as i64)
        .collect()
}

/// Little-endian bytes of `values` as `elem`: integers wrap into the type (`as` from
/// `i64`), floats round to nearest.
fn operand_bytes(values: &[i64], elem: ElemType) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * elem.size());
    for &v in values {
        match elem {
            ElemType::F16 => bytes.extend(half::f16::from_f64(v as f64).to_le_bytes()),
            ElemType::BF16 => bytes.extend(half::bf16::from_f64(v as f64).to_le_bytes()),
            ElemType::E4M3 => {
                bytes.push(cubert_runtime::lang::fp8::e4m3::from_f64(v as f64).to_bits())
            }
            ElemType::E5M2 => {
                bytes.push(cubert_runtime::lang::fp8::e5m2::from_f64(v as f64).to_bits())
            }
            ElemType::F32 => bytes.extend((v as f32).to_le_bytes()),
            ElemType::F64 => bytes.extend((v as f64).to_le_bytes()),
            ElemType::I8 => bytes.extend((v as i8).to_le_bytes()),
            ElemType::I16 => bytes.extend((v as i16).to_le_bytes()),
            ElemType::I32 => bytes.extend((v as i32).to_le_bytes()),
            ElemType::I64 => bytes.extend(v.to_le_bytes()),
            ElemType::U8 => bytes.extend((v as u8).to_le_bytes()),
            ElemType::U16 => bytes.extend((v as u16).to_le_bytes()),
            ElemType::U32 => bytes.extend((v as u32).to_le_bytes()),
            ElemType::U64 => bytes.extend((v as u64).to_le_bytes()),
            ElemType::Bool => bytes.push(u8::from(v != 0)),
        }
    }
    bytes
}

/// Every matmul variant of the backend computes every numeric type exactly on small
/// integers: integers wrap (`i8` and `u8` sums overflow here), floats are exact (the half
/// types accumulate in `f32` and round once), on shapes that don't divide the tiles and on
/// ones whose `n` (and `k`) take the kernels' line paths.
pub fn matmul_variants_compute_every_numeric_type<B: TestBackend>() {
    let client = client::<B>();
    for elem in ElemType::ALL.into_iter().filter(ElemType::has_arithmetic) {
        let kernel = StandardKernel::Matmul(elem);
        for (m, k, n) in [(37, 29, 45), (9, 70, 64), (5, 3, 8), (67, 40, 72)] {
            let (lhs, rhs) = (small_operand(m * k, 1), small_operand(k * n, 2));
            let mut expected = vec![0i64; m * n];
            for i in 0..m {
                for j in 0..n {
                    expected[i * n + j] = (0..k).map(|p| lhs[i * k + p] * rhs[p * n + j]).sum();
                }
            }
            let expected = operand_bytes(&expected, elem);
            for variant in B::R::standard_variants(kernel, client.properties()) {
                let problem = cubert_runtime::tune::standard::MatmulProblem {
                    lhs: client
                        .create(cubert_runtime::Bytes::from_slice(&operand_bytes(
                            &lhs, elem,
                        )))
                        .unwrap(),
                    rhs: client
                        .create(cubert_runtime::Bytes::from_slice(&operand_bytes(
                            &rhs, elem,
                        )))
                        .unwrap(),
                    out: client.empty(m * n * elem.size()).unwrap(),
                    m,
                    k,
                    n,
                    elem,
                };
                cubert_runtime::tune::standard::matmul_variant(&client, &variant, &problem)
                    .unwrap();
                let read = client.read_one(problem.out.clone()).unwrap().to_vec();
                assert!(
                    read == expected,
                    "matmul {variant} of {elem} on {m}x{k}x{n} differs from the reference"
                );
            }
        }
    }
}

/// `CubeDim::new` stays within the device's limits; `CubeCountSelection::new` dispatches
/// exactly the cubes asked for when they fit, and at least as many (within the limits)
/// when they don't.
pub fn cube_dim_and_cube_count_selection_respect_device_limits<B: TestBackend>() {
    let client = client::<B>();
    let hardware = client.properties().hardware.clone();
    for units in [0usize, 1, 7, 256, 1 << 20, usize::MAX] {
        let dim = CubeDim::new(&client, units);
        assert!(dim.num_elems() >= 1, "{units} units: {dim:?}");
        assert!(dim.num_elems() <= hardware.max_units_per_cube, "{dim:?}");
        assert!(dim.x <= hardware.max_cube_dim.0, "{dim:?}");
        assert!(dim.y <= hardware.max_cube_dim.1, "{dim:?}");
        assert!(dim.z <= hardware.max_cube_dim.2, "{dim:?}");
    }
    let max = hardware.max_cube_count;
    let small = CubeCountSelection::new(&client, 7);
    assert!(!small.has_idle());
    assert!(matches!(small.cube_count(), CubeCount::Static(7, 1, 1)));
    for wanted in [max.0.saturating_add(1), u32::MAX] {
        if wanted <= max.0 {
            continue;
        }
        let selection = CubeCountSelection::new(&client, wanted);
        let CubeCount::Static(x, y, z) = selection.clone().cube_count() else {
            panic!("a selection is always static");
        };
        assert!(
            x <= max.0 && y <= max.1 && z <= max.2,
            "({x}, {y}, {z}) vs {max:?}"
        );
        let total = u64::from(x) * u64::from(y) * u64::from(z);
        assert!(total >= u64::from(wanted), "({x}, {y}, {z}) < {wanted}");
        assert_eq!(selection.has_idle(), total != u64::from(wanted));
    }
}

/// The double-buffered matmul kernel (`matmul_double_buffered`, the GPUs' variants `d...`)
/// computes the exact product on every backend, whichever variants the backend lists: in
/// lines of 4 (`k` and `n` multiples of 4) and element by element, on tiles cut by the
/// matrices' edges, with more steps than buffers, for `f32` and for `f16` (summed in
/// `f32`), each tiling it takes; a tiling it can't take is refused with an error.
pub fn double_buffered_matmul_is_exact_on_every_backend<B: TestBackend>() {
    use cubert_runtime::kernel::standard::{MatmulTiling, matmul_definition};
    let client = client::<B>();
    let tilings = [((64, 64), 8), ((128, 64), 8), ((128, 128), 16)];
    for (block, depth) in tilings {
        let tiling = MatmulTiling::DoubleBuffered { block, depth };
        for elem in [ElemType::F32, ElemType::F16] {
            let (definition, cube_dim) =
                matmul_definition(elem, tiling, "double_buffered").unwrap();
            let kernel = <B::R as Runtime>::language_kernel(&definition, cube_dim).unwrap();
            for (m, k, n) in [(67, 40, 72), (37, 29, 45), (130, 16, 8)] {
                let (lhs, rhs) = (small_operand(m * k, 1), small_operand(k * n, 2));
                let mut expected = vec![0i64; m * n];
                for i in 0..m {
                    for j in 0..n {
                        expected[i * n + j] = (0..k).map(|p| lhs[i * k + p] * rhs[p * n + j]).sum();
                    }
                }
                let upload = |values: &[i64]| {
                    client
                        .create(cubert_runtime::Bytes::from_slice(&operand_bytes(
                            values, elem,
                        )))
                        .unwrap()
                };
                let (l, r) = (upload(&lhs), upload(&rhs));
                let out = client.empty(m * n * elem.size()).unwrap();
                let launched = ops::launch_matmul(
                    &client,
                    kernel.clone(),
                    (&l, &r, &out),
                    (m, k, n),
                    elem,
                    tiling.tile(),
                );
                // Two buffers of f32 sums: 33 KiB for 128 × 128 × 16, past lavapipe's 32.
                let shared = (2 * depth * (block.0 + 4 + block.1)) as usize * 4;
                if shared > client.properties().hardware.max_shared_memory_size {
                    assert!(
                        matches!(
                            launched,
                            Err(cubert_runtime::LaunchError::TooManyResources(
                                cubert_runtime::ResourceLimitError::SharedMemory { .. }
                            ))
                        ),
                        "{tiling:?} needs {shared} bytes of shared memory: {launched:?}"
                    );
                    continue;
                }
                launched.unwrap();
                let read = client.read_one(out).unwrap().to_vec();
                assert!(
                    read == operand_bytes(&expected, elem),
                    "{tiling:?} of {elem} on {m}x{k}x{n} differs from the reference"
                );
            }
        }
    }
    for (block, depth) in [((64, 64), 6), ((256, 256), 8), ((60, 64), 8)] {
        let tiling = MatmulTiling::DoubleBuffered { block, depth };
        assert!(
            matmul_definition(ElemType::F32, tiling, "bad").is_err(),
            "{tiling:?} is refused"
        );
    }
}
