//! Global arrays: their bindings, loads and stores (bounds-checked in checked mode),
//! lengths, lines, and the launch's scalars.
//!
//! Array slot `s` is `cubert_a{s}` at `@binding(2 + s)`, `read_write` whatever the
//! parameter's mutability (see the ABI in the module docs of `lang`); its element `i` is
//! element `cubert_info[2s] + i` of the binding and its length is `cubert_info[2s + 1]`.
//! Each access goes through a helper of the slot (`cubert_load_{s}`, `cubert_store_{s}`):
//!
//! - 4- and 8-byte types are arrays of their register type, or of `atomic<u32>` /
//!   `atomic<i32>` when the kernel uses atomics on the array (every access is then an
//!   atomic load or store; `f32` as its bits).
//! - 1- and 2-byte types (`u8`, `i8`, `bool` as one byte 0 or 1, `u16`, `i16`, `f16`,
//!   `bf16`) are packed little-endian in `u32` words: `array<u32>` for an `&Array`,
//!   `array<atomic<u32>>` for an `&mut Array`, a store clearing and setting its byte or half-word
//!   with `atomicAnd` and `atomicOr`, so units writing neighbouring elements of one word
//!   never lose each other's writes.
//!
//! In checked mode an index at or past the length adds one to `cubert_status[0]`; a load
//! then gives zero and a store does nothing. Unchecked accesses are not tested (WGSL
//! keeps them inside the binding).

use super::error::{GenerateError, fail};
use super::helpers::Helpers;
use super::wgsl_type::{register, zero};
use cubert_lang::ElemType;

/// An array parameter as the generator binds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ArrayParam {
    /// Element type.
    pub(super) elem: ElemType,
    /// Whether the kernel may write it (an `&mut Array`: packed elements are then atomic
    /// words, and stores are allowed).
    pub(super) mutable: bool,
    /// Whether atomics target it (`array<atomic<..>>`).
    pub(super) atomic: bool,
}

impl ArrayParam {
    /// Whether the elements are packed in `u32` words.
    fn packed(&self) -> bool {
        self.elem.size() < 4
    }

    /// The element type of the WGSL array of the binding.
    fn storage(&self) -> &'static str {
        if self.packed() {
            return if self.mutable { "atomic<u32>" } else { "u32" };
        }
        if self.atomic {
            return if self.elem == ElemType::I32 {
                "atomic<i32>"
            } else {
                "atomic<u32>"
            };
        }
        register(self.elem)
    }
}

/// The index of array `slot`'s offset word in `cubert_info` (its length is the next).
pub(super) fn offset_word(slot: u32) -> u32 {
    2 * slot
}

/// The WGSL expression of array `slot`'s length (`u32`).
pub(super) fn length(slot: u32) -> String {
    format!("cubert_info[{}u]", offset_word(slot) + 1)
}

/// The module-scope declarations of the status word, the info words and the arrays (those
/// of `vector_lines`, by slot bit, as arrays of `vec4`).
pub(super) fn bindings(arrays: &[ArrayParam], vector_lines: u64) -> String {
    let mut out = String::from(
        "@group(0) @binding(0) var<storage, read_write> cubert_status: array<atomic<u32>>;\n\
         @group(0) @binding(1) var<storage, read> cubert_info: array<u32>;\n",
    );
    for (slot, array) in arrays.iter().enumerate() {
        // Read-write even for an `&Array`: the arrays of one launch often share a pooled
        // buffer, and WebGPU refuses a buffer bound read-only and read-write in one
        // dispatch (the bind group layout is read-write throughout).
        let access = "read_write";
        let storage = if slot < 64 && vector_lines & (1 << slot) != 0 {
            format!("vec4<{}>", array.storage())
        } else {
            array.storage().to_string()
        };
        out.push_str(&format!(
            "@group(0) @binding({}) var<storage, {access}> cubert_a{slot}: array<{storage}>; // {}{}\n",
            slot + 2,
            if array.mutable { "&mut " } else { "&" },
            array.elem,
        ));
    }
    out
}

/// The statements counting an out-of-bounds access, in checked mode.
pub(super) fn report(checked: bool) -> &'static str {
    if checked {
        "\n        atomicAdd(&cubert_status[0], 1u);"
    } else {
        ""
    }
}

/// A packed element's bits (`bits`, a `u32`) as `elem`'s register.
fn from_bits(elem: ElemType, bits: &str) -> String {
    match elem {
        ElemType::I8 => format!("((bitcast<i32>({bits}) << 24u) >> 24u)"),
        ElemType::I16 => format!("((bitcast<i32>({bits}) << 16u) >> 16u)"),
        ElemType::Bool => format!("({bits} != 0u)"),
        _ => bits.to_string(),
    }
}

/// `elem`'s register `value` as the bits a packed element stores.
fn to_bits(elem: ElemType, value: &str) -> String {
    match elem {
        ElemType::I8 => format!("(bitcast<u32>({value}) & 0xffu)"),
        ElemType::I16 => format!("(bitcast<u32>({value}) & 0xffffu)"),
        ElemType::Bool => format!("select(0u, 1u, {value})"),
        ElemType::U8 | ElemType::E4M3 | ElemType::E5M2 => format!("({value} & 0xffu)"),
        _ => format!("({value} & 0xffffu)"),
    }
}

/// The packing of a narrow element type: (elements per word as a shift, bits per element,
/// mask).
fn packing(elem: ElemType) -> (u32, u32, &'static str) {
    if elem.size() == 1 {
        (2, 8, "0xffu")
    } else {
        (1, 16, "0xffffu")
    }
}

