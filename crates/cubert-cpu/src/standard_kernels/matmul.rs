//! Matrix product of row-major matrices: `out (m×n) = lhs (m×k) × rhs (k×n)`.
//!
//! Cube `(x, y)` computes the output tile of `TILE` rows × `TILE` columns at tile
//! coordinates `(x, y)`, then `(x + count.x, y)`, ... (grid-stride over tiles), so any cube
//! count covers the output. Inside a tile each row accumulates `lhs[i][p] * rhs[p][j0..j1]`
//! over `p` in i-k-j order: the inner loop runs along contiguous rows of `rhs` and `out`
//! and vectorizes.

use super::numeric::Numeric;
use crate::kernel::{Buffer, CpuKernel, CubeContext};
use cubert_runtime::CubeDim;

/// Rows and columns of an output tile (one unit per output element).
pub const TILE: usize = 32;

fn tile_fast<T: Numeric>(
    lhs: &[T],
    rhs: &[T],
    out: &Buffer<'_, T>,
    (k, n): (usize, usize),
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    let width = cols.len();
    let mut acc = [T::zero(); TILE];
    for i in rows {
        acc[..width].fill(T::zero());
        for p in 0..k {
            let a = lhs[i * k + p];
            let b = &rhs[p * n + cols.start..p * n + cols.end];
            for (acc, b) in acc[..width].iter_mut().zip(b) {
                *acc = acc.add(a.mul(*b));
            }
        }
        // SAFETY: the caller checked that `out` covers the whole matrix and doesn't overlap
        // `lhs` or `rhs`; this row segment belongs to this cube's tile only.
        let row = unsafe { out.slice_mut(i * n + cols.start..i * n + cols.end) };
        row.copy_from_slice(&acc[..width]);
    }
}

/// The bounds-checked tile. Indices saturate (an overflowing index is out of bounds, never
/// wrapped into range), and the `p` loop stops where neither input has elements left; the
/// loads it skips are counted as out-of-bounds accesses.
fn tile_checked<T: Numeric>(
    ctx: &CubeContext<'_>,
    (lhs, rhs, out): (&Buffer<'_, T>, &Buffer<'_, T>, &Buffer<'_, T>),
    (k, n): (usize, usize),
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    // For p >= p_bound both loads are out of bounds, whatever i and j.
    let p_bound = k.min(lhs.len().max(rhs.len().div_ceil(n.max(1))));
    let skipped_per_element = ((k - p_bound) as u64).saturating_mul(2);
    for i in rows {
        if ctx.access().gave_up() {
            // The launch already failed with OutOfBounds: don't run the rest of its loops
            // (an absurd k with huge m and n is trillions of missing loads).
            return;
        }
        for j in cols.clone() {
            let total = (0..p_bound).fold(T::zero(), |acc, p| {
                let a = lhs.load(i.saturating_mul(k).saturating_add(p));
                acc.add(a.mul(rhs.load(p.saturating_mul(n).saturating_add(j))))
            });
            ctx.access().violations_beyond(skipped_per_element, || {
                format!("loads for p in {p_bound}..{k}, past the end of both inputs")
            });
            out.store(i.saturating_mul(n).saturating_add(j), total);
        }
    }
}

/// The matmul kernel for `T`.
pub fn matmul<T: Numeric>(name: String) -> CpuKernel {
    CpuKernel::new(name, CubeDim::new_2d(TILE as u32, TILE as u32), |ctx| {
        let m = ctx.info_usize(0)?;
        let k = ctx.info_usize(1)?;
        let n = ctx.info_usize(2)?;
        let lhs = ctx.buffer::<T>(0)?;
        let rhs = ctx.buffer::<T>(1)?;
        let out = ctx.buffer::<T>(2)?;
        let (count_x, count_y, _) = ctx.cube_count();
        let (cube_x, cube_y, _) = ctx.cube_pos();
        let tiles_n = n.div_ceil(TILE);
        let tiles_m = m.div_ceil(TILE);
        let fast = m.checked_mul(k).is_some_and(|len| lhs.covers(&(0..len)))
            && k.checked_mul(n).is_some_and(|len| rhs.covers(&(0..len)))
            && m.checked_mul(n).is_some_and(|len| out.covers(&(0..len)))
            && !out.overlaps(&lhs)
            && !out.overlaps(&rhs);
        // In the checked path, tiles past what any buffer holds are not run: an absurd
        // `m` or `n` fails the launch at once instead of keeping the device busy for ages.
        let (tiles_m, tiles_n) = if fast {
            (tiles_m, tiles_n)
        } else {
            let longest = lhs.len().max(rhs.len()).max(out.len());
            let (m_bound, n_bound) = (m.min(longest), n.min(longest));
            let skipped = (m as u64)
                .saturating_mul(n as u64)
                .saturating_sub((m_bound as u64).saturating_mul(n_bound as u64));
            ctx.access().violations_beyond(skipped, || {
                format!("stores of a {m}x{n} output past the end of every buffer")
            });
            (m_bound.div_ceil(TILE), n_bound.div_ceil(TILE))
        };
        for tile_y in (cube_y as usize..tiles_m).step_by(count_y.max(1) as usize) {
            for tile_x in (cube_x as usize..tiles_n).step_by(count_x.max(1) as usize) {
                let rows = tile_y * TILE..((tile_y + 1) * TILE).min(m);
                let cols = tile_x * TILE..((tile_x + 1) * TILE).min(n);
                if fast {
                    // SAFETY: both inputs cover their matrices (checked above) and no unit
                    // writes them: `out` overlaps neither.
                    let (lhs, rhs) = unsafe { (lhs.slice(0..m * k), rhs.slice(0..k * n)) };
                    tile_fast(lhs, rhs, &out, (k, n), rows, cols);
                } else if ctx.access().gave_up() {
                    return Ok(());
                } else {
                    tile_checked(ctx, (&lhs, &rhs, &out), (k, n), rows, cols);
                }
            }
        }
        Ok(())
    })
}
