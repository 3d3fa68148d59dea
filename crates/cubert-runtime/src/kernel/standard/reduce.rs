//! The reduce-sum standard kernel, written once in the kernel language: `out[r]` is the
//! sum of row `r` of a row-major `rows × cols` input (buffers `[input, out]`, info
//! `[rows, cols]`).
//!
//! Two kernels share the rows among units in different ways, and a backend picks the one
//! that suits it (its variants, [`RowSplit`]):
//!
//! - [`reduce_rows_by_unit`]: each unit sums whole rows, eight partial sums over lines of
//!   8 elements. Nothing cooperates, so on the CPU it takes the exclusive fast path (the
//!   input is *gathered*: plain loads, each line checked once) and runs as a loop over
//!   slices would.
//! - [`reduce_rows_shared`]: the units of a plane (32) or of a whole cube sum one row
//!   together, each a strided share (by lines of 4 where `lines`), then fold their sums
//!   across each plane by a butterfly of shuffles and, for a cube, through shared memory:
//!   what GPUs want.
//!
//! Sums accumulate in `A`: `f32` for the half types, the element type itself otherwise
//! (integers wrap). Each kernel is correct for any grid (rows are strided over the units
//! or groups the grid has), and a row that isn't wholly inside the input is summed up to
//! one element past the input's end, which is reported as out of bounds: an absurd
//! `rows` or `cols` fails the launch at once instead of visiting billions of elements.
//! `rows` is clamped to one past the output's end in the same way.

use crate::elem::ElemType;
use crate::error::LaunchError;
use crate::kernel::CubeDim;
use crate::lang::KernelDefinition;
use crate::lang::prelude::*;

/// Each unit sums whole rows: unit `u` of the grid's `T` takes rows `u, u + T, ...`.
/// The elements before the row's first whole line of 8, then eight partial sums over the
/// lines (one per element of a line) added in order, then the elements after the last
/// whole line. `wide` keeps 32 partial sums over groups of 4 lines instead (more loads in
/// flight per step), folded into the eight before the rest of the lines.
#[cubert_macros::kernel(crate = crate)]
pub fn reduce_rows_by_unit<T: Numeric, A: Numeric>(
    input: &Array<T>,
    out: &mut Array<T>,
    rows: u64,
    cols: u64,
    #[comptime] wide: bool,
) {
    for row in (ABSOLUTE_POS..rows.min(out.len() as u64 + 1u64).min(4294967295u64) as u32)
        .step_by(CUBE_COUNT * CUBE_DIM)
    {
        let len = input.len() as u64;
        let start = row as u64 * cols;
        let mut total = 0u32 as A;
        if cols <= len && start + cols <= len {
            let first = start as u32;
            let end = (start + cols) as u32;
            let head_end = ((start + 7u64) / 8u64 * 8u64).min(start + cols) as u32;
            for i in first..head_end {
                total += input[i] as A;
            }
            let first_line = head_end / 8u32;
            let last_line = end / 8u32;
            let mut partial = [0u32 as A; 8];
            let mut lines_done = first_line;
            if wide {
                let mut p1 = partial;
                let mut p2 = partial;
                let mut p3 = partial;
                lines_done = first_line + (last_line - first_line) / 4u32 * 4u32;
                for l in (first_line..lines_done).step_by(4u32) {
                    let line0 = input.line::<8>(l);
                    let line1 = input.line::<8>(l + 1u32);
                    let line2 = input.line::<8>(l + 2u32);
                    let line3 = input.line::<8>(l + 3u32);
                    for k in 0..8u32 {
                        partial[k] += line0[k] as A;
                        p1[k] += line1[k] as A;
                        p2[k] += line2[k] as A;
                        p3[k] += line3[k] as A;
                    }
                }
                for k in 0..8u32 {
                    partial[k] += p1[k] + p2[k] + p3[k];
                }
            }
            for l in lines_done..last_line {
                let line = input.line::<8>(l);
                for k in 0..8u32 {
                    partial[k] += line[k] as A;
                }
            }
            for k in 0..8u32 {
                total += partial[k];
            }
            for i in (end / 8u32 * 8u32).max(head_end)..end {
                total += input[i] as A;
            }
        } else {
            // Not wholly inside the input: up to one element past its end.
            for c in 0u64..cols.min(len + 1u64) {
                total += input[(start + c).min(4294967295u64) as u32] as A;
            }
        }
        out[row] = total as T;
    }
}

