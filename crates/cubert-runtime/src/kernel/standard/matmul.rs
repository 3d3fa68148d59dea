//! The matmul standard kernel, written once in the kernel language: `out = lhs × rhs` for
//! row-major `lhs` (`m × k`), `rhs` (`k × n`) and `out` (`m × n`) (buffers
//! `[lhs, rhs, out]`, info `[m, k, n]`).
//!
//! Three kernels tile the output in different ways, and a backend picks the one that suits
//! it (its variants, [`MatmulTiling`]):
//!
//! - [`matmul_by_unit`]: each unit computes blocks of 4 rows × 8 columns over the whole
//!   of `k`, in 32 local sums, reading a line of 8 of `rhs` per step (when `n` is a
//!   multiple of 8) and 4 elements of `lhs`. Nothing cooperates, and the CPU reads both
//!   operands plainly (`lang::native::plain_reads_allowed`): a cube of `x × y` units covers
//!   `4x` rows × `8y` columns, and its units, which run one after the other, go down the
//!   rows first, so the columns of `rhs` they read stay in cache.
//! - [`matmul_tiled`]: the units of a cube compute a `block_rows × block_cols` tile of the
//!   output together, each `unit_rows × unit_cols` of it in local sums, strided across the
//!   tile so that shared-memory reads and global stores are contiguous per plane. The
//!   operands go through shared memory `depth` columns of `lhs` (transposed, padded
//!   against bank conflicts) and rows of `rhs` at a time, `rhs` in lines of 4 where
//!   `lines` and `n` allow: what GPUs want.
//! - [`matmul_double_buffered`]: the same cooperation with two shared buffers (the next
//!   step's operands travel through registers while the cube multiplies this one), 8 × 8
//!   outputs per unit in 4 × 4 blocks (16-byte shared loads) and both operands in lines of
//!   4: the fast path for large products on GPUs.
//!
//! Every output element sums `lhs[i][p] * rhs[p][j]` for `p` in order from 0 to `k` in
//! `A` (`f32` for the half types; integers wrap), one fused multiply-add (`mul_add`, one
//! rounding) per step, so every kernel gives the same bits on every backend. (On the CPU
//! the unit kernel runs as AVX2 and FMA code where the processor has them; elsewhere on
//! x86-64 `mul_add` is a library call, exact but several times slower.) Both are correct
//! for any grid (tiles are strided over the cubes the grid has), and their accesses are
//! checked as any kernel's are, so a buffer too short for its matrix is reported, not
//! overrun. Each of `m`, `k` and `n` is clamped to one past what the buffers can hold
//! (`m` and `n` to one past `out`'s length, `k` to one past each operand's, and, when `k`
//! isn't zero, `m` and `n` to one past `lhs`'s and `rhs`'s): a shape the buffers can't
//! hold still reaches past one of them, which is reported, but an absurd one fails at once
//! instead of looping over trillions of missing elements. Indices are `u32`:
//! [`crate::ops::launch_matmul`] splits `lhs` and `out` into bands of rows that fit and
//! refuses an `rhs` that doesn't.

use crate::elem::ElemType;
use crate::error::LaunchError;
use crate::kernel::CubeDim;
use crate::lang::KernelDefinition;
use crate::lang::prelude::*;

