//! Arithmetic semantics of the kernel language: wrapping integers, division and remainder
//! by zero, `MIN / -1`, shift amounts modulo the bit width, bit operations, unary minus,
//! compound assignment, comparisons, IEEE float arithmetic and per-operation rounding of
//! the half types.

use super::{assert_each, assert_same, cover, filled, read_bytes, read_scalars, upload_scalars};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use std::fmt::Debug;

/// The integer operations, 12 results per element: `+ - * / % << >> & | ^ !x -x`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn int_ops<T: Int>(a: &Array<T>, b: &Array<T>, s: &Array<u32>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let k = s[i];
        let base = i * 12;
        out[base] = x + y;
        out[base + 1] = x - y;
        out[base + 2] = x * y;
        out[base + 3] = x / y;
        out[base + 4] = x % y;
        out[base + 5] = x << k;
        out[base + 6] = x >> k;
        out[base + 7] = x & y;
        out[base + 8] = x | y;
        out[base + 9] = x ^ y;
        out[base + 10] = !x;
        out[base + 11] = -x;
    }
}

/// The float operations, 7 results per element: `x + y`, `x - y`, `x * y`, `x / y`,
/// `x % y`, `x * y + z` and `-x`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_ops<F: Float>(a: &Array<F>, b: &Array<F>, c: &Array<F>, out: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let z = c[i];
        let base = i * 7;
        out[base] = x + y;
        out[base + 1] = x - y;
        out[base + 2] = x * y;
        out[base + 3] = x / y;
        out[base + 4] = x % y;
        out[base + 5] = x * y + z;
        out[base + 6] = -x;
    }
}

/// Every compound assignment on a local and on an array element, for `i32` and `f32`,
/// and shifts by literal amounts.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn compound(x: &Array<i32>, f: &Array<f32>, ints: &mut Array<i32>, floats: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let mut v = x[i];
        v += 5;
        v -= 2;
        v *= 3;
        v /= 2;
        v %= 1000;
        v |= 8;
        v &= 0x7ff;
        v ^= 3;
        v <<= 2;
        v >>= 1;
        let j = i * 3;
        ints[j] = v;
        ints[j + 1] = x[i];
        ints[j + 1] += 5;
        ints[j + 1] -= 2;
        ints[j + 1] *= 3;
        ints[j + 1] /= 2;
        ints[j + 1] %= 1000;
        ints[j + 1] |= 8;
        ints[j + 1] &= 0x7ff;
        ints[j + 1] ^= 3;
        ints[j + 1] <<= 2;
        ints[j + 1] >>= 1;
        ints[j + 2] = (x[i] << 3) + (x[i] >> 33);

        let mut g = f[i];
        g += 0.5;
        g -= 0.25;
        g *= 3.0;
        g /= 2.0;
        g %= 4.0;
        floats[i * 2] = g;
        floats[i * 2 + 1] = f[i];
        floats[i * 2 + 1] += 0.5;
        floats[i * 2 + 1] -= 0.25;
        floats[i * 2 + 1] *= 3.0;
        floats[i * 2 + 1] /= 2.0;
        floats[i * 2 + 1] %= 4.0;
    }
}

/// The six comparisons, stored as `bool`s: 6 per element.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn compare<T: Scalar>(a: &Array<T>, b: &Array<T>, out: &mut Array<bool>) {
    let i = ABSOLUTE_POS;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let base = i * 6;
        out[base] = x == y;
        out[base + 1] = x != y;
        out[base + 2] = x < y;
        out[base + 3] = x <= y;
        out[base + 4] = x > y;
        out[base + 5] = x >= y;
    }
}

/// A specialization of each kernel of this module.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        int_ops::definition::<i8>(),
        int_ops::definition::<i16>(),
        int_ops::definition::<i32>(),
        int_ops::definition::<i64>(),
        int_ops::definition::<u8>(),
        int_ops::definition::<u16>(),
        int_ops::definition::<u32>(),
        int_ops::definition::<u64>(),
        float_ops::definition::<f16>(),
        float_ops::definition::<bf16>(),
        float_ops::definition::<f32>(),
        float_ops::definition::<f64>(),
        compound::definition(),
        compare::definition::<f32>(),
        compare::definition::<f16>(),
        compare::definition::<i32>(),
        compare::definition::<u32>(),
        compare::definition::<u8>(),
        compare::definition::<bool>(),
    ]
}

