//! Exhaustive casts of the half types: every one of the 65,536 `f16` and `bf16` bit
//! patterns through `ops::cast` into every element type, and every half value (and every
//! rounding midpoint between two of them) from `f32` and `f64` into the half types, each
//! compared bit for bit with the `half` crate and Rust's `as` (floats to integers saturate,
//! NaN gives 0, booleans are "not zero"). NaN payloads and signed zeros included.
//!
//! The values converted into the half types are half values, midpoints between neighbours
//! and the `f32` values on either side of each midpoint. `f32 -> half` is compared with the
//! `half` crate; `f64 -> half` with `cubert_runtime::half_rounding` (rounded once from the
//! exact `f64`: the `half` crate's `from_f64` ignores the low mantissa word for `bf16`, so a
//! value a hair above a tie rounds down there).

use crate::backend::TestBackend;
use crate::support::{client, read_elems, upload};
use cubert_runtime::lang::fp8::{e4m3, e5m2};
use cubert_runtime::{ElemType, half_rounding, ops};
use half::{bf16, f16};
use num_traits::AsPrimitive;

/// `value` cast to `to`, as little-endian bytes, with the semantics of `ops::cast`.
fn cast_value<S>(value: S, to: ElemType) -> Vec<u8>
where
    S: Copy
        + PartialEq
        + Default
        + AsPrimitive<f16>
        + AsPrimitive<bf16>
        + AsPrimitive<f32>
        + AsPrimitive<f64>
        + AsPrimitive<i8>
        + AsPrimitive<i16>
        + AsPrimitive<i32>
        + AsPrimitive<i64>
        + AsPrimitive<u8>
        + AsPrimitive<u16>
        + AsPrimitive<u32>
        + AsPrimitive<u64>,
{
    fn bytes<T: bytemuck::Pod>(value: T) -> Vec<u8> {
        bytemuck::bytes_of(&value).to_vec()
    }
    match to {
        ElemType::F16 => bytes(AsPrimitive::<f16>::as_(value)),
        ElemType::BF16 => bytes(AsPrimitive::<bf16>::as_(value)),
        ElemType::F32 => bytes(AsPrimitive::<f32>::as_(value)),
        ElemType::F64 => bytes(AsPrimitive::<f64>::as_(value)),
        ElemType::I8 => bytes(AsPrimitive::<i8>::as_(value)),
        ElemType::I16 => bytes(AsPrimitive::<i16>::as_(value)),
        ElemType::I32 => bytes(AsPrimitive::<i32>::as_(value)),
        ElemType::I64 => bytes(AsPrimitive::<i64>::as_(value)),
        ElemType::U8 => bytes(AsPrimitive::<u8>::as_(value)),
        ElemType::U16 => bytes(AsPrimitive::<u16>::as_(value)),
        ElemType::U32 => bytes(AsPrimitive::<u32>::as_(value)),
        ElemType::U64 => bytes(AsPrimitive::<u64>::as_(value)),
        ElemType::Bool => vec![u8::from(value != S::default())],
        // Rounded once from the exact value (the half types' values are exact in f64).
        ElemType::E4M3 => bytes(e4m3::from_f64(AsPrimitive::<f64>::as_(value))),
        ElemType::E5M2 => bytes(e5m2::from_f64(AsPrimitive::<f64>::as_(value))),
    }
}