/// Each unit computes blocks of 4 rows × 8 columns. A cube of `X × Y` units covers `4X`
/// rows × `8Y` columns (its units go down the rows first: the grid's x runs over the
/// columns, as for every matmul, the cube's x over the rows), and the grid strides over
/// the blocks it doesn't cover. A block wholly inside `out` keeps 32 sums in local
/// variables, reading a line of `rhs` per step where `n` is a multiple of 8; a block at the
/// edge computes its elements inside `out` one by one, in the same order.
#[cubert_macros::kernel(crate = crate)]
pub fn matmul_by_unit<T: Numeric, A: Numeric>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    m: u64,
    k: u64,
    n: u64,
) {
    // At most one past what the buffers hold (see the module docs).
    let mut rows_end = m.min(out.len() as u64 + 1u64);
    let mut cols_end = n.min(out.len() as u64 + 1u64);
    let inner_end = k.min(lhs.len() as u64 + 1u64).min(rhs.len() as u64 + 1u64);
    if inner_end > 0u64 {
        rows_end = rows_end.min(lhs.len() as u64 + 1u64);
        cols_end = cols_end.min(rhs.len() as u64 + 1u64);
    }
    let rows = rows_end.min(4294967295u64) as u32;
    let inner = inner_end.min(4294967295u64) as u32;
    let cols = cols_end.min(4294967295u64) as u32;
    let blocks_y = (rows_end + 3u64) / 4u64;
    let blocks_x = (cols_end + 7u64) / 8u64;
    // A cube's units go down the rows first (x), so the ones that run one after another
    // share the columns of `rhs` they read (strided, the operand worth keeping in cache).
    let first_block_y = CUBE_POS_Y * CUBE_DIM_X + UNIT_POS_X;
    let first_block_x = CUBE_POS_X * CUBE_DIM_Y + UNIT_POS_Y;
    for block_x in (first_block_x..blocks_x as u32).step_by(CUBE_COUNT_X * CUBE_DIM_Y) {
        for block_y in (first_block_y..blocks_y as u32).step_by(CUBE_COUNT_Y * CUBE_DIM_X) {
            let row0 = block_y * 4u32;
            let col0 = block_x * 8u32;
            if row0 as u64 + 4u64 <= rows_end && col0 as u64 + 8u64 <= cols_end {
                let mut acc = [0u32 as A; 32];
                let lhs0 = row0 * inner;
                let lhs1 = lhs0 + inner;
                let lhs2 = lhs1 + inner;
                let lhs3 = lhs2 + inner;
                if cols % 8u32 == 0u32 {
                    let first_line = col0 / 8u32;
                    let line_step = cols / 8u32;
                    for p in 0..inner {
                        let b = rhs.line::<8>(first_line + p * line_step);
                        let a0 = lhs[lhs0 + p] as A;
                        let a1 = lhs[lhs1 + p] as A;
                        let a2 = lhs[lhs2 + p] as A;
                        let a3 = lhs[lhs3 + p] as A;
                        for j in 0..8u32 {
                            let bj = b[j] as A;
                            acc[j] = a0.mul_add(bj, acc[j]);
                            acc[8u32 + j] = a1.mul_add(bj, acc[8u32 + j]);
                            acc[16u32 + j] = a2.mul_add(bj, acc[16u32 + j]);
                            acc[24u32 + j] = a3.mul_add(bj, acc[24u32 + j]);
                        }
                    }
                } else {
                    for p in 0..inner {
                        let mut b = [0u32 as A; 8];
                        for j in 0..8u32 {
                            b[j] = rhs[p * cols + col0 + j] as A;
                        }
                        let a0 = lhs[lhs0 + p] as A;
                        let a1 = lhs[lhs1 + p] as A;
                        let a2 = lhs[lhs2 + p] as A;
                        let a3 = lhs[lhs3 + p] as A;
                        for j in 0..8u32 {
                            acc[j] = a0.mul_add(b[j], acc[j]);
                            acc[8u32 + j] = a1.mul_add(b[j], acc[8u32 + j]);
                            acc[16u32 + j] = a2.mul_add(b[j], acc[16u32 + j]);
                            acc[24u32 + j] = a3.mul_add(b[j], acc[24u32 + j]);
                        }
                    }
                }
                for i in 0..4u32 {
                    for j in 0..8u32 {
                        out[(row0 + i) * cols + col0 + j] = acc[i * 8u32 + j] as T;
                    }
                }
            } else {
                for i in 0..4u32 {
                    for j in 0..8u32 {
                        let row = row0 + i;
                        let col = col0 + j;
                        if row < rows && col < cols {
                            let mut sum = 0u32 as A;
                            for p in 0..inner {
                                let a = lhs[row * inner + p] as A;
                                sum = a.mul_add(rhs[p * cols + col] as A, sum);
                            }
                            out[row * cols + col] = sum as T;
                        }
                    }
                }
            }
        }
    }
}