/// An integer type with the language's semantics spelled with Rust's integer methods.
trait HostInt: Int + Debug {
    /// Bits of the type.
    const BITS: u32;
    /// The smallest value.
    const MIN: Self;
    /// The largest value.
    const MAX: Self;
    /// `value` wrapped into the type (Rust `as`).
    fn of(value: i128) -> Self;
    /// The 12 results of `int_ops` for `x`, `y` and shift amount `k`.
    fn ops(x: Self, y: Self, k: u32) -> [Self; 12];
}

macro_rules! host_int {
    ($($ty:ty),*) => {$(
        impl HostInt for $ty {
            const BITS: u32 = <$ty>::BITS;
            const MIN: Self = <$ty>::MIN;
            const MAX: Self = <$ty>::MAX;
            fn of(value: i128) -> Self {
                value as $ty
            }
            fn ops(x: Self, y: Self, k: u32) -> [Self; 12] {
                // x / 0 == 0 and x % 0 == 0; MIN / -1 wraps to MIN and MIN % -1 is 0.
                let quotient = match x.checked_div(y) {
                    Some(q) => q,
                    None if y == 0 => 0,
                    None => x,
                };
                let remainder = x.checked_rem(y).unwrap_or(0);
                [
                    x.wrapping_add(y),
                    x.wrapping_sub(y),
                    x.wrapping_mul(y),
                    quotient,
                    remainder,
                    // Rust's wrapping shifts take the amount modulo the bit width; `>>` of a
                    // signed type is arithmetic.
                    x.wrapping_shl(k),
                    x.wrapping_shr(k),
                    x & y,
                    x | y,
                    x ^ y,
                    !x,
                    x.wrapping_neg(),
                ]
            }
        }
    )*};
}
host_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The columns of `int_ops` by name.
const INT_OPS: [&str; 12] = [
    "+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "!x", "-x",
];

/// Runs `int_ops::<T>` over `(x, y, k)` triples and checks the columns in `columns`
/// against [`HostInt::ops`].
fn check_int_ops<B: TestBackend, T: HostInt>(
    client: &Client<B>,
    inputs: &[(T, T, u32)],
    columns: &[usize],
) {
    let xs: Vec<T> = inputs.iter().map(|input| input.0).collect();
    let ys: Vec<T> = inputs.iter().map(|input| input.1).collect();
    let ks: Vec<u32> = inputs.iter().map(|input| input.2).collect();
    let a = upload_scalars::<B, T>(client, &xs);
    let b = upload_scalars::<B, T>(client, &ys);
    let s = upload_scalars::<B, u32>(client, &ks);
    let out = filled::<B, T>(client, T::default(), inputs.len() * 12);
    let (count, dim) = cover(inputs.len(), 8);
    int_ops::launch::<T, B::R>(client, count, dim, &a, &b, &s, &out).unwrap();
    let got = read_scalars::<B, T>(client, &out);
    for &column in columns {
        let got: Vec<T> = got.iter().skip(column).step_by(12).copied().collect();
        let want: Vec<T> = inputs
            .iter()
            .map(|&(x, y, k)| T::ops(x, y, k)[column])
            .collect();
        let what = format!("{} `{}`", T::ELEM, INT_OPS[column]);
        assert_same(&what, inputs, &got, &want);
    }
}

/// `(x, y, k)` for every pair of `values`, with shift amounts cycling through `amounts`.
fn pairs<T: HostInt>(values: &[i128], amounts: &[u32]) -> Vec<(T, T, u32)> {
    let mut out = Vec::new();
    for &x in values {
        for &y in values {
            let k = amounts[out.len() % amounts.len()];
            out.push((T::of(x), T::of(y), k));
        }
    }
    out
}

/// Values that overflow every integer type when added or multiplied.
const EDGE_VALUES: [i128; 12] = [
    0,
    1,
    -1,
    2,
    100,
    200,
    40_000,
    70_000,
    0x7fff_ffff,
    -0x8000_0000,
    0x7fff_ffff_ffff_ffff,
    -0x8000_0000_0000_0000,
];

/// Runs `check_int_ops` for every integer type with `inputs_of`'s inputs.
macro_rules! for_every_int {
    ($client:expr, $inputs:ident, $columns:expr) => {
        check_int_ops::<B, i8>($client, &$inputs::<i8>(), $columns);
        check_int_ops::<B, i16>($client, &$inputs::<i16>(), $columns);
        check_int_ops::<B, i32>($client, &$inputs::<i32>(), $columns);
        check_int_ops::<B, i64>($client, &$inputs::<i64>(), $columns);
        check_int_ops::<B, u8>($client, &$inputs::<u8>(), $columns);
        check_int_ops::<B, u16>($client, &$inputs::<u16>(), $columns);
        check_int_ops::<B, u32>($client, &$inputs::<u32>(), $columns);
        check_int_ops::<B, u64>($client, &$inputs::<u64>(), $columns);
    };
}

