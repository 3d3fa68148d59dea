//! `x as T` with the language's conversions (see `Scalar::narrow` in `cubert-lang`).
//!
//! - Integers wrap (Rust's `as`), through the registers' two's complement.
//! - Float to integer saturates and NaN gives 0. WGSL clamps too, but to the nearest
//!   value *representable in the float type* (`i32(1e20f)` is 2147483520) and leaves NaN
//!   indeterminate, so the bounds and NaN are tested first and only in-range values
//!   convert.
//! - Integer to float rounds once to nearest even. WGSL leaves the rounding of an inexact
//!   conversion open, so values that don't convert exactly (32-bit integers from 2^24,
//!   64-bit ones from 2^24 or 2^53) are rounded with integer arithmetic and scaled by
//!   `ldexp` (exact).
//! - To a half type rounds once from the `f64` value, as the CPU does: integers are first
//!   rounded to odd at 24 bits (after rounding 64-bit ones to `f64`'s 53), which the final
//!   rounding to 11 or 8 bits can't double-round.
//! - To an 8-bit float likewise (once, nearest even, saturating; NaN gives `0x7f`), through
//!   the same helpers (`fp8`).
//! - `f32` to `f64` and back are written on the bits too (exact, and nearest even).
//! - A number is `true` when it isn't zero (NaN included).

use super::error::GenerateError;
use super::float::{self, Format};
use super::half;
use super::helpers::Helpers;
use super::wgsl_type::{is_int, is_narrow_float, is_signed_int, normalize, one, register, zero};
use cubert_lang::ElemType;

/// `text` (a register of `from`) converted to `to`'s register.
pub(super) fn cast(
    helpers: &mut Helpers,
    from: ElemType,
    text: &str,
    to: ElemType,
) -> Result<String, GenerateError> {
    if from == to {
        return Ok(text.to_string());
    }
    Ok(match (from, to) {
        (_, ElemType::Bool) => to_bool(from, text),
        (ElemType::Bool, _) => format!("select({}, {}, {text})", zero(to), one(to)),
        (_, _) if from.is_float() && to.is_float() => float_to_float(helpers, from, text, to),
        (_, _) if from.is_float() => float_to_int(helpers, from, text, to),
        (_, _) if to.is_float() => int_to_float(helpers, from, text, to),
        _ => int_to_int(from, text, to),
    })
}

/// Whether a number isn't zero (bits tested for floats: NaN is `true`, `-0.0` `false`).
fn to_bool(from: ElemType, text: &str) -> String {
    match from {
        ElemType::F16 | ElemType::BF16 => format!("(({text} & 0x7fffu) != 0u)"),
        ElemType::E4M3 | ElemType::E5M2 => format!("(({text} & 0x7fu) != 0u)"),
        ElemType::F32 => format!("((bitcast<u32>({text}) & 0x7fffffffu) != 0u)"),
        ElemType::F64 => format!("((bitcast<u64>({text}) & 0x7ffffffffffffffflu) != 0lu)"),
        _ => format!("({text} != {})", zero(from)),
    }
}

fn float_to_float(helpers: &mut Helpers, from: ElemType, text: &str, to: ElemType) -> String {
    match (from, to) {
        (ElemType::F32, ElemType::F64) => format!("{}({text})", half::f32_to_f64(helpers)),
        (ElemType::F64, ElemType::F32) => format!("{}({text})", half::f64_to_f32(helpers)),
        (half, ElemType::F32) if is_narrow_float(half) => half::widen(helpers, half, text),
        (half, ElemType::F64) if is_narrow_float(half) => {
            format!("{}({text})", half::to_f64(helpers, half))
        }
        (ElemType::F32, half) => half::round(helpers, half, text),
        (ElemType::F64, half) => format!("{}({text})", half::from_f64(helpers, half)),
        // One half or 8-bit type to another: through f32, exact from either.
        (from, to) => {
            let wide = half::widen(helpers, from, text);
            half::round(helpers, to, &wide)
        }
    }
}

/// The smallest and largest value of integer type `elem`, as WGSL literals of its
/// register type, and as `f64` (the saturation bounds before rounding to the float).
fn int_range(elem: ElemType) -> (&'static str, &'static str, f64, f64) {
    match elem {
        ElemType::I8 => ("(-128i)", "127i", -128.0, 127.0),
        ElemType::I16 => ("(-32768i)", "32767i", -32768.0, 32767.0),
        ElemType::I32 => (
            "bitcast<i32>(0x80000000u)",
            "2147483647i",
            -2147483648.0,
            2147483647.0,
        ),
        ElemType::I64 => (
            "bitcast<i64>(0x8000000000000000lu)",
            "9223372036854775807li",
            -9223372036854775808.0,
            9223372036854775807.0,
        ),
        ElemType::U8 => ("0u", "255u", 0.0, 255.0),
        ElemType::U16 => ("0u", "65535u", 0.0, 65535.0),
        ElemType::U32 => ("0u", "4294967295u", 0.0, 4294967295.0),
        _ => ("0lu", "18446744073709551615lu", 0.0, 18446744073709551615.0),
    }
}

