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
/// [`FUNCTIONS`]'s order); run on `f32` and `f64`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_functions<F: Float>(x: &Array<F>, y: &Array<F>, out: &mut Array<F>) {
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

/// The names of [`float_functions`]'s results.
const FUNCTIONS: [&str; 10] = [
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
        float_functions::definition::<f32>(),
        float_functions::definition::<f64>(),
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
    // Without strict float math (wgpu), `mul_add` may round twice.
    let relaxed = !features.strict_float_math;
    let transcendental = F::ELEM != ElemType::F64 || features.f64_transcendentals;
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
        assert_each(&what, &inputs, &got_column, &want, |g, w| {
            if exact {
                super::same(*g, *w)
            } else {
                within_ulps(*g, *w, ulps)
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

/// A float type whose [`float_functions`] are checked over their whole domain.
trait DomainFloat: HostFloat + Scalar + Copy + std::fmt::LowerExp {
    /// The most ulps a result may be off the reference.
    const BAR: u128;
    /// The arguments, each with an exponent for `powf` (see [`domain_arguments`]).
    fn arguments() -> Vec<(Self, Self)>;
    /// The reference results of [`FUNCTIONS`] at `(x, y)`.
    fn results(x: Self, y: Self) -> [Self; 10];
    /// A second accepted result of function `k` at `x`, where the reference is known to be
    /// off the correctly rounded one.
    fn correctly_rounded(x: Self, k: usize) -> Option<Self>;
    /// Whether the value is NaN, infinite or zero.
    fn is_special(self) -> bool;
}

/// `(x, y)` pairs from `x` (each with an exponent from `exponents` in turn) and every pair
/// of `bases` and `powers`: `powf`'s C99 cases and its overflows and underflows.
fn domain_pairs(x: &[f64], exponents: &[f64], bases: &[f64], powers: &[f64]) -> Vec<(f64, f64)> {
    let mut pairs: Vec<(f64, f64)> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, exponents[i % exponents.len()]))
        .collect();
    for &b in bases {
        for &p in powers {
            pairs.push((b, p));
        }
    }
    pairs
}

/// Marsaglia's xorshift64 from `seed` (not zero): the tests' fixed pseudo-random bits.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Arguments common to both types: special values, every binade of the type from the
/// subnormals to the largest value (both signs, `exponent_bits` wide, `mantissa` random
/// bits below), multiples of π/2 and their neighbours, and steps over [-8, 8].
fn domain_arguments(exponent_bits: u32, mantissa_bits: u32, step: usize) -> Vec<u64> {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut bits = Vec::new();
    let sign = 1u64 << (exponent_bits + mantissa_bits);
    for exponent in (0..(1u64 << exponent_bits) - 1).step_by(step) {
        let value = (exponent << mantissa_bits) | (next() & ((1u64 << mantissa_bits) - 1));
        bits.extend([value, value | sign]);
    }
    bits
}

impl DomainFloat for f64 {
    const BAR: u128 = 3;

    fn arguments() -> Vec<(f64, f64)> {
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
        // Next to multiples of π/2 up to 2^20 π/2, where the float reduction cancels most
        // and takes its second and third steps (204,551 π/2 is the nearest of them all).
        for n in [
            17u32, 100, 1_000, 4_096, 12_345, 65_535, 204_551, 524_289, 1_048_575,
        ] {
            let multiple = f64::from(n) * std::f64::consts::FRAC_PI_2;
            for step in [-1i64, 0, 1] {
                let near = f64::from_bits(multiple.to_bits().wrapping_add_signed(step));
                x.extend([near, -near]);
            }
        }
        x.extend(domain_arguments(11, 52, 5).into_iter().map(f64::from_bits));
        x.extend((0..160).map(|step| -8.0 + f64::from(step) * 0.1003));
        x.extend((0..64).map(|step| -745.0 + f64::from(step) * 22.9));
        let exponents = [
            0.5, 2.0, -1.0, 3.0, -3.0, 0.3, 1e10, -1e10, 1e300, -0.7, 7.25, -2.5, 1075.0, -1075.0,
        ];
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
        domain_pairs(&x, &exponents, &bases, &powers)
    }

    fn results(x: f64, y: f64) -> [f64; 10] {
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

    fn is_special(self) -> bool {
        self.is_nan() || self.is_infinite() || self == 0.0
    }
}

/// The f64 nearest a multiple of π/2 (6381956970095103 * 2^797).
const HARDEST_REDUCTION: u64 = 0x7506_ac5b_262c_a1ff;

/// The `f32` arguments nearest a multiple of π/2 (an exhaustive search over every `f32`,
/// `scripts/math/hardest-f32-reductions.rs`):
/// x·2/π is within 2^-29 of an integer for the first two, 2^-28 for the next two and 2^-27
/// for the others; no `f32` comes closer.
const HARDEST_F32_REDUCTIONS: [u32; 8] = [
    0x50a3_e87f,
    0x6f79_be45,
    0x437c_e5f1,
    0x5123_e87f,
    0x43fc_e5f1,
    0x53b1_46a6,
    0x6a19_76f1,
    0x7758_4625,
];

impl DomainFloat for f32 {
    const BAR: u128 = 3;

    fn arguments() -> Vec<(f32, f32)> {
        let mut x: Vec<f64> = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1.0,
            -1.0,
            f64::from(f32::MIN_POSITIVE),
            -f64::from(f32::MIN_POSITIVE),
            1e-45,
            -1e-45,
            f64::from(f32::MAX),
            f64::from(f32::MIN),
            1e5,
            88.72283,
            88.72284,
            -87.33,
            -103.97,
            -103.98,
            -110.0,
            1e-10,
            -3e-5,
            1.0 - 1e-7,
            1.0 + 2e-7,
        ];
        x.extend(HARDEST_F32_REDUCTIONS.map(|bits| f64::from(f32::from_bits(bits))));
        for n in 1..=16 {
            let multiple = f64::from(n) * std::f64::consts::FRAC_PI_2;
            x.extend([multiple, -multiple, multiple * (1.0 + 1e-7)]);
        }
        let bits = domain_arguments(8, 23, 1);
        x.extend(
            bits.into_iter()
                .map(|b| f64::from(f32::from_bits(b as u32))),
        );
        x.extend((0..160).map(|step| -8.0 + f64::from(step) * 0.1003));
        x.extend((0..64).map(|step| -104.0 + f64::from(step) * 3.05));
        let exponents = [
            0.5, 2.0, -1.0, 3.0, -3.0, 0.3, 1e5, -1e5, 1e30, -0.7, 7.25, -2.5, 150.0, -150.0,
        ];
        let bases = [
            0.5,
            2.0,
            10.0,
            1e-30,
            1e30,
            3.7,
            0.999_999_9,
            1.000_000_1,
            1e-45,
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
            1e5,
            1e30,
            -0.7,
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            150.0,
            -150.0,
            16777217.0,
            1e20,
            -1e20,
        ];
        let mut pairs = domain_pairs(&x, &exponents, &bases, &powers);
        // Results just under the largest f32 (the sweep found NVIDIA's Vulkan driver
        // folding msun's overflow test into infinity there).
        pairs.extend([(3.866_024_6e-16, -2.5), (4.874_082e25, 1.5)]);
        pairs
            .into_iter()
            .map(|(v, w)| (v as f32, w as f32))
            .collect()
    }

    /// Each function of the `f64` argument, rounded once to `f32`: within an ulp of the
    /// correctly rounded result (equal to it but for double roundings).
    fn results(x: f32, y: f32) -> [f32; 10] {
        f64::results(f64::from(x), f64::from(y)).map(|v| v as f32)
    }

    fn correctly_rounded(_: f32, _: usize) -> Option<f32> {
        None
    }

    fn is_special(self) -> bool {
        self.is_nan() || self.is_infinite() || self == 0.0
    }
}

/// The verdict on one result of [`float_functions`].
struct Verdict {
    /// Ulps off the reference (zero for special values and where flushing excuses it).
    ulps: u128,
    /// Whether the result holds.
    holds: bool,
}

/// Judges `got`, function `k`'s result at `(v, w)`, against `want`, the reference: special
/// values exactly, others within [`DomainFloat::BAR`] ulps; a subnormal argument or
/// reference counts as zero where the device `flushes` subnormal values.
fn judge<F: DomainFloat>(v: F, w: F, k: usize, got: F, want: F, flushes: bool) -> Verdict {
    let flushed =
        flushes && (super::is_subnormal(v) || super::is_subnormal(w) || super::is_subnormal(want));
    if want.is_special() {
        let holds = super::same(got, want) || flushed;
        return Verdict { ulps: 0, holds };
    }
    // Off the reference, or off the correctly rounded result where it is not.
    let off = |reference: F| super::ordered(got).abs_diff(super::ordered(reference));
    let ulps = F::correctly_rounded(v, k).map_or(off(want), |exact| off(want).min(off(exact)));
    if flushed {
        return Verdict {
            ulps: 0,
            holds: true,
        };
    }
    // A result that rounds up to the smallest normal may be tiny before rounding: a device
    // that flushes may return a zero of its sign (seen on NVIDIA's Vulkan driver:
    // `powf(3.207209e-12, 3.3)`).
    if flushes && super::is_smallest_normal(want) && super::is_zero_signed_as(got, want) {
        return Verdict {
            ulps: 0,
            holds: true,
        };
    }
    Verdict {
        ulps,
        holds: ulps <= F::BAR,
    }
}

/// One wrong result, for a failure message.
fn describe<F: DomainFloat>(v: F, w: F, k: usize, got: F, want: F, ulps: u128) -> String {
    format!(
        "{}({v:e}{}) = {got:e} ({:#x}), want {want:e} ({:#x}), {ulps} ulps",
        FUNCTIONS[k],
        if k == 9 {
            format!(", {w:e}")
        } else {
            String::new()
        },
        got.to_bits(),
        want.to_bits(),
    )
}

/// Runs [`float_functions`] on `F`'s [`DomainFloat::arguments`] and checks each result
/// against the reference; returns the largest error of each function, in ulps.
fn check_whole_domain<B: TestBackend, F: DomainFloat>(client: &Client<B>) -> [u128; 10] {
    let flushes = !client.properties().features.strict_float_math;
    let pairs = F::arguments();
    let (xs, ys): (Vec<F>, Vec<F>) = pairs.iter().copied().unzip();
    let got = run_float_functions::<B, F>(client, &xs, &ys);
    let mut wrong = Vec::new();
    let mut worst = [0u128; 10];
    for (i, &(v, w)) in pairs.iter().enumerate() {
        for (k, want) in F::results(v, w).into_iter().enumerate() {
            let g = got[i * 10 + k];
            let verdict = judge(v, w, k, g, want, flushes);
            worst[k] = worst[k].max(verdict.ulps);
            if !verdict.holds {
                wrong.push(describe(v, w, k, g, want, verdict.ulps));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{}: {} of {} results wrong:\n{}",
        F::ELEM,
        wrong.len(),
        pairs.len() * 10,
        wrong[..wrong.len().min(40)].join("\n")
    );
    worst
}

/// The results of [`float_functions`] at `xs` (and `ys` for `powf`), 10 per argument.
fn run_float_functions<B: TestBackend, F: DomainFloat>(
    client: &Client<B>,
    xs: &[F],
    ys: &[F],
) -> Vec<F> {
    let (x, y) = (
        upload_scalars::<B, F>(client, xs),
        upload_scalars::<B, F>(client, ys),
    );
    // Every element of the output is written.
    let out = client.empty(xs.len() * 10 * F::ELEM.size()).unwrap();
    let (count, dim) = cover(xs.len(), 64);
    float_functions::launch::<F, B::R>(client, count, dim, &x, &y, &out).unwrap();
    read_scalars::<B, F>(client, &out)
}

/// `exp`, `ln`, `log2`, `log10`, `sin`, `cos`, `tan`, `tanh`, `erf` and `powf` of `f32` and
/// `f64` hold over their whole domain: within 3 ulps of the reference from the subnormals
/// to the largest value, the trigonometric functions of huge arguments and of the
/// arguments nearest a multiple of π/2 included, and Rust's special values (NaN,
/// infinities, signed zeros, arguments out of the domain, `powf`'s C99 cases) exactly.
/// The reference is Rust's `std` (`libm::erf`), for `f32` computed in `f64` and rounded
/// once. `f64` is checked where the device has its transcendental functions
/// (`Features::f64_transcendentals`). Where the device may flush subnormal values (no
/// strict float math), a subnormal argument or result may count as zero.
pub fn float_functions_hold_over_their_whole_domain<B: TestBackend>() {
    let client = client::<B>();
    let features = &client.properties().features;
    let mut report = vec![("f32", check_whole_domain::<B, f32>(&client))];
    if features.f64_transcendentals && features.types.contains(&ElemType::F64) {
        report.push(("f64", check_whole_domain::<B, f64>(&client)));
    }
    for (name, worst) in report {
        let worst: Vec<String> = FUNCTIONS
            .iter()
            .zip(worst)
            .map(|(function, ulps)| format!("{function} {ulps}"))
            .collect();
        eprintln!("largest {name} errors, in ulps: {}", worst.join(", "));
    }
}

/// The exponents [`f32_functions_hold_for_every_f32`] pairs with each argument of `powf`
/// (by the argument's bits): results from tiny to huge, overflowing and underflowing.
const SWEEP_EXPONENTS: [f32; 12] = [
    0.5, 1.5, 2.5, -1.0, -2.5, 3.3, 7.0, -0.7, 0.1, 11.0, -13.0, 31.0,
];

/// How many `f32` arguments [`f32_functions_hold_for_every_f32`] sends per launch: 80 MiB
/// of results, under WebGPU's default limit of a storage binding (128 MiB).
const SWEEP_CHUNK: u64 = 1 << 21;

/// A `u32` environment variable in decimal or, after `0x`, hexadecimal.
fn env_u32(name: &str) -> Option<u32> {
    let value = std::env::var(name).ok()?;
    match value.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => value.parse().ok(),
    }
}

/// Every `stride`-th `f32` bit pattern from `first + offset` to `last`
/// (`CUBERT_F32_STRIDE`, default 4099: about a million; `CUBERT_F32_OFFSET`, default 0:
/// stride 2 with offsets 0 and 1 sweeps all 2^32 in two runs; `CUBERT_F32_FIRST` and
/// `CUBERT_F32_LAST`, bit patterns in decimal or `0x` hex, default all of them: one
/// function's range, densely) through `exp`, `ln`, `log2`, `log10`, `sin`, `cos`, `tan`,
/// `tanh`, `erf` and `powf` (with one of twelve exponents from -13 to 31, picked by the
/// argument's bits), each result judged as in
/// [`float_functions_hold_over_their_whole_domain`]; prints the largest error of each
/// function and where it is.
pub fn f32_functions_hold_for_every_f32<B: TestBackend>() {
    let stride: u64 = std::env::var("CUBERT_F32_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(4099);
    let offset: u64 = std::env::var("CUBERT_F32_OFFSET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        % stride;
    let first = u64::from(env_u32("CUBERT_F32_FIRST").unwrap_or(0)) + offset;
    let last = u64::from(env_u32("CUBERT_F32_LAST").unwrap_or(u32::MAX));
    assert!(
        first <= last,
        "CUBERT_F32_FIRST + offset is past CUBERT_F32_LAST"
    );
    let client = client::<B>();
    let flushes = !client.properties().features.strict_float_math;
    let total = (last - first) / stride + 1;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut worst = [(0u128, 0u32); 10];
    let mut wrong: Vec<String> = Vec::new();
    let mut wrong_count = 0u64;
    let mut start = 0u64;
    while start < total {
        let n = SWEEP_CHUNK.min(total - start);
        let xs: Vec<f32> = (start..start + n)
            .map(|i| f32::from_bits((first + i * stride) as u32))
            .collect();
        let ys: Vec<f32> = xs
            .iter()
            .map(|x| SWEEP_EXPONENTS[x.to_bits() as usize % SWEEP_EXPONENTS.len()])
            .collect();
        let got = run_float_functions::<B, f32>(&client, &xs, &ys);
        let part = xs.len().div_ceil(threads);
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (xs, ys, got) = (&xs, &ys, &got);
                    scope.spawn(move || {
                        let mut worst = [(0u128, 0u32); 10];
                        let (mut wrong, mut count) = (Vec::new(), 0u64);
                        for i in (t * part)..((t + 1) * part).min(xs.len()) {
                            let (v, w) = (xs[i], ys[i]);
                            for (k, want) in f32::results(v, w).into_iter().enumerate() {
                                let g = got[i * 10 + k];
                                let verdict = judge(v, w, k, g, want, flushes);
                                if verdict.ulps > worst[k].0 {
                                    worst[k] = (verdict.ulps, v.to_bits());
                                }
                                if !verdict.holds {
                                    count += 1;
                                    if wrong.len() < 40 {
                                        wrong.push(describe(v, w, k, g, want, verdict.ulps));
                                    }
                                }
                            }
                        }
                        (worst, wrong, count)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (part_worst, part_wrong, count) in results {
            for (k, candidate) in part_worst.into_iter().enumerate() {
                if candidate.0 > worst[k].0 {
                    worst[k] = candidate;
                }
            }
            wrong.extend(part_wrong);
            wrong_count += count;
        }
        start += n;
    }
    wrong.truncate(40);
    report_sweep(
        &format!("{total} f32 arguments (every {stride}th from {first:#010x} to {last:#010x})"),
        worst.map(|(ulps, at)| (ulps, format!("{at:#010x}"))),
        wrong_count,
        total * 10,
        &wrong,
    );
}

/// Prints the largest error of each function of a sweep over `what` (with the argument
/// where it is) and fails if any of its `results` was wrong, listing the first of them.
fn report_sweep(
    what: &str,
    worst: [(u128, String); 10],
    wrong_count: u64,
    results: u64,
    wrong: &[String],
) {
    let worst: Vec<String> = FUNCTIONS
        .iter()
        .zip(worst)
        .map(|(function, (ulps, at))| format!("{function} {ulps} (at {at})"))
        .collect();
    eprintln!("{what}, largest errors in ulps: {}", worst.join(", "));
    assert!(
        wrong_count == 0,
        "{wrong_count} of {results} results wrong:\n{}",
        wrong.join("\n")
    );
}

/// `sin`, `cos` and `tan` of `f64` (and the other functions, at the same arguments) hold
/// where the float argument reduction runs and just past it: `CUBERT_F64_COUNT` arguments
/// (default 2^22) from a fixed seed, both signs, a third of them log-uniform from π/4 to
/// 2^21 π/2, a third uniform over that range, a third within two ulps of a multiple of
/// π/2 there (where the reduction cancels most), each judged as in
/// [`float_functions_hold_over_their_whole_domain`]. Skipped where the device has no
/// `f64` transcendental functions.
pub fn f64_functions_hold_where_the_float_reduction_runs<B: TestBackend>() {
    let client = client::<B>();
    let features = &client.properties().features;
    if !(features.f64_transcendentals && features.types.contains(&ElemType::F64)) {
        eprintln!("no f64 transcendental functions on this device: nothing to check");
        return;
    }
    let flushes = !features.strict_float_math;
    let count: u64 = std::env::var("CUBERT_F64_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 22);
    let top = f64::from(1u32 << 21) * std::f64::consts::FRAC_PI_2;
    let bottom = std::f64::consts::FRAC_PI_4;
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut unit = move || (next() >> 11) as f64 / (1u64 << 53) as f64;
    let mut worst = [(0u128, 0.0f64); 10];
    let mut wrong: Vec<String> = Vec::new();
    let mut wrong_count = 0u64;
    let mut done = 0u64;
    // 80 MiB of results per launch, under WebGPU's default storage binding limit.
    let chunk = 1u64 << 20;
    while done < count {
        let n = chunk.min(count - done);
        let xs: Vec<f64> = (done..done + n)
            .map(|i| {
                let magnitude = match i % 3 {
                    0 => bottom * (top / bottom).powf(unit()),
                    1 => bottom + (top - bottom) * unit(),
                    _ => {
                        let multiple = (unit() * f64::from(1u32 << 21)).floor().max(1.0)
                            * std::f64::consts::FRAC_PI_2;
                        let step = (unit() * 5.0) as i64 - 2;
                        f64::from_bits(multiple.to_bits().wrapping_add_signed(step))
                    }
                };
                if unit() < 0.5 { -magnitude } else { magnitude }
            })
            .collect();
        let ys = vec![2.0f64; xs.len()];
        let got = run_float_functions::<B, f64>(&client, &xs, &ys);
        for (i, &v) in xs.iter().enumerate() {
            for (k, want) in f64::results(v, 2.0).into_iter().enumerate() {
                let g = got[i * 10 + k];
                let verdict = judge(v, 2.0, k, g, want, flushes);
                if verdict.ulps > worst[k].0 {
                    worst[k] = (verdict.ulps, v);
                }
                if !verdict.holds {
                    wrong_count += 1;
                    if wrong.len() < 40 {
                        wrong.push(describe(v, 2.0, k, g, want, verdict.ulps));
                    }
                }
            }
        }
        done += n;
    }
    report_sweep(
        &format!("{count} f64 arguments from pi/4 to 2^21 pi/2"),
        worst.map(|(ulps, at)| (ulps, format!("{at:e}"))),
        wrong_count,
        count * 10,
        &wrong,
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
