//! Atomics on global and shared arrays of `i32`, `u32` and `f32`.
//!
//! An array atomics target is declared as `array<atomic<i32>>` (`i32`) or
//! `array<atomic<u32>>` (`u32`, and `f32` as its bits). Each operation is a helper of its
//! array that returns the element's previous value:
//!
//! - `i32`/`u32` add, max, min and exchange are WGSL's `atomicAdd`, `atomicMax`,
//!   `atomicMin`, `atomicExchange` (signed or unsigned by the atomic's type).
//! - `compare_exchange` loops on `atomicCompareExchangeWeak` until it either exchanges or
//!   sees a different value (the weak form may fail spuriously; the language's may not).
//!   `f32` compares bits.
//! - `f32` add, max and min are compare-exchange loops on the bits, with the language's
//!   `+`, `max`, `min` (NaN operands give the other one).
//!
//! An index out of bounds does nothing and gives zero, in every mode (as on CUDA); checked
//! mode also counts it in `cubert_status[0]`.

use super::error::{GenerateError, fail};
use super::float::{self, Format};
use super::helpers::Helpers;
use super::memory::{length, offset_word, report};
use cubert_lang::ElemType;
use cubert_lang::ir::{AtomicOp, VarId};

/// The array an atomic works on.
#[derive(Clone, Copy, Debug)]
pub(super) enum Array {
    /// Global array parameter in slot `0`.
    Global(u32),
    /// Shared array `var` of `len` elements.
    Shared(VarId, u32),
}

impl Array {
    fn name(self) -> String {
        match self {
            Array::Global(slot) => format!("a{slot}"),
            Array::Shared(var, _) => var.to_string(),
        }
    }

    /// The WGSL bound and the element reference of index `i`.
    fn access(self) -> (String, String) {
        match self {
            Array::Global(slot) => (
                length(slot),
                format!("&cubert_a{slot}[cubert_info[{}u] + i]", offset_word(slot)),
            ),
            Array::Shared(var, len) => (format!("{len}u"), format!("&{var}[i]")),
        }
    }
}

fn op_name(op: AtomicOp) -> &'static str {
    match op {
        AtomicOp::Add => "add",
        AtomicOp::Max => "max",
        AtomicOp::Min => "min",
        AtomicOp::Exchange => "exchange",
        AtomicOp::CompareExchange => "compare_exchange",
    }
}

/// One atomic operation as the printed code calls it.
pub(super) struct Call<'a> {
    /// The operation.
    pub(super) op: AtomicOp,
    /// The element type (`i32`, `u32` or `f32`).
    pub(super) elem: ElemType,
    /// The array.
    pub(super) array: Array,
    /// The index expression.
    pub(super) index: &'a str,
    /// The operand expression.
    pub(super) value: &'a str,
    /// The compared value's expression, for compare-exchange.
    pub(super) compare: Option<&'a str>,
}

/// The expression of atomic `call`, whose helper counts an index out of bounds when
/// `checked`.
pub(super) fn atomic(
    helpers: &mut Helpers,
    checked: bool,
    call: Call<'_>,
) -> Result<String, GenerateError> {
    let Call {
        op,
        elem,
        array,
        index,
        value,
        compare,
    } = call;
    let ty = match elem {
        ElemType::I32 => "i32",
        ElemType::U32 => "u32",
        ElemType::F32 => "f32",
        other => return fail(format!("atomics on {other} (i32, u32 and f32 have them)")),
    };
    let float = elem == ElemType::F32;
    let (bound, element) = array.access();
    let fold = if float {
        match op {
            AtomicOp::Add => Some("(bitcast<f32>(old) + v)".to_string()),
            AtomicOp::Max => Some(format!(
                "{}(bitcast<f32>(old), v)",
                float::max(helpers, Format::F32)
            )),
            AtomicOp::Min => Some(format!(
                "{}(bitcast<f32>(old), v)",
                float::min(helpers, Format::F32)
            )),
            _ => None,
        }
    } else {
        None
    };
    let name = format!("cubert_atomic_{}_{}", op_name(op), array.name());
    let zero = match elem {
        ElemType::I32 => "0i",
        ElemType::U32 => "0u",
        _ => "0.0f",
    };
    helpers.add(&name, || {
        let bits = |x: &str| {
            if float {
                format!("bitcast<u32>({x})")
            } else {
                x.to_string()
            }
        };
        let unbits = |x: &str| {
            if float {
                format!("bitcast<f32>({x})")
            } else {
                x.to_string()
            }
        };
        let body = match (op, fold) {
            (_, Some(fold)) => format!(
                "    var old = atomicLoad(p);\n    loop {{\n        let r = atomicCompareExchangeWeak(p, old, bitcast<u32>({fold}));\n        if (r.exchanged) {{\n            break;\n        }}\n        old = r.old_value;\n    }}\n    return bitcast<f32>(old);"
            ),
            (AtomicOp::CompareExchange, None) => format!(
                "    var old: u32;\n    loop {{\n        let r = atomicCompareExchangeWeak(p, {compare}, {value});\n        old = r.old_value;\n        if (r.exchanged || r.old_value != {compare}) {{\n            break;\n        }}\n    }}\n    return {old};",
                compare = bits("compare"),
                value = bits("v"),
                old = unbits("old"),
            )
            .replace("var old: u32;", &format!("var old: {};", if ty == "i32" { "i32" } else { "u32" })),
            (other, None) => {
                let function = match other {
                    AtomicOp::Add => "atomicAdd",
                    AtomicOp::Max => "atomicMax",
                    AtomicOp::Min => "atomicMin",
                    _ => "atomicExchange",
                };
                format!("    return {};", unbits(&format!("{function}(p, {})", bits("v"))))
            }
        };
        let compare_param = if op == AtomicOp::CompareExchange {
            format!(", compare: {ty}")
        } else {
            String::new()
        };
        format!(
            "\n// `atomic_{}` on element `i` of {}: the previous value (zero out of bounds).\nfn {name}(i: u32, v: {ty}{compare_param}) -> {ty} {{\n    if (i >= {bound}) {{{}\n        return {zero};\n    }}\n    let p = {element};\n{body}\n}}",
            op_name(op),
            array.name(),
            report(checked),
        )
    });
    Ok(match compare {
        Some(compare) if op == AtomicOp::CompareExchange => {
            format!("{name}({index}, {value}, {compare})")
        }
        None if op == AtomicOp::CompareExchange => {
            return fail("a compare-exchange without the value compared with");
        }
        _ => format!("{name}({index}, {value})"),
    })
}
