//! The 8-bit floats `e4m3` and `e5m2` on the device, bit for bit against the host
//! conversions of `cubert_runtime::lang::fp8`: every code through `ops::cast` into every
//! element type and back from every float type; values at and beside every rounding
//! midpoint, past the largest value, infinities, NaNs and subnormals from `f32` and `f64`,
//! and every `f16` and `bf16` bit pattern, into both; a `#[kernel]` that loads `e4m3`,
//! scales in `f32` and stores `e5m2`; and arithmetic on them refused with a clear error that
//! leaves the destination as it was.

use crate::backend::{Client, TestBackend};
use crate::support::{client, read_elems, upload};
use cubert_runtime::lang::fp8::{e4m3, e5m2};
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, ElemType, ops};
use half::{bf16, f16};

/// The two 8-bit float types.
const FP8: [ElemType; 2] = [ElemType::E4M3, ElemType::E5M2];

/// The 8-bit float `code` of type `elem` as `f64` (exact).
fn fp8_to_f64(elem: ElemType, code: u8) -> f64 {
    match elem {
        ElemType::E4M3 => e4m3::from_bits(code).to_f64(),
        _ => e5m2::from_bits(code).to_f64(),
    }
}

/// `value` rounded once to the 8-bit float type `elem` (host reference).
fn fp8_from_f64(elem: ElemType, value: f64) -> u8 {
    match elem {
        ElemType::E4M3 => e4m3::from_f64(value).to_bits(),
        _ => e5m2::from_f64(value).to_bits(),
    }
}

/// The host's value of `value` (an exact float, NaN included) cast to `to`, as bytes: the
/// documented semantics of `ops::cast` from a float.
fn from_float(value: f64, to: ElemType) -> Vec<u8> {
    match to {
        ElemType::E4M3 | ElemType::E5M2 => vec![fp8_from_f64(to, value)],
        // Exact: every 8-bit value is an f16, bf16 and f32 value (a NaN converts as f32's).
        ElemType::F16 => f16::from_f32(value as f32).to_le_bytes().to_vec(),
        ElemType::BF16 => bf16::from_f32(value as f32).to_le_bytes().to_vec(),
        ElemType::F32 => (value as f32).to_le_bytes().to_vec(),
        ElemType::F64 => value.to_le_bytes().to_vec(),
        ElemType::I8 => (value as i8).to_le_bytes().to_vec(),
        ElemType::I16 => (value as i16).to_le_bytes().to_vec(),
        ElemType::I32 => (value as i32).to_le_bytes().to_vec(),
        ElemType::I64 => (value as i64).to_le_bytes().to_vec(),
        ElemType::U8 => vec![value as u8],
        ElemType::U16 => (value as u16).to_le_bytes().to_vec(),
        ElemType::U32 => (value as u32).to_le_bytes().to_vec(),
        ElemType::U64 => (value as u64).to_le_bytes().to_vec(),
        ElemType::Bool => vec![u8::from(value != 0.0)],
    }
}

/// Casts `source` (elements of `from`) to `to` with `ops::cast` and returns the result's
/// bytes.
fn cast_on_device<B: TestBackend>(
    client: &Client<B>,
    source: &[u8],
    from: ElemType,
    to: ElemType,
) -> Vec<u8> {
    let len = source.len() / from.size();
    let src = upload::<B, u8>(client, source);
    let dst = client.empty(len * to.size()).unwrap();
    ops::cast(client, &src, &dst, len, from, to).unwrap();
    read_elems::<B, u8>(client, &dst)
}

