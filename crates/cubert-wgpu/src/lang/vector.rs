//! Arrays read and written only by lines of four 4-byte elements print as arrays of `vec4`,
//! so each line is one 16-byte access.
//!
//! A line of a scalar array prints as four scalar accesses, which the driver keeps as four
//! loads: on the H200 (NVIDIA's Vulkan driver), an add streaming 1 GiB arrays that way
//! reached about half the bandwidth of the same add on `array<vec4<f32>>` (`docs/wgpu.md`).
//!
//! [`candidates`] says which array slots of a kernel qualify: a 4-byte element type the
//! kernel doesn't use atomics on, and every access a `LoadLine` or `StoreLine` of width 4
//! (`len()` reads an info word, so it is allowed). A launch prints a candidate as `vec4`
//! only where its binding allows it (the server's choice, [`super::WgslTarget::vector_lines`]):
//! the array's first element on a 16-byte boundary of the binding and its size a multiple
//! of 16 bytes, so a `vec4` never reaches past the array. The offset word stays in elements
//! (then a multiple of 4), so line `l` is `vec4` number `offset / 4 + l` of the binding.
//!
//! In checked mode a line wholly below the length is one access; a line that isn't is
//! loaded or stored element by element through vector components, each element checked
//! and counted as the scalar form counts it (a line index whose first element overflows
//! `u32` is out of bounds in all four).

use super::helpers::Helpers;
use super::memory::{ArrayParam, length, line_element, offset_word, report};
use super::wgsl_type::{register, zero};
use cubert_lang::ElemType;
use cubert_lang::ir::{AtomicTarget, Block, Instruction, Kernel, Operation, Param, Type};

/// Elements per vector line.
pub const WIDTH: u32 = 4;

/// The array slots of `kernel` (bit `s` for slot `s`, slots below 64) whose every access is
/// a line of [`WIDTH`] elements of a 4-byte type without atomics: the ones a launch may
/// print as `array<vec4<T>>`.
pub fn candidates(kernel: &Kernel) -> u64 {
    let mut mask = 0u64;
    let mut slot = 0u32;
    for param in &kernel.params {
        if let Param::Array { elem, .. } = param {
            if slot < 64 && matches!(elem, ElemType::F32 | ElemType::I32 | ElemType::U32) {
                mask |= 1 << slot;
            }
            slot += 1;
        }
    }
    let mut lines = 0u64;
    disqualify(kernel, &kernel.body, &mut mask, &mut lines);
    mask & lines
}

/// Clears from `mask` the slots `block` accesses other than by lines of [`WIDTH`], and
/// sets in `lines` those it accesses by lines.
fn disqualify(kernel: &Kernel, block: &Block, mask: &mut u64, lines: &mut u64) {
    fn clear(mask: &mut u64, slot: u32) {
        if slot < 64 {
            *mask &= !(1 << slot);
        }
    }
    for instruction in &block.instructions {
        match instruction {
            Instruction::Assign { op, .. } => match op {
                Operation::Load { array, .. } => clear(mask, *array),
                Operation::Atomic {
                    target: AtomicTarget::Global(array),
                    ..
                } => clear(mask, *array),
                _ => {}
            },
            Instruction::Store { array, .. } | Instruction::CopyLineAsync { array, .. } => {
                clear(mask, *array)
            }
            Instruction::LoadLine {
                out: local, array, ..
            }
            | Instruction::StoreLine {
                value: local,
                array,
                ..
            } => match kernel.local_type(*local) {
                Some(Type::LocalArray(_, width)) if width == WIDTH && *array < 64 => {
                    *lines |= 1 << *array;
                }
                _ => clear(mask, *array),
            },
            Instruction::If {
                then, otherwise, ..
            } => {
                disqualify(kernel, then, mask, lines);
                disqualify(kernel, otherwise, mask, lines);
            }
            Instruction::Loop { body } | Instruction::RangeLoop { body, .. } => {
                disqualify(kernel, body, mask, lines);
            }
            _ => {}
        }
    }
}

/// The start of a checked line helper of array `slot`: the length, the first `vec4`, and
/// the line's whole access when it lies below the length (`whole`, indented once more);
/// what follows handles a line that doesn't, element by element.
fn checked_prelude(helpers: &mut Helpers, slot: u32, whole: &str) -> String {
    let element = line_element(helpers);
    format!(
        "    let len = {};\n    let base = cubert_info[{}u] / 4u;\n    let first = {element}(l, 4u, 0u);\n    if (first < len && len - first >= 4u) {{\n        {whole}\n    }}\n",
        length(slot),
        offset_word(slot)
    )
}

/// The loop over a line's four elements of a checked helper, `access` for one in bounds.
fn checked_elements(helpers: &mut Helpers, access: &str) -> String {
    let element = line_element(helpers);
    format!(
        "    for (var k = 0u; k < 4u; k = k + 1u) {{\n        let e = {element}(l, 4u, k);\n        if (e < len) {{\n            {access}\n        }} else {{{}\n        }}\n    }}",
        report(true).replace("\n        ", "\n            ")
    )
}

/// The helper loading line `l` of vectorized array `slot` as a `vec4`.
pub(super) fn load(helpers: &mut Helpers, checked: bool, slot: u32, array: &ArrayParam) -> String {
    let name = format!("cubert_load_line_{slot}");
    let elem = array.elem;
    let vector = format!("vec4<{}>", register(elem));
    let offset = offset_word(slot);
    let body = if checked {
        format!(
            "{}    var v = {vector}({});\n{}\n    return v;",
            checked_prelude(helpers, slot, &format!("return cubert_a{slot}[base + l];")),
            zero(elem),
            checked_elements(
                helpers,
                &format!("v[k] = cubert_a{slot}[base + e / 4u][e % 4u];")
            )
        )
    } else {
        format!("    return cubert_a{slot}[cubert_info[{offset}u] / 4u + l];")
    };
    helpers.add(&name, || {
        format!(
            "\n// Line `l` (elements 4l .. 4l + 4) of array {slot} ({elem}), one vec4.\nfn {name}(l: u32) -> {vector} {{\n{body}\n}}"
        )
    })
}

/// The helper storing `v` to line `l` of vectorized array `slot`.
pub(super) fn store(helpers: &mut Helpers, checked: bool, slot: u32, array: &ArrayParam) -> String {
    let name = format!("cubert_store_line_{slot}");
    let elem = array.elem;
    let vector = format!("vec4<{}>", register(elem));
    let offset = offset_word(slot);
    let body = if checked {
        format!(
            "{}{}",
            checked_prelude(
                helpers,
                slot,
                &format!("cubert_a{slot}[base + l] = v;\n        return;")
            ),
            checked_elements(
                helpers,
                &format!("cubert_a{slot}[base + e / 4u][e % 4u] = v[k];")
            )
        )
    } else {
        format!("    cubert_a{slot}[cubert_info[{offset}u] / 4u + l] = v;")
    };
    helpers.add(&name, || {
        format!(
            "\n// Stores `v` to line `l` (elements 4l .. 4l + 4) of array {slot} ({elem}), one vec4.\nfn {name}(l: u32, v: {vector}) {{\n{body}\n}}"
        )
    })
}
