//! Kernels of the language on wgpu: the IR printed as WGSL.
//!
//! [`generate`] walks a kernel's IR (`cubert_lang::ir`) and prints a WGSL compute shader:
//! one statement per instruction in the entry point, and the helper functions those
//! statements call (array accesses, the language's arithmetic where WGSL's differs, plane
//! operations, atomics), each printed once, before it. Where WGSL leaves behaviour to
//! the implementation or differs from the language, the printed code spells the
//! language's semantics out (`docs/kernel-language.md` lists them; the CPU backend is the
//! reference):
//!
//! - integers wrap at their width: narrow ones are held sign- or zero-extended in `i32`/
//!   `u32` registers and put back after every operation; division and remainder by zero
//!   give 0 and `MIN / -1 == MIN` (WGSL gives the dividend for `x / 0`, and rejects a
//!   constant zero divisor); shifts take their amount modulo the width;
//! - float division, `recip`, `sqrt` and `%` (C's `fmod`) are exact, computed on the bits
//!   (WGSL allows 2.5 ULP for `/`, and defines `%` as `x - y * trunc(x / y)`); `round`
//!   rounds half away from zero (WGSL's rounds half to even); `min`/`max` return the other
//!   operand of a NaN; `x != y` prints as `!(x == y)` (naga lowers WGSL's `!=` on floats
//!   to SPIR-V's ordered `FOrdNotEqual`, false for NaN) and `x != x` (`is_nan`) as a test
//!   on the bits;
//! - float to integer casts saturate and NaN gives 0; integer to float and `f64` to `f32`
//!   round to nearest even on the bits; half types are `u32` bits converted with the CUDA
//!   prelude's integer code (round to nearest even, NaN payloads kept), computing in `f32`
//!   and rounding back after every operation;
//! - range loops stop at a wrap, as the CPU's `advance` does;
//! - plane reductions fold in lane order; tensor metadata saturates; operations of
//!   constants only are not folded by WGSL (which would reject the overflows, NaNs and
//!   divisions by zero the language defines).
//!
//! What WGSL leaves open and the printed code can't pin down: an implementation may flush
//! subnormal `f32` values to zero, may reassociate and contract float arithmetic (naga's
//! SPIR-V marks no operation `NoContraction`, so Mesa's drivers fold `(x + 0.5) - 0.25`
//! into `x + 0.25`), and WGSL's `fma` may round twice (lavapipe's does). WGSL's own
//! transcendental functions are never printed: they are only as accurate as WGSL
//! promises, and the language's are within a few ulps of the CPU's everywhere.
//!
//! # The ABI
//!
//! Every binding is in `@group(0)`, and every one is declared even when the kernel doesn't
//! use it, so the server binds one fixed layout (an explicit bind group layout: WGSL's
//! automatic layout would leave unused bindings out):
//!
//! - `@binding(0) var<storage, read_write> cubert_status: array<atomic<u32>>`: word 0
//!   counts out-of-bounds accesses. In checked mode ([`WgslTarget::checked`]) every load,
//!   store, atomic and line element of a global array whose index is at or past the
//!   array's length adds 1 (a load then gives zero, a store is skipped, an atomic does
//!   nothing and gives zero), as does a shared array's. Unchecked mode prints no bounds
//!   test for global loads and stores (WGSL keeps every access inside its binding);
//!   atomics and shared and local arrays are still tested (skipped and zero out of
//!   bounds), as on CUDA.
//! - `@binding(1) var<storage, read> cubert_info: array<u32>`: for array parameter slot
//!   `s` (0-based among arrays, in parameter order) `cubert_info[2s]` is the array's
//!   offset in elements from the start of its binding and `cubert_info[2s + 1]` its
//!   length in elements. Then, with `A` the number of array parameters, the launch's
//!   64-bit info words as CUDA passes them (`info_words`: the scalars in parameter order,
//!   then the tensor metadata), word `k` as `cubert_info[2A + 2k]` (low half) and
//!   `cubert_info[2A + 2k + 1]` (high half). A scalar of 32 bits or fewer is read from the
//!   low half (floats as bit patterns, `f16`/`bf16` in its low 16 bits, `u8`/`i8` in its
//!   low byte, `bool` true when its low byte isn't 0), a 64-bit one from both halves.
//!   Tensor metadata reads stay within `arrayLength(&cubert_info)`: bind exactly the
//!   words the launch has (or pad with zeros).
//! - `@binding(2 + s)`: array slot `s`, `var<storage, read_write>` whether the parameter
//!   is an `&Array` or an `&mut Array` (the arrays of a launch often share one pooled
//!   buffer, which WebGPU refuses to bind read-only and read-write in the same dispatch).
//!   Element `i` of the array is element `cubert_info[2s] + i` of the binding. `f32`, `i32`, `u32` are `array<f32>` and so on,
//!   or `array<atomic<u32>>` (`u32`, `f32` as bits) / `array<atomic<i32>>` when the kernel
//!   applies atomics to the array (then every access to it is atomic). `u8`, `i8`, `bool`
//!   (one byte, 0 or 1), `u16`, `i16`, `f16`, `bf16` are packed little-endian in `u32`
//!   words: `array<u32>` when read-only, `array<atomic<u32>>` when mutable (a store is an
//!   `atomicAnd` and an `atomicOr` on its word, so units writing neighbouring elements
//!   don't race). Element `e` of the binding is in word `e / 4` (bytes) or `e / 2`
//!   (half-words): the server binds ranges starting on a word (256-byte aligned) and
//!   passes a view's start in `cubert_info[2s]`. `f64`, `i64`, `u64` are `array<f64>`,
//!   `array<i64>`, `array<u64>`. A 4-byte array in [`WgslTarget::vector_lines`] (accessed
//!   only by lines of four) is `array<vec4<f32>>` and so on: its offset word, still in
//!   elements, is then a multiple of 4, and the binding holds whole vectors ([`vector`]).
//! - Shared arrays are `var<workgroup>` arrays of 32-bit registers (narrow types widened:
//!   `4 * len` bytes each; 64-bit types 8) or atomics; the IR's `shared_memory_bytes` is
//!   the language's (CUDA's) budget, not WGSL's.
//! - The entry point is `@compute @workgroup_size(x, y, z) fn <entry>(...)` with the
//!   builtins `local_invocation_id`, `local_invocation_index`, `workgroup_id`,
//!   `num_workgroups`, and `subgroup_size` (and `subgroup_invocation_id` in cubes of one
//!   dimension) when the kernel uses plane operations. `UNIT_POS` is `local_invocation_index` (x fastest, as CUDA
//!   linearizes), `CUBE_POS` is `x + y * nx + z * nx * ny` over the workgroup grid,
//!   `ABSOLUTE_POS` is `CUBE_POS * CUBE_DIM + UNIT_POS`, `CUBE_DIM` the constant cube
//!   dim, `PLANE_DIM` `subgroup_size`, and `UNIT_POS_PLANE` `subgroup_invocation_id` in
//!   cubes of one dimension and `UNIT_POS % PLANE_DIM` in others (naga refuses
//!   `subgroup_invocation_id` in workgroups of more than one dimension). Plane operations
//!   assume, as every driver does, that subgroups are runs of consecutive `UNIT_POS`.
//! - Each statement's Rust line is a `// rust: file:line` comment before its code, as in
//!   CUDA's generated source.
//!
//! # Targets
//!
//! [`WgslTarget`] says what the adapter can do. Without `shader_int64`, kernels using
//! `i64`/`u64` are refused; without `shader_f64` *and* `shader_int64`, kernels using `f64`
//! (its bits are handled as `u64`); without `subgroups`, kernels using plane operations or
//! `PLANE_DIM`/`UNIT_POS_PLANE`. The transcendental functions (`exp`, `ln`, `sin`,
//! `powf`, ...) print as software helpers (`float32.rs`, `float64.rs`): WGSL has no
//! `f64` ones, and its `f32` ones are too loose. A
//! refusal is a [`GenerateError`] whose [`GenerateError::is_unsupported`] is
//! true. `shader_f16` changes nothing: half types are handled as bits in every mode, so
//! kernels print without `enable f16;`.

