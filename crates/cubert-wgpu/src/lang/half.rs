//! Half types (`f16`, `bf16`) as bits: conversions to and from `f32` and `f64`. The
//! conversion helpers also take the 8-bit floats, whose own are in `fp8`.
//!
//! A half value is held as its 16 bits in a `u32` (in registers, in shared memory and
//! packed in global arrays), so no WGSL extension is needed, and every operation computes
//! in `f32` and rounds back, as the language defines. The conversions are written with
//! integer arithmetic, ports of the CUDA prelude's (themselves ports of the `half`
//! crate's): round to nearest even, NaNs keep their payload and get the quiet bit, and a
//! `f64` rounds once (its low word only as a sticky bit).

use super::float::{self, Format};
use super::helpers::Helpers;
use cubert_lang::ElemType;

const F16_TO_F32: &str = r"
// The f16 in the low 16 bits of `h` as f32 (exact).
fn cubert_f16_to_f32(h: u32) -> f32 {
    let i = h & 0xffffu;
    if ((i & 0x7fffu) == 0u) {
        return bitcast<f32>(i << 16u);
    }
    let sign = i & 0x8000u;
    let exponent = i & 0x7c00u;
    let mantissa = i & 0x03ffu;
    if (exponent == 0x7c00u) {
        if (mantissa == 0u) {
            return bitcast<f32>((sign << 16u) | 0x7f800000u);
        }
        return bitcast<f32>((sign << 16u) | 0x7fc00000u | (mantissa << 13u));
    }
    if (exponent == 0u) {
        // A subnormal: the leading zeros of the 10-bit mantissa in 16 bits, less 6.
        let e = countLeadingZeros(mantissa) - 22u;
        let exp32 = (127u - 15u - e) << 23u;
        let man32 = (mantissa << (14u + e)) & 0x7fffffu;
        return bitcast<f32>((sign << 16u) | exp32 | man32);
    }
    return bitcast<f32>((sign << 16u) | (((exponent >> 10u) + 112u) << 23u) | (mantissa << 13u));
}";

const F32_TO_F16: &str = r"
// `value` as f16 bits, rounded to nearest even.
fn cubert_f32_to_f16(value: f32) -> u32 {
    let x = bitcast<u32>(value);
    let sign = x & 0x80000000u;
    let exponent = x & 0x7f800000u;
    let mantissa = x & 0x007fffffu;
    if (exponent == 0x7f800000u) {
        let nan_bit = select(0x0200u, 0u, mantissa == 0u);
        return (sign >> 16u) | 0x7c00u | nan_bit | (mantissa >> 13u);
    }
    let half_sign = sign >> 16u;
    let half_exp = i32(exponent >> 23u) - 127 + 15;
    if (half_exp >= 0x1f) {
        return half_sign | 0x7c00u;
    }
    if (half_exp <= 0) {
        if (14 - half_exp > 24) {
            return half_sign;
        }
        let man = mantissa | 0x00800000u;
        var half_man = man >> u32(14 - half_exp);
        let round_bit = 1u << u32(13 - half_exp);
        if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) {
            half_man = half_man + 1u;
        }
        return half_sign | half_man;
    }
    var bits = half_sign | (u32(half_exp) << 10u) | (mantissa >> 13u);
    let round_bit = 0x00001000u;
    if ((mantissa & round_bit) != 0u && (mantissa & (3u * round_bit - 1u)) != 0u) {
        bits = bits + 1u;
    }
    return bits;
}";

const BF16_TO_F32: &str = r"
// The bf16 in the low 16 bits of `h` as f32 (exact; NaNs get the quiet bit).
fn cubert_bf16_to_f32(h: u32) -> f32 {
    let i = h & 0xffffu;
    if ((i & 0x7fffu) > 0x7f80u) {
        return bitcast<f32>((i | 0x0040u) << 16u);
    }
    return bitcast<f32>(i << 16u);
}";

const F32_TO_BF16: &str = r"
// `value` as bf16 bits, rounded to nearest even.
fn cubert_f32_to_bf16(value: f32) -> u32 {
    let x = bitcast<u32>(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x0040u;
    }
    let round_bit = 0x00008000u;
    if ((x & round_bit) != 0u && (x & (3u * round_bit - 1u)) != 0u) {
        return (x >> 16u) + 1u;
    }
    return x >> 16u;
}";

