//! Unary, binary, math and fused multiply-add operations with the language's semantics.
//!
//! - Integers wrap: WGSL's `+`, `-`, `*`, unary `-` wrap on `i32`/`u32` (and the 64-bit
//!   types), and narrow integers are put back into their width after each of them.
//! - Integer `/` and `%` go through helpers: WGSL gives `x / 0 == x` and `x % 0 == 0`
//!   and a shader-creation error for a constant zero divisor; the language wants
//!   `x / 0 == 0`, `x % 0 == 0`, `MIN / -1 == MIN` and `MIN % -1 == 0`.
//! - Shifts take their amount modulo the type's width (`& (bits - 1)`); `>>` is
//!   arithmetic on the signed registers (narrow signed values are sign-extended).
//! - Floats: `+`, `-`, `*` are WGSL's (correctly rounded); `/`, `%`, `sqrt`, `recip`,
//!   `round`, `min` and `max` through [`super::float`], `powf` and the transcendental
//!   functions through [`super::float32`] and [`super::float64`]. Half types compute in `f32` and round back after every operation;
//!   their negation and `abs` work on the sign bit, as Rust's do.
//! - `mul_add` is WGSL's `fma` for floats (one rounding where the device fuses it, which
//!   every desktop GPU does; WGSL allows an unfused one) and wrapping `a * b + c` for
//!   integers.

use super::error::{GenerateError, fail};
use super::float::{self, Format};
use super::float32;
use super::float64;
use super::half;
use super::helpers::Helpers;
use super::wgsl_type::{
    bits, is_half, is_int, is_narrow_float, is_signed_int, normalize, register, zero,
};
use cubert_lang::ElemType;
use cubert_lang::ir::{BinaryOp, MathOp, UnaryOp};

/// The float format of `elem`'s register (`None` for non-floats and half types).
fn format_of(elem: ElemType) -> Option<Format> {
    match elem {
        ElemType::F32 => Some(Format::F32),
        ElemType::F64 => Some(Format::F64),
        _ => None,
    }
}

/// `op x` on a value of type `elem`.
pub(super) fn unary(op: UnaryOp, elem: ElemType, x: &str) -> Result<String, GenerateError> {
    Ok(match (op, elem) {
        (UnaryOp::Not, ElemType::Bool) => format!("(!{x})"),
        (UnaryOp::Not, int) if is_int(int) => normalize(int, &format!("(~{x})")),
        (UnaryOp::Neg, int) if is_int(int) => normalize(int, &format!("({} - {x})", zero(int))),
        (UnaryOp::Neg, half) if is_half(half) => format!("({x} ^ 0x8000u)"),
        (UnaryOp::Neg, float) => match format_of(float) {
            Some(format) => float::neg(format, x),
            None => return fail(format!("{op:?} on {elem}")),
        },
        (op, elem) => return fail(format!("{op:?} on {elem}")),
    })
}

fn comparison_symbol(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        _ => ">=",
    }
}

/// A comparison of floats. `!=` is true when either operand is NaN (IEEE's and Rust's
/// `!=`), but naga lowers WGSL's `!=` to SPIR-V's ordered `FOrdNotEqual`, false for NaN:
/// it prints as `!(x == y)`. The other comparisons are false for NaN everywhere.
fn float_comparison(op: BinaryOp, x: &str, y: &str) -> String {
    if op == BinaryOp::Ne {
        format!("(!({x} == {y}))")
    } else {
        format!("({x} {} {y})", comparison_symbol(op))
    }
}

