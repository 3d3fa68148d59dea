//! The elementwise standard kernels, written once in the kernel language.
//!
//! Each kernel visits every `i < len` whatever the grid: a grid-stride loop starting at
//! the unit's position and stepping by the grid's unit count. A GPU launch of one unit per
//! element runs the loop once per unit, as a hand-written CUDA kernel would; on the CPU
//! such a grid takes the exclusive fast path (plain loads and stores the compiler
//! vectorizes), and any smaller grid, or one whose buffers don't hold every element, takes
//! the checked body.
//!
//! On GPUs `ops` runs add and mul of 4-byte types by lines of 4 elements instead
//! ([`binary_lines`]: one 16-byte load per operand and unit, so enough bytes are in flight
//! to stream device memory at full speed), with the scalar kernel for a ragged tail.
//!
//! The loop's end is `len` clamped to one past the longest buffer: an element past every
//! buffer is out of bounds for each access, so visiting one of them reports the launch as
//! out of bounds, and a launch with an absurd length (a caller who builds the launch by
//! hand, past `ops`' checks) fails at once instead of visiting billions of elements. The
//! clamp also keeps the end in `u32` (kernels index with `u32`; `ops` splits longer
//! calls).

use crate::lang::prelude::*;

/// Does nothing: launch overhead.
#[cubert_macros::kernel(crate = crate)]
pub fn noop() {}

/// `out[i] = value` for `i < len`.
#[cubert_macros::kernel(crate = crate)]
pub fn fill<T: Scalar>(out: &mut Array<T>, len: u64, value: T) {
    for i in (ABSOLUTE_POS..len.min(out.len() as u64 + 1u64).min(4294967295u64) as u32)
        .step_by(CUBE_COUNT * CUBE_DIM)
    {
        out[i] = value;
    }
}

/// `dst[i] = src[i]` for `i < len`.
#[cubert_macros::kernel(crate = crate)]
pub fn copy<T: Scalar>(src: &Array<T>, dst: &mut Array<T>, len: u64) {
    for i in (ABSOLUTE_POS
        ..len
            .min(src.len().max(dst.len()) as u64 + 1u64)
            .min(4294967295u64) as u32)
        .step_by(CUBE_COUNT * CUBE_DIM)
    {
        dst[i] = src[i];
    }
}

/// Copies lines `0 .. lines` of 4 words from `src` to `dst` (the ranges must not overlap):
/// a device-to-device copy as a kernel, for backends whose driver copies slower than a
/// kernel streams (the wgpu backend on NVIDIA's Vulkan driver, `docs/wgpu.md`).
#[cubert_macros::kernel(crate = crate)]
pub fn copy_lines(src: &Array<u32>, dst: &mut Array<u32>, lines: u64) {
    for i in (ABSOLUTE_POS..lines.min(4294967295u64) as u32).step_by(CUBE_COUNT * CUBE_DIM) {
        let line = src.line::<4>(i);
        dst.set_line(i, line);
    }
}

/// `dst[i] = src[i] as D` for `i < len`, with the language's casts.
#[cubert_macros::kernel(crate = crate)]
pub fn cast<S: Scalar, D: Scalar>(src: &Array<S>, dst: &mut Array<D>, len: u64) {
    for i in (ABSOLUTE_POS
        ..len
            .min(src.len().max(dst.len()) as u64 + 1u64)
            .min(4294967295u64) as u32)
        .step_by(CUBE_COUNT * CUBE_DIM)
    {
        dst[i] = src[i] as D;
    }
}

/// `out[i] = lhs[i] + rhs[i]` for `i < len`, or `lhs[i] * rhs[i]` when `multiply`.
#[cubert_macros::kernel(crate = crate)]
pub fn binary<T: Numeric>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    len: u64,
    #[comptime] multiply: bool,
) {
    for i in (ABSOLUTE_POS
        ..len
            .min(lhs.len().max(rhs.len()).max(out.len()) as u64 + 1u64)
            .min(4294967295u64) as u32)
        .step_by(CUBE_COUNT * CUBE_DIM)
    {
        if multiply {
            out[i] = lhs[i] * rhs[i];
        } else {
            out[i] = lhs[i] + rhs[i];
        }
    }
}

/// Elements of one line of [`binary_lines`].
pub const LINE: usize = 4;

/// [`binary`] by lines: line `i` of `out` (elements `4i .. 4i + 4`) from the lines of
/// `lhs` and `rhs`, for every `i < lines`, whatever the grid. Launched by `ops` on GPUs over
/// 16-byte aligned views, with a validated `lines`; it is not a standard kernel of its own
/// (its loop ends at `lines`, not clamped to the buffers).
#[cubert_macros::kernel(crate = crate)]
pub fn binary_lines<T: Numeric>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    lines: u64,
    #[comptime] multiply: bool,
) {
    for i in (ABSOLUTE_POS..lines.min(4294967295u64) as u32).step_by(CUBE_COUNT * CUBE_DIM) {
        let a = lhs.line::<4>(i);
        let b = rhs.line::<4>(i);
        let mut c = a;
        for k in 0..4u32 {
            if multiply {
                c[k] = a[k] * b[k];
            } else {
                c[k] = a[k] + b[k];
            }
        }
        out.set_line(i, c);
    }
}

/// [`fill`] for a grid of a unit per element along x: unit `i` writes element `i` if
/// `i < len`, with no loop. Launched by `ops` on GPUs with a validated `len`; the few
/// instructions before the store are what a small launch costs on the device.
#[cubert_macros::kernel(crate = crate)]
pub fn fill_units<T: Scalar>(out: &mut Array<T>, len: u64, value: T) {
    let i = ABSOLUTE_POS_X;
    if (i as u64) < len {
        out[i] = value;
    }
}

/// [`cast`] for a grid of a unit per element along x, as [`fill_units`].
#[cubert_macros::kernel(crate = crate)]
pub fn cast_units<S: Scalar, D: Scalar>(src: &Array<S>, dst: &mut Array<D>, len: u64) {
    let i = ABSOLUTE_POS_X;
    if (i as u64) < len {
        dst[i] = src[i] as D;
    }
}

/// [`binary`] for a grid of a unit per element along x, as [`fill_units`].
#[cubert_macros::kernel(crate = crate)]
pub fn binary_units<T: Numeric>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    len: u64,
    #[comptime] multiply: bool,
) {
    let i = ABSOLUTE_POS_X;
    if (i as u64) < len {
        if multiply {
            out[i] = lhs[i] * rhs[i];
        } else {
            out[i] = lhs[i] + rhs[i];
        }
    }
}
