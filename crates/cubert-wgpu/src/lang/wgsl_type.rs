//! How the language's scalar types are held in WGSL registers, and their constants.
//!
//! Every local value lives in a 32- or 64-bit WGSL type (its *register* type):
//!
//! | language | register | form |
//! |---|---|---|
//! | `f32`, `f64` | `f32`, `f64` | the value |
//! | `f16`, `bf16` | `u32` | the 16 bits, zero-extended (computed in `f32`, rounded back) |
//! | `e4m3`, `e5m2` | `u32` | the 8 bits, zero-extended (no arithmetic; compared in `f32`) |
//! | `i8`, `i16`, `i32` | `i32` | sign-extended: always a value of the type |
//! | `u8`, `u16`, `u32` | `u32` | zero-extended: always a value of the type |
//! | `i64`, `u64` | `i64`, `u64` | the value |
//! | `bool` | `bool` | the value |
//!
//! Narrow integers are put back into that form ([`normalize`]) after every operation that
//! may leave it, so their arithmetic wraps at their own width.

use super::WgslTarget;
use cubert_lang::ElemType;
use cubert_lang::ir::Constant;

/// The WGSL type of a register holding a value of `elem`.
pub(super) fn register(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F32 => "f32",
        ElemType::F64 => "f64",
        ElemType::F16 | ElemType::BF16 | ElemType::U8 | ElemType::U16 | ElemType::U32 => "u32",
        ElemType::E4M3 | ElemType::E5M2 => "u32",
        ElemType::I8 | ElemType::I16 | ElemType::I32 => "i32",
        ElemType::I64 => "i64",
        ElemType::U64 => "u64",
        ElemType::Bool => "bool",
    }
}

/// Whether `elem` is a half type (held as its bits, computed in `f32`).
pub(super) fn is_half(elem: ElemType) -> bool {
    matches!(elem, ElemType::F16 | ElemType::BF16)
}

/// Whether `elem` is held as its bits and widened through `f32` to compare or convert: a
/// half type or an 8-bit float.
pub(super) fn is_narrow_float(elem: ElemType) -> bool {
    is_half(elem) || elem.is_fp8()
}

/// Whether `elem` is a signed integer.
pub(super) fn is_signed_int(elem: ElemType) -> bool {
    matches!(
        elem,
        ElemType::I8 | ElemType::I16 | ElemType::I32 | ElemType::I64
    )
}

/// Whether `elem` is an integer.
pub(super) fn is_int(elem: ElemType) -> bool {
    !elem.is_float() && elem != ElemType::Bool
}

/// Bit width of `elem`.
pub(super) fn bits(elem: ElemType) -> u32 {
    (elem.size() * 8) as u32
}

/// Whether `elem` is 64 bits wide.
pub(super) fn is_wide(elem: ElemType) -> bool {
    elem.size() == 8
}

/// Why the adapter of `target` can't hold `elem`, if it can't.
pub(super) fn unsupported(elem: ElemType, target: &WgslTarget) -> Option<String> {
    match elem {
        ElemType::I64 | ElemType::U64 if !target.shader_int64 => Some(format!(
            "`{elem}` needs 64-bit integers in shaders, which this adapter lacks (SHADER_INT64)"
        )),
        // f64's bits (constants, NaN payloads, conversions, packing) are handled as u64.
        ElemType::F64 if !target.shader_f64 || !target.shader_int64 => Some(format!(
            "`f64` needs 64-bit floats and integers in shaders, which this adapter lacks \
             (SHADER_F64 and SHADER_INT64: {} and {})",
            if target.shader_f64 { "has" } else { "lacks" },
            if target.shader_int64 { "has" } else { "lacks" }
        )),
        _ => None,
    }
}

/// `expr` (a register of `elem`'s register type) put back into `elem`'s form: narrow
/// integers wrap to their width (sign- or zero-extended); other types are unchanged.
pub(super) fn normalize(elem: ElemType, expr: &str) -> String {
    match elem {
        ElemType::I8 => format!("((({expr}) << 24u) >> 24u)"),
        ElemType::I16 => format!("((({expr}) << 16u) >> 16u)"),
        ElemType::U8 => format!("(({expr}) & 0xffu)"),
        ElemType::U16 => format!("(({expr}) & 0xffffu)"),
        _ => expr.to_string(),
    }
}

/// The unsigned WGSL type of `elem`'s register width (`u32` or `u64`): wrapping counts.
pub(super) fn unsigned_register(elem: ElemType) -> &'static str {
    if is_wide(elem) { "u64" } else { "u32" }
}

/// A register of integer type `elem` reinterpreted as [`unsigned_register`].
pub(super) fn to_unsigned(elem: ElemType, expr: &str) -> String {
    match register(elem) {
        "i32" => format!("bitcast<u32>({expr})"),
        "i64" => format!("bitcast<u64>({expr})"),
        _ => expr.to_string(),
    }
}

