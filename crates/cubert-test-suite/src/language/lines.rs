//! Lines: `x.line::<N>(i)` loads elements `i * N .. i * N + N` as a local array and
//! `y.set_line(i, v)` stores one, for widths 1, 2, 4 and 8, on aligned buffers, on views at
//! odd offsets (where a GPU can't use a vector access) and across the end of an array.

use super::{assert_same, filled, read_scalars, upload_scalars};
use crate::backend::TestBackend;
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, ServerError};

/// `out = x + x + y` by lines of 1.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn axpy_lines_1<T: Numeric>(x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    let a = x.line::<1>(i);
    let b = y.line::<1>(i);
    let mut c = a;
    c[0] = a[0] + a[0] + b[0];
    out.set_line(i, c);
}

/// `out = x + x + y` by lines of 2.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn axpy_lines_2<T: Numeric>(x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    let a = x.line::<2>(i);
    let b = y.line::<2>(i);
    let mut c = a;
    for k in 0..2u32 {
        c[k] = a[k] + a[k] + b[k];
    }
    out.set_line(i, c);
}

/// `out = x + x + y` by lines of 4 (a `float4` for `f32`).
#[cubert_macros::kernel(crate = cubert_runtime)]
fn axpy_lines_4<T: Numeric>(x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    let a = x.line::<4>(i);
    let b = y.line::<4>(i);
    let mut c = a;
    for k in 0..4u32 {
        c[k] = a[k] + a[k] + b[k];
    }
    out.set_line(i, c);
}

/// `out = x + x + y` by lines of 8 (two 16-byte accesses for `f32`).
#[cubert_macros::kernel(crate = cubert_runtime)]
fn axpy_lines_8<T: Numeric>(x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    let a = x.line::<8>(i);
    let b = y.line::<8>(i);
    let mut c = a;
    for k in 0..8u32 {
        c[k] = a[k] + a[k] + b[k];
    }
    out.set_line(i, c);
}

/// A specialization of each kernel here.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        axpy_lines_1::definition::<f32>(),
        axpy_lines_2::definition::<f16>(),
        axpy_lines_4::definition::<f32>(),
        axpy_lines_4::definition::<u8>(),
        axpy_lines_4::definition::<f64>(),
        axpy_lines_8::definition::<f32>(),
        axpy_lines_8::definition::<i64>(),
        axpy_lines_8::definition::<bf16>(),
    ]
}

/// Which kernel, by width.
fn launch_axpy<B: TestBackend, T: Numeric>(
    client: &crate::backend::Client<B>,
    width: u32,
    lines: u32,
    handles: (
        &cubert_runtime::Handle,
        &cubert_runtime::Handle,
        &cubert_runtime::Handle,
    ),
) {
    let (x, y, out) = handles;
    let count = CubeCount::Static(lines.div_ceil(32).max(1), 1, 1);
    let dim = CubeDim::new_1d(32);
    let result = match width {
        1 => axpy_lines_1::launch::<T, B::R>(client, count, dim, x, y, out),
        2 => axpy_lines_2::launch::<T, B::R>(client, count, dim, x, y, out),
        4 => axpy_lines_4::launch::<T, B::R>(client, count, dim, x, y, out),
        _ => axpy_lines_8::launch::<T, B::R>(client, count, dim, x, y, out),
    };
    result.unwrap();
}

fn check_axpy<B: TestBackend, T: Numeric>(values: &[T], width: u32) {
    let client = client::<B>();
    let n = values.len();
    let y: Vec<T> = values.iter().rev().copied().collect();
    let xs = upload_scalars::<B, T>(&client, values);
    let ys = upload_scalars::<B, T>(&client, &y);
    let out = filled::<B, T>(&client, T::from_i128(0), n);
    launch_axpy::<B, T>(&client, width, n as u32 / width, (&xs, &ys, &out));
    client
        .sync()
        .unwrap_or_else(|error| panic!("width {width}: {error}"));
    let want: Vec<T> = values
        .iter()
        .zip(&y)
        .map(|(x, y)| T::add(T::add(*x, *x), *y))
        .collect();
    assert_same(
        &format!("lines of {width} {}", T::ELEM),
        values,
        &read_scalars::<B, T>(&client, &out),
        &want,
    );
}

/// Lines of 1, 2, 4 and 8 elements load and store exactly the elements `i * N .. i * N +
/// N`, for floats, halves and integers.
pub fn lines_of_every_width_load_and_store_their_elements<B: TestBackend>() {
    let floats: Vec<f32> = (0..256).map(|i| i as f32 * 0.75 - 40.0).collect();
    for width in [1, 2, 4, 8] {
        check_axpy::<B, f32>(&floats, width);
    }
    let halves: Vec<f16> = floats.iter().map(|v| f16::from_f32(*v)).collect();
    check_axpy::<B, f16>(&halves, 2);
    let brains: Vec<bf16> = floats.iter().map(|v| bf16::from_f32(*v)).collect();
    check_axpy::<B, bf16>(&brains, 8);
    let bytes: Vec<u8> = (0..=255).collect();
    check_axpy::<B, u8>(&bytes, 4);
    let longs: Vec<i64> = (0..256).map(|i| (i - 128) << 40).collect();
    check_axpy::<B, i64>(&longs, 8);
    let doubles: Vec<f64> = floats.iter().map(|v| f64::from(*v) / 3.0).collect();
    check_axpy::<B, f64>(&doubles, 4);
}

/// Lines of views that start 4 bytes into an allocation (not 16-byte aligned) still load
/// and store the right elements.
pub fn lines_of_views_at_unaligned_offsets_move_the_right_elements<B: TestBackend>() {
    let client = client::<B>();
    let n = 64usize;
    let values: Vec<f32> = (0..=n as i32).map(|i| i as f32).collect();
    let backing = upload_scalars::<B, f32>(&client, &values); // n + 1 elements
    let x = backing.view(4, (n * 4) as u64).unwrap();
    let out_backing = filled::<B, f32>(&client, -1.0, n + 1);
    let out = out_backing.view(4, (n * 4) as u64).unwrap();
    let ys = filled::<B, f32>(&client, 1.0, n);
    axpy_lines_4::launch::<f32, B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d((n / 4) as u32),
        &x,
        &ys,
        &out,
    )
    .unwrap();
    let got = read_scalars::<B, f32>(&client, &out_backing);
    let mut want = vec![-1.0f32];
    want.extend((1..=n).map(|v| v as f32 * 2.0 + 1.0));
    assert_eq!(got, want);
}

/// A line across the end of an array loads zero past the end, stores only the elements
/// inside, and fails the launch with `OutOfBounds` at the next sync.
pub fn lines_across_the_end_store_only_inside_and_fail_the_launch<B: TestBackend>() {
    let client = client::<B>();
    let n = 10usize; // lines 0, 1 whole; line 2 holds elements 8, 9 and two past the end
    let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let xs = upload_scalars::<B, f32>(&client, &values);
    let ys = filled::<B, f32>(&client, 0.5, n);
    let out = filled::<B, f32>(&client, 0.0, n);
    axpy_lines_4::launch::<f32, B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(3),
        &xs,
        &ys,
        &out,
    )
    .unwrap();
    let error = client.sync().unwrap_err();
    assert!(
        matches!(&error, ServerError::OutOfBounds { kernel, .. } if kernel.contains("axpy_lines_4")),
        "expected OutOfBounds naming axpy_lines_4, got {error:?}"
    );
    let want: Vec<f32> = values.iter().map(|v| v * 2.0 + 0.5).collect();
    assert_eq!(read_scalars::<B, f32>(&client, &out), want);
}
