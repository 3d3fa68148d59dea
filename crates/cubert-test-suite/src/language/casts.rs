//! `as` casts of the kernel language between every pair of the 13 scalar types: integers
//! wrap, floats to integers saturate and NaN gives 0, integers to floats round to nearest,
//! every type to a half type rounds once to nearest even (from `f64` too), a number is
//! `true` when it isn't zero and `bool` is 0 or 1.

use super::{assert_same, cover, filled, read_scalars, same, upload_scalars};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::half_rounding::{f64_to_bf16, f64_to_f16};
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;

/// `y[i] = x[i] as D`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn cast_to<S: Scalar, D: Scalar>(x: &Array<S>, y: &mut Array<D>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        y[i] = x[i] as D;
    }
}

/// A value of any scalar type, widened without loss on the host.
#[derive(Clone, Copy, Debug)]
enum Wide {
    Int(i128),
    Float(f64),
}

/// The host's model of a cast: widen the source, then convert with Rust's `as` (integers
/// wrap, floats saturate to integers with NaN giving 0, integers round to nearest floats),
/// `half_rounding` for the half types (rounded once from the exact value), `!= 0` for
/// `bool`.
trait HostScalar: Scalar {
    fn wide(self) -> Wide;
    fn from_wide(value: Wide) -> Self;
}

macro_rules! host_int {
    ($($ty:ty),*) => {$(
        impl HostScalar for $ty {
            fn wide(self) -> Wide {
                Wide::Int(self as i128)
            }
            fn from_wide(value: Wide) -> Self {
                match value {
                    Wide::Int(v) => v as $ty,
                    Wide::Float(v) => v as $ty,
                }
            }
        }
    )*};
}
host_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! host_float {
    ($($ty:ty),*) => {$(
        impl HostScalar for $ty {
            fn wide(self) -> Wide {
                Wide::Float(self as f64)
            }
            fn from_wide(value: Wide) -> Self {
                match value {
                    // i128 -> f32 rounds once (not through f64).
                    Wide::Int(v) => v as $ty,
                    Wide::Float(v) => v as $ty,
                }
            }
        }
    )*};
}
host_float!(f32, f64);

impl HostScalar for f16 {
    fn wide(self) -> Wide {
        Wide::Float(self.to_f64())
    }
    fn from_wide(value: Wide) -> Self {
        match value {
            // Integers beyond 2^53 round to f64 first (the documented double rounding).
            Wide::Int(v) => f64_to_f16(v as f64),
            Wide::Float(v) => f64_to_f16(v),
        }
    }
}

impl HostScalar for bf16 {
    fn wide(self) -> Wide {
        Wide::Float(self.to_f64())
    }
    fn from_wide(value: Wide) -> Self {
        match value {
            Wide::Int(v) => f64_to_bf16(v as f64),
            Wide::Float(v) => f64_to_bf16(v),
        }
    }
}

impl HostScalar for bool {
    fn wide(self) -> Wide {
        Wide::Int(i128::from(self))
    }
    fn from_wide(value: Wide) -> Self {
        match value {
            Wide::Int(v) => v != 0,
            Wide::Float(v) => v != 0.0,
        }
    }
}

/// Representative values: NaN, infinities, signed zeros, ties and near-ties of every
/// rounding, fractions, negatives, and magnitudes past every type's range.
fn representative_values() -> Vec<Wide> {
    let floats = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.1,
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        -2.7,
        127.5,
        128.0,
        -128.9,
        255.5,
        256.0,
        2049.0,
        65504.0,
        65519.0,
        65520.0,
        -40000.5,
        1e-7,
        1e-30,
        16_777_217.0,
        2_147_483_647.5,
        3.0e9,
        -3.0e9,
        4_294_967_296.0,
        9.3e18,
        -9.3e18,
        1.9e19,
        1e20,
        -1e20,
        3.5e38,
        f64::MAX,
        f64::MIN_POSITIVE,
        1.0 + f64::EPSILON,
    ];
    let ints: [i128; 26] = [
        0,
        1,
        -1,
        2,
        127,
        128,
        -129,
        255,
        256,
        257,
        2049,
        4099,
        -32769,
        65_535,
        65_536,
        65_520,
        16_777_217,
        0x7fff_ffff,
        -0x8000_0000,
        0xffff_ffff,
        (1 << 53) + 1,
        0x7fff_ffff_ffff_ffff,
        -0x8000_0000_0000_0000,
        0xffff_ffff_ffff_ffff,
        0x7fff_ffff_ffff_fdff,
        -1_234_567_890_123,
    ];
    floats
        .into_iter()
        .map(Wide::Float)
        .chain(ints.into_iter().map(Wide::Int))
        .collect()
}