/// The units of a cube compute a `block_rows × block_cols` tile together: cube `(x, y)` of
/// the grid's `X × Y` takes the tiles `(x + iX, y + jY)`. The cube has
/// `block_cols / unit_cols × block_rows / unit_rows` units; unit `(tx, ty)` sums the
/// outputs `(ty + i * units_y, tx + j * units_x)` for `i < unit_rows`, `j < unit_cols`
/// (at most 64 of them). Each step over `k` loads `depth` columns of the tile's rows of
/// `lhs` (transposed) and `depth` rows of its columns of `rhs` into shared memory (zeros
/// past the matrices' ends), then every unit runs its multiply-adds from there.
#[cubert_macros::kernel(crate = crate)]
pub fn matmul_tiled<T: Numeric, A: Numeric>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    m: u64,
    k: u64,
    n: u64,
    #[comptime] block_rows: u32,
    #[comptime] block_cols: u32,
    #[comptime] depth: u32,
    #[comptime] unit_rows: u32,
    #[comptime] unit_cols: u32,
    #[comptime] lines: bool,
) {
    let mut lhs_tile = SharedMemory::<A>::new(depth * (block_rows + 1u32));
    let mut rhs_tile = SharedMemory::<A>::new(depth * block_cols);
    // At most one past what the buffers hold (see the module docs).
    let mut rows_end = m.min(out.len() as u64 + 1u64);
    let mut cols_end = n.min(out.len() as u64 + 1u64);
    let inner_end = k.min(lhs.len() as u64 + 1u64).min(rhs.len() as u64 + 1u64);
    if inner_end > 0u64 {
        rows_end = rows_end.min(lhs.len() as u64 + 1u64);
        cols_end = cols_end.min(rhs.len() as u64 + 1u64);
    }
    let rows = rows_end.min(4294967295u64) as u32;
    let inner = inner_end.min(4294967295u64) as u32;
    let cols = cols_end.min(4294967295u64) as u32;
    let tiles_y = ((rows_end + (block_rows - 1u32) as u64) / block_rows as u64) as u32;
    let tiles_x = ((cols_end + (block_cols - 1u32) as u64) / block_cols as u64) as u32;
    let units_x = block_cols / unit_cols;
    let units_y = block_rows / unit_rows;
    let units = units_x * units_y;
    let unit = UNIT_POS_Y * units_x + UNIT_POS_X;
    let lhs_stride = block_rows + 1u32;
    let vector = lines && cols % 4u32 == 0u32;
    for tile_y in (CUBE_POS_Y..tiles_y).step_by(CUBE_COUNT_Y) {
        for tile_x in (CUBE_POS_X..tiles_x).step_by(CUBE_COUNT_X) {
            let row0 = tile_y * block_rows;
            let col0 = tile_x * block_cols;
            let mut acc = [0u32 as A; 64];
            for p0 in (0u32..inner).step_by(depth) {
                for i in (unit..block_rows * depth).step_by(units) {
                    let r = i / depth;
                    let q = i % depth;
                    let mut value = 0u32 as A;
                    if row0 + r < rows && p0 + q < inner {
                        value = lhs[(row0 + r) * inner + p0 + q] as A;
                    }
                    lhs_tile[q * lhs_stride + r] = value;
                }
                if vector {
                    for i in (unit..depth * (block_cols / 4u32)).step_by(units) {
                        let q = i / (block_cols / 4u32);
                        let c = i % (block_cols / 4u32) * 4u32;
                        let at = q * block_cols + c;
                        if p0 + q < inner && col0 + c < cols {
                            let line = rhs.line::<4>(((p0 + q) * cols + col0 + c) / 4u32);
                            for j in 0..4u32 {
                                rhs_tile[at + j] = line[j] as A;
                            }
                        } else {
                            for j in 0..4u32 {
                                rhs_tile[at + j] = 0u32 as A;
                            }
                        }
                    }
                } else {
                    for i in (unit..depth * block_cols).step_by(units) {
                        let q = i / block_cols;
                        let c = i % block_cols;
                        let mut value = 0u32 as A;
                        if p0 + q < inner && col0 + c < cols {
                            value = rhs[(p0 + q) * cols + col0 + c] as A;
                        }
                        rhs_tile[i] = value;
                    }
                }
                sync_cube();
                for q in 0..depth {
                    let mut a = [0u32 as A; 8];
                    let mut b = [0u32 as A; 8];
                    for i in 0..unit_rows {
                        a[i] = lhs_tile[q * lhs_stride + UNIT_POS_Y + i * units_y];
                    }
                    for j in 0..unit_cols {
                        b[j] = rhs_tile[q * block_cols + UNIT_POS_X + j * units_x];
                    }
                    for i in 0..unit_rows {
                        for j in 0..unit_cols {
                            acc[i * unit_cols + j] = a[i].mul_add(b[j], acc[i * unit_cols + j]);
                        }
                    }
                }
                sync_cube();
            }
            for i in 0..unit_rows {
                let row = row0 + UNIT_POS_Y + i * units_y;
                for j in 0..unit_cols {
                    let col = col0 + UNIT_POS_X + j * units_x;
                    if row < rows && col < cols {
                        out[row * cols + col] = acc[i * unit_cols + j] as T;
                    }
                }
            }
        }
    }
}

