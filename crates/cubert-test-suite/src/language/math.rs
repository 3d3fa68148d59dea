//! Math intrinsics of the kernel language: the float methods (as methods and as
//! `F::method(x)` calls) against Rust's `std` (and `libm::erf`), exact where IEEE 754
//! fixes the result and within a few ulps for the transcendental functions; half types
//! computing in `f32` and rounding back; integer `abs`/`min`/`max`; `select` and `is_nan`.

use super::{assert_each, assert_same, cover, filled, read_bytes, read_scalars, upload_scalars};
use super::{assert_refused_as_unsupported, within_ulps};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::ElemType;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;

/// The one-argument float methods, 16 results per element (in [`UNARY`]'s order); the
/// transcendental ones only if `transcendental` (the others are left as they were).
#[cubert_macros::kernel(crate = cubert_runtime)]
fn unary_math<F: Float>(x: &Array<F>, out: &mut Array<F>, #[comptime] transcendental: bool) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let base = i * 16;
        out[base] = v.sqrt();
        if transcendental {
            out[base + 1] = v.exp();
            out[base + 2] = v.ln();
            out[base + 3] = v.log2();
            out[base + 4] = v.log10();
            out[base + 5] = v.sin();
            out[base + 6] = v.cos();
            out[base + 7] = v.tan();
            out[base + 8] = v.tanh();
            out[base + 9] = v.erf();
        }
        out[base + 10] = v.floor();
        out[base + 11] = v.ceil();
        out[base + 12] = v.round();
        out[base + 13] = v.trunc();
        out[base + 14] = v.recip();
        out[base + 15] = v.abs();
    }
}

/// The names of [`unary_math`]'s results.
const UNARY: [&str; 16] = [
    "sqrt", "exp", "ln", "log2", "log10", "sin", "cos", "tan", "tanh", "erf", "floor", "ceil",
    "round", "trunc", "recip", "abs",
];

/// The results of [`unary_math`] IEEE 754 (or the language) fixes exactly.
const UNARY_EXACT: [usize; 7] = [0, 10, 11, 12, 13, 14, 15];

/// The methods of two and three arguments, also called as `F::method(..)`: 8 results per
/// element (in [`BINARY`]'s order), and `is_nan` of `x` and `x * y`; `powf` only if
/// `transcendental`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn binary_math<F: Float>(
    x: &Array<F>,
    y: &Array<F>,
    z: &Array<F>,
    out: &mut Array<F>,
    nan: &mut Array<bool>,
    #[comptime] transcendental: bool,
) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let w = y[i];
        let base = i * 8;
        if transcendental {
            out[base] = v.abs().powf(w);
            out[base + 7] = F::powf(F::abs(v), w);
        }
        out[base + 1] = v.min(w);
        out[base + 2] = v.max(w);
        out[base + 3] = v.mul_add(w, z[i]);
        out[base + 4] = F::min(v, w);
        out[base + 5] = F::max(v, w);
        out[base + 6] = F::sqrt(F::abs(v));
        nan[i * 2] = v.is_nan();
        nan[i * 2 + 1] = (v * w).is_nan();
    }
}

/// The names of [`binary_math`]'s results.
const BINARY: [&str; 8] = [
    "|x|.powf(y)",
    "x.min(y)",
    "x.max(y)",
    "x.mul_add(y, z)",
    "F::min(x, y)",
    "F::max(x, y)",
    "F::sqrt(F::abs(x))",
    "F::powf(F::abs(x), y)",
];

/// The results of [`binary_math`] fixed exactly (all but `powf`).
const BINARY_EXACT: [usize; 6] = [1, 2, 3, 4, 5, 6];

/// `select` on `f32`, `i32` and `bool` values, with conditions read from an array and
/// computed by `is_nan` and a comparison.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn selects(
    c: &Array<bool>,
    x: &Array<f32>,
    y: &Array<i32>,
    floats: &mut Array<f32>,
    ints: &mut Array<i32>,
    bools: &mut Array<bool>,
) {
    let i = ABSOLUTE_POS;
    if i < c.len() {
        floats[i * 2] = select(c[i], x[i], -x[i]);
        floats[i * 2 + 1] = select(x[i].is_nan(), 0.0, x[i] * 2.0);
        ints[i * 2] = select(c[i], y[i], 7);
        ints[i * 2 + 1] = select(y[i] > 0 && !c[i], y[i] * 10, -1);
        bools[i] = select(c[i], y[i] > 0, x[i] < 0.0);
    }
}