/// `x op y` for operands of type `elem` (the shift amount of `Shl`/`Shr` is a `u32`).
pub(super) fn binary(
    helpers: &mut Helpers,
    op: BinaryOp,
    elem: ElemType,
    x: &str,
    y: &str,
) -> Result<String, GenerateError> {
    if op == BinaryOp::Ne && x == y && elem.is_float() {
        // `x != x`: the language's `is_nan`, tested on the bits, which no assumption about
        // NaNs in the device compiler can fold away.
        return Ok(match elem {
            ElemType::F16 => format!("(({x} & 0x7fffu) > 0x7c00u)"),
            ElemType::BF16 => format!("(({x} & 0x7fffu) > 0x7f80u)"),
            ElemType::E4M3 | ElemType::E5M2 => super::fp8::is_nan(elem, x),
            ElemType::F64 => format!("{}({x})", float::is_nan(helpers, Format::F64)),
            _ => format!("{}({x})", float::is_nan(helpers, Format::F32)),
        });
    }
    if is_narrow_float(elem) {
        let (a, b) = (half::widen(helpers, elem, x), half::widen(helpers, elem, y));
        if op.is_comparison() {
            return Ok(float_comparison(op, &a, &b));
        }
        let computed = float_binary(helpers, Format::F32, op, &a, &b)?;
        return Ok(half::round(helpers, elem, &computed));
    }
    if op.is_comparison() {
        if elem == ElemType::Bool {
            // false < true, as Rust orders booleans.
            return Ok(match op {
                BinaryOp::Eq => format!("({x} == {y})"),
                BinaryOp::Ne => format!("({x} != {y})"),
                BinaryOp::Lt => format!("(!{x} && {y})"),
                BinaryOp::Le => format!("(!{x} || {y})"),
                BinaryOp::Gt => format!("({x} && !{y})"),
                _ => format!("({x} || !{y})"),
            });
        }
        if elem.is_float() {
            return Ok(float_comparison(op, x, y));
        }
        return Ok(format!("({x} {} {y})", comparison_symbol(op)));
    }
    if let Some(format) = format_of(elem) {
        return float_binary(helpers, format, op, x, y);
    }
    if elem == ElemType::Bool {
        return Ok(match op {
            BinaryOp::BitAnd => format!("({x} & {y})"),
            BinaryOp::BitOr => format!("({x} | {y})"),
            BinaryOp::BitXor => format!("({x} != {y})"),
            other => return fail(format!("{other:?} on bool")),
        });
    }
    int_binary(helpers, op, elem, x, y)
}

fn float_binary(
    helpers: &mut Helpers,
    format: Format,
    op: BinaryOp,
    x: &str,
    y: &str,
) -> Result<String, GenerateError> {
    Ok(match op {
        BinaryOp::Add => format!("({x} + {y})"),
        BinaryOp::Sub => format!("({x} - {y})"),
        BinaryOp::Mul => format!("({x} * {y})"),
        BinaryOp::Div => format!("{}({x}, {y})", float::div(helpers, format)),
        BinaryOp::Rem => format!("{}({x}, {y})", float::rem(helpers, format)),
        BinaryOp::Min => format!("{}({x}, {y})", float::min(helpers, format)),
        BinaryOp::Max => format!("{}({x}, {y})", float::max(helpers, format)),
        BinaryOp::Pow => {
            let function = match format {
                Format::F32 => float32::pow(helpers),
                Format::F64 => float64::pow(helpers),
            };
            format!("{function}({x}, {y})")
        }
        other => return fail(format!("{other:?} on floats")),
    })
}

const INT_DIV: &str = r"
// `a / b` as the language defines it: truncating, `x / 0 == 0`, `MIN / -1 == MIN`.
fn cubert_div_$T(a: $T, b: $T) -> $T {
    if (b == 0$s) {
        return 0$s;
    }
    $MINUS_ONE
    return a / b;
}";

const INT_REM: &str = r"
// `a % b` as the language defines it: the sign of `a`, `x % 0 == 0`, `MIN % -1 == 0`.
fn cubert_rem_$T(a: $T, b: $T) -> $T {
    if (b == 0$s$OR_MINUS_ONE) {
        return 0$s;
    }
    return a % b;
}";

fn int_division(helpers: &mut Helpers, elem: ElemType, rem: bool) -> String {
    let reg = register(elem);
    let suffix = match reg {
        "i32" => "i",
        "u32" => "u",
        "i64" => "li",
        _ => "lu",
    };
    let signed = reg.starts_with('i');
    let name = format!("cubert_{}_{reg}", if rem { "rem" } else { "div" });
    helpers.add(&name, || {
        let (minus_one, or_minus_one) = if signed {
            (
                format!("if (b == -1{suffix}) {{\n        return 0{suffix} - a;\n    }}"),
                format!(" || b == -1{suffix}"),
            )
        } else {
            (String::new(), String::new())
        };
        let template = if rem { INT_REM } else { INT_DIV };
        template
            .replace("$MINUS_ONE", &minus_one)
            .replace("$OR_MINUS_ONE", &or_minus_one)
            .replace("$T", reg)
            .replace("$s", suffix)
            .replace("\n    \n", "\n")
    })
}