/// Compares the device's cast of `source` with `expected`, element by element; the message
/// names the first mismatches.
fn check_cast<B: TestBackend>(
    client: &Client<B>,
    source: &[u8],
    from: ElemType,
    to: ElemType,
    expected: impl Fn(&[u8]) -> Vec<u8>,
) {
    let got = cast_on_device::<B>(client, source, from, to);
    let mismatches: Vec<String> = source
        .chunks_exact(from.size())
        .zip(got.chunks_exact(to.size()))
        .enumerate()
        .filter_map(|(index, (input, output))| {
            let want = expected(input);
            (output != want.as_slice())
                .then(|| format!("#{index} {input:02x?} -> {output:02x?}, expected {want:02x?}"))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{from} -> {to}: {} of {} elements differ; first: {:#?}",
        mismatches.len(),
        source.len() / from.size(),
        &mismatches[..mismatches.len().min(8)]
    );
}

/// Every one of the 256 codes of each 8-bit float cast to every element type (the other
/// 8-bit float, every float, every integer, `bool`) equals the host conversion, bit for bit
/// (to its own type: the same bits).
pub fn every_fp8_code_casts_to_every_type_like_the_host<B: TestBackend>() {
    let client = client::<B>();
    let codes: Vec<u8> = (0..=u8::MAX).collect();
    for from in FP8 {
        for to in ElemType::ALL {
            if !client.properties().features.supports_type(to) {
                continue;
            }
            check_cast::<B>(&client, &codes, from, to, |input| {
                if to == from {
                    // A cast to the same type keeps the bits (NaNs included).
                    input.to_vec()
                } else {
                    from_float(fp8_to_f64(from, input[0]), to)
                }
            });
        }
    }
}

/// Every code of each 8-bit float, cast to `f16`, `bf16`, `f32` and `f64` and back on the
/// device, is the code it was: NaNs come back as the canonical NaN `0x7f`, and `e5m2`'s
/// infinities as its largest finite value of their sign (saturation).
pub fn every_fp8_code_round_trips_through_every_float_type<B: TestBackend>() {
    let client = client::<B>();
    let codes: Vec<u8> = (0..=u8::MAX).collect();
    for elem in FP8 {
        for wide in [ElemType::F16, ElemType::BF16, ElemType::F32, ElemType::F64] {
            if !client.properties().features.supports_type(wide) {
                continue;
            }
            let widened = cast_on_device::<B>(&client, &codes, elem, wide);
            let back = cast_on_device::<B>(&client, &widened, wide, elem);
            for (code, got) in codes.iter().zip(back) {
                let value = fp8_to_f64(elem, *code);
                let want = if value.is_nan() {
                    0x7f
                } else if value.is_infinite() {
                    (code & 0x80) | (if elem == ElemType::E4M3 { 0x7e } else { 0x7b })
                } else {
                    *code
                };
                assert_eq!(got, want, "{elem} {code:#04x} through {wide}");
            }
        }
    }
}

/// The finite values of `elem`, the midpoint between each pair of neighbours and the
/// `f32` values on either side of it, values past the largest, infinities, NaNs, zeros and
/// the subnormal range's edges, as `f64`.
fn values_around(elem: ElemType) -> Vec<f64> {
    let mut finite: Vec<f64> = (0..=u8::MAX)
        .map(|code| fp8_to_f64(elem, code))
        .filter(|value| value.is_finite())
        .collect();
    finite.sort_by(f64::total_cmp);
    finite.dedup();
    let mut values = Vec::new();
    for pair in finite.windows(2) {
        let mid = (pair[0] + pair[1]) / 2.0;
        let single = mid as f32;
        values.extend([
            pair[0],
            mid,
            f64::from(f32::from_bits(single.to_bits().wrapping_add(1))),
            f64::from(f32::from_bits(single.to_bits().wrapping_sub(1))),
        ]);
    }
    let max = finite[finite.len() - 1];
    let ulp = max - finite[finite.len() - 2];
    values.extend([
        max + ulp / 2.0,
        -(max + ulp / 2.0),
        max + ulp,
        max * 4.0,
        -max * 4.0,
        1e30,
        f64::from(f32::MAX),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        0.0,
        -0.0,
        f64::from(f32::from_bits(1)),
        -f64::from(f32::from_bits(1)),
    ]);
    values
}

/// Values at, beside and between the 8-bit values, from `f32` and `f64` (where a hair
/// beside a midpoint is closer than `f32` can hold: rounding through `f32` to nearest would
/// land on the midpoint), round into each 8-bit float as the host rounds: once, to nearest
/// even, saturating, NaN to `0x7f`.
pub fn float_values_round_into_fp8_like_the_host<B: TestBackend>() {
    let client = client::<B>();
    for to in FP8 {
        let values = values_around(to);
        let singles: Vec<u8> = values
            .iter()
            .flat_map(|v| (*v as f32).to_le_bytes())
            .collect();
        check_cast::<B>(&client, &singles, ElemType::F32, to, |input| {
            let value = f32::from_le_bytes([input[0], input[1], input[2], input[3]]);
            vec![fp8_from_f64(to, f64::from(value))]
        });
        if !client.properties().features.supports_type(ElemType::F64) {
            continue;
        }
        let mut doubles = values.clone();
        for value in &values {
            doubles.push(value + value.abs() * 2f64.powi(-40));
            doubles.push(value - value.abs() * 2f64.powi(-40));
        }
        let bytes: Vec<u8> = doubles.iter().flat_map(|v| v.to_le_bytes()).collect();
        check_cast::<B>(&client, &bytes, ElemType::F64, to, |input| {
            let mut word = [0u8; 8];
            word.copy_from_slice(input);
            vec![fp8_from_f64(to, f64::from_le_bytes(word))]
        });
    }
}

/// Every one of the 65,536 `f16` and `bf16` bit patterns casts into each 8-bit float as
/// the host rounds its exact value.
pub fn every_half_bit_pattern_rounds_into_fp8_like_the_host<B: TestBackend>() {
    let client = client::<B>();
    let patterns: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
    for to in FP8 {
        check_cast::<B>(&client, &patterns, ElemType::F16, to, |input| {
            let value = f16::from_le_bytes([input[0], input[1]]).to_f64();
            vec![fp8_from_f64(to, value)]
        });
        check_cast::<B>(&client, &patterns, ElemType::BF16, to, |input| {
            let value = bf16::from_le_bytes([input[0], input[1]]).to_f64();
            vec![fp8_from_f64(to, value)]
        });
    }
}

/// `out[i] = ((x[i] as f32) * scale) as e5m2`: what a dequantize-scale-requantize step of a
/// kernel looks like.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn rescale_e4m3_to_e5m2(x: &Array<e4m3>, out: &mut Array<e5m2>, scale: f32) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let wide = x[i] as f32;
        out[i] = (wide * scale) as e5m2;
    }
}

