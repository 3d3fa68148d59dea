//! Local arrays (a unit's registers) and shared arrays (`var<workgroup>`, one per cube).
//!
//! A local array is a function-scope `array<R, len>` of the register type. An index out of
//! bounds loads zero and stores nothing, as on CUDA (the CPU panics in Rust's bounds check
//! instead; the language leaves such an index unspecified for local arrays).
//!
//! A shared array is a module-scope `var<workgroup>` array of the register type (narrow
//! types widened to 32 bits, which the language allows: only its byte layout for the
//! shared-memory size is fixed, and the server may budget `4 * len` bytes), or of
//! `atomic<u32>` / `atomic<i32>` when atomics target it (every access is then atomic; `f32`
//! as its bits). Its accesses go through helpers that skip an index out of bounds (a load
//! gives zero) and, in checked mode, count it in `cubert_status[0]`, as CUDA's do.

use super::helpers::Helpers;
use super::memory::report;
use super::wgsl_type::{register, zero};
use cubert_lang::ElemType;
use cubert_lang::ir::{Constant, Value, VarId};

/// The element type of the WGSL array holding shared array `elem` (atomic when `atomic`).
pub(super) fn shared_storage(elem: ElemType, atomic: bool) -> &'static str {
    match (atomic, elem) {
        (true, ElemType::I32) => "atomic<i32>",
        (true, _) => "atomic<u32>",
        (false, elem) => register(elem),
    }
}

/// The declaration of shared array `var` of `len` elements of `elem`.
pub(super) fn declare_shared(var: VarId, elem: ElemType, len: u32, atomic: bool) -> String {
    format!(
        "var<workgroup> {var}: array<{}, {}>; // shared {elem}\n",
        shared_storage(elem, atomic),
        len.max(1)
    )
}

/// The constant value of `index` when it is a constant.
fn constant_index(index: Value) -> Option<u64> {
    match index {
        Value::Const(Constant { bits, .. }) => Some(bits),
        _ => None,
    }
}

/// Element `index` of local array `array` (`len` elements of `elem`): zero out of bounds.
pub(super) fn local_load(
    array: &str,
    elem: ElemType,
    len: u32,
    index: Value,
    text: &str,
) -> String {
    match constant_index(index) {
        Some(i) if i < u64::from(len) => format!("{array}[{text}]"),
        Some(_) => zero(elem),
        None => format!("select({}, {array}[{text}], {text} < {len}u)", zero(elem)),
    }
}

/// The statement storing `value` to element `index` of local array `array` (`len`
/// elements): nothing out of bounds (`None` when the index is a constant out of bounds).
pub(super) fn local_store(
    array: &str,
    len: u32,
    index: Value,
    text: &str,
    value: &str,
) -> Option<String> {
    match constant_index(index) {
        Some(i) if i < u64::from(len) => Some(format!("{array}[{text}] = {value};")),
        Some(_) => None,
        None => Some(format!(
            "if ({text} < {len}u) {{ {array}[{text}] = {value}; }}"
        )),
    }
}

/// The helper loading element `i` of shared array `var`; returns its name.
pub(super) fn shared_load(
    helpers: &mut Helpers,
    checked: bool,
    var: VarId,
    elem: ElemType,
    len: u32,
    atomic: bool,
) -> String {
    let name = format!("cubert_shared_load_{var}");
    helpers.add(&name, || {
        let reg = register(elem);
        let read = match (atomic, elem) {
            (true, ElemType::F32) => format!("bitcast<f32>(atomicLoad(&{var}[i]))"),
            (true, _) => format!("atomicLoad(&{var}[i])"),
            (false, _) => format!("{var}[i]"),
        };
        format!(
            "\n// Element `i` of shared array {var} ({elem}): zero out of bounds.\nfn {name}(i: u32) -> {reg} {{\n    if (i < {len}u) {{\n        return {read};\n    }}{}\n    return {};\n}}",
            report(checked).replace("\n    ", "\n"),
            zero(elem)
        )
    })
}

/// The helper storing `v` to element `i` of shared array `var`; returns its name.
pub(super) fn shared_store(
    helpers: &mut Helpers,
    checked: bool,
    var: VarId,
    elem: ElemType,
    len: u32,
    atomic: bool,
) -> String {
    let name = format!("cubert_shared_store_{var}");
    helpers.add(&name, || {
        let reg = register(elem);
        let write = match (atomic, elem) {
            (true, ElemType::F32) => format!("atomicStore(&{var}[i], bitcast<u32>(v));"),
            (true, _) => format!("atomicStore(&{var}[i], v);"),
            (false, _) => format!("{var}[i] = v;"),
        };
        format!(
            "\n// Stores `v` to element `i` of shared array {var} ({elem}): nothing out of bounds.\nfn {name}(i: u32, v: {reg}) {{\n    if (i < {len}u) {{\n        {write}\n        return;\n    }}{}\n}}",
            report(checked).replace("\n    ", "\n"),
        )
    })
}