/// A float literal of an integer-valued bound, rounded to `format` (the bounds are powers
/// of two or integers below 2^24, exact in both formats once rounded).
fn bound_literal(value: f64, format: Format) -> String {
    match format {
        Format::F32 => format!("{:.1}f", value as f32),
        Format::F64 => format!("{value:.1}lf"),
    }
}

fn float_to_int(helpers: &mut Helpers, from: ElemType, text: &str, to: ElemType) -> String {
    let (format, value) = match from {
        ElemType::F64 => (Format::F64, text.to_string()),
        ElemType::F32 => (Format::F32, text.to_string()),
        half => (Format::F32, half::widen(helpers, half, text)),
    };
    let is_nan = float::is_nan(helpers, format);
    let ft = if format == Format::F64 { "f64" } else { "f32" };
    let name = format!("cubert_{ft}_to_{to}");
    let reg = register(to);
    helpers.add(&name, || {
        let (min, max, low, high) = int_range(to);
        let (low, high) = (bound_literal(low, format), bound_literal(high, format));
        format!(
            r"
// `x as {to}`: saturating, NaN gives 0 (WGSL clamps to float-representable values and
// leaves NaN indeterminate).
fn {name}(x: {ft}) -> {reg} {{
    if ({is_nan}(x)) {{
        return {zero};
    }}
    if (x <= {low}) {{
        return {min};
    }}
    if (x >= {high}) {{
        return {max};
    }}
    return {reg}(x);
}}",
            zero = zero(to),
        )
    });
    format!("{name}({value})")
}

const U32_TO_F32: &str = r"
// `x` as f32, rounded to nearest even.
fn cubert_u32_to_f32(x: u32) -> f32 {
    if (x < 0x01000000u) {
        return f32(x);
    }
    let shift = 8u - countLeadingZeros(x);
    var m = x >> shift;
    let rest = x & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (m & 1u) != 0u)) {
        m = m + 1u;
    }
    return ldexp(f32(m), i32(shift));
}";

const U32_TO_F32_ODD: &str = r"
// `x` as f32 rounded to odd (truncated, the last bit set if anything was dropped): one
// more rounding to a half type is then the correctly rounded one.
fn cubert_u32_to_f32_odd(x: u32) -> f32 {
    if (x < 0x01000000u) {
        return f32(x);
    }
    let shift = 8u - countLeadingZeros(x);
    let m = (x >> shift) | select(0u, 1u, (x & ((1u << shift) - 1u)) != 0u);
    return ldexp(f32(m), i32(shift));
}";

const U64_TO_F32: &str = r"
// `x` as f32, rounded to nearest even.
fn cubert_u64_to_f32(x: u64) -> f32 {
    if (x < 0x1000000lu) {
        return f32(u32(x));
    }
    let shift = 40u - cubert_clz_u64(x);
    var m = u32(x >> shift);
    let rest = x & ((1lu << shift) - 1lu);
    let half = 1lu << (shift - 1u);
    if (rest > half || (rest == half && (m & 1u) != 0u)) {
        m = m + 1u;
    }
    return ldexp(f32(m), i32(shift));
}";

const U64_TO_F64: &str = r"
// `x` as f64, rounded to nearest even.
fn cubert_u64_to_f64(x: u64) -> f64 {
    if (x < 0x20000000000000lu) {
        return f64(x);
    }
    let shift = 11u - cubert_clz_u64(x);
    var m = x >> shift;
    let rest = x & ((1lu << shift) - 1lu);
    let half = 1lu << (shift - 1u);
    if (rest > half || (rest == half && (m & 1lu) != 0lu)) {
        m = m + 1lu;
    }
    return ldexp(f64(m), i32(shift));
}";