fn edge_pairs<T: HostInt>() -> Vec<(T, T, u32)> {
    pairs::<T>(&EDGE_VALUES, &[0])
}

/// `+`, `-` and `*` wrap on overflow for every integer type (`i32`, `u8`, ... at their
/// limits).
pub fn integer_add_sub_mul_wrap_on_overflow<B: TestBackend>() {
    let client = client::<B>();
    for_every_int!(&client, edge_pairs, &[0, 1, 2]);
    assert_eq!(i32::ops(i32::MAX, 1, 0)[0], i32::MIN);
    assert_eq!(u8::ops(200, 100, 0)[0], 44);
}

fn division_inputs<T: HostInt>() -> Vec<(T, T, u32)> {
    let values = [0, 1, -1, 7, -7, 2, -2, 3, 100, -100, 255, 0x7fff_ffff];
    let mut inputs = pairs::<T>(&values, &[0]);
    // Every value over zero, explicitly.
    inputs.extend(values.iter().map(|&x| (T::of(x), T::of(0), 0)));
    inputs.push((T::MAX, T::of(0), 0));
    inputs.push((T::MIN, T::of(0), 0));
    inputs
}

/// Integer `x / 0` and `x % 0` give 0 for every integer type; other quotients truncate
/// toward zero and remainders take the dividend's sign.
pub fn integer_division_and_remainder_by_zero_give_zero<B: TestBackend>() {
    let client = client::<B>();
    for_every_int!(&client, division_inputs, &[3, 4]);
    assert_eq!(i32::ops(7, 0, 0)[3..5], [0, 0]);
    assert_eq!(i32::ops(-7, 2, 0)[3..5], [-3, -1]);
}

/// `MIN / -1` wraps to `MIN`, `MIN % -1` is 0 and `-MIN` is `MIN`, for every signed type.
pub fn integer_min_divided_by_minus_one_is_min<B: TestBackend>() {
    fn check<B: TestBackend, T: HostInt>(client: &Client<B>) {
        let inputs = [
            (T::MIN, T::of(-1), 0),
            (T::MIN, T::of(1), 0),
            (T::MAX, T::of(-1), 0),
        ];
        check_int_ops::<B, T>(client, &inputs, &[3, 4, 11]);
        assert!(T::ops(T::MIN, T::of(-1), 0)[3] == T::MIN);
    }
    let client = client::<B>();
    check::<B, i8>(&client);
    check::<B, i16>(&client);
    check::<B, i32>(&client);
    check::<B, i64>(&client);
}

fn shift_inputs<T: HostInt>() -> Vec<(T, T, u32)> {
    let bits = T::BITS;
    let amounts = [
        0,
        1,
        3,
        7,
        bits - 1,
        bits,
        bits + 1,
        bits + 5,
        2 * bits,
        2 * bits - 1,
        100,
        u32::MAX,
    ];
    let values = [1, -1, 0x55, -0x80, 0x7fff_ffff, -0x8000_0000_0000_0000, 6];
    let mut inputs = Vec::new();
    for &x in &values {
        for &k in &amounts {
            inputs.push((T::of(x), T::of(0), k));
        }
    }
    inputs
}

/// `x << k` and `x >> k` take `k` modulo the bit width (a `u32` amount of 32 shifts an
/// `i32` by 0, of 9 shifts a `u8` by 1); `>>` of a signed type is arithmetic.
pub fn shift_amounts_are_taken_modulo_the_bit_width<B: TestBackend>() {
    let client = client::<B>();
    for_every_int!(&client, shift_inputs, &[5, 6]);
    assert_eq!(u8::ops(3, 0, 9)[5], 6);
    assert_eq!(i32::ops(-8, 0, 33)[6], -4);
}

fn bit_inputs<T: HostInt>() -> Vec<(T, T, u32)> {
    pairs::<T>(
        &[0, -1, 0x5a5a_5a5a_5a5a_5a5a, 0x0f0f, 0x8000_0000, 1, 0xff],
        &[0],
    )
}

/// `&`, `|`, `^` and `!` of integers give Rust's bits for every integer type.
pub fn bit_operations_match_rust<B: TestBackend>() {
    let client = client::<B>();
    for_every_int!(&client, bit_inputs, &[7, 8, 9, 10]);
}