/// Casts `source` to `D` on the device and returns a line per mismatch with the host's
/// model.
fn cast_mismatches<B: TestBackend, S: HostScalar, D: HostScalar>(
    client: &Client<B>,
    source: &[S],
) -> Vec<String> {
    let x = upload_scalars::<B, S>(client, source);
    let y = filled::<B, D>(client, D::default(), source.len());
    let (count, dim) = cover(source.len(), 32);
    cast_to::launch::<S, D, B::R>(client, count, dim, &x, &y).unwrap();
    let got = read_scalars::<B, D>(client, &y);
    source
        .iter()
        .zip(got)
        .filter_map(|(&value, got)| {
            let want = D::from_wide(value.wide());
            (!same(got, want)).then(|| {
                format!(
                    "{value:?} as {}: got {got:?} ({:#x}), expected {want:?} ({:#x})",
                    D::ELEM,
                    got.to_bits(),
                    want.to_bits()
                )
            })
        })
        .collect()
}

/// Casts the representative values, as `S`, to each of the 13 types.
fn casts_from<B: TestBackend, S: HostScalar>(client: &Client<B>) -> Vec<String> {
    let source: Vec<S> = representative_values()
        .into_iter()
        .map(S::from_wide)
        .collect();
    let mut mismatches = Vec::new();
    mismatches.extend(cast_mismatches::<B, S, f16>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, bf16>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, f32>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, f64>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, i8>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, i16>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, i32>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, i64>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, u8>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, u16>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, u32>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, u64>(client, &source));
    mismatches.extend(cast_mismatches::<B, S, bool>(client, &source));
    mismatches
}

/// The definitions of `cast_to` from `S` to each of the 13 types.
fn definitions_from<S: Scalar>() -> Vec<KernelDefinition> {
    vec![
        cast_to::definition::<S, f16>(),
        cast_to::definition::<S, bf16>(),
        cast_to::definition::<S, f32>(),
        cast_to::definition::<S, f64>(),
        cast_to::definition::<S, i8>(),
        cast_to::definition::<S, i16>(),
        cast_to::definition::<S, i32>(),
        cast_to::definition::<S, i64>(),
        cast_to::definition::<S, u8>(),
        cast_to::definition::<S, u16>(),
        cast_to::definition::<S, u32>(),
        cast_to::definition::<S, u64>(),
        cast_to::definition::<S, bool>(),
    ]
}

/// `cast_to` for every pair of types.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    let mut all = Vec::new();
    all.extend(definitions_from::<f16>());
    all.extend(definitions_from::<bf16>());
    all.extend(definitions_from::<f32>());
    all.extend(definitions_from::<f64>());
    all.extend(definitions_from::<i8>());
    all.extend(definitions_from::<i16>());
    all.extend(definitions_from::<i32>());
    all.extend(definitions_from::<i64>());
    all.extend(definitions_from::<u8>());
    all.extend(definitions_from::<u16>());
    all.extend(definitions_from::<u32>());
    all.extend(definitions_from::<u64>());
    all.extend(definitions_from::<bool>());
    all
}

