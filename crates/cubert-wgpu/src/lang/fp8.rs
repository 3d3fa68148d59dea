//! The 8-bit floats (`e4m3`, `e5m2`) as bits: conversions to and from `f32` and `f64`.
//!
//! An 8-bit float is held as its byte in a `u32` (zero-extended), packed four to a word in
//! global and shared arrays as `u8` is. The conversions are ports of `cubert-lang`'s `fp8`
//! module (and the CUDA prelude's): to `f32` exact (a NaN becomes the quiet NaN of its
//! sign); from `f32` to nearest even, saturating to the largest finite value (infinities
//! too), NaN to `0x7f`; from `f64` through `f32` rounded to odd, so it rounds once. There is
//! no arithmetic on them: a kernel loads, stores, compares (in `f32`) and converts them.

use super::helpers::Helpers;
use cubert_lang::ElemType;

/// (mantissa bits, bias, largest finite code, whether `max + 1` is infinity) of `elem`.
fn layout(elem: ElemType) -> (u32, i32, u32, bool) {
    if elem == ElemType::E5M2 {
        (2, 15, 0x7b, true)
    } else {
        (3, 7, 0x7e, false)
    }
}

/// The helper converting `elem`'s bits to `f32`; returns its name.
pub(super) fn to_f32(helpers: &mut Helpers, elem: ElemType) -> String {
    let name = format!("cubert_{elem}_to_f32");
    let (man, bias, max_code, inf) = layout(elem);
    let nan_above = max_code + u32::from(inf);
    let infinity = if inf {
        format!(
            "    if (mag == {nan_above}u) {{\n        return bitcast<f32>(sign | 0x7f800000u);\n    }}\n"
        )
    } else {
        String::new()
    };
    let scale = (127 + 1 - bias - man as i32) as u32;
    helpers.add(&name, || {
        format!(
            r"
// The {elem} in the low 8 bits of `h` as f32 (exact; a NaN is the quiet NaN of its sign).
fn {name}(h: u32) -> f32 {{
    let sign = (h & 0x80u) << 24u;
    let mag = h & 0x7fu;
    if (mag > {nan_above}u) {{
        return bitcast<f32>(sign | 0x7fc00000u);
    }}
{infinity}    let exponent = mag >> {man}u;
    let mantissa = mag & {mask}u;
    if (exponent == 0u) {{
        return bitcast<f32>(sign | bitcast<u32>(f32(mantissa) * bitcast<f32>({scale}u << 23u)));
    }}
    return bitcast<f32>(sign | ((exponent + {rebias}u) << 23u) | (mantissa << {shift}u));
}}",
            mask = (1u32 << man) - 1,
            rebias = 127 - bias,
            shift = 23 - man,
        )
    })
}

/// The helper rounding an `f32` to `elem`'s bits; returns its name.
pub(super) fn from_f32(helpers: &mut Helpers, elem: ElemType) -> String {
    let name = format!("cubert_f32_to_{elem}");
    let (man, bias, max_code, _) = layout(elem);
    helpers.add(&name, || {
        format!(
            r"
// `value` as {elem} bits: nearest even, saturating to the largest finite value (infinities
// too), NaN to 0x7f.
fn {name}(value: f32) -> u32 {{
    let x = bitcast<u32>(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) {{
        return 0x7fu;
    }}
    let sign = (x >> 24u) & 0x80u;
    let field = (x >> 23u) & 0xffu;
    let significand = select((x & 0x7fffffu) | 0x800000u, x & 0x7fffffu, field == 0u);
    let exponent = select(i32(field) - 127, -126, field == 0u);
    let biased = exponent + {bias};
    let drop = u32(min(23 - {man} + select(1 - biased, 0, biased >= 1), 31));
    var kept = significand >> drop;
    let rest = significand & ((1u << drop) - 1u);
    let half = 1u << (drop - 1u);
    if (rest > half || (rest == half && (kept & 1u) != 0u)) {{
        kept = kept + 1u;
    }}
    var code = kept;
    if (biased >= 1) {{
        code = (u32(biased - 1) << {man}u) + kept;
    }}
    return sign | min(code, {max_code}u);
}}"
        )
    })
}

const F64_TO_F32_ODD: &str = r"
// `x` as f32 rounded to odd (truncated, the last bit set if anything was dropped), enough
// for one more rounding to an 8-bit float: below f32's normal range it gives the smallest
// f32 of the sign (or zero), beyond it the largest, both far outside every 8-bit float.
fn cubert_f64_to_f32_odd(x: f64) -> f32 {
    let u = bitcast<u64>(x);
    let sign = u32(u >> 32u) & 0x80000000u;
    let e = i32(u32(u >> 52u) & 0x7ffu);
    let m = u & 0x000ffffffffffffflu;
    if (e == 0x7ff) {
        return bitcast<f32>(sign | 0x7f800000u | select(0u, 0x400000u, m != 0lu));
    }
    let e32 = e - 1023 + 127;
    if (e32 >= 255) {
        return bitcast<f32>(sign | 0x7f7fffffu);
    }
    if (e32 <= 0) {
        return bitcast<f32>(sign | select(0u, 1u, e != 0 || m != 0lu));
    }
    let sticky = select(0u, 1u, (m & 0x1ffffffflu) != 0lu);
    return bitcast<f32>(sign | (u32(e32) << 23u) | u32(m >> 29u) | sticky);
}";

/// The helper rounding an `f64` once to `elem`'s bits; returns its name.
pub(super) fn from_f64(helpers: &mut Helpers, elem: ElemType) -> String {
    let round = from_f32(helpers, elem);
    let odd = helpers.add("cubert_f64_to_f32_odd", || F64_TO_F32_ODD.to_string());
    let name = format!("cubert_f64_to_{elem}");
    helpers.add(&name, || {
        format!(
            r"
// `x` as {elem} bits, rounded once (through f32 rounded to odd).
fn {name}(x: f64) -> u32 {{
    return {round}({odd}(x));
}}"
        )
    })
}

/// The helper converting `elem`'s bits to `f64` (exact); returns its name.
pub(super) fn to_f64(helpers: &mut Helpers, elem: ElemType) -> String {
    let narrow = to_f32(helpers, elem);
    let widen = super::half::f32_to_f64(helpers);
    let name = format!("cubert_{elem}_to_f64");
    helpers.add(&name, || {
        format!(
            r"
// The {elem} in the low 8 bits of `h` as f64 (exact).
fn {name}(h: u32) -> f64 {{
    return {widen}({narrow}(h));
}}"
        )
    })
}

/// `x != x` (a NaN test) on `elem`'s bits.
pub(super) fn is_nan(elem: ElemType, x: &str) -> String {
    let (_, _, max_code, inf) = layout(elem);
    format!("(({x} & 0x7fu) > {}u)", max_code + u32::from(inf))
}