fn int_binary(
    helpers: &mut Helpers,
    op: BinaryOp,
    elem: ElemType,
    x: &str,
    y: &str,
) -> Result<String, GenerateError> {
    let wrap = |text: String| normalize(elem, &text);
    let mask = bits(elem) - 1;
    Ok(match op {
        BinaryOp::Add => wrap(format!("({x} + {y})")),
        BinaryOp::Sub => wrap(format!("({x} - {y})")),
        BinaryOp::Mul => wrap(format!("({x} * {y})")),
        BinaryOp::Div => wrap(format!("{}({x}, {y})", int_division(helpers, elem, false))),
        BinaryOp::Rem => wrap(format!("{}({x}, {y})", int_division(helpers, elem, true))),
        BinaryOp::BitAnd => format!("({x} & {y})"),
        BinaryOp::BitOr => format!("({x} | {y})"),
        BinaryOp::BitXor => format!("({x} ^ {y})"),
        BinaryOp::Shl => wrap(format!("({x} << ({y} & {mask}u))")),
        BinaryOp::Shr => format!("({x} >> ({y} & {mask}u))"),
        BinaryOp::Min => format!("select({x}, {y}, {y} < {x})"),
        BinaryOp::Max => format!("select({x}, {y}, {y} > {x})"),
        other => return fail(format!("{other:?} on {elem}")),
    })
}

/// `x.op()` for a value of type `elem` (integers: `abs` only).
pub(super) fn math(
    helpers: &mut Helpers,
    op: MathOp,
    elem: ElemType,
    x: &str,
) -> Result<String, GenerateError> {
    if is_int(elem) {
        if op != MathOp::Abs {
            return fail(format!("{} on {elem}", op.name()));
        }
        if !is_signed_int(elem) {
            return Ok(x.to_string());
        }
        // Wrapping: `MIN.abs() == MIN`.
        let zero = zero(elem);
        let negated = normalize(elem, &format!("({zero} - {x})"));
        return Ok(format!("select({x}, {negated}, {x} < {zero})"));
    }
    if is_half(elem) {
        if op == MathOp::Abs {
            return Ok(format!("({x} & 0x7fffu)"));
        }
        let wide = half::widen(helpers, elem, x);
        let computed = float_math(helpers, Format::F32, op, &wide)?;
        return Ok(half::round(helpers, elem, &computed));
    }
    match format_of(elem) {
        Some(format) => float_math(helpers, format, op, x),
        None => fail(format!("{} on {elem}", op.name())),
    }
}

fn float_math(
    helpers: &mut Helpers,
    format: Format,
    op: MathOp,
    x: &str,
) -> Result<String, GenerateError> {
    let one = if format == Format::F64 {
        "1.0lf"
    } else {
        "1.0f"
    };
    Ok(match op {
        MathOp::Abs => float::abs(format, x),
        MathOp::Sqrt => format!("{}({x})", float::sqrt(helpers, format)),
        MathOp::Floor => format!("floor({x})"),
        MathOp::Ceil => format!("ceil({x})"),
        MathOp::Trunc => format!("trunc({x})"),
        MathOp::Round => format!("{}({x})", float::round(helpers, format)),
        MathOp::Recip => format!("{}({one}, {x})", float::div(helpers, format)),
        other => {
            let function = match format {
                Format::F32 => float32::transcendental(helpers, other.name()),
                Format::F64 => float64::transcendental(helpers, other.name()),
            };
            match function {
                Some(function) => format!("{function}({x})"),
                None => return fail(format!("{} on floats", other.name())),
            }
        }
    })
}

/// `a * b + c` for operands of type `elem`.
pub(super) fn fma(
    helpers: &mut Helpers,
    elem: ElemType,
    a: &str,
    b: &str,
    c: &str,
) -> Result<String, GenerateError> {
    if is_int(elem) {
        return Ok(normalize(elem, &format!("({a} * {b} + {c})")));
    }
    if is_half(elem) {
        let (x, y, z) = (
            half::widen(helpers, elem, a),
            half::widen(helpers, elem, b),
            half::widen(helpers, elem, c),
        );
        return Ok(half::round(helpers, elem, &format!("fma({x}, {y}, {z})")));
    }
    match format_of(elem) {
        Some(_) => Ok(format!("fma({a}, {b}, {c})")),
        None => fail(format!("mul_add on {elem}")),
    }
}