/// An [`unsigned_register`] value reinterpreted as `elem`'s register type.
pub(super) fn from_unsigned(elem: ElemType, expr: &str) -> String {
    match register(elem) {
        "i32" => format!("bitcast<i32>({expr})"),
        "i64" => format!("bitcast<i64>({expr})"),
        _ => expr.to_string(),
    }
}

/// A float literal of `value` as WGSL spells a `f32`: a decimal when the decimal is the
/// exact value (so any parser reads it back bit for bit), else the bits.
fn f32_literal(value: f32) -> String {
    if value.is_finite() {
        let text = format!("{value:?}");
        if text
            .parse::<f64>()
            .is_ok_and(|exact| exact == f64::from(value))
        {
            return if value.is_sign_negative() {
                format!("({text}f)")
            } else {
                format!("{text}f")
            };
        }
    }
    format!("bitcast<f32>(0x{:08x}u)", value.to_bits())
}

/// As [`f32_literal`], for `f64`.
fn f64_literal(value: f64) -> String {
    if value.is_finite() {
        let text = format!("{value:?}");
        // The shortest decimal that reads back as the value (a correct `f64` parser reads
        // it back bit for bit; there is no wider type to round through first).
        if text
            .parse::<f64>()
            .is_ok_and(|back| back.to_bits() == value.to_bits())
        {
            return if value.is_sign_negative() {
                format!("({text}lf)")
            } else {
                format!("{text}lf")
            };
        }
    }
    format!("bitcast<f64>(0x{:016x}lu)", value.to_bits())
}

/// A constant as a WGSL expression of its register type, bit-exact.
pub(super) fn constant(constant: Constant) -> String {
    let bits = constant.bits;
    match constant.elem {
        ElemType::Bool => (if bits & 0xff != 0 { "true" } else { "false" }).to_string(),
        ElemType::F16 | ElemType::BF16 => format!("0x{:04x}u", bits as u16),
        ElemType::E4M3 | ElemType::E5M2 => format!("0x{:02x}u", bits as u8),
        ElemType::F32 => f32_literal(f32::from_bits(bits as u32)),
        ElemType::F64 => f64_literal(f64::from_bits(bits)),
        ElemType::U8 | ElemType::U16 | ElemType::U32 => {
            let mask = if constant.elem == ElemType::U32 {
                u64::from(u32::MAX)
            } else {
                (1u64 << (constant.elem.size() * 8)) - 1
            };
            format!("{}u", bits & mask)
        }
        ElemType::I8 | ElemType::I16 | ElemType::I32 => {
            let value = constant.as_i64();
            if value == i64::from(i32::MIN) {
                "bitcast<i32>(0x80000000u)".to_string()
            } else if value < 0 {
                format!("({value}i)")
            } else {
                format!("{value}i")
            }
        }
        ElemType::I64 => {
            let value = bits as i64;
            if value == i64::MIN {
                "bitcast<i64>(0x8000000000000000lu)".to_string()
            } else if value < 0 {
                format!("({value}li)")
            } else {
                format!("{value}li")
            }
        }
        ElemType::U64 => format!("{bits}lu"),
    }
}

/// The zero of `elem` as a WGSL expression of its register type.
pub(super) fn zero(elem: ElemType) -> String {
    constant(Constant { elem, bits: 0 })
}

/// The one of `elem` (`true` for `bool`) as a WGSL expression of its register type.
pub(super) fn one(elem: ElemType) -> String {
    let bits = match elem {
        ElemType::F16 => 0x3c00,
        ElemType::BF16 => 0x3f80,
        ElemType::E4M3 => 0x38,
        ElemType::E5M2 => 0x3c,
        ElemType::F32 => u64::from(1.0f32.to_bits()),
        ElemType::F64 => 1.0f64.to_bits(),
        _ => 1,
    };
    constant(Constant { elem, bits })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_bit_exact_literals() {
        let c = |elem, bits| constant(Constant { elem, bits });
        assert_eq!(c(ElemType::F32, u64::from(1.5f32.to_bits())), "1.5f");
        assert_eq!(
            c(ElemType::F32, u64::from(0.1f32.to_bits())),
            "bitcast<f32>(0x3dcccccdu)"
        );
        assert_eq!(c(ElemType::F32, u64::from((-2.0f32).to_bits())), "(-2.0f)");
        assert_eq!(c(ElemType::I32, 0x8000_0000), "bitcast<i32>(0x80000000u)");
        assert_eq!(c(ElemType::I8, 0xff), "(-1i)");
        assert_eq!(c(ElemType::U8, 0xff), "255u");
        assert_eq!(c(ElemType::F16, 0x3c00), "0x3c00u");
        assert_eq!(c(ElemType::U64, u64::MAX), "18446744073709551615lu");
        assert_eq!(c(ElemType::I64, u64::MAX), "(-1li)");
    }
}