/// Runs `float_ops::<F>` over `(x, y, z)` triples and returns the 7 results of each.
fn run_float_ops<B: TestBackend, F: Float>(
    client: &Client<B>,
    inputs: &[(F, F, F)],
) -> Vec<[F; 7]> {
    let a = upload_scalars::<B, F>(client, &inputs.iter().map(|t| t.0).collect::<Vec<_>>());
    let b = upload_scalars::<B, F>(client, &inputs.iter().map(|t| t.1).collect::<Vec<_>>());
    let c = upload_scalars::<B, F>(client, &inputs.iter().map(|t| t.2).collect::<Vec<_>>());
    let out = filled::<B, F>(client, F::default(), inputs.len() * 7);
    let (count, dim) = cover(inputs.len(), 8);
    float_ops::launch::<F, B::R>(client, count, dim, &a, &b, &c, &out).unwrap();
    read_scalars::<B, F>(client, &out)
        .chunks_exact(7)
        .map(|chunk| std::array::from_fn(|k| chunk[k]))
        .collect()
}

/// Checks `float_ops::<F>` against `expected` for every input, column by column.
fn check_float_ops<B: TestBackend, F: Float>(
    client: &Client<B>,
    inputs: &[(F, F, F)],
    expected: impl Fn(F, F, F) -> [F; 7],
) {
    let got = run_float_ops::<B, F>(client, inputs);
    let names = ["+", "-", "*", "/", "%", "x * y + z", "-x"];
    for (column, name) in names.iter().enumerate() {
        let got: Vec<F> = got.iter().map(|row| row[column]).collect();
        let want: Vec<F> = inputs
            .iter()
            .map(|&(x, y, z)| expected(x, y, z)[column])
            .collect();
        assert_same(&format!("{} `{name}`", F::ELEM), inputs, &got, &want);
    }
}

/// Special and ordinary `(x, y, z)` float inputs, as f64.
fn float_inputs() -> Vec<(f64, f64, f64)> {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    vec![
        (1.0, 0.0, 0.0),
        (-1.0, 0.0, 0.0),
        (0.0, 0.0, 1.0),
        (-0.0, 0.0, -0.0),
        (7.5, 2.0, 1.0),
        (-7.5, 2.0, -1.0),
        (7.5, -2.0, 0.5),
        (inf, 2.0, 1.0),
        (5.0, inf, -inf),
        (inf, inf, inf),
        (-inf, inf, 0.0),
        (nan, 1.0, 2.0),
        (1.0, nan, 0.0),
        (1e-30, 1e30, 3.0),
        (0.1, 0.2, 0.3),
        (3.0, 0.1, -0.3),
        (1e20, 1e20, -1e40),
        (100.0, 0.0001, 1.0),
    ]
}

/// f32 and f64 `+ - * / %` and `-x` follow IEEE 754: `x / 0` is an infinity or NaN, `%` is
/// `fmod` (the dividend's sign, NaN for `x % 0` and `inf % y`), `-0.0` keeps its sign.
pub fn float_division_and_remainder_follow_ieee<B: TestBackend>() {
    let client = client::<B>();
    let doubles = float_inputs();
    check_float_ops::<B, f64>(&client, &doubles, |x, y, z| {
        [x + y, x - y, x * y, x / y, x % y, x * y + z, -x]
    });
    let singles: Vec<(f32, f32, f32)> = doubles
        .iter()
        .map(|&(x, y, z)| (x as f32, y as f32, z as f32))
        .collect();
    check_float_ops::<B, f32>(&client, &singles, |x, y, z| {
        [x + y, x - y, x * y, x / y, x % y, x * y + z, -x]
    });
}