/// `abs`, `min` and `max` of integers, as methods and as `T::method(..)` calls.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn int_math(
    a: &Array<i32>,
    b: &Array<i32>,
    u: &Array<u8>,
    v: &Array<u8>,
    ints: &mut Array<i32>,
    bytes: &mut Array<u8>,
) {
    let i = ABSOLUTE_POS;
    if i < a.len() {
        let base = i * 5;
        ints[base] = a[i].abs();
        ints[base + 1] = a[i].min(b[i]);
        ints[base + 2] = a[i].max(b[i]);
        ints[base + 3] = i32::max(a[i], b[i]);
        ints[base + 4] = i32::abs(b[i]);
        bytes[i * 3] = u[i].min(v[i]);
        bytes[i * 3 + 1] = u[i].max(v[i]);
        bytes[i * 3 + 2] = u8::min(u[i], v[i]).abs();
    }
}

/// The transcendental functions of one argument and `powf`, 10 results per element (in
/// [`F64_FUNCTIONS`]'s order); run on `f64`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn f64_functions<F: Float>(x: &Array<F>, y: &Array<F>, out: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let base = i * 10;
        out[base] = v.exp();
        out[base + 1] = v.ln();
        out[base + 2] = v.log2();
        out[base + 3] = v.log10();
        out[base + 4] = v.sin();
        out[base + 5] = v.cos();
        out[base + 6] = v.tan();
        out[base + 7] = v.tanh();
        out[base + 8] = v.erf();
        out[base + 9] = v.powf(y[i]);
    }
}

/// The names of [`f64_functions`]'s results.
const F64_FUNCTIONS: [&str; 10] = [
    "exp", "ln", "log2", "log10", "sin", "cos", "tan", "tanh", "erf", "powf",
];

/// A specialization of each kernel of this module.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        unary_math::definition::<f16>(true),
        unary_math::definition::<bf16>(true),
        unary_math::definition::<f32>(true),
        unary_math::definition::<f64>(true),
        binary_math::definition::<f16>(true),
        binary_math::definition::<bf16>(true),
        binary_math::definition::<f32>(true),
        binary_math::definition::<f64>(true),
        unary_math::definition::<f64>(false),
        binary_math::definition::<f64>(false),
        f64_functions::definition::<f64>(),
        selects::definition(),
        int_math::definition(),
    ]
}

/// A float type with its reference results on the host.
trait HostFloat: Float {
    /// `value` rounded into the type.
    fn of(value: f64) -> Self;
    /// The 16 results of [`unary_math`].
    fn unary(v: Self) -> [Self; 16];
    /// The 8 results of [`binary_math`].
    fn binary(v: Self, w: Self, u: Self) -> [Self; 8];
    /// `v * w + u` rounded twice: what an unfused `mul_add` gives.
    fn mul_then_add(v: Self, w: Self, u: Self) -> Self;
}

macro_rules! host_float {
    ($($ty:ty),*) => {$(
        impl HostFloat for $ty {
            fn of(value: f64) -> Self {
                value as $ty
            }
            fn unary(v: Self) -> [Self; 16] {
                [
                    v.sqrt(),
                    v.exp(),
                    v.ln(),
                    v.log2(),
                    v.log10(),
                    v.sin(),
                    v.cos(),
                    v.tan(),
                    v.tanh(),
                    libm::erf(v as f64) as $ty,
                    v.floor(),
                    v.ceil(),
                    v.round(),
                    v.trunc(),
                    v.recip(),
                    v.abs(),
                ]
            }
            fn binary(v: Self, w: Self, u: Self) -> [Self; 8] {
                [
                    v.abs().powf(w),
                    v.min(w),
                    v.max(w),
                    v.mul_add(w, u),
                    v.min(w),
                    v.max(w),
                    v.abs().sqrt(),
                    v.abs().powf(w),
                ]
            }
            fn mul_then_add(v: Self, w: Self, u: Self) -> Self {
                v * w + u
            }
        }
    )*};
}
host_float!(f32, f64);