const F64_TO_F16: &str = r"
// `value` as f16 bits, rounded once to nearest even from the f64.
fn cubert_f64_to_f16(value: f64) -> u32 {
    let val = bitcast<u64>(value);
    let x = u32(val >> 32u);
    let low = u32(val & 0xfffffffflu);
    // The low word only matters as a sticky bit.
    let sticky = select(0u, 1u, low != 0u);
    let sign = x & 0x80000000u;
    let exponent = x & 0x7ff00000u;
    let mantissa = x & 0x000fffffu;
    if (exponent == 0x7ff00000u) {
        let nan_bit = select(0x0200u, 0u, mantissa == 0u && low == 0u);
        return (sign >> 16u) | 0x7c00u | nan_bit | (mantissa >> 10u);
    }
    let half_sign = sign >> 16u;
    let half_exp = i32(exponent >> 20u) - 1023 + 15;
    if (half_exp >= 0x1f) {
        return half_sign | 0x7c00u;
    }
    if (half_exp <= 0) {
        if (10 - half_exp > 21) {
            return half_sign;
        }
        let man = mantissa | 0x00100000u;
        var half_man = man >> u32(11 - half_exp);
        let round_bit = 1u << u32(10 - half_exp);
        if ((man & round_bit) != 0u && ((man & (3u * round_bit - 1u)) | sticky) != 0u) {
            half_man = half_man + 1u;
        }
        return half_sign | half_man;
    }
    var bits = half_sign | (u32(half_exp) << 10u) | (mantissa >> 10u);
    let round_bit = 0x00000200u;
    if ((mantissa & round_bit) != 0u && ((mantissa & (3u * round_bit - 1u)) | sticky) != 0u) {
        bits = bits + 1u;
    }
    return bits;
}";

const F64_TO_BF16: &str = r"
// `value` as bf16 bits, rounded once to nearest even from the f64.
fn cubert_f64_to_bf16(value: f64) -> u32 {
    let val = bitcast<u64>(value);
    let x = u32(val >> 32u);
    let low = u32(val & 0xfffffffflu);
    let sticky = select(0u, 1u, low != 0u);
    let sign = x & 0x80000000u;
    let exponent = x & 0x7ff00000u;
    let mantissa = x & 0x000fffffu;
    if (exponent == 0x7ff00000u) {
        let nan_bit = select(0x0040u, 0u, mantissa == 0u && low == 0u);
        return (sign >> 16u) | 0x7f80u | nan_bit | (mantissa >> 13u);
    }
    let half_sign = sign >> 16u;
    let half_exp = i32(exponent >> 20u) - 1023 + 127;
    if (half_exp >= 0xff) {
        return half_sign | 0x7f80u;
    }
    if (half_exp <= 0) {
        if (7 - half_exp > 21) {
            return half_sign;
        }
        let man = mantissa | 0x00100000u;
        var half_man = man >> u32(14 - half_exp);
        let round_bit = 1u << u32(13 - half_exp);
        if ((man & round_bit) != 0u && ((man & (3u * round_bit - 1u)) | sticky) != 0u) {
            half_man = half_man + 1u;
        }
        return half_sign | half_man;
    }
    var bits = half_sign | (u32(half_exp) << 7u) | (mantissa >> 13u);
    let round_bit = 0x00001000u;
    if ((mantissa & round_bit) != 0u && ((mantissa & (3u * round_bit - 1u)) | sticky) != 0u) {
        bits = bits + 1u;
    }
    return bits;
}";

const F16_TO_F64: &str = r"
// The f16 in the low 16 bits of `h` as f64 (exact; a NaN keeps its payload).
fn cubert_f16_to_f64(h: u32) -> f64 {
    let i = h & 0xffffu;
    if ((i & 0x7c00u) == 0x7c00u && (i & 0x03ffu) != 0u) {
        let sign = u64(i & 0x8000u) << 48u;
        let payload = u64(i & 0x03ffu) << 42u;
        return bitcast<f64>(sign | 0x7ff8000000000000lu | payload);
    }
    return cubert_f32_to_f64(cubert_f16_to_f32(i));
}";

const BF16_TO_F64: &str = r"
// The bf16 in the low 16 bits of `h` as f64 (exact; a NaN keeps its payload).
fn cubert_bf16_to_f64(h: u32) -> f64 {
    let i = h & 0xffffu;
    if ((i & 0x7fffu) > 0x7f80u) {
        let sign = u64(i & 0x8000u) << 48u;
        let payload = u64(i & 0x007fu) << 45u;
        return bitcast<f64>(sign | 0x7ff8000000000000lu | payload);
    }
    return cubert_f32_to_f64(cubert_bf16_to_f32(i));
}";