/// The helper loading element `i` of array `slot`; returns its name.
pub(super) fn load(helpers: &mut Helpers, checked: bool, slot: u32, array: &ArrayParam) -> String {
    let name = format!("cubert_load_{slot}");
    helpers.add(&name, || {
        let elem = array.elem;
        let reg = register(elem);
        let offset = offset_word(slot);
        let check = format!(
            "    if (i >= {}) {{{}\n        return {};\n    }}\n",
            length(slot),
            report(checked),
            zero(elem)
        );
        let check = if checked { check.as_str() } else { "" };
        let body = if array.packed() {
            let (word_shift, width, mask) = packing(elem);
            let word = if array.mutable {
                format!("atomicLoad(&cubert_a{slot}[e >> {word_shift}u])")
            } else {
                format!("cubert_a{slot}[e >> {word_shift}u]")
            };
            let per_word = (1u32 << word_shift) - 1;
            format!(
                "    let e = cubert_info[{offset}u] + i;\n    let bits = ({word} >> ((e & {per_word}u) * {width}u)) & {mask};\n    return {};",
                from_bits(elem, "bits")
            )
        } else if array.atomic {
            let read = format!("atomicLoad(&cubert_a{slot}[cubert_info[{offset}u] + i])");
            let read = if elem == ElemType::F32 {
                format!("bitcast<f32>({read})")
            } else {
                read
            };
            format!("    return {read};")
        } else {
            format!("    return cubert_a{slot}[cubert_info[{offset}u] + i];")
        };
        format!(
            "\n// Element `i` of array {slot} ({elem}).\nfn {name}(i: u32) -> {reg} {{\n{check}{body}\n}}"
        )
    })
}

/// The helper storing `v` to element `i` of array `slot`; returns its name.
pub(super) fn store(
    helpers: &mut Helpers,
    checked: bool,
    slot: u32,
    array: &ArrayParam,
) -> Result<String, GenerateError> {
    if !array.mutable {
        return fail(format!("a store to array {slot}, which is read-only"));
    }
    let name = format!("cubert_store_{slot}");
    Ok(helpers.add(&name, || {
        let elem = array.elem;
        let reg = register(elem);
        let offset = offset_word(slot);
        let check = format!(
            "    if (i >= {}) {{{}\n        return;\n    }}\n",
            length(slot),
            report(checked),
        );
        let check = if checked { check.as_str() } else { "" };
        let body = if array.packed() {
            let (word_shift, width, mask) = packing(elem);
            let per_word = (1u32 << word_shift) - 1;
            format!(
                "    let e = cubert_info[{offset}u] + i;\n    let shift = (e & {per_word}u) * {width}u;\n    let word = &cubert_a{slot}[e >> {word_shift}u];\n    atomicAnd(word, ~({mask} << shift));\n    atomicOr(word, {} << shift);",
                to_bits(elem, "v")
            )
        } else if array.atomic {
            let value = if elem == ElemType::F32 {
                "bitcast<u32>(v)"
            } else {
                "v"
            };
            format!("    atomicStore(&cubert_a{slot}[cubert_info[{offset}u] + i], {value});")
        } else {
            format!("    cubert_a{slot}[cubert_info[{offset}u] + i] = v;")
        };
        format!(
            "\n// Stores `v` to element `i` of array {slot} ({elem}).\nfn {name}(i: u32, v: {reg}) {{\n{check}{body}\n}}"
        )
    }))
}

/// The helper giving the index of element `k` of line `line` of `width` elements:
/// `line * width + k`, saturating at `u32::MAX` (past every array's end), as the CPU
/// computes it.
pub(super) fn line_element(helpers: &mut Helpers) -> String {
    helpers.add("cubert_line_element", || {
        r"
// Element `k` of line `line` of `width` elements: `line * width + k`, saturating (an
// index past u32::MAX is out of bounds of every array).
fn cubert_line_element(line: u32, width: u32, k: u32) -> u32 {
    let first = select(line * width, 0xffffffffu, line > 0xffffffffu / width);
    return select(first + k, 0xffffffffu, first > 0xffffffffu - k);
}"
        .to_string()
    })
}

/// The WGSL expression reading scalar parameter `index` (of type `elem`) from the info
/// words of a kernel with `arrays` array parameters.
pub(super) fn scalar(arrays: u32, index: u32, elem: ElemType) -> String {
    let low_word = 2 * arrays + 2 * index;
    let low = format!("cubert_info[{low_word}u]");
    let high = format!("cubert_info[{}u]", low_word + 1);
    let wide = format!("((u64({high}) << 32u) | u64({low}))");
    match elem {
        ElemType::F32 => format!("bitcast<f32>({low})"),
        ElemType::I32 => format!("bitcast<i32>({low})"),
        ElemType::U32 => low,
        ElemType::U8 | ElemType::E4M3 | ElemType::E5M2 => format!("({low} & 0xffu)"),
        ElemType::U16 | ElemType::F16 | ElemType::BF16 => format!("({low} & 0xffffu)"),
        ElemType::I8 => format!("((bitcast<i32>({low}) << 24u) >> 24u)"),
        ElemType::I16 => format!("((bitcast<i32>({low}) << 16u) >> 16u)"),
        ElemType::Bool => format!("(({low} & 0xffu) != 0u)"),
        ElemType::U64 => wide,
        ElemType::I64 => format!("bitcast<i64>{wide}"),
        ElemType::F64 => format!("bitcast<f64>{wide}"),
    }
}