/// A group of units sums each row together: a plane of 32 (`per_cube` false: plane `p` of
/// the grid's `P` takes rows `p, p + P, ...`; the cube's units must be a multiple of 32)
/// or the whole cube (`per_cube`: cube `c` takes rows `c, c + count, ...`; at most 1024
/// units). Unit `g` of the group adds elements `g, g + G, ...` of the row (or, with
/// `lines`, its lines of 4, four lines per trip into four sums, with the elements before
/// the first whole line and after the last added one by one), the group folds its sums across each plane by a butterfly of
/// shuffles and, for a cube, the planes' sums through shared memory.
#[cubert_macros::kernel(crate = crate)]
pub fn reduce_rows_shared<T: Numeric, A: Numeric>(
    input: &Array<T>,
    out: &mut Array<T>,
    rows: u64,
    cols: u64,
    #[comptime] per_cube: bool,
    #[comptime] lines: bool,
) {
    let mut plane_sums = SharedMemory::<A>::new(32u32);
    let len = input.len() as u64;
    let rows_end = rows.min(out.len() as u64 + 1u64).min(4294967295u64) as u32;
    let mut group_unit = UNIT_POS_PLANE;
    let mut group_units = PLANE_DIM;
    let mut first_row = ABSOLUTE_POS / PLANE_DIM;
    let mut row_step = CUBE_COUNT * (CUBE_DIM / PLANE_DIM);
    if per_cube {
        group_unit = UNIT_POS;
        group_units = CUBE_DIM;
        first_row = CUBE_POS;
        row_step = CUBE_COUNT;
    }
    for row in (first_row..rows_end).step_by(row_step) {
        let start = row as u64 * cols;
        let mut sum = 0u32 as A;
        if cols <= len && start + cols <= len {
            let first = start as u32;
            let end = (start + cols) as u32;
            if lines {
                let head_end = ((start + 3u64) / 4u64 * 4u64).min(start + cols) as u32;
                for i in (first + group_unit..head_end).step_by(group_units) {
                    sum += input[i] as A;
                }
                // Four lines per trip, into four sums: four loads in flight per unit.
                let first_line = head_end / 4u32 + group_unit;
                let lines_end = end / 4u32;
                let quad = group_units * 4u32;
                let mut quads_end = first_line;
                if lines_end > first_line {
                    quads_end = first_line + (lines_end - first_line) / quad * quad;
                }
                let mut sum1 = 0u32 as A;
                let mut sum2 = 0u32 as A;
                let mut sum3 = 0u32 as A;
                for l in (first_line..quads_end).step_by(quad) {
                    let line0 = input.line::<4>(l);
                    let line1 = input.line::<4>(l + group_units);
                    let line2 = input.line::<4>(l + group_units * 2u32);
                    let line3 = input.line::<4>(l + group_units * 3u32);
                    sum += (line0[0] as A + line0[1] as A) + (line0[2] as A + line0[3] as A);
                    sum1 += (line1[0] as A + line1[1] as A) + (line1[2] as A + line1[3] as A);
                    sum2 += (line2[0] as A + line2[1] as A) + (line2[2] as A + line2[3] as A);
                    sum3 += (line3[0] as A + line3[1] as A) + (line3[2] as A + line3[3] as A);
                }
                for l in (quads_end..lines_end).step_by(group_units) {
                    let line = input.line::<4>(l);
                    sum += (line[0] as A + line[1] as A) + (line[2] as A + line[3] as A);
                }
                sum += (sum1 + sum2) + sum3;
                for i in ((end / 4u32 * 4u32).max(head_end) + group_unit..end).step_by(group_units)
                {
                    sum += input[i] as A;
                }
            } else {
                for i in (first + group_unit..end).step_by(group_units) {
                    sum += input[i] as A;
                }
            }
        } else {
            // Not wholly inside the input: up to one element past its end.
            for c in (group_unit as u64..cols.min(len + 1u64)).step_by(group_units as u64) {
                sum += input[(start + c).min(4294967295u64) as u32] as A;
            }
        }
        // The plane's sum by a butterfly (5 shuffles; `plane_sum` folds in lane order, 32):
        // every lane ends with the same bits, lanes past the cube's end give zero.
        sum += plane_shuffle(sum, UNIT_POS_PLANE ^ 16u32);
        sum += plane_shuffle(sum, UNIT_POS_PLANE ^ 8u32);
        sum += plane_shuffle(sum, UNIT_POS_PLANE ^ 4u32);
        sum += plane_shuffle(sum, UNIT_POS_PLANE ^ 2u32);
        sum += plane_shuffle(sum, UNIT_POS_PLANE ^ 1u32);
        if per_cube {
            if UNIT_POS_PLANE == 0 {
                plane_sums[UNIT_POS / PLANE_DIM] = sum;
            }
            sync_cube();
            if UNIT_POS < PLANE_DIM {
                let mut total = 0u32 as A;
                if UNIT_POS < (CUBE_DIM + PLANE_DIM - 1) / PLANE_DIM {
                    total = plane_sums[UNIT_POS];
                }
                total += plane_shuffle(total, UNIT_POS_PLANE ^ 16u32);
                total += plane_shuffle(total, UNIT_POS_PLANE ^ 8u32);
                total += plane_shuffle(total, UNIT_POS_PLANE ^ 4u32);
                total += plane_shuffle(total, UNIT_POS_PLANE ^ 2u32);
                total += plane_shuffle(total, UNIT_POS_PLANE ^ 1u32);
                if UNIT_POS == 0 {
                    out[row] = total as T;
                }
            }
            sync_cube();
        } else if UNIT_POS_PLANE == 0 {
            out[row] = sum as T;
        }
    }
}