/// Casts `source` (elements of `from`) to `to` on the device and compares every element's
/// bytes with `expected`; the message names the first mismatches.
fn check_cast<B: TestBackend>(
    source: &[u8],
    from: ElemType,
    to: ElemType,
    expected: impl Fn(&[u8]) -> Vec<u8>,
) {
    let client = client::<B>();
    let len = source.len() / from.size();
    let src = upload::<B, u8>(&client, source);
    let dst = client.empty(len * to.size()).unwrap();
    ops::cast(&client, &src, &dst, len, from, to).unwrap();
    let got: Vec<u8> = read_elems::<B, u8>(&client, &dst);
    let mut mismatches = Vec::new();
    for (index, (input, output)) in source
        .chunks_exact(from.size())
        .zip(got.chunks_exact(to.size()))
        .enumerate()
    {
        let want = expected(input);
        if output != want.as_slice() {
            mismatches.push(format!(
                "#{index} {input:02x?} -> {output:02x?}, expected {want:02x?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{from} -> {to}: {} of {len} elements differ; first: {:#?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(8)]
    );
}

fn every_pattern() -> Vec<u8> {
    (0..=u16::MAX).flat_map(u16::to_le_bytes).collect()
}

/// Every `f16` bit pattern cast to every element type equals the `half` crate's value.
pub fn every_f16_bit_pattern_casts_like_the_half_crate<B: TestBackend>() {
    let source = every_pattern();
    for to in ElemType::ALL {
        check_cast::<B>(&source, ElemType::F16, to, |input| {
            cast_value(f16::from_le_bytes([input[0], input[1]]), to)
        });
    }
}

/// Every `bf16` bit pattern cast to every element type equals the `half` crate's value.
pub fn every_bf16_bit_pattern_casts_like_the_half_crate<B: TestBackend>() {
    let source = every_pattern();
    for to in ElemType::ALL {
        check_cast::<B>(&source, ElemType::BF16, to, |input| {
            cast_value(bf16::from_le_bytes([input[0], input[1]]), to)
        });
    }
}

/// Every value of a half type as `f32`, the midpoint to the next value up, and the `f32`
/// values on either side of that midpoint (ties, and the roundings next to them), with
/// NaNs of several payloads, infinities and signed zeros.
fn values_around(half_values: impl Iterator<Item = f32> + Clone) -> Vec<f32> {
    let mut values: Vec<f32> = Vec::new();
    let finite: Vec<f32> = half_values.filter(|v| v.is_finite()).collect();
    let mut sorted = finite.clone();
    sorted.sort_by(f32::total_cmp);
    sorted.dedup();
    for pair in sorted.windows(2) {
        let (low, high) = (pair[0], pair[1]);
        // Both are exact halves, so their midpoint is exact in f64 and in f32.
        let mid = ((f64::from(low) + f64::from(high)) / 2.0) as f32;
        values.extend([low, mid, f32::from_bits(mid.to_bits().wrapping_add(1))]);
        values.push(f32::from_bits(mid.to_bits().wrapping_sub(1)));
    }
    values.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffa0_0001),
        0.0,
        -0.0,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        1.0e-45,
        -1.0e-45,
    ]);
    values
}

/// Every half value, every midpoint between neighbours and the values beside each midpoint,
/// from `f32` and `f64`, round into `f16` and `bf16` exactly as the `half` crate rounds.
pub fn values_round_into_the_half_types_like_the_half_crate<B: TestBackend>() {
    let f16s = (0..=u16::MAX).map(|bits| f16::from_bits(bits).to_f32());
    let bf16s = (0..=u16::MAX).map(|bits| bf16::from_bits(bits).to_f32());
    for (to, values) in [
        (ElemType::F16, values_around(f16s)),
        (ElemType::BF16, values_around(bf16s)),
    ] {
        let singles: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        check_cast::<B>(&singles, ElemType::F32, to, |input| {
            let value = f32::from_le_bytes([input[0], input[1], input[2], input[3]]);
            cast_value(value, to)
        });
        // The same values as f64, NaNs excepted (an f64 NaN's payload is its own).
        let doubles: Vec<u8> = values
            .iter()
            .filter(|v| !v.is_nan())
            .flat_map(|v| f64::from(*v).to_le_bytes())
            .collect();
        // f64 -> half rounds once from the exact value (`half_rounding`), which the
        // `half` crate's `from_f64` doesn't everywhere.
        check_cast::<B>(&doubles, ElemType::F64, to, |input| {
            let mut word = [0u8; 8];
            word.copy_from_slice(input);
            let value = f64::from_le_bytes(word);
            match to {
                ElemType::F16 => half_rounding::f64_to_f16(value).to_le_bytes().to_vec(),
                _ => half_rounding::f64_to_bf16(value).to_le_bytes().to_vec(),
            }
        });
    }
}