/// `x * y + z` rounds the product before the sum (no fused multiply-add: `mul_add` is the
/// fused one), for every float type, and half types compute each operation in `f32` and
/// round back after every operation (`2048 + 1` is 2048 in `f16`).
pub fn float_operations_round_after_every_operation<B: TestBackend>() {
    let client = client::<B>();
    // (1 + e)^2 - (1 + 2e) is e^2 exactly, but rounding the product first gives 0.
    let e32 = f32::EPSILON;
    let singles = [(1.0 + e32, 1.0 + e32, -(1.0 + 2.0 * e32)), (2.5, 4.0, 1.0)];
    check_float_ops::<B, f32>(&client, &singles, |x, y, z| {
        [x + y, x - y, x * y, x / y, x % y, x * y + z, -x]
    });
    assert_eq!(
        (1.0 + e32).mul_add(1.0 + e32, -(1.0 + 2.0 * e32)),
        e32 * e32
    );
    let e64 = f64::EPSILON;
    let doubles = [(1.0 + e64, 1.0 + e64, -(1.0 + 2.0 * e64)), (2.5, 4.0, 1.0)];
    check_float_ops::<B, f64>(&client, &doubles, |x, y, z| {
        [x + y, x - y, x * y, x / y, x % y, x * y + z, -x]
    });

    let epsilon = f16::EPSILON.to_f32();
    check_half_rounding::<B, f16>(&client, f16::from_f32, f16::to_f32, epsilon);
    let epsilon = bf16::EPSILON.to_f32();
    check_half_rounding::<B, bf16>(&client, bf16::from_f32, bf16::to_f32, epsilon);
    // 2048 + 1 rounds to 2048 in f16 (and 256 + 1 to 256 in bf16), where f32 keeps 2049.
    assert_eq!(f16::from_f32(2048.0 + 1.0).to_f32(), 2048.0);
}

/// Checks `float_ops` of half type `H` (converted from and to `f32` by `of` and `to`,
/// machine epsilon `epsilon`): each operation computed in `f32` and rounded back, the
/// product of `x * y + z` before the sum.
fn check_half_rounding<B: TestBackend, H: Float>(
    client: &Client<B>,
    of: impl Fn(f32) -> H + Copy,
    to: impl Fn(H) -> f32 + Copy,
    epsilon: f32,
) {
    let big = 2.0 / epsilon;
    let inputs = vec![
        (
            of(1.0 + epsilon),
            of(1.0 + epsilon),
            of(-(1.0 + 2.0 * epsilon)),
        ),
        (of(big), of(1.0), of(0.0)),
        (of(1.0), of(3.0), of(0.1)),
        (of(0.1), of(0.3), of(-0.03)),
        (of(300.0), of(7.0), of(-2100.0)),
    ];
    check_float_ops::<B, H>(client, &inputs, |x, y, z| {
        let (x, y, z) = (to(x), to(y), to(z));
        [
            of(x + y),
            of(x - y),
            of(x * y),
            of(x / y),
            of(x % y),
            of(to(of(x * y)) + z),
            of(-x),
        ]
    });
}

/// `-x` negates: integers wrap (`-MIN == MIN`, `-1u32 == u32::MAX`), floats flip the sign
/// (of zeros and infinities too) for every float type.
pub fn unary_minus_negates_and_wraps<B: TestBackend>() {
    let client = client::<B>();
    let values: [i128; 8] = [
        0,
        1,
        -1,
        5,
        -0x80,
        0x7fff_ffff,
        -0x8000_0000,
        -0x8000_0000_0000_0000,
    ];
    macro_rules! negate {
        ($($ty:ty),*) => {$(
            let inputs: Vec<($ty, $ty, u32)> =
                values.iter().map(|&v| (<$ty>::of(v), 0, 0)).collect();
            check_int_ops::<B, $ty>(&client, &inputs, &[11]);
        )*};
    }
    negate!(i8, i16, i32, i64, u8, u16, u32, u64);
    let floats = [
        0.0,
        -0.0,
        1.5,
        -2.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e-310,
    ];
    let doubles: Vec<(f64, f64, f64)> = floats.iter().map(|&v| (v, 1.0, 1.0)).collect();
    let got = run_float_ops::<B, f64>(&client, &doubles);
    for (row, &v) in got.iter().zip(&floats) {
        assert_eq!(row[6].to_bits(), (-v).to_bits(), "-({v:e})");
    }
    let halves: Vec<(f16, f16, f16)> = floats
        .iter()
        .map(|&v| (f16::from_f64(v), f16::ONE, f16::ONE))
        .collect();
    let got = run_float_ops::<B, f16>(&client, &halves);
    for (row, &(v, ..)) in got.iter().zip(&halves) {
        assert_eq!(row[6].to_bits(), v.to_bits() ^ 0x8000, "-({v})");
    }
}

