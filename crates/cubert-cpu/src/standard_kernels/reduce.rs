//! Row sums: `out[r] = sum(input[r * cols .. (r + 1) * cols])`.
//!
//! Cube `c` of `n` takes rows `c, c + n, c + 2n, ...`. The sum keeps eight partial sums
//! (which also lets the compiler vectorize) and adds them at the end.

use super::numeric::Numeric;
use crate::kernel::CpuKernel;
use cubert_runtime::CubeDim;

const LANES: usize = 8;

fn sum<T: Numeric>(values: &[T]) -> T {
    let mut partial = [T::zero(); LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (acc, value) in partial.iter_mut().zip(chunk) {
            *acc = acc.add(*value);
        }
    }
    let mut total = chunks
        .remainder()
        .iter()
        .fold(T::zero(), |acc, value| acc.add(*value));
    for acc in partial {
        total = total.add(acc);
    }
    total
}

/// The reduce-sum kernel for `T`.
pub fn reduce_sum<T: Numeric>(name: String) -> CpuKernel {
    CpuKernel::new(name, CubeDim::new_single(), |ctx| {
        let rows = ctx.info_usize(0)?;
        let cols = ctx.info_usize(1)?;
        let input = ctx.buffer::<T>(0)?;
        let out = ctx.buffer::<T>(1)?;
        let cubes = usize::try_from(ctx.cube_count_total())
            .unwrap_or(usize::MAX)
            .max(1);
        let first = usize::try_from(ctx.cube_index()).unwrap_or(usize::MAX);
        // Rows from `bound` on touch no element of either buffer: they are counted as
        // out-of-bounds accesses, not run (an absurd `rows` or `cols` can't keep the device
        // busy for ages).
        let bound = out.len().max(input.len().div_ceil(cols.max(1)));
        let last = rows.min(bound);
        for row in (first..last).step_by(cubes) {
            let start = row.saturating_mul(cols);
            let range = start..start.saturating_add(cols);
            let total = if input.covers(&range) && !input.overlaps(&out) {
                // SAFETY: the range is in bounds and no unit writes `input` (`out` doesn't
                // overlap it).
                sum(unsafe { input.slice(range) })
            } else {
                let end = range.end.min(input.len().max(range.start));
                ctx.access()
                    .violations_beyond((range.end - end) as u64, || {
                        format!("loads of elements {end}..{} of the input", range.end)
                    });
                (range.start..end).fold(T::zero(), |acc, i| acc.add(input.load(i)))
            };
            out.store(row, total);
        }
        let skipped_from = first.max(last);
        let next =
            first.saturating_add((skipped_from - first).div_ceil(cubes).saturating_mul(cubes));
        if next < rows {
            let skipped = (rows - next).div_ceil(cubes) as u64;
            let per_row = (cols as u64).saturating_add(1);
            ctx.access()
                .violations_beyond(skipped.saturating_mul(per_row), || {
                    format!("rows {next}..{rows}, past the end of both buffers")
                });
        }
        Ok(())
    })
}