/// How a reduce-sum kernel shares the rows among units: which of the two kernels runs, and
/// with how many units per cube. A backend's reduce-sum variants are a table of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowSplit {
    /// [`reduce_rows_by_unit`], `units` per cube: a unit per row.
    Unit {
        /// Units (rows) per cube.
        units: u32,
        /// 32 partial sums instead of 8.
        wide: bool,
    },
    /// [`reduce_rows_shared`] by planes: a plane of 32 units per row, `planes` per cube.
    Plane {
        /// Planes (rows) per cube.
        planes: u32,
        /// Whether the units read lines of 4 elements.
        lines: bool,
    },
    /// [`reduce_rows_shared`] by cubes: the cube's `units` units per row.
    Cube {
        /// Units per cube (at most 1024).
        units: u32,
        /// Whether the units read lines of 4 elements.
        lines: bool,
    },
}

impl RowSplit {
    /// The units of one cube.
    pub fn cube_dim(&self) -> CubeDim {
        match *self {
            RowSplit::Unit { units, .. } => CubeDim::new_1d(units.max(1)),
            RowSplit::Plane { planes, .. } => CubeDim::new_1d(planes.max(1) * 32),
            RowSplit::Cube { units, .. } => CubeDim::new_1d(units.max(1)),
        }
    }

    /// The rows one cube sums per step: what sizes the grid (one step per cube covers
    /// every row).
    pub fn rows_per_cube(&self) -> u32 {
        match *self {
            RowSplit::Unit { units, .. } => units.max(1),
            RowSplit::Plane { planes, .. } => planes.max(1),
            RowSplit::Cube { .. } => 1,
        }
    }
}

/// The kernel of `split` summing rows of `elem`, named `name` (as profiles and errors name
/// it), and its cube dim. Halves accumulate in `f32`.
///
/// # Errors
/// [`LaunchError`] for booleans, which have no arithmetic.
pub fn reduce_sum_definition(
    elem: ElemType,
    split: RowSplit,
    name: &str,
) -> Result<(KernelDefinition, CubeDim), LaunchError> {
    fn define<T: Numeric, A: Numeric>(split: RowSplit) -> KernelDefinition {
        match split {
            RowSplit::Unit { wide, .. } => reduce_rows_by_unit::definition::<T, A>(wide),
            RowSplit::Plane { lines, .. } => reduce_rows_shared::definition::<T, A>(false, lines),
            RowSplit::Cube { lines, .. } => reduce_rows_shared::definition::<T, A>(true, lines),
        }
    }
    if let Some(error) = super::no_arithmetic(super::StandardKernel::ReduceSum(elem), elem) {
        return Err(error);
    }
    let definition = match elem {
        ElemType::F16 => define::<f16, f32>(split),
        ElemType::BF16 => define::<bf16, f32>(split),
        other => crate::with_elem!(other, u8, u8, T => define::<T, T>(split)),
    };
    Ok((definition.renamed(name, name), split.cube_dim()))
}