/// Half types: the `f32` result of each method, rounded into the type once.
macro_rules! host_half {
    ($($ty:ty),*) => {$(
        impl HostFloat for $ty {
            fn of(value: f64) -> Self {
                <$ty>::from_f64(value)
            }
            fn unary(v: Self) -> [Self; 16] {
                f32::unary(v.to_f32()).map(<$ty>::from_f32)
            }
            fn binary(v: Self, w: Self, u: Self) -> [Self; 8] {
                f32::binary(v.to_f32(), w.to_f32(), u.to_f32()).map(<$ty>::from_f32)
            }
            fn mul_then_add(v: Self, w: Self, u: Self) -> Self {
                <$ty>::from_f32(f32::mul_then_add(v.to_f32(), w.to_f32(), u.to_f32()))
            }
        }
    )*};
}
host_half!(f16, bf16);

/// Inputs of the one-argument methods: `(value, moderate)`; the transcendental functions
/// are compared on moderate inputs only.
fn unary_inputs() -> Vec<(f64, bool)> {
    let moderate = [
        0.1, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 5.25, 7.0, 10.0, -0.3, -0.5, -1.0, -1.5, -2.5,
        -2.9, -6.0,
    ];
    let special = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e30,
        -1e-30,
        4.5,
        -3.5,
        0.49999997,
        8388609.0,
        -1e6,
    ];
    moderate
        .iter()
        .map(|&v| (v, true))
        .chain(special.iter().map(|&v| (v, false)))
        .collect()
}

/// Inputs of the methods of several arguments: `(x, y, z, moderate)`; `powf` is compared
/// on moderate inputs only.
fn binary_inputs() -> Vec<(f64, f64, f64, bool)> {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    vec![
        (2.0, 10.0, 1.0, true),
        (0.5, -3.0, 0.25, true),
        (10.0, 0.5, -3.0, true),
        (1.7, 2.3, 0.1, true),
        (-3.0, -2.5, 1e-3, true),
        (0.3, 0.7, -0.21, true),
        (1.0 + 1.0 / 1024.0, 1.0 + 1.0 / 1024.0, -1.0, true),
        (-1.0, 2.0, 3.0, true),
        (3.0, -4.0, 12.0, true),
        (nan, 1.0, 0.0, false),
        (1.0, nan, 0.0, false),
        (nan, nan, nan, false),
        (inf, 5.0, -inf, false),
        (-inf, 5.0, 1.0, false),
        (0.0, -1.0, 0.0, false),
        (1e30, 1e10, 1e40, false),
    ]
}