mod arith;
mod atomic;
mod cast;
mod error;
mod float;
mod float32;
mod float64;
mod fp8;
mod generate;
mod half;
mod helpers;
mod memory;
mod plane;
mod shared;
mod tensor;
mod unroll;
pub mod vector;
mod wgsl_type;

pub use error::GenerateError;
pub use generate::generate;

use cubert_runtime::properties::fnv1a;

/// What the target adapter can do: which types and operations print, and which are
/// refused with a [`GenerateError`] that [`GenerateError::is_unsupported`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgslTarget {
    /// `enable f16;` is usable. The generator holds half types as bits whatever this says
    /// (their arithmetic is `f32`'s, rounded back), so it doesn't change the output.
    pub shader_f16: bool,
    /// `f64` is supported natively (naga's `Capabilities::FLOAT64`). `f64` also needs
    /// `shader_int64`.
    pub shader_f64: bool,
    /// `i64` and `u64` are supported natively (naga's `Capabilities::SHADER_INT64`).
    pub shader_int64: bool,
    /// Plane operations print as WGSL subgroup operations (naga's
    /// `Capabilities::SUBGROUP`).
    pub subgroups: bool,
    /// Accesses to global and shared arrays are bounds-checked and count violations in
    /// `cubert_status[0]` (the launch's checked and validate modes).
    pub checked: bool,
    /// The array slots (bit `s` for slot `s`) printed as `array<vec4<T>>`, each line one
    /// access: a subset of [`vector::candidates`] whose arrays are whole 16-byte vectors (see
    /// [`vector`]); other bits are ignored.
    pub vector_lines: u64,
}

/// A WGSL identifier for the specialization: the kernel's name (its characters that WGSL
/// allows) and a hash of the full id, as CUDA's entry names are.
pub fn entry_name(name: &str, id: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("cubert_{clean}_{:016x}", fnv1a(id.as_bytes()))
}
