//! Register-blocked matmul variants for the autotuner (`out = lhs × rhs`, row-major; the
//! calling convention of the standard matmul).
//!
//! A variant covers an output tile of `tm` rows × `tn` columns per cube (grid-stride over
//! tiles, so any cube count is correct). Inside a tile the output is computed in micro
//! blocks of `MR` rows × `NR` columns held in local accumulators: for each `p`, one row
//! segment of `rhs` (`NR` wide, the vector width of the inner loop) is loaded once and used
//! for `MR` rows, where the default kernel loads it once per row. With `kc > 0` the `p`
//! loop is split in blocks of `kc` so the `kc × NR` panel of `rhs` stays in cache while
//! the micro blocks of the tile's rows go by.
//!
//! Every output element still sums `lhs[i][p] * rhs[p][j]` for `p` in order from 0 to
//! `k`, exactly like the default kernel, so the variants give bit-identical results.
//!
//! When a buffer doesn't cover its matrix, or the output overlaps an input, a variant runs
//! the default kernel's bounds-checked code for its cube instead (which covers the whole
//! output with any cube count), so out-of-bounds accesses are reported the same way.

use super::numeric::Numeric;
use crate::kernel::{CpuKernel, CubeContext, KernelError};
use cubert_runtime::CubeDim;
use std::ops::Range;

/// The register block of a variant: `MR` rows × `NR` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Micro {
    /// 4 × 8.
    M4N8,
    /// 4 × 16.
    M4N16,
    /// 2 × 8.
    M2N8,
    /// 8 × 8.
    M8N8,
    /// 4 × 4.
    M4N4,
}

/// Parameters of a matmul variant (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulParams {
    /// Output rows per cube tile.
    pub tm: usize,
    /// Output columns per cube tile.
    pub tn: usize,
    /// Block of the `p` loop; 0 runs all of `k` at once.
    pub kc: usize,
    /// The register block.
    pub micro: Micro,
}

/// Shapes of the problem and of one micro block.
#[derive(Clone, Copy)]
struct Dims {
    k: usize,
    n: usize,
}

/// `acc[i * stride + j] += sum over ps of lhs[row0 + i][p] * rhs[p][col0 + j]` for an
/// `MR × NR` block, in local accumulators.
#[inline(always)]
fn micro_full<T: Numeric, const MR: usize, const NR: usize>(
    (lhs, rhs): (&[T], &[T]),
    Dims { k, n }: Dims,
    (row0, col0): (usize, usize),
    ps: Range<usize>,
    acc: &mut [T],
    stride: usize,
) {
    let mut regs = [[T::zero(); NR]; MR];
    for (i, reg) in regs.iter_mut().enumerate() {
        reg.copy_from_slice(&acc[i * stride..i * stride + NR]);
    }
    for p in ps {
        let start = p * n + col0;
        let Ok(b) = <&[T; NR]>::try_from(&rhs[start..start + NR]) else {
            continue;
        };
        for (i, reg) in regs.iter_mut().enumerate() {
            let a = lhs[(row0 + i) * k + p];
            for j in 0..NR {
                reg[j] = reg[j].add(a.mul(b[j]));
            }
        }
    }
    for (i, reg) in regs.iter().enumerate() {
        acc[i * stride..i * stride + NR].copy_from_slice(reg);
    }
}

/// As `micro_full` for a partial block of `rows × cols` at the tile's edge.
#[allow(clippy::too_many_arguments)]
fn micro_edge<T: Numeric>(
    (lhs, rhs): (&[T], &[T]),
    Dims { k, n }: Dims,
    (row0, col0): (usize, usize),
    (rows, cols): (usize, usize),
    ps: Range<usize>,
    acc: &mut [T],
    stride: usize,
) {
    for i in 0..rows {
        let out = &mut acc[i * stride..i * stride + cols];
        for p in ps.clone() {
            let a = lhs[(row0 + i) * k + p];
            let b = &rhs[p * n + col0..p * n + col0 + cols];
            for (o, b) in out.iter_mut().zip(b) {
                *o = o.add(a.mul(*b));
            }
        }
    }
}