/// Runs [`unary_math`] and [`binary_math`] for `F` on the inputs and checks every result:
/// bit for bit for the exact ones, within `ulps` for the others on moderate inputs. Where
/// the device's float math is not strict (`Features::strict_float_math`),
/// `mul_add` may also round twice, like `x * y + z`.
fn check_float_methods<B: TestBackend, F: HostFloat>(client: &Client<B>, exact: bool, ulps: u32) {
    let features = &client.properties().features;
    // Without strict float math (wgpu), `mul_add` may round twice and the transcendental
    // functions have WGSL's accuracy.
    let relaxed = !features.strict_float_math;
    let transcendental = F::ELEM != ElemType::F64 || features.f64_transcendentals;
    let as_f32 = |v: F| f32::from_bits(v.to_bits() as u32);
    let unary = unary_inputs();
    let x: Vec<F> = unary.iter().map(|&(v, _)| F::of(v)).collect();
    let xs = upload_scalars::<B, F>(client, &x);
    let out = filled::<B, F>(client, F::default(), x.len() * 16);
    let (count, dim) = cover(x.len(), 8);
    unary_math::launch::<F, B::R>(client, count, dim, &xs, &out, transcendental).unwrap();
    let got = read_scalars::<B, F>(client, &out);
    for (column, name) in UNARY.iter().enumerate() {
        let is_exact = UNARY_EXACT.contains(&column);
        if is_exact != exact {
            continue;
        }
        let (mut inputs, mut got_column, mut want) = (Vec::new(), Vec::new(), Vec::new());
        for (row, (&v, &(_, moderate))) in x.iter().zip(&unary).enumerate() {
            if exact || moderate {
                inputs.push(v);
                got_column.push(got[row * 16 + column]);
                want.push(F::unary(v)[column]);
            }
        }
        let what = format!("{}::{name}", F::ELEM);
        // Without strict float math, f32's transcendental functions have WGSL's accuracy.
        let wgsl = relaxed && F::ELEM == ElemType::F32;
        let row = std::cell::Cell::new(0);
        assert_each(&what, &inputs, &got_column, &want, |g, w| {
            let x = inputs[row.get()];
            row.set(row.get() + 1);
            if exact {
                super::same(*g, *w)
            } else {
                within_ulps(*g, *w, ulps)
                    || (wgsl
                        && super::within_wgsl_accuracy(name, as_f32(x), as_f32(*g), as_f32(*w)))
            }
        });
    }

    let binary = binary_inputs();
    let rows: Vec<(F, F, F)> = binary
        .iter()
        .map(|&(v, w, u, _)| (F::of(v), F::of(w), F::of(u)))
        .collect();
    let column_of = |k: usize| {
        rows.iter()
            .map(move |row| [row.0, row.1, row.2][k])
            .collect::<Vec<F>>()
    };
    let (xs, ys, zs) = (
        upload_scalars::<B, F>(client, &column_of(0)),
        upload_scalars::<B, F>(client, &column_of(1)),
        upload_scalars::<B, F>(client, &column_of(2)),
    );
    let out = filled::<B, F>(client, F::default(), rows.len() * 8);
    let nan = filled::<B, u8>(client, 0xee, rows.len() * 2);
    let (count, dim) = cover(rows.len(), 8);
    binary_math::launch::<F, B::R>(
        client,
        count,
        dim,
        &xs,
        &ys,
        &zs,
        &out,
        &nan,
        transcendental,
    )
    .unwrap();
    let got = read_scalars::<B, F>(client, &out);
    for (column, name) in BINARY.iter().enumerate() {
        let is_exact = BINARY_EXACT.contains(&column);
        if is_exact != exact {
            continue;
        }
        let (mut inputs, mut got_column, mut want) = (Vec::new(), Vec::new(), Vec::new());
        for (row, (&(v, w, u), &(.., moderate))) in rows.iter().zip(&binary).enumerate() {
            if exact || moderate {
                inputs.push((v, w, u));
                got_column.push(got[row * 8 + column]);
                want.push(F::binary(v, w, u)[column]);
            }
        }
        let what = format!("{}::{name}", F::ELEM);
        let mul_add = column == 3;
        // `assert_each` matches the rows in order: the row's inputs give the unfused value.
        let row = std::cell::Cell::new(0);
        assert_each(&what, &inputs, &got_column, &want, |g, w| {
            let (v, y, u) = inputs[row.get()];
            row.set(row.get() + 1);
            if exact {
                super::same(*g, *w)
                    || (mul_add && relaxed && super::same(*g, F::mul_then_add(v, y, u)))
            } else {
                within_ulps(*g, *w, ulps)
                    || (relaxed
                        && F::ELEM == ElemType::F32
                        && within_wgsl_pow_accuracy(as_f32(v), as_f32(y), as_f32(*g), as_f32(*w)))
            }
        });
    }
    let want_nan: Vec<u8> = rows
        .iter()
        .flat_map(|&(v, w, _)| [v.is_nan(), F::mul(v, w).is_nan()].map(u8::from))
        .collect();
    assert_same(
        &format!("{}::is_nan", F::ELEM),
        &rows,
        &read_bytes::<B>(client, &nan),
        &want_nan,
    );
}

/// Whether `got` is within WGSL's accuracy of `want = |x|.powf(y)` for `f32`: WGSL's `pow`
/// is `exp2(y * log2(x))`, so it inherits `exp2`'s 3 + 2·|e| ulps (`e` the exponent) and
/// `log2`'s error (2^-21 absolute) scaled by `y`, about 2.8·|y| ulps of the result.
fn within_wgsl_pow_accuracy(x: f32, y: f32, got: f32, want: f32) -> bool {
    let exponent = (y * x.abs().log2()).abs();
    let ulps = 3.0 + 2.0 * exponent + 3.0 * y.abs();
    within_ulps(got, want, ulps.ceil().min(1e6) as u32)
}

/// `sqrt`, `floor`, `ceil`, `round` (ties away from zero), `trunc`, `recip`, `abs`, `min`
/// and `max` (the other operand when one is NaN), `mul_add` (fused) and `is_nan` of f32
/// and f64, as methods and as `F::method(..)`, equal Rust's `std` bit for bit, special
/// values included.
pub fn exact_float_methods_match_std_bit_for_bit<B: TestBackend>() {
    let client = client::<B>();
    check_float_methods::<B, f32>(&client, true, 0);
    check_float_methods::<B, f64>(&client, true, 0);
    assert_eq!(2.5f32.round(), 3.0);
}