/// The units of a cube compute a `block_rows × block_cols` tile together, each an 8 × 8
/// block of it in local sums, through two shared buffers: while the cube multiplies one
/// step of `depth` columns of `lhs` (transposed in shared memory, rows padded by 4) and
/// rows of `rhs`, each unit holds its part of the next step in registers, read from
/// global memory in lines of 4 (where `k` and `n` are multiples of 4; element by element
/// otherwise), and stores it into the other buffer after: one barrier per step.
///
/// The cube has `block_cols / 8 × block_rows / 8` units; unit `(tx, ty)` sums rows
/// `ty * 4 + i` and `block_rows / 2 + ty * 4 + i`, columns `tx * 4 + j` and
/// `block_cols / 2 + tx * 4 + j` (`i`, `j` < 4) of the tile: each step reads 4 runs of 4
/// consecutive shared elements (one 16-byte load each on GPUs) for 64 multiply-adds, and
/// a plane's stores are runs of 4 consecutive columns. Cube `(x, y)` takes the tiles
/// `(x + iX, y + jY)`, like [`matmul_tiled`]; the sums and their order are the same.
#[cubert_macros::kernel(crate = crate)]
pub fn matmul_double_buffered<T: Numeric, A: Numeric>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    m: u64,
    k: u64,
    n: u64,
    #[comptime] block_rows: u32,
    #[comptime] block_cols: u32,
    #[comptime] depth: u32,
) {
    let lhs_stride = block_rows + 4u32;
    let mut lhs_tile = SharedMemory::<A>::new(2u32 * depth * (block_rows + 4u32));
    let mut rhs_tile = SharedMemory::<A>::new(2u32 * depth * block_cols);
    // At most one past what the buffers hold (see the module docs).
    let mut rows_end = m.min(out.len() as u64 + 1u64);
    let mut cols_end = n.min(out.len() as u64 + 1u64);
    let inner_end = k.min(lhs.len() as u64 + 1u64).min(rhs.len() as u64 + 1u64);
    if inner_end > 0u64 {
        rows_end = rows_end.min(lhs.len() as u64 + 1u64);
        cols_end = cols_end.min(rhs.len() as u64 + 1u64);
    }
    let rows = rows_end.min(4294967295u64) as u32;
    let inner = inner_end.min(4294967295u64) as u32;
    let cols = cols_end.min(4294967295u64) as u32;
    let tiles_y = ((rows_end + (block_rows - 1u32) as u64) / block_rows as u64) as u32;
    let tiles_x = ((cols_end + (block_cols - 1u32) as u64) / block_cols as u64) as u32;
    let units_x = block_cols / 8u32;
    let units = units_x * (block_rows / 8u32);
    let unit = UNIT_POS_Y * units_x + UNIT_POS_X;
    let lines = inner % 4u32 == 0u32 && cols % 4u32 == 0u32;
    let steps = (inner + depth - 1u32) / depth;
    // Lines of 4 each unit moves per step: of `lhs` and of `rhs` (the tiling makes them
    // whole: at most 2 each).
    let lhs_lines = block_rows * depth / 4u32 / units;
    let rhs_lines = depth * block_cols / 4u32 / units;
    for tile_y in (CUBE_POS_Y..tiles_y).step_by(CUBE_COUNT_Y) {
        for tile_x in (CUBE_POS_X..tiles_x).step_by(CUBE_COUNT_X) {
            let row0 = tile_y * block_rows;
            let col0 = tile_x * block_cols;
            let mut acc = [0u32 as A; 64];
            let mut lhs_next = [0u32 as A; 8];
            let mut rhs_next = [0u32 as A; 8];
            // Trip `s` reads step `s` into registers, multiplies step `s - 1` from its
            // buffer, then stores step `s` into the other buffer.
            for s in 0..steps + 1u32 {
                let p0 = s * depth;
                if s < steps {
                    for l in 0..lhs_lines {
                        let line = unit + l * units;
                        let r = line / (depth / 4u32);
                        let q = (line % (depth / 4u32)) * 4u32;
                        let row = row0 + r;
                        if lines {
                            if row < rows && p0 + q < inner {
                                let x = lhs.line::<4>((row * inner + p0 + q) / 4u32);
                                for j in 0..4u32 {
                                    lhs_next[l * 4u32 + j] = x[j] as A;
                                }
                            } else {
                                for j in 0..4u32 {
                                    lhs_next[l * 4u32 + j] = 0u32 as A;
                                }
                            }
                        } else {
                            for j in 0..4u32 {
                                let mut value = 0u32 as A;
                                if row < rows && p0 + q + j < inner {
                                    value = lhs[row * inner + p0 + q + j] as A;
                                }
                                lhs_next[l * 4u32 + j] = value;
                            }
                        }
                    }
                    for l in 0..rhs_lines {
                        let line = unit + l * units;
                        let q = line / (block_cols / 4u32);
                        let c = (line % (block_cols / 4u32)) * 4u32;
                        let col = col0 + c;
                        if lines {
                            if p0 + q < inner && col < cols {
                                let x = rhs.line::<4>(((p0 + q) * cols + col) / 4u32);
                                for j in 0..4u32 {
                                    rhs_next[l * 4u32 + j] = x[j] as A;
                                }
                            } else {
                                for j in 0..4u32 {
                                    rhs_next[l * 4u32 + j] = 0u32 as A;
                                }
                            }
                        } else {
                            for j in 0..4u32 {
                                let mut value = 0u32 as A;
                                if p0 + q < inner && col + j < cols {
                                    value = rhs[(p0 + q) * cols + col + j] as A;
                                }
                                rhs_next[l * 4u32 + j] = value;
                            }
                        }
                    }
                }
                if s > 0u32 {
                    let lhs_first = ((s - 1u32) % 2u32) * depth * lhs_stride;
                    let rhs_first = ((s - 1u32) % 2u32) * depth * block_cols;
                    for q in 0..depth {
                        let mut a = [0u32 as A; 8];
                        let mut b = [0u32 as A; 8];
                        let a_at = lhs_first + q * lhs_stride + UNIT_POS_Y * 4u32;
                        let b_at = rhs_first + q * block_cols + UNIT_POS_X * 4u32;
                        for i in 0..4u32 {
                            a[i] = lhs_tile[a_at + i];
                            a[4u32 + i] = lhs_tile[a_at + block_rows / 2u32 + i];
                            b[i] = rhs_tile[b_at + i];
                            b[4u32 + i] = rhs_tile[b_at + block_cols / 2u32 + i];
                        }
                        for i in 0..8u32 {
                            for j in 0..8u32 {
                                acc[i * 8u32 + j] = a[i].mul_add(b[j], acc[i * 8u32 + j]);
                            }
                        }
                    }
                }
                if s < steps {
                    let lhs_first = (s % 2u32) * depth * lhs_stride;
                    let rhs_first = (s % 2u32) * depth * block_cols;
                    for l in 0..lhs_lines {
                        let line = unit + l * units;
                        let r = line / (depth / 4u32);
                        let q = (line % (depth / 4u32)) * 4u32;
                        for j in 0..4u32 {
                            lhs_tile[lhs_first + (q + j) * lhs_stride + r] = lhs_next[l * 4u32 + j];
                        }
                    }
                    for l in 0..rhs_lines {
                        let line = unit + l * units;
                        let q = line / (block_cols / 4u32);
                        let c = (line % (block_cols / 4u32)) * 4u32;
                        for j in 0..4u32 {
                            rhs_tile[rhs_first + q * block_cols + c + j] = rhs_next[l * 4u32 + j];
                        }
                    }
                }
                sync_cube();
            }
            for i in 0..8u32 {
                let row = row0 + UNIT_POS_Y * 4u32 + (i / 4u32) * (block_rows / 2u32) + i % 4u32;
                for h in 0..2u32 {
                    let col = col0 + UNIT_POS_X * 4u32 + h * (block_cols / 2u32);
                    if row < rows {
                        if lines && col < cols {
                            let mut v = [0u32 as T; 4];
                            for j in 0..4u32 {
                                v[j] = acc[i * 8u32 + h * 4u32 + j] as T;
                            }
                            out.set_line((row * cols + col) / 4u32, v);
                        } else {
                            for j in 0..4u32 {
                                if col + j < cols {
                                    out[row * cols + col + j] = acc[i * 8u32 + h * 4u32 + j] as T;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How a matmul kernel tiles the output: which of the two kernels runs, and its tile. A
/// backend's matmul variants are a table of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulTiling {
    /// [`matmul_by_unit`] with cubes of `rows × cols` units (blocks of 4 × 8 each: the
    /// cube covers `4 rows × 8 cols` of the output).
    Unit {
        /// Units along the rows (the cube's x).
        rows: u32,
        /// Units along the columns (the cube's y).
        cols: u32,
    },
    /// [`matmul_tiled`]: tiles of `block.0` rows × `block.1` columns, `depth` deep, each
    /// unit summing `unit.0 × unit.1` outputs (at most 8 × 8), `rhs` read by lines of 4
    /// where `lines`.
    Tiled {
        /// Rows and columns of a cube's tile.
        block: (u32, u32),
        /// Steps of `k` per shared-memory load.
        depth: u32,
        /// Rows and columns each unit sums.
        unit: (u32, u32),
        /// Whether `rhs` is read by lines of 4.
        lines: bool,
    },
    /// [`matmul_double_buffered`]: tiles of `block.0` rows × `block.1` columns, `depth`
    /// deep, 8 × 8 outputs per unit.
    DoubleBuffered {
        /// Rows and columns of a cube's tile.
        block: (u32, u32),
        /// Steps of `k` per shared-memory buffer.
        depth: u32,
    },
}

impl MatmulTiling {
    /// The units of one cube.
    pub fn cube_dim(&self) -> CubeDim {
        match *self {
            MatmulTiling::Unit { rows, cols } => CubeDim::new_2d(rows.max(1), cols.max(1)),
            MatmulTiling::Tiled { block, unit, .. } => {
                CubeDim::new_2d(block.1 / unit.1.max(1), block.0 / unit.0.max(1))
            }
            MatmulTiling::DoubleBuffered { block, .. } => {
                CubeDim::new_2d((block.1 / 8).max(1), (block.0 / 8).max(1))
            }
        }
    }

    /// The output one cube covers per step, `(columns, rows)`: what sizes the grid.
    pub fn tile(&self) -> (u32, u32) {
        match *self {
            MatmulTiling::Unit { rows, cols } => (cols.max(1) * 8, rows.max(1) * 4),
            MatmulTiling::Tiled { block, .. } | MatmulTiling::DoubleBuffered { block, .. } => {
                (block.1, block.0)
            }
        }
    }

    /// Why the tiling can't be built, if it can't: a tiled kernel's unit block must divide
    /// its tile and hold at most 8 × 8 outputs, its depth must be positive, and a cube at
    /// most 1024 units; a double-buffered kernel's tile sides must be multiples of 8, its
    /// depth a multiple of 4, and each unit must move whole lines of 4 of each operand,
    /// at most 2 (`16 · depth` a multiple of each side, at most twice it).
    fn invalid(&self) -> Option<String> {
        match *self {
            MatmulTiling::Unit { .. } => None,
            MatmulTiling::DoubleBuffered { block, depth } => {
                let (rows, cols) = block;
                let lines = |side: u32| {
                    side > 0 && (16 * depth).is_multiple_of(side) && 16 * depth / side <= 2
                };
                let units = self.cube_dim().num_elems();
                let valid = rows.is_multiple_of(8)
                    && cols.is_multiple_of(8)
                    && depth > 0
                    && depth.is_multiple_of(4)
                    && lines(rows)
                    && lines(cols)
                    && units <= 1024;
                (!valid).then(|| {
                    format!(
                        "a double-buffered tile of {rows} x {cols}, {depth} deep, isn't a matmul \
                         tiling (sides multiples of 8, depth a multiple of 4, 16 x depth a \
                         multiple of each side and at most twice it)"
                    )
                })
            }
            MatmulTiling::Tiled {
                block, depth, unit, ..
            } => {
                let divides = unit.0 > 0
                    && unit.1 > 0
                    && block.0.is_multiple_of(unit.0)
                    && block.1.is_multiple_of(unit.1);
                let units = self.cube_dim().num_elems();
                (!divides || unit.0 > 8 || unit.1 > 8 || depth == 0 || units > 1024 || units == 0)
                    .then(|| {
                        format!(
                            "a tile of {} x {} with {} x {} outputs per unit, {depth} deep, isn't \
                             a matmul tiling (the unit's outputs divide the tile, at most 8 x 8, \
                             at most 1024 units)",
                            block.0, block.1, unit.0, unit.1
                        )
                    })
            }
        }
    }
}

/// The kernel of `tiling` multiplying matrices of `elem`, named `name` (as profiles and
/// errors name it), and its cube dim. Halves accumulate in `f32`.
///
/// # Errors
/// [`LaunchError`] for booleans, which have no arithmetic, and for an invalid tiling.
pub fn matmul_definition(
    elem: ElemType,
    tiling: MatmulTiling,
    name: &str,
) -> Result<(KernelDefinition, CubeDim), LaunchError> {
    fn define<T: Numeric, A: Numeric>(tiling: MatmulTiling) -> KernelDefinition {
        match tiling {
            MatmulTiling::Unit { .. } => matmul_by_unit::definition::<T, A>(),
            MatmulTiling::Tiled {
                block,
                depth,
                unit,
                lines,
            } => matmul_tiled::definition::<T, A>(block.0, block.1, depth, unit.0, unit.1, lines),
            MatmulTiling::DoubleBuffered { block, depth } => {
                matmul_double_buffered::definition::<T, A>(block.0, block.1, depth)
            }
        }
    }
    if let Some(reason) = tiling.invalid() {
        return Err(LaunchError::unknown(format!("`{name}`: {reason}")));
    }
    if let Some(error) = super::no_arithmetic(super::StandardKernel::Matmul(elem), elem) {
        return Err(error);
    }
    let definition = match elem {
        ElemType::F16 => define::<f16, f32>(tiling),
        ElemType::BF16 => define::<bf16, f32>(tiling),
        other => crate::with_elem!(other, u8, u8, T => define::<T, T>(tiling)),
    };
    Ok((definition.renamed(name, name), tiling.cube_dim()))
}
