//! Element-type generics, compile-time parameters, builtins, local arrays and out-of-bounds
//! accesses of the kernel language.

use super::{assert_each, assert_same, cover, filled, read_bytes, read_scalars, upload_scalars};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::ir::{Block, Instruction};
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, ServerError, half_rounding};

/// `a * x + y - x`, generic over every numeric element type.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn multiply_add<T: Numeric>(a: T, x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    if i < out.len() {
        out[i] = a * x[i] + y[i] - x[i];
    }
}

/// `sqrt(x * 0.1 + 1.25) - |x| + i`, generic over the float types.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_formula<F: Float>(x: &Array<F>, out: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        out[i] = (v * F::new(0.1) + F::new(1.25)).sqrt() - v.abs() + i as F;
    }
}

/// Copies an array of any scalar type.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn copy_elements<T: Scalar>(x: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        out[i] = x[i];
    }
}

/// Logic of `bool` arrays, comparisons stored as `bool`, and casts between `bool`, `u8`
/// and `i32`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn bool_logic(
    a: &Array<bool>,
    b: &Array<bool>,
    x: &Array<i32>,
    out: &mut Array<bool>,
    bytes: &mut Array<u8>,
) {
    let i = ABSOLUTE_POS;
    if i < a.len() {
        let p = a[i];
        let q = b[i];
        let base = i * 8;
        out[base] = p & q;
        out[base + 1] = p | q;
        out[base + 2] = p ^ q;
        out[base + 3] = !p;
        out[base + 4] = p == q;
        out[base + 5] = p < q;
        out[base + 6] = x[i] > 0;
        out[base + 7] = x[i] as bool;
        bytes[i] = p as u8 + (q as u8) * 2 + (x[i] < 0) as u8 * 4;
    }
}

/// `x * factor`, negated if `negate`, plus `reps` (added one at a time in a loop).
#[cubert_macros::kernel(crate = cubert_runtime)]
fn comptime_affine(
    x: &Array<i32>,
    out: &mut Array<i32>,
    #[comptime] factor: i32,
    #[comptime] negate: bool,
    #[comptime] reps: u32,
) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let mut v = x[i] * factor;
        if negate {
            v = -v;
        }
        let bias = if negate { 1000 } else { 0 };
        for _k in 0..reps {
            v += 1;
        }
        out[i] = v + bias;
    }
}

/// `x * F::new(scale)`: a compile-time `f64` turned into the kernel's float type.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn comptime_scale<F: Float>(x: &Array<F>, out: &mut Array<F>, #[comptime] scale: f64) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        out[i] = x[i] * F::new(scale);
    }
}

/// A scalar parameter declared `mut` and reassigned in the body.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn mutable_parameter(mut a: i32, x: &Array<i32>, out: &mut Array<i32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        a += x[i];
        a *= 2;
        out[i] = a;
    }
}

/// Every builtin of every unit: 20 values per unit at `ABSOLUTE_POS * 20`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn geometry(out: &mut Array<u32>) {
    let base = ABSOLUTE_POS * 20;
    out[base] = ABSOLUTE_POS;
    out[base + 1] = ABSOLUTE_POS_X;
    out[base + 2] = ABSOLUTE_POS_Y;
    out[base + 3] = ABSOLUTE_POS_Z;
    out[base + 4] = UNIT_POS;
    out[base + 5] = UNIT_POS_X;
    out[base + 6] = UNIT_POS_Y;
    out[base + 7] = UNIT_POS_Z;
    out[base + 8] = CUBE_POS;
    out[base + 9] = CUBE_POS_X;
    out[base + 10] = CUBE_POS_Y;
    out[base + 11] = CUBE_POS_Z;
    out[base + 12] = CUBE_DIM;
    out[base + 13] = CUBE_DIM_X;
    out[base + 14] = CUBE_DIM_Y;
    out[base + 15] = CUBE_DIM_Z;
    out[base + 16] = CUBE_COUNT;
    out[base + 17] = CUBE_COUNT_X;
    out[base + 18] = CUBE_COUNT_Y;
    out[base + 19] = CUBE_COUNT_Z;
}

/// A local array's length given by a constant.
const LANES: usize = 4;