const F32_TO_F64: &str = r"
// `x` as f64 (exact; a NaN keeps its payload and gets the quiet bit), on the bits: WGSL
// lets conversions flush subnormals.
fn cubert_f32_to_f64(x: f32) -> f64 {
    let u = bitcast<u32>(x);
    let sign = u64(u & 0x80000000u) << 32u;
    let e = (u >> 23u) & 0xffu;
    var m = u & 0x007fffffu;
    if (e == 0xffu) {
        let quiet = select(0lu, 0x0008000000000000lu, m != 0u);
        return bitcast<f64>(sign | 0x7ff0000000000000lu | quiet | (u64(m) << 29u));
    }
    if (e == 0u) {
        if (m == 0u) {
            return bitcast<f64>(sign);
        }
        let s = countLeadingZeros(m) - 8u;
        m = (m << s) & 0x007fffffu;
        return bitcast<f64>(sign | (u64(897u - s) << 52u) | (u64(m) << 29u));
    }
    return bitcast<f64>(sign | (u64(e + 896u) << 52u) | (u64(m) << 29u));
}";

const F64_TO_F32: &str = r"
// `x` as f32, rounded to nearest even on the bits (WGSL leaves the rounding of an
// inexact conversion open).
fn cubert_f64_to_f32(x: f64) -> f32 {
    let u = bitcast<u64>(x);
    let sign = u32(u >> 32u) & 0x80000000u;
    let e = i32(u32(u >> 52u) & 0x7ffu);
    let m = u & 0x000ffffffffffffflu;
    if (e == 0x7ff) {
        if (m == 0lu) {
            return bitcast<f32>(sign | 0x7f800000u);
        }
        return bitcast<f32>(sign | 0x7fc00000u | u32(m >> 29u));
    }
    if (e == 0 && m == 0lu) {
        return bitcast<f32>(sign);
    }
    let full = select(m | 0x0010000000000000lu, m, e == 0);
    // The top 26 bits of the significand (two below the last kept), the rest sticky.
    let q = u32(full >> 27u);
    let sticky = (full & 0x7fffffflu) != 0lu;
    return cubert_round_pack_f32(sign, e - 1023 + 127, q, sticky);
}";

/// The helper converting half type `elem`'s bits to `f32`; returns its name.
pub(super) fn to_f32(helpers: &mut Helpers, elem: ElemType) -> String {
    if elem.is_fp8() {
        return super::fp8::to_f32(helpers, elem);
    }
    if elem == ElemType::BF16 {
        helpers.add("cubert_bf16_to_f32", || BF16_TO_F32.to_string())
    } else {
        helpers.add("cubert_f16_to_f32", || F16_TO_F32.to_string())
    }
}

/// The helper rounding an `f32` to half type `elem`'s bits; returns its name.
pub(super) fn from_f32(helpers: &mut Helpers, elem: ElemType) -> String {
    if elem.is_fp8() {
        return super::fp8::from_f32(helpers, elem);
    }
    if elem == ElemType::BF16 {
        helpers.add("cubert_f32_to_bf16", || F32_TO_BF16.to_string())
    } else {
        helpers.add("cubert_f32_to_f16", || F32_TO_F16.to_string())
    }
}

/// The helper rounding an `f64` once to half type `elem`'s bits; returns its name.
pub(super) fn from_f64(helpers: &mut Helpers, elem: ElemType) -> String {
    if elem.is_fp8() {
        return super::fp8::from_f64(helpers, elem);
    }
    if elem == ElemType::BF16 {
        helpers.add("cubert_f64_to_bf16", || F64_TO_BF16.to_string())
    } else {
        helpers.add("cubert_f64_to_f16", || F64_TO_F16.to_string())
    }
}

/// The helper converting half type `elem`'s bits to `f64`; returns its name.
pub(super) fn to_f64(helpers: &mut Helpers, elem: ElemType) -> String {
    if elem.is_fp8() {
        return super::fp8::to_f64(helpers, elem);
    }
    to_f32(helpers, elem);
    f32_to_f64(helpers);
    if elem == ElemType::BF16 {
        helpers.add("cubert_bf16_to_f64", || BF16_TO_F64.to_string())
    } else {
        helpers.add("cubert_f16_to_f64", || F16_TO_F64.to_string())
    }
}

/// The exact `f32` to `f64` helper; returns its name.
pub(super) fn f32_to_f64(helpers: &mut Helpers) -> String {
    helpers.add("cubert_f32_to_f64", || F32_TO_F64.to_string())
}

/// The correctly rounded `f64` to `f32` helper; returns its name.
pub(super) fn f64_to_f32(helpers: &mut Helpers) -> String {
    float::round_pack(helpers, Format::F32);
    helpers.add("cubert_f64_to_f32", || F64_TO_F32.to_string())
}

/// `f32` expression `x` rounded to half type `elem`.
pub(super) fn round(helpers: &mut Helpers, elem: ElemType, x: &str) -> String {
    format!("{}({x})", from_f32(helpers, elem))
}

/// Half expression `x` (bits) of type `elem` as `f32`.
pub(super) fn widen(helpers: &mut Helpers, elem: ElemType, x: &str) -> String {
    format!("{}({x})", to_f32(helpers, elem))
}