/// Computes the tile `rows × cols` into `acc` (row stride `cols.len()`).
fn tile<T: Numeric, const MR: usize, const NR: usize>(
    inputs: (&[T], &[T]),
    dims: Dims,
    (rows, cols): (Range<usize>, Range<usize>),
    kc: usize,
    acc: &mut [T],
) {
    let (height, width) = (rows.len(), cols.len());
    let stride = width;
    acc[..height * width].fill(T::zero());
    let kc = if kc == 0 { dims.k.max(1) } else { kc };
    let mut p0 = 0;
    while p0 < dims.k {
        let ps = p0..(p0 + kc).min(dims.k);
        let mut c = 0;
        while c < width {
            let nr = NR.min(width - c);
            let mut r = 0;
            while r < height {
                let mr = MR.min(height - r);
                let block = &mut acc[r * stride + c..];
                let at = (rows.start + r, cols.start + c);
                if mr == MR && nr == NR {
                    micro_full::<T, MR, NR>(inputs, dims, at, ps.clone(), block, stride);
                } else {
                    micro_edge(inputs, dims, at, (mr, nr), ps.clone(), block, stride);
                }
                r += mr;
            }
            c += nr;
        }
        p0 = ps.end;
    }
}

fn run<T: Numeric, const MR: usize, const NR: usize>(
    ctx: &mut CubeContext<'_>,
    params: MatmulParams,
    fallback: &CpuKernel,
) -> Result<(), KernelError> {
    let m = ctx.info_usize(0)?;
    let k = ctx.info_usize(1)?;
    let n = ctx.info_usize(2)?;
    let lhs = ctx.buffer::<T>(0)?;
    let rhs = ctx.buffer::<T>(1)?;
    let out = ctx.buffer::<T>(2)?;
    let fast = m.checked_mul(k).is_some_and(|len| lhs.covers(&(0..len)))
        && k.checked_mul(n).is_some_and(|len| rhs.covers(&(0..len)))
        && m.checked_mul(n).is_some_and(|len| out.covers(&(0..len)))
        && !out.overlaps(&lhs)
        && !out.overlaps(&rhs);
    if !fast {
        return fallback.run(ctx);
    }
    let (tm, tn) = (params.tm.max(1), params.tn.max(1));
    let (count_x, count_y, _) = ctx.cube_count();
    let (cube_x, cube_y, _) = ctx.cube_pos();
    // SAFETY: both inputs cover their matrices (checked above) and no unit writes them:
    // `out` overlaps neither.
    let inputs = unsafe { (lhs.slice(0..m * k), rhs.slice(0..k * n)) };
    let dims = Dims { k, n };
    let mut acc = vec![T::zero(); tm * tn];
    for tile_y in (cube_y as usize..m.div_ceil(tm)).step_by(count_y.max(1) as usize) {
        for tile_x in (cube_x as usize..n.div_ceil(tn)).step_by(count_x.max(1) as usize) {
            let rows = tile_y * tm..((tile_y + 1) * tm).min(m);
            let cols = tile_x * tn..((tile_x + 1) * tn).min(n);
            tile::<T, MR, NR>(
                inputs,
                dims,
                (rows.clone(), cols.clone()),
                params.kc,
                &mut acc,
            );
            let width = cols.len();
            for (r, i) in rows.enumerate() {
                // SAFETY: `out` covers the matrix and overlaps no input (checked above); this
                // row segment belongs to this cube's tile only.
                let row = unsafe { out.slice_mut(i * n + cols.start..i * n + cols.end) };
                row.copy_from_slice(&acc[r * width..(r + 1) * width]);
            }
        }
    }
    Ok(())
}

/// The matmul variant `name` for `T` with `params`; `fallback` is the default matmul kernel
/// of `T`, run when the buffers don't allow the fast path.
pub fn matmul_blocked<T: Numeric>(
    name: String,
    params: MatmulParams,
    fallback: CpuKernel,
) -> CpuKernel {
    let body: fn(&mut CubeContext<'_>, MatmulParams, &CpuKernel) -> Result<(), KernelError> =
        match params.micro {
            Micro::M4N8 => run::<T, 4, 8>,
            Micro::M4N16 => run::<T, 4, 16>,
            Micro::M2N8 => run::<T, 2, 8>,
            Micro::M8N8 => run::<T, 8, 8>,
            Micro::M4N4 => run::<T, 4, 4>,
        };
    // The cube dim is informative for CPU kernels (the function loops over its tile); keep
    // it within the device's unit limit.
    let dim = CubeDim::new_2d(params.tn.clamp(1, 32) as u32, params.tm.clamp(1, 32) as u32);
    CpuKernel::new(name, dim, move |ctx| body(ctx, params, &fallback))
}