/// `x as T` between every pair of the 13 scalar types, on NaN, infinities, signed zeros,
/// ties, fractions, negatives and out-of-range magnitudes, gives the host's value under
/// the language's rules, bit for bit (any NaN for a NaN).
pub fn casts_between_every_pair_of_types_follow_the_rules<B: TestBackend>() {
    let client = client::<B>();
    let mut mismatches = Vec::new();
    mismatches.extend(casts_from::<B, f16>(&client));
    mismatches.extend(casts_from::<B, bf16>(&client));
    mismatches.extend(casts_from::<B, f32>(&client));
    mismatches.extend(casts_from::<B, f64>(&client));
    mismatches.extend(casts_from::<B, i8>(&client));
    mismatches.extend(casts_from::<B, i16>(&client));
    mismatches.extend(casts_from::<B, i32>(&client));
    mismatches.extend(casts_from::<B, i64>(&client));
    mismatches.extend(casts_from::<B, u8>(&client));
    mismatches.extend(casts_from::<B, u16>(&client));
    mismatches.extend(casts_from::<B, u32>(&client));
    mismatches.extend(casts_from::<B, u64>(&client));
    mismatches.extend(casts_from::<B, bool>(&client));
    assert!(
        mismatches.is_empty(),
        "{} casts differ; first: {:#?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(12)]
    );
}

/// Casts `source` to `D` on the device and compares with `want`.
fn check_cast<B: TestBackend, S: Scalar, D: Scalar>(client: &Client<B>, source: &[S], want: &[D]) {
    let x = upload_scalars::<B, S>(client, source);
    let y = filled::<B, D>(client, D::default(), source.len());
    let (count, dim) = cover(source.len(), 8);
    cast_to::launch::<S, D, B::R>(client, count, dim, &x, &y).unwrap();
    let got = read_scalars::<B, D>(client, &y);
    assert_same(&format!("{} as {}", S::ELEM, D::ELEM), source, &got, want);
}

/// Float-to-integer casts truncate toward zero, saturate at the type's limits and give 0
/// for NaN (written out by hand, independently of the host model).
pub fn float_to_integer_casts_saturate_and_nan_gives_zero<B: TestBackend>() {
    let client = client::<B>();
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let x = [
        nan, inf, -inf, 3e9, -3e9, 2.9, -2.9, 255.5, 256.0, -0.0, 1e-3,
    ];
    check_cast::<B, f32, i32>(
        &client,
        &x,
        &[
            0,
            i32::MAX,
            i32::MIN,
            i32::MAX,
            i32::MIN,
            2,
            -2,
            255,
            256,
            0,
            0,
        ],
    );
    check_cast::<B, f32, u8>(&client, &x, &[0, 255, 0, 255, 0, 2, 0, 255, 255, 0, 0]);
    check_cast::<B, f32, u32>(
        &client,
        &x,
        &[0, u32::MAX, 0, 3_000_000_000, 0, 2, 0, 255, 256, 0, 0],
    );
    check_cast::<B, f32, i8>(
        &client,
        &x,
        &[0, 127, -128, 127, -128, 2, -2, 127, 127, 0, 0],
    );
    let d = [f64::NAN, 1e300, -1e300, 9.3e18, -9.3e18, 1.8e19, -0.99];
    check_cast::<B, f64, i64>(
        &client,
        &d,
        &[0, i64::MAX, i64::MIN, i64::MAX, i64::MIN, i64::MAX, 0],
    );
    check_cast::<B, f64, u64>(
        &client,
        &d,
        &[
            0,
            u64::MAX,
            0,
            9_300_000_000_000_000_000,
            0,
            18_000_000_000_000_000_000,
            0,
        ],
    );
    let h = [
        f16::NAN,
        f16::INFINITY,
        f16::from_f32(-300.5),
        f16::from_f32(65504.0),
    ];
    check_cast::<B, f16, u8>(&client, &h, &[0, 255, 0, 255]);
    check_cast::<B, f16, i16>(&client, &h, &[0, i16::MAX, -300, i16::MAX]);
}