/// Local arrays: filled, indexed, summed, updated in place, copied by `let`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn local_arrays(x: &Array<f32>, sums: &mut Array<f32>, ints: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < sums.len() {
        let mut v = [0.0f32; 8];
        for k in 0..8u32 {
            v[k] = x[i * 8 + k] * (k + 1) as f32;
        }
        v[3] += 0.5;
        let mut sum = 0.0f32;
        for k in 0..v.len() {
            sum += v[k];
        }
        sums[i] = sum;

        let mut a = [i; LANES];
        a[1] = 5;
        let b = a;
        a[1] = 7;
        a[2] = 9;
        let mut wide = [x[i * 8] as i64; 3];
        wide[2] *= 3;
        let base = i * 8;
        ints[base] = b[0];
        ints[base + 1] = b[1];
        ints[base + 2] = b[2];
        ints[base + 3] = a[1];
        ints[base + 4] = a[2];
        ints[base + 5] = a.len() + v.len() * 10;
        ints[base + 6] = (wide[0] + wide[2]) as u32;
        ints[base + 7] = x.is_empty() as u32 + (sums.len() == 0) as u32;
    }
}

/// `out[i] = i + 1` for every unit, in bounds or not.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn store_everywhere(out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    out[i] = i + 1;
}

/// `out[i] = x[i + 8] + 1` for every unit of `out`: loads past the end of `x`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn load_shifted(x: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < out.len() {
        out[i] = x[i + 8] + 1;
    }
}

/// A specialization of each kernel of this module.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        multiply_add::definition::<f16>(),
        multiply_add::definition::<bf16>(),
        multiply_add::definition::<f32>(),
        multiply_add::definition::<f64>(),
        multiply_add::definition::<i8>(),
        multiply_add::definition::<i16>(),
        multiply_add::definition::<i32>(),
        multiply_add::definition::<i64>(),
        multiply_add::definition::<u8>(),
        multiply_add::definition::<u16>(),
        multiply_add::definition::<u32>(),
        multiply_add::definition::<u64>(),
        float_formula::definition::<f16>(),
        float_formula::definition::<bf16>(),
        float_formula::definition::<f32>(),
        float_formula::definition::<f64>(),
        copy_elements::definition::<bool>(),
        copy_elements::definition::<f16>(),
        copy_elements::definition::<u64>(),
        bool_logic::definition(),
        comptime_affine::definition(3, false, 0),
        comptime_affine::definition(-2, true, 3),
        comptime_scale::definition::<f32>(0.1),
        comptime_scale::definition::<f16>(2.5),
        geometry::definition(),
        local_arrays::definition(),
        store_everywhere::definition(),
        load_shifted::definition(),
    ]
}

/// Launches `multiply_add::<T>` over `x` and `y` and compares with `expected(a, x, y)`.
fn check_multiply_add<B: TestBackend, T: Numeric>(
    client: &Client<B>,
    a: T,
    x: &[T],
    y: &[T],
    expected: impl Fn(T, T, T) -> T,
) {
    let n = x.len();
    let xs = upload_scalars::<B, T>(client, x);
    let ys = upload_scalars::<B, T>(client, y);
    let out = filled::<B, T>(client, T::default(), n);
    let (count, dim) = cover(n, 4);
    multiply_add::launch::<T, B::R>(client, count, dim, a, &xs, &ys, &out).unwrap();
    let got = read_scalars::<B, T>(client, &out);
    let want: Vec<T> = x.iter().zip(y).map(|(&x, &y)| expected(a, x, y)).collect();
    let inputs: Vec<(T, T)> = x.iter().copied().zip(y.iter().copied()).collect();
    let what = format!("multiply_add::<{}>", T::ELEM);
    if T::ELEM.is_float() && !client.properties().features.strict_float_math {
        // The driver may contract `a * x + y` into a fused multiply-add.
        assert_each(&what, &inputs, &got, &want, |g, w| {
            super::within_ulps(*g, *w, 4)
        });
    } else {
        assert_same(&what, &inputs, &got, &want);
    }
}

/// `f16::from_f32`/`bf16::from_f32` of an `f32` result: how half types round each step.
fn h(value: f32) -> f16 {
    f16::from_f32(value)
}
fn b(value: f32) -> bf16 {
    bf16::from_f32(value)
}