/// `exp`, `ln`, `log2`, `log10`, `sin`, `cos`, `tan`, `tanh`, `erf` and `powf` of f32 and
/// f64 are within 4 ulps of Rust's `std` (`libm::erf` for `erf`) on moderate inputs.
/// Where the device has no `f64` transcendental functions
/// (`Features::f64_transcendentals`), a kernel calling them is refused with
/// `LaunchError::Unsupported`.
pub fn transcendental_float_methods_are_within_four_ulps_of_std<B: TestBackend>() {
    let client = client::<B>();
    check_float_methods::<B, f32>(&client, false, 4);
    if client.properties().features.f64_transcendentals {
        check_float_methods::<B, f64>(&client, false, 4);
    } else {
        let xs = upload_scalars::<B, f64>(&client, &[1.0, 2.0]);
        let out = filled::<B, f64>(&client, 0.0, 2 * 16);
        let (count, dim) = cover(2, 8);
        let launched = unary_math::launch::<f64, B::R>(&client, count, dim, &xs, &out, true);
        assert_refused_as_unsupported::<B>(&client, launched, "f64 transcendentals");
    }
    assert!(!within_ulps(1.0f32, 1.0 + 5.0 * f32::EPSILON, 4));
}

/// The arguments of [`f64_functions`]: special values, every binade from the subnormals
/// to the largest `f64` (both signs), multiples of π/2 and the `f64` nearest one (the
/// hardest argument reduction), and the ranges where `exp`, `tanh` and `erf` change
/// formula; each with an exponent for `powf`, and `powf`'s own special pairs.
fn f64_function_arguments() -> Vec<(f64, f64)> {
    let mut x: Vec<f64> = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        f64::MAX,
        f64::MIN,
        1e22,
        f64::from_bits(HARDEST_REDUCTION),
        709.78,
        709.79,
        -708.5,
        -744.0,
        -745.2,
        1e-20,
        -3e-10,
    ];
    for n in 1..=16 {
        let multiple = f64::from(n) * std::f64::consts::FRAC_PI_2;
        x.extend([multiple, -multiple, multiple * (1.0 + 1e-15)]);
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for exponent in (0..2047u64).step_by(5) {
        let bits = (exponent << 52) | (next() & 0x000f_ffff_ffff_ffff);
        x.extend([f64::from_bits(bits), -f64::from_bits(bits)]);
    }
    for step in 0..160 {
        let v = -8.0 + f64::from(step) * 0.1003;
        x.push(v);
    }
    for step in 0..64 {
        x.push(-745.0 + f64::from(step) * 22.9);
    }
    let exponents = [
        0.5, 2.0, -1.0, 3.0, -3.0, 0.3, 1e10, -1e10, 1e300, -0.7, 7.25, -2.5, 1075.0, -1075.0,
    ];
    let mut pairs: Vec<(f64, f64)> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, exponents[i % exponents.len()]))
        .collect();
    let bases = [
        0.5,
        2.0,
        10.0,
        1e-300,
        1e300,
        3.7,
        0.999_999_9,
        1.000_000_1,
        5e-324,
        -2.0,
        -0.5,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -1.0,
    ];
    let powers = [
        0.5,
        2.0,
        -1.0,
        3.0,
        -3.0,
        0.3,
        1e10,
        1e300,
        -0.7,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1075.0,
        -1075.0,
        9007199254740993.0,
        1e20,
        -1e20,
    ];
    for &b in &bases {
        for &p in &powers {
            pairs.push((b, p));
        }
    }
    pairs
}

/// The f64 nearest a multiple of π/2 (6381956970095103 * 2^797).
const HARDEST_REDUCTION: u64 = 0x7506_ac5b_262c_a1ff;