const U64_TO_F32_ODD: &str = r"
// `x` rounded to f64 (nearest even, as the language converts a 64-bit integer to a half
// type), then to odd at f32's 24 bits.
fn cubert_u64_to_f32_odd(x: u64) -> f32 {
    var m = x;
    var shift = 0u;
    if (m >= 0x20000000000000lu) {
        shift = 11u - cubert_clz_u64(m);
        let rest = m & ((1lu << shift) - 1lu);
        let half = 1lu << (shift - 1u);
        m = m >> shift;
        if (rest > half || (rest == half && (m & 1lu) != 0lu)) {
            m = m + 1lu;
        }
    }
    if (m >= 0x1000000lu) {
        let s = 40u - cubert_clz_u64(m);
        m = (m >> s) | select(0lu, 1lu, (m & ((1lu << s) - 1lu)) != 0lu);
        shift = shift + s;
    }
    return ldexp(f32(u32(m)), i32(shift));
}";

/// The helper converting an unsigned register (`u32` or `u64`) to `out` (`f32`, `f64`,
/// or `f32` rounded to odd: `odd`); returns its name.
fn unsigned_to_float(helpers: &mut Helpers, wide: bool, out: &str) -> String {
    if wide {
        float::clz_u64(helpers);
    }
    match (wide, out) {
        (false, "odd") => helpers.add("cubert_u32_to_f32_odd", || U32_TO_F32_ODD.into()),
        (false, _) => helpers.add("cubert_u32_to_f32", || U32_TO_F32.into()),
        (true, "f64") => helpers.add("cubert_u64_to_f64", || U64_TO_F64.into()),
        (true, "odd") => helpers.add("cubert_u64_to_f32_odd", || U64_TO_F32_ODD.into()),
        (true, _) => helpers.add("cubert_u64_to_f32", || U64_TO_F32.into()),
    }
}

/// The helper converting signed register `reg` (`i32` or `i64`) through the unsigned
/// helper `unsigned` (magnitude) to float type `ft`; returns its name.
fn signed_to_float(helpers: &mut Helpers, reg: &str, unsigned: &str, ft: &str) -> String {
    let name = format!("{unsigned}_signed");
    let (ut, zero) = if reg == "i64" {
        ("u64", "0li")
    } else {
        ("u32", "0i")
    };
    helpers.add(&name, || {
        format!(
            r"
// `{unsigned}` of a signed value: the magnitude converted, then the sign.
fn {name}(x: {reg}) -> {ft} {{
    let magnitude = {unsigned}(select(bitcast<{ut}>(x), bitcast<{ut}>({zero} - x), x < {zero}));
    return select(magnitude, -magnitude, x < {zero});
}}"
        )
    })
}

fn int_to_float(helpers: &mut Helpers, from: ElemType, text: &str, to: ElemType) -> String {
    let wide = from.size() == 8;
    // Narrow integers (up to 16 bits) convert exactly.
    let exact = from.size() <= 2;
    let flavour = match to {
        ElemType::F64 => "f64",
        ElemType::F32 => "f32",
        _ => "odd",
    };
    let converted = if exact || (!wide && to == ElemType::F64) {
        let ft = if to == ElemType::F64 { "f64" } else { "f32" };
        format!("{ft}({text})")
    } else {
        let unsigned = unsigned_to_float(helpers, wide, flavour);
        let ft = if to == ElemType::F64 { "f64" } else { "f32" };
        let function = if is_signed_int(from) {
            signed_to_float(helpers, register(from), &unsigned, ft)
        } else {
            unsigned
        };
        format!("{function}({text})")
    };
    if is_narrow_float(to) {
        half::round(helpers, to, &converted)
    } else {
        converted
    }
}

/// Integer to integer: wraps (two's complement), as Rust's `as`.
fn int_to_int(from: ElemType, text: &str, to: ElemType) -> String {
    debug_assert!(is_int(from) && is_int(to));
    let as_u64 = |text: &str| match register(from) {
        "i64" => format!("bitcast<u64>({text})"),
        _ => text.to_string(),
    };
    let converted = match (register(from), register(to)) {
        (a, b) if a == b => text.to_string(),
        ("i32", "u32") => format!("bitcast<u32>({text})"),
        ("u32", "i32") => format!("bitcast<i32>({text})"),
        ("i64" | "u64", "i32") => format!("bitcast<i32>(u32({} & 0xfffffffflu))", as_u64(text)),
        ("i64" | "u64", "u32") => format!("u32({} & 0xfffffffflu)", as_u64(text)),
        ("i32", "i64") => format!("i64({text})"),
        ("u32", "i64") => format!("bitcast<i64>(u64({text}))"),
        ("i32", "u64") => format!("bitcast<u64>(i64({text}))"),
        ("u32", "u64") => format!("u64({text})"),
        ("i64", "u64") => format!("bitcast<u64>({text})"),
        _ => format!("bitcast<i64>({text})"),
    };
    normalize(to, &converted)
}