/// Integer casts wrap (truncate to the low bits) or extend by sign, and `bool` converts
/// to 0 or 1 and from "not zero" (NaN is not zero).
pub fn integer_and_bool_casts_wrap_extend_and_test_for_zero<B: TestBackend>() {
    let client = client::<B>();
    let x = [0i32, 1, -1, 255, 256, -129, 0x1234_5678, i32::MIN];
    check_cast::<B, i32, u8>(&client, &x, &[0, 1, 255, 255, 0, 127, 0x78, 0]);
    check_cast::<B, i32, i8>(&client, &x, &[0, 1, -1, -1, 0, 127, 0x78, 0]);
    check_cast::<B, i32, i64>(
        &client,
        &x,
        &[0, 1, -1, 255, 256, -129, 0x1234_5678, -0x8000_0000],
    );
    check_cast::<B, i32, u64>(
        &client,
        &x,
        &[
            0,
            1,
            u64::MAX,
            255,
            256,
            u64::MAX - 128,
            0x1234_5678,
            0xffff_ffff_8000_0000,
        ],
    );
    check_cast::<B, i32, bool>(
        &client,
        &x,
        &[false, true, true, true, true, true, true, true],
    );
    let u = [0u8, 1, 128, 255];
    check_cast::<B, u8, i8>(&client, &u, &[0, 1, -128, -1]);
    check_cast::<B, u8, i32>(&client, &u, &[0, 1, 128, 255]);
    let f = [0.0f32, -0.0, 0.5, -2.0, f32::NAN, f32::INFINITY];
    check_cast::<B, f32, bool>(&client, &f, &[false, false, true, true, true, true]);
    let b = [false, true];
    check_cast::<B, bool, f32>(&client, &b, &[0.0, 1.0]);
    check_cast::<B, bool, i64>(&client, &b, &[0, 1]);
    check_cast::<B, bool, f16>(&client, &b, &[f16::ZERO, f16::ONE]);
}

/// Casts into `f16` and `bf16` round once to nearest, ties to even, from integers, `f32`
/// and `f64` (an `f64` just above a tie rounds up, where rounding through `f32` first
/// would round to even); past the largest finite value they give infinity.
pub fn casts_to_half_types_round_to_nearest_even<B: TestBackend>() {
    let client = client::<B>();
    let h = |v: f32| f16::from_f32(v);
    let b = |v: f32| bf16::from_f32(v);
    // f16 values between 2048 and 4096 are 2 apart; between 4096 and 8192, 4 apart.
    let ints = [2049i32, 2051, 4098, 4099, 65519, 65520, -2049, 70000];
    check_cast::<B, i32, f16>(
        &client,
        &ints,
        &[
            h(2048.0),
            h(2052.0),
            h(4096.0),
            h(4100.0),
            h(65504.0),
            f16::INFINITY,
            h(-2048.0),
            f16::INFINITY,
        ],
    );
    // bf16 values between 256 and 512 are 2 apart.
    let ints = [257i32, 259, 260, -257, 16_777_217];
    check_cast::<B, i32, bf16>(
        &client,
        &ints,
        &[b(256.0), b(260.0), b(260.0), b(-256.0), b(16_777_216.0)],
    );
    let singles = [2049.0f32, 2051.0, 2049.001, 65519.0, 65520.0, 1e-8, -1e-8];
    check_cast::<B, f32, f16>(
        &client,
        &singles,
        &[
            h(2048.0),
            h(2052.0),
            h(2050.0),
            h(65504.0),
            f16::INFINITY,
            f16::ZERO,
            f16::NEG_ZERO,
        ],
    );
    let above_tie_f16 = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let above_tie_bf16 = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    let doubles = [above_tie_f16, 1.0 + 2f64.powi(-11), above_tie_bf16, 1e10];
    check_cast::<B, f64, f16>(
        &client,
        &doubles,
        &[
            h(1.0 + 2f32.powi(-10)),
            h(1.0),
            h(1.0 + 2f32.powi(-8)),
            f16::INFINITY,
        ],
    );
    check_cast::<B, f64, bf16>(
        &client,
        &doubles,
        &[b(1.0), b(1.0), b(1.0 + 2f32.powi(-7)), b(1e10)],
    );
    // Rounding the f64 through f32 first would land on the tie and round to even.
    assert_eq!(f16::from_f32(above_tie_f16 as f32), h(1.0));
}
