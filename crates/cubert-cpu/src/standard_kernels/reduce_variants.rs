//! Row-sum variants for the autotuner (`out[r] = sum of row r`; the calling convention of
//! the standard reduce-sum).
//!
//! A variant has two parameters: `LANES`, the number of partial sums kept while walking a
//! row (the vector width of the loop: more lanes, more independent additions in flight),
//! and `rows_per_cube`, how many consecutive rows one cube sums per step (cube `c` takes
//! chunks `c, c + count, ...` of that many rows, so any cube count is correct). Chunks of
//! rows amortize the per-cube cost when rows are short; one row per cube spreads long rows
//! over the workers.
//!
//! When a buffer doesn't cover its data, or the output overlaps the input, a variant runs
//! the default kernel's bounds-checked code for its cube instead (it covers every row with
//! any cube count), so out-of-bounds accesses are reported the same way.

use super::numeric::Numeric;
use crate::kernel::{CpuKernel, CubeContext, KernelError};
use cubert_runtime::CubeDim;

fn sum<T: Numeric, const LANES: usize>(values: &[T]) -> T {
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

fn run<T: Numeric, const LANES: usize>(
    ctx: &mut CubeContext<'_>,
    rows_per_cube: usize,
    fallback: &CpuKernel,
) -> Result<(), KernelError> {
    let rows = ctx.info_usize(0)?;
    let cols = ctx.info_usize(1)?;
    let input = ctx.buffer::<T>(0)?;
    let out = ctx.buffer::<T>(1)?;
    let fast = rows
        .checked_mul(cols)
        .is_some_and(|len| input.covers(&(0..len)))
        && out.covers(&(0..rows))
        && !input.overlaps(&out);
    if !fast {
        return fallback.run(ctx);
    }
    let chunk = rows_per_cube.max(1);
    let cubes = usize::try_from(ctx.cube_count_total())
        .unwrap_or(usize::MAX)
        .max(1);
    let first = usize::try_from(ctx.cube_index()).unwrap_or(usize::MAX);
    // SAFETY: the input covers `rows * cols` elements and no unit writes it (`out` doesn't
    // overlap it).
    let data = unsafe { input.slice(0..rows * cols) };
    for index in (first..rows.div_ceil(chunk)).step_by(cubes) {
        let start = index * chunk;
        let end = (start + chunk).min(rows);
        // SAFETY: `out` covers `rows` elements and overlaps no input (checked above); rows
        // `start..end` belong to this cube only.
        let sums = unsafe { out.slice_mut(start..end) };
        for (total, row) in sums.iter_mut().zip(start..end) {
            *total = sum::<T, LANES>(&data[row * cols..(row + 1) * cols]);
        }
    }
    Ok(())
}

/// The row-sum variant `name` for `T` keeping `lanes` partial sums (4, 8, 16 or 32; others
/// round to 8) over chunks of `rows_per_cube` rows; `fallback` is the default reduce-sum
/// kernel of `T`.
pub fn reduce_rows<T: Numeric>(
    name: String,
    lanes: usize,
    rows_per_cube: usize,
    fallback: CpuKernel,
) -> CpuKernel {
    let body: fn(&mut CubeContext<'_>, usize, &CpuKernel) -> Result<(), KernelError> = match lanes {
        4 => run::<T, 4>,
        16 => run::<T, 16>,
        32 => run::<T, 32>,
        _ => run::<T, 8>,
    };
    CpuKernel::new(name, CubeDim::new_single(), move |ctx| {
        body(ctx, rows_per_cube, &fallback)
    })
}
