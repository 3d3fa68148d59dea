//! How the language's scalar types are spelled in CUDA C++, and their constants.

use cubert_lang::ElemType;
use cubert_lang::ir::Constant;

/// The C++ type holding a value of `elem` (half types and the 8-bit floats are the
/// prelude's storage structs).
pub fn name(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F16 => "cubert::f16",
        ElemType::BF16 => "cubert::bf16",
        ElemType::E4M3 => "cubert::e4m3",
        ElemType::E5M2 => "cubert::e5m2",
        ElemType::F32 => "float",
        ElemType::F64 => "double",
        ElemType::I8 => "signed char",
        ElemType::I16 => "short",
        ElemType::I32 => "int",
        ElemType::I64 => "long long",
        ElemType::U8 => "unsigned char",
        ElemType::U16 => "unsigned short",
        ElemType::U32 => "unsigned int",
        ElemType::U64 => "unsigned long long",
        ElemType::Bool => "bool",
    }
}

/// The unsigned type integer arithmetic of `elem` wraps in (C++ promotes the small types
/// to `int`, whose overflow is undefined: arithmetic goes through these instead).
pub fn wrapping(elem: ElemType) -> &'static str {
    match elem {
        ElemType::I64 | ElemType::U64 => "unsigned long long",
        _ => "unsigned int",
    }
}

/// Whether `elem` is a half type (stored as bits, computed in `float`).
pub fn is_half(elem: ElemType) -> bool {
    matches!(elem, ElemType::F16 | ElemType::BF16)
}

/// Whether `elem` is a signed integer.
pub fn is_signed_int(elem: ElemType) -> bool {
    matches!(
        elem,
        ElemType::I8 | ElemType::I16 | ElemType::I32 | ElemType::I64
    )
}

/// Whether `elem` is an integer.
pub fn is_int(elem: ElemType) -> bool {
    !elem.is_float() && elem != ElemType::Bool
}

/// Bit width of `elem`.
pub fn bits(elem: ElemType) -> u32 {
    (elem.size() * 8) as u32
}

/// The smallest and largest value of integer type `elem`, as C++ `double` literals
/// (exact: both are powers of two or one less, and only their rounding to double matters
/// for the saturation test, which compares with `<=`/`>=`).
pub fn int_range_as_double(elem: ElemType) -> (&'static str, &'static str) {
    match elem {
        ElemType::I8 => ("-128.0", "127.0"),
        ElemType::I16 => ("-32768.0", "32767.0"),
        ElemType::I32 => ("-2147483648.0", "2147483647.0"),
        ElemType::I64 => ("-9223372036854775808.0", "9223372036854775807.0"),
        ElemType::U8 => ("0.0", "255.0"),
        ElemType::U16 => ("0.0", "65535.0"),
        ElemType::U32 => ("0.0", "4294967295.0"),
        _ => ("0.0", "18446744073709551615.0"),
    }
}

/// The C++ literal of the smallest and largest value of integer type `elem`.
pub fn int_range(elem: ElemType) -> (&'static str, &'static str) {
    match elem {
        ElemType::I8 => ("(signed char)-128", "(signed char)127"),
        ElemType::I16 => ("(short)-32768", "(short)32767"),
        ElemType::I32 => ("(int)(-2147483647 - 1)", "(int)2147483647"),
        ElemType::I64 => (
            "(long long)(-9223372036854775807ll - 1)",
            "9223372036854775807ll",
        ),
        ElemType::U8 => ("(unsigned char)0", "(unsigned char)255"),
        ElemType::U16 => ("(unsigned short)0", "(unsigned short)65535"),
        ElemType::U32 => ("0u", "4294967295u"),
        _ => ("0ull", "18446744073709551615ull"),
    }
}

/// A constant as a C++ expression of its type, bit-exact (floats through their bits).
pub fn constant(constant: Constant) -> String {
    let bits = constant.bits;
    match constant.elem {
        ElemType::F16 => format!("cubert::make_f16(0x{:04x}u)", bits as u16),
        ElemType::BF16 => format!("cubert::make_bf16(0x{:04x}u)", bits as u16),
        ElemType::E4M3 => format!("cubert::make_e4m3(0x{:02x}u)", bits as u8),
        ElemType::E5M2 => format!("cubert::make_e5m2(0x{:02x}u)", bits as u8),
        ElemType::F32 => format!("__int_as_float(0x{:08x})", bits as u32),
        ElemType::F64 => format!("__longlong_as_double(0x{bits:016x}ll)"),
        ElemType::Bool => (if bits & 0xff != 0 { "true" } else { "false" }).to_string(),
        ElemType::U64 => format!("{bits}ull"),
        ElemType::I64 => format!("(long long)0x{bits:016x}ull"),
        elem => format!("({})0x{:x}u", name(elem), bits),
    }
}

/// The zero of `elem` as a C++ expression.
pub fn zero(elem: ElemType) -> String {
    constant(Constant { elem, bits: 0 })
}