/// `out[i]` = 1 if `x[i] < y[i]`, + 2 if `x[i] == y[i]`, + 4 if `x[i] != y[i]`: the
/// comparisons the language allows on every scalar, by value.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn compare<T: Scalar>(x: &Array<T>, y: &Array<T>, out: &mut Array<u8>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        out[i] = (a < b) as u8 + 2u8 * (a == b) as u8 + 4u8 * (a != b) as u8;
    }
}

/// The definitions of this module's kernels, for code generators to compile.
pub fn definitions() -> Vec<cubert_runtime::lang::KernelDefinition> {
    vec![
        rescale_e4m3_to_e5m2::definition(),
        compare::definition::<e4m3>(),
        compare::definition::<e5m2>(),
    ]
}

/// Every 8-bit code against 64 others (by a stride that meets zeros of both signs, NaNs,
/// infinities and subnormals): `<`, `==`, `!=` in a kernel compare values, as the host's
/// `PartialOrd` does (`-0 == +0`, NaN unordered and unequal to itself).
fn comparisons_match_the_host<B: TestBackend, T: Scalar + From<u8> + bytemuck::Pod>()
where
    f64: From<T>,
{
    let client = client::<B>();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for a in 0..=u8::MAX {
        for k in 0..64u8 {
            xs.push(T::from(a));
            ys.push(T::from(
                a.wrapping_add(k.wrapping_mul(4)).wrapping_add(k / 2),
            ));
        }
    }
    xs.extend([T::from(0x00), T::from(0x80), T::from(0x7f)]);
    ys.extend([T::from(0x80), T::from(0x00), T::from(0x7f)]);
    let x = upload::<B, T>(&client, &xs);
    let y = upload::<B, T>(&client, &ys);
    let out = upload::<B, u8>(&client, &vec![0xee; xs.len()]);
    let count = CubeCount::Static(xs.len().div_ceil(64) as u32, 1, 1);
    compare::launch::<T, B::R>(&client, count, CubeDim::new_1d(64), &x, &y, &out).unwrap();
    let got = read_elems::<B, u8>(&client, &out);
    for ((a, b), got) in xs.iter().zip(&ys).zip(got) {
        let (va, vb) = (f64::from(*a), f64::from(*b));
        let want = u8::from(va < vb) + 2 * u8::from(va == vb) + 4 * u8::from(va != vb);
        assert_eq!(got, want, "{} {:?} vs {:?}", T::ELEM, a, b);
    }
}