/// The correctly rounded `sin`, `cos` and `tan` (`k` 4 to 6) of [`HARDEST_REDUCTION`]
/// (from 2000-bit arithmetic). glibc's argument reduction keeps about 106 bits, which this
/// argument's cancellation of 61 leaves at 45: its `cos` and `tan` are 8 and 14 ulps off,
/// so a result within a few ulps of these values holds too.
fn correctly_rounded(x: f64, k: usize) -> Option<f64> {
    if x.to_bits() != HARDEST_REDUCTION {
        return None;
    }
    match k {
        4 => Some(1.0),
        5 => Some(f64::from_bits(0xbc21_4ae7_2e6b_a22f)),
        6 => Some(f64::from_bits(0xc3bd_9ba9_a797_5636)),
        _ => None,
    }
}

/// Rust's result of [`F64_FUNCTIONS`] at `(x, y)`.
fn f64_function_results(x: f64, y: f64) -> [f64; 10] {
    [
        x.exp(),
        x.ln(),
        x.log2(),
        x.log10(),
        x.sin(),
        x.cos(),
        x.tan(),
        x.tanh(),
        libm::erf(x),
        x.powf(y),
    ]
}

/// `exp`, `ln`, `log2`, `log10`, `sin`, `cos`, `tan`, `tanh`, `erf` and `powf` of `f64`
/// hold over their whole domain where the device has them (`Features::f64_transcendentals`):
/// within 3 ulps of Rust's `std` (`libm::erf`) from the subnormals to the largest `f64`,
/// the trigonometric functions of huge arguments and of the argument nearest a multiple of
/// π/2 included, and Rust's special values (NaN, infinities, signed zeros, arguments out of
/// the domain, `powf`'s C99 cases) exactly. Where the device may flush subnormal values
/// (no strict float math), a subnormal argument or result may count as zero.
pub fn f64_functions_hold_over_their_whole_domain<B: TestBackend>() {
    let client = client::<B>();
    let features = &client.properties().features;
    if !features.f64_transcendentals || !features.types.contains(&ElemType::F64) {
        return;
    }
    let flushes = !features.strict_float_math;
    let pairs = f64_function_arguments();
    let (xs, ys): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let (x, y) = (
        upload_scalars::<B, f64>(&client, &xs),
        upload_scalars::<B, f64>(&client, &ys),
    );
    let out = filled::<B, f64>(&client, 0.0, pairs.len() * 10);
    let (count, dim) = cover(pairs.len(), 64);
    f64_functions::launch::<f64, B::R>(&client, count, dim, &x, &y, &out).unwrap();
    let got = read_scalars::<B, f64>(&client, &out);
    let mut wrong = Vec::new();
    let mut worst = [0u128; 10];
    for (i, &(v, w)) in pairs.iter().enumerate() {
        for (k, want) in f64_function_results(v, w).into_iter().enumerate() {
            let g = got[i * 10 + k];
            let exact = want.is_nan() || want.is_infinite() || want == 0.0;
            // Off std's result, or off the correctly rounded one where std's is not.
            let off = |reference: f64| super::ordered(g).abs_diff(super::ordered(reference));
            let ulps = correctly_rounded(v, k).map_or(off(want), |exact| off(want).min(off(exact)));
            let holds = if exact {
                super::same(g, want)
            } else {
                ulps <= 3
            };
            let flushed = flushes
                && (super::is_subnormal(v) || super::is_subnormal(w) || super::is_subnormal(want));
            if !exact && !want.is_nan() {
                worst[k] = worst[k].max(if flushed { 0 } else { ulps });
            }
            if !holds && !flushed {
                wrong.push(format!(
                    "{}({v:e}{}) = {g:e} ({:#018x}), want {want:e} ({:#018x}), {ulps} ulps",
                    F64_FUNCTIONS[k],
                    if k == 9 {
                        format!(", {w:e}")
                    } else {
                        String::new()
                    },
                    g.to_bits(),
                    want.to_bits(),
                ));
            }
        }
    }
    let worst: Vec<String> = F64_FUNCTIONS
        .iter()
        .zip(worst)
        .map(|(name, ulps)| format!("{name} {ulps}"))
        .collect();
    eprintln!("largest f64 errors, in ulps: {}", worst.join(", "));
    assert!(
        wrong.is_empty(),
        "{} of {} results wrong:\n{}",
        wrong.len(),
        pairs.len() * 10,
        wrong[..wrong.len().min(40)].join("\n")
    );
}

/// The float methods of `f16` and `bf16` compute in `f32` and round back: exact methods
/// bit for bit, the transcendental ones within 1 ulp of the half type.
pub fn half_float_methods_compute_in_f32_and_round_back<B: TestBackend>() {
    let client = client::<B>();
    for exact in [true, false] {
        check_float_methods::<B, f16>(&client, exact, 1);
        check_float_methods::<B, bf16>(&client, exact, 1);
    }
}