/// Every compound assignment (`+= -= *= /= %= |= &= ^= <<= >>=`) updates a local and an
/// array element like the plain operation would, for `i32` and `f32`; literal shift
/// amounts are taken modulo the bit width too.
pub fn compound_assignment_updates_locals_and_array_elements<B: TestBackend>() {
    let client = client::<B>();
    let x = [0, 1, -1, 7, -250, 12345, i32::MAX, i32::MIN];
    let f = [0.0f32, 1.0, -1.0, 2.75, -10.5, 1e6, 0.1, -0.3];
    let xs = upload_scalars::<B, i32>(&client, &x);
    let fs = upload_scalars::<B, f32>(&client, &f);
    let ints = filled::<B, i32>(&client, 0, x.len() * 3);
    let floats = filled::<B, f32>(&client, 0.0, x.len() * 2);
    let (count, dim) = cover(x.len(), 4);
    compound::launch::<B::R>(&client, count, dim, &xs, &fs, &ints, &floats).unwrap();
    let mut want_ints = Vec::new();
    for &v in &x {
        let mut w = v.wrapping_add(5).wrapping_sub(2).wrapping_mul(3) / 2 % 1000;
        w = ((w | 8) & 0x7ff) ^ 3;
        w = w.wrapping_shl(2) >> 1;
        want_ints.extend([w, w, v.wrapping_shl(3).wrapping_add(v >> 1)]);
    }
    let mut want_floats = Vec::new();
    for &g in &f {
        let g = (g + 0.5 - 0.25) * 3.0 / 2.0 % 4.0;
        want_floats.extend([g, g]);
    }
    assert_eq!(
        read_scalars::<B, i32>(&client, &ints),
        want_ints,
        "inputs {x:?}"
    );
    let got = read_scalars::<B, f32>(&client, &floats);
    if client.properties().features.strict_float_math {
        assert_same("f32 compound assignments", &f, &got, &want_floats);
    } else {
        // The driver may contract and reassociate the chain (`(g + 0.5) - 0.25` into
        // `g + 0.25`): a few roundings apart at most on these inputs.
        assert_each(
            "f32 compound assignments",
            &f,
            &got,
            &want_floats,
            |g, w| super::within_ulps(*g, *w, 4),
        );
    }
}

/// Runs `compare::<T>` over pairs and checks the six results against Rust's operators.
fn check_compare<B: TestBackend, T: Scalar>(client: &Client<B>, values: &[T]) {
    let pairs: Vec<(T, T)> = values
        .iter()
        .flat_map(|&x| values.iter().map(move |&y| (x, y)))
        .collect();
    let a = upload_scalars::<B, T>(client, &pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let b = upload_scalars::<B, T>(client, &pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let out = filled::<B, u8>(client, 0xee, pairs.len() * 6);
    let (count, dim) = cover(pairs.len(), 16);
    compare::launch::<T, B::R>(client, count, dim, &a, &b, &out).unwrap();
    let got = read_bytes::<B>(client, &out);
    let compare = |x: T, y: T| [x == y, x != y, x < y, x <= y, x > y, x >= y].map(u8::from);
    let mut want: Vec<u8> = pairs.iter().flat_map(|&(x, y)| compare(x, y)).collect();
    if !client.properties().features.strict_float_math {
        // Subnormal operands may be flushed to zero: the comparison of the flushed values
        // is right too.
        let flush = |v: T| {
            if super::is_subnormal(v) {
                T::default()
            } else {
                v
            }
        };
        for (index, &(x, y)) in pairs.iter().enumerate() {
            let flushed = compare(flush(x), flush(y));
            for k in 0..6 {
                if got[index * 6 + k] == flushed[k] {
                    want[index * 6 + k] = flushed[k];
                }
            }
        }
    }
    assert_same(&format!("{} comparisons", T::ELEM), &pairs, &got, &want);
}

/// `== != < <= > >=` follow each type's order: signed and unsigned integers compare as
/// their type, floats as IEEE 754 (NaN unordered and unequal to itself, `-0.0 == 0.0`),
/// `false < true`; the results are stored as one-byte `bool`s.
pub fn comparisons_follow_each_types_order<B: TestBackend>() {
    let client = client::<B>();
    check_compare::<B, i32>(&client, &[i32::MIN, -1, 0, 1, i32::MAX]);
    check_compare::<B, u32>(&client, &[0, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX]);
    check_compare::<B, u8>(&client, &[0, 1, 127, 128, 255]);
    let special = [
        f32::NEG_INFINITY,
        -1.5,
        -0.0,
        0.0,
        1e-45,
        2.0,
        f32::INFINITY,
        f32::NAN,
    ];
    check_compare::<B, f32>(&client, &special);
    check_compare::<B, f16>(&client, &special.map(f16::from_f32));
    check_compare::<B, bool>(&client, &[false, true]);
}