/// One generic kernel runs for every numeric element type with that type's arithmetic:
/// integers wrap, half types round after every operation.
pub fn generic_kernel_runs_for_every_numeric_element_type<B: TestBackend>() {
    let client = client::<B>();
    check_multiply_add::<B, i8>(
        &client,
        3,
        &[0, 1, 50, -100, 127],
        &[1, -1, 9, 7, -128],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, i16>(
        &client,
        -7,
        &[0, 300, 5000, -4681, 32767],
        &[3, 2, 1, 0, -1],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, i32>(
        &client,
        65537,
        &[0, 1, -1, 70000, i32::MAX],
        &[5, i32::MIN, 3, -9, 1],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, i64>(
        &client,
        1 << 33,
        &[0, 1, -1, 1 << 31, i64::MAX],
        &[5, i64::MIN, 3, -9, 1],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, u8>(
        &client,
        7,
        &[0, 1, 100, 200, 255],
        &[3, 250, 9, 100, 255],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, u16>(
        &client,
        300,
        &[0, 1, 219, 65535, 4],
        &[3, 65535, 9, 1, 0],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, u32>(
        &client,
        3,
        &[0, 1, 2, 0x8000_0000, u32::MAX],
        &[0, u32::MAX, 7, 1, 2],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, u64>(
        &client,
        u64::MAX,
        &[0, 1, 2, 1 << 63, u64::MAX],
        &[0, u64::MAX, 7, 1, 2],
        |a, x, y| a.wrapping_mul(x).wrapping_add(y).wrapping_sub(x),
    );
    check_multiply_add::<B, f32>(
        &client,
        1.5,
        &[0.0, 1.0, -2.25, 1e30, 3.0e38],
        &[0.5, -1.0, 1e-3, -1e30, 3.0e38],
        |a, x, y| a * x + y - x,
    );
    check_multiply_add::<B, f64>(
        &client,
        -0.1,
        &[0.0, 1.0, -2.25, 1e300, 0.3],
        &[0.5, -1.0, 1e-3, -1e300, 0.7],
        |a, x, y| a * x + y - x,
    );
    let halves = [0.0, 1.0, -2.25, 1000.0, 0.1, 60000.0];
    let others = [0.5, -1.0, 0.001, 3.3, 7.0, 60000.0];
    check_multiply_add::<B, f16>(
        &client,
        h(1.1),
        &halves.map(h),
        &others.map(h),
        |a, x, y| h(h(h(a.to_f32() * x.to_f32()).to_f32() + y.to_f32()).to_f32() - x.to_f32()),
    );
    check_multiply_add::<B, bf16>(
        &client,
        b(1.1),
        &halves.map(b),
        &others.map(b),
        |a, x, y| b(b(b(a.to_f32() * x.to_f32()).to_f32() + y.to_f32()).to_f32() - x.to_f32()),
    );
}

/// Runs `float_formula::<F>` over `x` and compares with `expected(x, i)`.
fn check_float_formula<B: TestBackend, F: Float>(
    client: &Client<B>,
    x: &[F],
    expected: impl Fn(F, usize) -> F,
) {
    let xs = upload_scalars::<B, F>(client, x);
    let out = filled::<B, F>(client, F::default(), x.len());
    let (count, dim) = cover(x.len(), 2);
    float_formula::launch::<F, B::R>(client, count, dim, &xs, &out).unwrap();
    let got = read_scalars::<B, F>(client, &out);
    let want: Vec<F> = x.iter().enumerate().map(|(i, &v)| expected(v, i)).collect();
    assert_same(&format!("float_formula::<{}>", F::ELEM), x, &got, &want);
}

/// A kernel generic over `F: Float` (`F::new`, a method, `as F`) runs for f16, bf16, f32
/// and f64; `F::new(0.1)` rounds once into the type and half types round after each step.
pub fn generic_float_kernel_runs_for_f16_bf16_f32_f64<B: TestBackend>() {
    let client = client::<B>();
    let values = [0.0, 1.0, -2.5, 10.0, 0.3, -7.75, 100.0];
    let x32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    check_float_formula::<B, f32>(&client, &x32, |v, i| {
        (v * 0.1f64 as f32 + 1.25).sqrt() - v.abs() + i as f32
    });
    check_float_formula::<B, f64>(&client, &values, |v, i| {
        (v * 0.1 + 1.25).sqrt() - v.abs() + i as f64
    });
    let tenth = half_rounding::f64_to_f16(0.1).to_f32();
    let x16: Vec<f16> = values
        .iter()
        .map(|&v| half_rounding::f64_to_f16(v))
        .collect();
    check_float_formula::<B, f16>(&client, &x16, |v, i| {
        let scaled = h(v.to_f32() * tenth);
        let root = h(h(scaled.to_f32() + 1.25).to_f32().sqrt());
        h(h(root.to_f32() - v.to_f32().abs()).to_f32() + i as f32)
    });
    let tenth = half_rounding::f64_to_bf16(0.1).to_f32();
    let xb: Vec<bf16> = values
        .iter()
        .map(|&v| half_rounding::f64_to_bf16(v))
        .collect();
    check_float_formula::<B, bf16>(&client, &xb, |v, i| {
        let scaled = b(v.to_f32() * tenth);
        let root = b(b(scaled.to_f32() + 1.25).to_f32().sqrt());
        b(b(root.to_f32() - v.to_f32().abs()).to_f32() + i as f32)
    });
}

/// Copies `values` with `copy_elements::<T>` and checks the copy.
fn check_copy<B: TestBackend, T: Scalar>(client: &Client<B>, values: &[T]) {
    let xs = upload_scalars::<B, T>(client, values);
    let out = filled::<B, T>(client, T::default(), values.len());
    let (count, dim) = cover(values.len(), 3);
    copy_elements::launch::<T, B::R>(client, count, dim, &xs, &out).unwrap();
    let got = read_scalars::<B, T>(client, &out);
    assert_same(
        &format!("copy_elements::<{}>", T::ELEM),
        values,
        &got,
        values,
    );
}

/// A kernel generic over `T: Scalar` copies arrays of all 13 element types, `bool`
/// included, element for element.
pub fn generic_copy_moves_every_scalar_type_unchanged<B: TestBackend>() {
    let client = client::<B>();
    check_copy::<B, f16>(&client, &[h(1.5), h(-0.0), f16::INFINITY, f16::MAX, h(0.1)]);
    check_copy::<B, bf16>(
        &client,
        &[b(1.5), b(-0.0), bf16::NEG_INFINITY, bf16::MIN, b(0.1)],
    );
    check_copy::<B, f32>(&client, &[1.5, -0.0, f32::MIN_POSITIVE, f32::MAX, 1e-45]);
    check_copy::<B, f64>(&client, &[1.5, -0.0, f64::MIN_POSITIVE, f64::MAX, 5e-324]);
    check_copy::<B, i8>(&client, &[0, -1, i8::MIN, i8::MAX, 42]);
    check_copy::<B, i16>(&client, &[0, -1, i16::MIN, i16::MAX, 4242]);
    check_copy::<B, i32>(&client, &[0, -1, i32::MIN, i32::MAX, 424_242]);
    check_copy::<B, i64>(&client, &[0, -1, i64::MIN, i64::MAX, 42 << 40]);
    check_copy::<B, u8>(&client, &[0, 1, u8::MAX, 0x80, 42]);
    check_copy::<B, u16>(&client, &[0, 1, u16::MAX, 0x8000, 4242]);
    check_copy::<B, u32>(&client, &[0, 1, u32::MAX, 0x8000_0000, 424_242]);
    check_copy::<B, u64>(&client, &[0, 1, u64::MAX, 1 << 63, 42 << 40]);
    check_copy::<B, bool>(&client, &[true, false, false, true, true]);
}

/// `bool` arrays hold one byte per element (0 or 1): `&`, `|`, `^`, `!`, `==`, `<` on
/// bools, comparisons stored as bools, and casts between `bool` and integers.
pub fn bool_arrays_hold_one_byte_and_compute_logic<B: TestBackend>() {
    let client = client::<B>();
    let a = [false, false, true, true, true];
    let bs = [false, true, false, true, true];
    let x = [0, 5, -3, 0, 7];
    let a_h = upload_scalars::<B, bool>(&client, &a);
    let b_h = upload_scalars::<B, bool>(&client, &bs);
    let x_h = upload_scalars::<B, i32>(&client, &x);
    let out = filled::<B, u8>(&client, 0xee, a.len() * 8);
    let bytes = filled::<B, u8>(&client, 0xee, a.len());
    let (count, dim) = cover(a.len(), 2);
    bool_logic::launch::<B::R>(&client, count, dim, &a_h, &b_h, &x_h, &out, &bytes).unwrap();
    let mut want = Vec::new();
    let mut want_bytes = Vec::new();
    for ((&p, &q), &v) in a.iter().zip(&bs).zip(&x) {
        let row = [p & q, p | q, p ^ q, !p, p == q, !p & q, v > 0, v != 0];
        want.extend(row.map(u8::from));
        want_bytes.push(u8::from(p) + 2 * u8::from(q) + 4 * u8::from(v < 0));
    }
    let inputs: Vec<(bool, bool, i32)> = (0..a.len()).map(|i| (a[i], bs[i], x[i])).collect();
    assert_eq!(
        read_bytes::<B>(&client, &out),
        want,
        "bool results, inputs {inputs:?}"
    );
    assert_eq!(
        read_bytes::<B>(&client, &bytes),
        want_bytes,
        "bool as u8, inputs {inputs:?}"
    );
}

/// The same kernel launched with different compile-time values computes with each: a
/// factor, an `if` on a compile-time `bool` (as a statement and as a value) and a loop
/// bound; launching the first values again gives the first results again.
pub fn comptime_values_specialize_the_kernel<B: TestBackend>() {
    let client = client::<B>();
    let x = [0, 1, -4, 100, 7];
    let xs = upload_scalars::<B, i32>(&client, &x);
    let run = |factor: i32, negate: bool, reps: u32| {
        let out = filled::<B, i32>(&client, -1, x.len());
        let (count, dim) = cover(x.len(), 4);
        comptime_affine::launch::<B::R>(&client, count, dim, &xs, &out, factor, negate, reps)
            .unwrap();
        read_scalars::<B, i32>(&client, &out)
    };
    let expected = |factor: i32, negate: bool, reps: u32| -> Vec<i32> {
        x.iter()
            .map(|&v| {
                let scaled = v * factor;
                let signed = if negate { -scaled } else { scaled };
                signed + reps as i32 + if negate { 1000 } else { 0 }
            })
            .collect()
    };
    assert_eq!(run(3, false, 0), expected(3, false, 0), "factor 3");
    assert_eq!(
        run(-2, true, 3),
        expected(-2, true, 3),
        "factor -2, negated, 3 reps"
    );
    assert_eq!(run(3, true, 0), expected(3, true, 0), "factor 3, negated");
    assert_eq!(run(3, false, 5), expected(3, false, 5), "factor 3, 5 reps");
    assert_eq!(run(3, false, 0), expected(3, false, 0), "factor 3 again");

    // A compile-time f64 through `F::new`, rounded once into f32 and f16.
    let values = [1.0, -3.0, 0.5, 1000.0];
    for scale in [0.1, 2.5, -7.0] {
        let x32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let xs = upload_scalars::<B, f32>(&client, &x32);
        let out = filled::<B, f32>(&client, 0.0, x32.len());
        let (count, dim) = cover(x32.len(), 4);
        comptime_scale::launch::<f32, B::R>(&client, count.clone(), dim, &xs, &out, scale).unwrap();
        let want: Vec<f32> = x32.iter().map(|&v| v * scale as f32).collect();
        let got = read_scalars::<B, f32>(&client, &out);
        assert_same(&format!("f32 times F::new({scale})"), &x32, &got, &want);

        let x16: Vec<f16> = values.iter().map(|&v| f16::from_f64(v)).collect();
        let xs = upload_scalars::<B, f16>(&client, &x16);
        let out = filled::<B, f16>(&client, f16::ZERO, x16.len());
        comptime_scale::launch::<f16, B::R>(&client, count, dim, &xs, &out, scale).unwrap();
        let factor = half_rounding::f64_to_f16(scale).to_f32();
        let want: Vec<f16> = x16.iter().map(|&v| h(v.to_f32() * factor)).collect();
        let got = read_scalars::<B, f16>(&client, &out);
        assert_same(&format!("f16 times F::new({scale})"), &x16, &got, &want);
    }
}

/// A scalar parameter declared `mut` can be reassigned in the body (`a += x[i]`), and the
/// kernel records its IR (the expansion turns the parameter into a variable).
pub fn mutable_scalar_parameters_can_be_reassigned<B: TestBackend>() {
    let client = client::<B>();
    let x = [0, 1, -5, 100];
    let xs = upload_scalars::<B, i32>(&client, &x);
    let out = filled::<B, i32>(&client, 0, x.len());
    let (count, dim) = cover(x.len(), 4);
    mutable_parameter::launch::<B::R>(&client, count, dim, 7, &xs, &out).unwrap();
    let want: Vec<i32> = x.iter().map(|&v| (7 + v) * 2).collect();
    assert_eq!(read_scalars::<B, i32>(&client, &out), want);
    let definition = mutable_parameter::definition();
    assert!(definition.ir().is_ok(), "{:?}", definition.ir().err());
}

/// How many `If` instructions `block` holds, nested ones included.
fn count_ifs(block: &Block) -> usize {
    block
        .instructions
        .iter()
        .map(|instruction| match instruction {
            Instruction::If {
                then, otherwise, ..
            } => 1 + count_ifs(then) + count_ifs(otherwise),
            Instruction::Loop { body } | Instruction::RangeLoop { body, .. } => count_ifs(body),
            _ => 0,
        })
        .sum()
}

/// An `if` on a compile-time `bool` is decided while expanding: only the bounds check's
/// `if` reaches the IR, whichever the value.
pub fn comptime_if_records_only_the_taken_branch<B: TestBackend>() {
    for negate in [false, true] {
        let definition = comptime_affine::definition(3, negate, 2);
        let ir = definition.ir().unwrap();
        assert_eq!(count_ifs(&ir.body), 1, "negate = {negate}: {ir:#?}");
    }
}

/// The 20 builtins of every unit of a 3-D launch (cubes of 4x2x2 units, 3x2x2 cubes) equal
/// the geometry computed on the host: positions linear with x fastest, `ABSOLUTE_POS =
/// CUBE_POS * CUBE_DIM + UNIT_POS`.
pub fn builtins_report_the_3d_launch_geometry<B: TestBackend>() {
    let client = client::<B>();
    let (dim, count) = ((4u32, 2u32, 2u32), (3u32, 2u32, 2u32));
    let units_per_cube = dim.0 * dim.1 * dim.2;
    let cubes = count.0 * count.1 * count.2;
    let total = (units_per_cube * cubes) as usize;
    let out = filled::<B, u32>(&client, u32::MAX, total * 20);
    geometry::launch::<B::R>(
        &client,
        CubeCount::Static(count.0, count.1, count.2),
        CubeDim::new_3d(dim.0, dim.1, dim.2),
        &out,
    )
    .unwrap();
    let got = read_scalars::<B, u32>(&client, &out);
    let mut want = vec![u32::MAX; total * 20];
    for (cz, cy, cx) in grid(count) {
        for (uz, uy, ux) in grid(dim) {
            let cube_pos = cx + cy * count.0 + cz * count.0 * count.1;
            let unit_pos = ux + uy * dim.0 + uz * dim.0 * dim.1;
            let absolute = cube_pos * units_per_cube + unit_pos;
            let row = [
                absolute,
                cx * dim.0 + ux,
                cy * dim.1 + uy,
                cz * dim.2 + uz,
                unit_pos,
                ux,
                uy,
                uz,
                cube_pos,
                cx,
                cy,
                cz,
                units_per_cube,
                dim.0,
                dim.1,
                dim.2,
                cubes,
                count.0,
                count.1,
                count.2,
            ];
            let base = absolute as usize * 20;
            want[base..base + 20].copy_from_slice(&row);
        }
    }
    let names = [
        "ABSOLUTE_POS",
        "ABSOLUTE_POS_X",
        "ABSOLUTE_POS_Y",
        "ABSOLUTE_POS_Z",
        "UNIT_POS",
        "UNIT_POS_X",
        "UNIT_POS_Y",
        "UNIT_POS_Z",
        "CUBE_POS",
        "CUBE_POS_X",
        "CUBE_POS_Y",
        "CUBE_POS_Z",
        "CUBE_DIM",
        "CUBE_DIM_X",
        "CUBE_DIM_Y",
        "CUBE_DIM_Z",
        "CUBE_COUNT",
        "CUBE_COUNT_X",
        "CUBE_COUNT_Y",
        "CUBE_COUNT_Z",
    ];
    for (index, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g,
            w,
            "unit at ABSOLUTE_POS {}: {} is {g}, expected {w}",
            index / 20,
            names[index % 20]
        );
    }
}

/// `(z, y, x)` for every point of a `(x, y, z)` extent, x fastest.
fn grid((x, y, z): (u32, u32, u32)) -> impl Iterator<Item = (u32, u32, u32)> {
    (0..z).flat_map(move |k| (0..y).flat_map(move |j| (0..x).map(move |i| (k, j, i))))
}

/// Local arrays: `[v; 8]` and `[v; CONST]` fill, index, update in place (`v[k] += ..`) and
/// sum in a loop; `let b = a;` copies, so writing `a` afterwards leaves `b` unchanged;
/// `len()` of a local array is its length and `is_empty()` of a parameter is false.
pub fn local_arrays_fill_index_sum_and_copy_on_let<B: TestBackend>() {
    let client = client::<B>();
    let units = 6;
    let x: Vec<f32> = (0..units * 8).map(|k| k as f32 * 0.75 - 11.0).collect();
    let xs = upload_scalars::<B, f32>(&client, &x);
    let sums = filled::<B, f32>(&client, -1.0, units);
    let ints = filled::<B, u32>(&client, u32::MAX, units * 8);
    let (count, dim) = cover(units, 4);
    local_arrays::launch::<B::R>(&client, count, dim, &xs, &sums, &ints).unwrap();
    let mut want_sums = Vec::new();
    let mut want_ints = Vec::new();
    for i in 0..units {
        let mut v = [0.0f32; 8];
        for (k, slot) in v.iter_mut().enumerate() {
            *slot = x[i * 8 + k] * (k + 1) as f32;
        }
        v[3] += 0.5;
        // Summed left to right, as the kernel's loop does.
        want_sums.push(v.iter().fold(0.0f32, |sum, value| sum + value));
        let first = x[i * 8] as i64;
        want_ints.extend([
            i as u32,
            5,
            i as u32,
            7,
            9,
            (LANES + 8 * 10) as u32,
            (first + first * 3) as u32,
            0,
        ]);
    }
    let got_sums = read_scalars::<B, f32>(&client, &sums);
    assert_same("local array sums", &x, &got_sums, &want_sums);
    assert_eq!(
        read_scalars::<B, u32>(&client, &ints),
        want_ints,
        "local array copies"
    );
}

/// A store past the end of an array makes the launch fail with `OutOfBounds` (naming the
/// kernel) at the next sync, once; the in-bounds stores of the same launch are written.
pub fn out_of_bounds_store_fails_at_sync_and_keeps_in_bounds_writes<B: TestBackend>() {
    let client = client::<B>();
    let len = 40;
    let out = filled::<B, u32>(&client, 0, len);
    // 64 units over 40 elements: 24 stores past the end.
    store_everywhere::launch::<B::R>(
        &client,
        CubeCount::Static(2, 1, 1),
        CubeDim::new_1d(32),
        &out,
    )
    .expect("an out-of-bounds launch is queued");
    let error = client.sync().unwrap_err();
    assert!(
        matches!(&error, ServerError::OutOfBounds { kernel, accesses, .. }
            if kernel.contains("store_everywhere") && *accesses >= 1),
        "expected OutOfBounds naming store_everywhere, got {error:?}"
    );
    client.sync().expect("the error is reported once");
    let want: Vec<u32> = (1..=len as u32).collect();
    assert_eq!(read_scalars::<B, u32>(&client, &out), want);
}

/// A load past the end of an array makes the launch fail with `OutOfBounds` at the next
/// read; the skipped loads give zero and the other units' results are written.
pub fn out_of_bounds_load_fails_at_the_next_read<B: TestBackend>() {
    let client = client::<B>();
    let x: Vec<u32> = (100..116).collect();
    let xs = upload_scalars::<B, u32>(&client, &x);
    let out = filled::<B, u32>(&client, 0, x.len());
    let (count, dim) = cover(x.len(), 8);
    load_shifted::launch::<B::R>(&client, count, dim, &xs, &out).unwrap();
    let error = client.read_one(out.clone()).unwrap_err();
    assert!(
        matches!(&error, ServerError::OutOfBounds { kernel, .. } if kernel.contains("load_shifted")),
        "expected OutOfBounds naming load_shifted, got {error:?}"
    );
    let want: Vec<u32> = (0..x.len())
        .map(|i| x.get(i + 8).map_or(1, |v| v + 1))
        .collect();
    assert_eq!(read_scalars::<B, u32>(&client, &out), want);
}