/// `select(c, a, b)` gives `a` where `c` holds and `b` elsewhere, for floats, integers
/// and bools, with conditions from an array, from `is_nan` and from `&&`.
pub fn select_picks_by_condition<B: TestBackend>() {
    let client = client::<B>();
    let c = [true, false, true, false, true, false];
    let x = [1.5f32, -2.0, f32::NAN, f32::NAN, 0.0, f32::INFINITY];
    let y = [3, -4, 5, 6, 0, -7];
    let (cs, xs, ys) = (
        upload_scalars::<B, bool>(&client, &c),
        upload_scalars::<B, f32>(&client, &x),
        upload_scalars::<B, i32>(&client, &y),
    );
    let floats = filled::<B, f32>(&client, -9.0, c.len() * 2);
    let ints = filled::<B, i32>(&client, -9, c.len() * 2);
    let bools = filled::<B, u8>(&client, 0xee, c.len());
    let (count, dim) = cover(c.len(), 4);
    selects::launch::<B::R>(&client, count, dim, &cs, &xs, &ys, &floats, &ints, &bools).unwrap();
    let inputs: Vec<(bool, f32, i32)> = (0..c.len()).map(|i| (c[i], x[i], y[i])).collect();
    let mut want_floats = Vec::new();
    let mut want_ints = Vec::new();
    let mut want_bools = Vec::new();
    for &(c, x, y) in &inputs {
        want_floats.extend([
            if c { x } else { -x },
            if x.is_nan() { 0.0 } else { x * 2.0 },
        ]);
        want_ints.extend([if c { y } else { 7 }, if y > 0 && !c { y * 10 } else { -1 }]);
        want_bools.push(u8::from(if c { y > 0 } else { x < 0.0 }));
    }
    let got = read_scalars::<B, f32>(&client, &floats);
    assert_same("select of f32", &inputs, &got, &want_floats);
    assert_eq!(
        read_scalars::<B, i32>(&client, &ints),
        want_ints,
        "select of i32"
    );
    assert_eq!(
        read_bytes::<B>(&client, &bools),
        want_bools,
        "select of bool"
    );
}

/// `abs` of an integer wraps (`i32::MIN.abs() == i32::MIN`); `min` and `max` of signed and
/// unsigned integers compare as the type, as methods and as `T::method(..)`.
pub fn integer_abs_min_max_wrap_and_compare<B: TestBackend>() {
    let client = client::<B>();
    let a = [0, -1, 5, i32::MIN, i32::MAX, -7];
    let b = [1, -2, -5, 0, i32::MIN, -7];
    let u = [0u8, 255, 128, 7, 1, 200];
    let v = [1u8, 0, 127, 7, 255, 100];
    let (a_h, b_h, u_h, v_h) = (
        upload_scalars::<B, i32>(&client, &a),
        upload_scalars::<B, i32>(&client, &b),
        upload_scalars::<B, u8>(&client, &u),
        upload_scalars::<B, u8>(&client, &v),
    );
    let ints = filled::<B, i32>(&client, 0, a.len() * 5);
    let bytes = filled::<B, u8>(&client, 0, a.len() * 3);
    let (count, dim) = cover(a.len(), 4);
    int_math::launch::<B::R>(&client, count, dim, &a_h, &b_h, &u_h, &v_h, &ints, &bytes).unwrap();
    let mut want_ints = Vec::new();
    let mut want_bytes = Vec::new();
    for i in 0..a.len() {
        want_ints.extend([
            a[i].wrapping_abs(),
            a[i].min(b[i]),
            a[i].max(b[i]),
            a[i].max(b[i]),
            b[i].wrapping_abs(),
        ]);
        want_bytes.extend([u[i].min(v[i]), u[i].max(v[i]), u[i].min(v[i])]);
    }
    assert_eq!(want_ints[15], i32::MIN, "i32::MIN.abs() wraps");
    assert_eq!(
        read_scalars::<B, i32>(&client, &ints),
        want_ints,
        "i32 abs/min/max"
    );
    assert_eq!(
        read_scalars::<B, u8>(&client, &bytes),
        want_bytes,
        "u8 min/max"
    );
}