/// `<`, `==`, `!=` on `e4m3` and `e5m2` values in a kernel compare by value, as on the host.
pub fn fp8_comparisons_in_a_kernel_compare_values<B: TestBackend>() {
    comparisons_match_the_host::<B, e4m3>();
    comparisons_match_the_host::<B, e5m2>();
}

/// A kernel loading every `e4m3` code, scaling it in `f32` and storing `e5m2` gives the
/// host's result bit for bit, for scales that round, saturate and keep NaN.
pub fn kernel_loads_e4m3_scales_in_f32_and_stores_e5m2<B: TestBackend>() {
    let client = client::<B>();
    let codes: Vec<e4m3> = (0..=u8::MAX).map(e4m3::from_bits).collect();
    let x = upload::<B, e4m3>(&client, &codes);
    for scale in [1.0f32, 0.3, 200.0, -1e-3, 3.0e4] {
        let out = upload::<B, e5m2>(&client, &vec![e5m2::from_bits(0x55); codes.len()]);
        let count = CubeCount::Static(codes.len().div_ceil(64) as u32, 1, 1);
        rescale_e4m3_to_e5m2::launch::<B::R>(&client, count, CubeDim::new_1d(64), &x, &out, scale)
            .unwrap();
        let got: Vec<e5m2> = read_elems::<B, e5m2>(&client, &out);
        for (input, got) in codes.iter().zip(got) {
            let want = e5m2::from_f32(input.to_f32() * scale);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{input:?} ({:#04x}) * {scale}",
                input.to_bits()
            );
        }
    }
}

/// Add, mul, reduce-sum and matmul on an 8-bit float are refused with an error that names
/// the type and says to cast first, and the destination keeps its bytes.
pub fn arithmetic_on_fp8_is_refused_with_a_clear_error<B: TestBackend>() {
    let client = client::<B>();
    for elem in FP8 {
        let input = upload::<B, u8>(&client, &[0x38; 4]);
        let out = upload::<B, u8>(&client, &[0x11; 4]);
        let errors = [
            ops::add(&client, &input, &input, &out, 4, elem).unwrap_err(),
            ops::mul(&client, &input, &input, &out, 4, elem).unwrap_err(),
        ];
        for error in errors {
            let message = error.to_string();
            assert!(
                message.contains(elem.name()) && message.contains("8-bit float"),
                "{elem}: {message}"
            );
        }
        assert_eq!(read_elems::<B, u8>(&client, &out), vec![0x11; 4]);
        let reduced = ops::reduce_sum(&client, &input, &out, 2, 2, elem);
        assert!(reduced.is_err(), "{elem}: reduce-sum ran");
        let multiplied = ops::matmul(&client, &input, &input, &out, 2, 2, 2, elem);
        assert!(multiplied.is_err(), "{elem}: matmul ran");
        assert_eq!(read_elems::<B, u8>(&client, &out), vec![0x11; 4]);
    }
}
