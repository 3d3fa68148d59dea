//! Elementwise standard kernels: fill, copy, cast, and binary arithmetic.
//!
//! Each cube takes one contiguous chunk of the `len` elements (see [`chunk`]). If every
//! buffer covers the chunk, a raw-pointer loop runs (the compiler vectorizes it, and raw
//! pointers stay correct when an output is also an input); otherwise each element goes
//! through the bounds-checked `load`/`store`, so out-of-bounds elements are skipped and
//! reported. Elements past the end of every buffer are only counted ([`checked_part`]): a
//! launch with an absurd length fails at once instead of looping over it.

use super::numeric::Numeric;
use super::{ELEMENTWISE_CUBE_DIM, with_elem};
use crate::kernel::{CpuKernel, CubeContext};
use cubert_runtime::elem::ElemType;
use cubert_runtime::half_rounding;
use cubert_runtime::{Element, LaunchError};
use num_traits::AsPrimitive;
use std::ops::Range;

/// The contiguous chunk of `len` elements the running cube takes.
pub fn chunk(ctx: &CubeContext<'_>, len: usize) -> Range<usize> {
    let cubes = usize::try_from(ctx.cube_count_total())
        .unwrap_or(usize::MAX)
        .max(1);
    let per_cube = len.div_ceil(cubes);
    let index = usize::try_from(ctx.cube_index()).unwrap_or(usize::MAX);
    let start = index.saturating_mul(per_cube).min(len);
    let end = start.saturating_add(per_cube).min(len);
    start..end
}

/// The part of `range` that runs element by element in the checked path: up to `bound`
/// (the longest buffer), past which every one of the `accesses` accesses per element is out
/// of bounds; those are counted as violations without being made.
pub fn checked_part(
    ctx: &CubeContext<'_>,
    range: Range<usize>,
    bound: usize,
    accesses: u64,
) -> Range<usize> {
    let end = range.end.min(bound.max(range.start));
    let beyond = (range.end - end) as u64;
    ctx.access()
        .violations_beyond(beyond.saturating_mul(accesses), || {
            format!(
                "{accesses} access(es) to each of elements {end}..{}, past the end of every \
                 buffer ({bound} elements)",
                range.end
            )
        });
    range.start..end
}

/// `out[i] = value`.
pub fn fill<T: Element>(name: String) -> CpuKernel {
    CpuKernel::new(name, ELEMENTWISE_CUBE_DIM, |ctx| {
        let len = ctx.info_usize(0)?;
        let value: T = ctx.scalar(1)?;
        let out = ctx.buffer::<T>(0)?;
        let range = chunk(ctx, len);
        if out.covers(&range) {
            // SAFETY: the range is in bounds and only this cube writes it.
            unsafe { out.slice_mut(range) }.fill(value);
        } else {
            for i in checked_part(ctx, range, out.len(), 1) {
                out.store(i, value);
            }
        }
        Ok(())
    })
}

/// `dst[i] = src[i]`.
pub fn copy<T: Element>(name: String) -> CpuKernel {
    CpuKernel::new(name, ELEMENTWISE_CUBE_DIM, |ctx| {
        let len = ctx.info_usize(0)?;
        let src = ctx.buffer::<T>(0)?;
        let dst = ctx.buffer::<T>(1)?;
        let range = chunk(ctx, len);
        if src.covers(&range) && dst.covers(&range) {
            // SAFETY: both ranges are in bounds; only this cube writes this range of `dst`;
            // `copy` (memmove) is correct if `src` and `dst` overlap.
            unsafe {
                std::ptr::copy(
                    src.as_ptr().add(range.start),
                    dst.as_ptr().add(range.start),
                    range.len(),
                );
            }
        } else {
            for i in checked_part(ctx, range, src.len().max(dst.len()), 2) {
                dst.store(i, src.load(i));
            }
        }
        Ok(())
    })
}

/// `dst[i] = convert(src[i])`.
fn map<S: Element, D: Element>(
    name: String,
    convert: impl Fn(S) -> D + Copy + Send + Sync + 'static,
) -> CpuKernel {
    CpuKernel::new(name, ELEMENTWISE_CUBE_DIM, move |ctx| {
        let len = ctx.info_usize(0)?;
        let src = ctx.buffer::<S>(0)?;
        let dst = ctx.buffer::<D>(1)?;
        let range = chunk(ctx, len);
        if src.covers(&range) && dst.covers(&range) {
            let (s, d) = (src.as_ptr(), dst.as_ptr());
            for i in range {
                // SAFETY: `i` is in bounds of both buffers; only this cube writes this
                // range of `dst`.
                unsafe { d.add(i).write(convert(s.add(i).read())) };
            }
        } else {
            for i in checked_part(ctx, range, src.len().max(dst.len()), 2) {
                dst.store(i, convert(src.load(i)));
            }
        }
        Ok(())
    })
}

fn as_<S: AsPrimitive<D>, D: Copy + 'static>(value: S) -> D {
    value.as_()
}

/// `dst[i] = src[i] as to`, with Rust's `as` semantics (floats to integers saturate, NaN
/// becomes 0); booleans are 0 or 1, and any non-zero value becomes `true`; `f64` to the
/// half types rounds once from the exact value (`cubert_runtime::half_rounding`).
pub fn cast(name: String, from: ElemType, to: ElemType) -> Result<CpuKernel, LaunchError> {
    Ok(match (from, to) {
        (ElemType::Bool, ElemType::Bool) => map::<u8, u8>(name, |s| u8::from(s != 0)),
        (from, ElemType::Bool) => {
            with_elem!(from, S => map::<S, u8>(name, |s| u8::from(s != S::default())))
        }
        // Rounded once from the exact f64 (the `half` crate's `from_f64` isn't, everywhere).
        (ElemType::F64, ElemType::F16) => map::<f64, half::f16>(name, half_rounding::f64_to_f16),
        (ElemType::F64, ElemType::BF16) => map::<f64, half::bf16>(name, half_rounding::f64_to_bf16),
        (ElemType::Bool, to) => {
            with_elem!(to, D => map::<u8, D>(name, |s| as_::<u8, D>(u8::from(s != 0))))
        }
        (from, to) => with_elem!(from, S => with_elem!(to, D => map::<S, D>(name, as_::<S, D>))),
    })
}

/// `out[i] = op(lhs[i], rhs[i])`. `op` is a type parameter, not a function pointer, so
/// the loop inlines it and vectorizes.
pub fn binary<T: Numeric>(
    name: String,
    op: impl Fn(T, T) -> T + Copy + Send + Sync + 'static,
) -> CpuKernel {
    CpuKernel::new(name, ELEMENTWISE_CUBE_DIM, move |ctx| {
        let len = ctx.info_usize(0)?;
        let lhs = ctx.buffer::<T>(0)?;
        let rhs = ctx.buffer::<T>(1)?;
        let out = ctx.buffer::<T>(2)?;
        let range = chunk(ctx, len);
        if lhs.covers(&range) && rhs.covers(&range) && out.covers(&range) {
            let (a, b, o) = (lhs.as_ptr(), rhs.as_ptr(), out.as_ptr());
            for i in range {
                // SAFETY: `i` is in bounds of the three buffers; only this cube writes this
                // range of `out` (which may be `lhs` or `rhs`: each element is read before
                // it is written).
                unsafe { o.add(i).write(op(a.add(i).read(), b.add(i).read())) };
            }
        } else {
            let bound = lhs.len().max(rhs.len()).max(out.len());
            for i in checked_part(ctx, range, bound, 3) {
                out.store(i, op(lhs.load(i), rhs.load(i)));
            }
        }
        Ok(())
    })
}
