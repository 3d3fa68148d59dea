//! The `f32` matmul on tensor cores as TF32, written in the kernel language: row-major
//! `lhs` (`m × k`) times row-major `rhs` (`k × n`) into row-major `out` (`m × n`), all
//! `f32`, each input rounded to TF32 (10 mantissa bits, to nearest, ties away) by
//! `plane_mma` and the products summed in `f32` (what cuBLAS's
//! `CUBLAS_COMPUTE_32F_FAST_TF32` does, with cuBLAS's own rounding of the inputs).
//!
//! The kernel is [`super::matmul_mma`]'s, with the shape of TF32's `plane_mma` (16 × 8 by
//! 8 × 8): the same [`MmaTiling`]s, cube order, pipeline of asynchronous copies and
//! register tiles, with these differences:
//!
//! - a copy moves a line of 4 elements (16 bytes); where `k` or `n` isn't a multiple of 4
//!   the copies go element by element;
//! - a pipeline step of `depth` columns is `depth / 8` `plane_mma` steps;
//! - rows of the `lhs` tile are padded by 4 elements (16 bytes: the eight rows one
//!   `ldmatrix` phase reads fall in distinct banks), rows of the `rhs` tile by 8 (the `B`
//!   fragments of 32-bit elements load element by element, `ldmatrix` can't transpose
//!   them, and a stride of 8 modulo 32 words puts a plane's 32 reads in 32 banks).
//!
//! It is not [`crate::ops::matmul`]'s `f32` path: TF32 keeps 11 of the inputs' 24
//! significant bits, so a caller asks for it by name ([`super::matmul_mma::matmul_tensor_cores`]
//! with `ElemType::F32`).

use super::matmul_mma::{GROUP_M, MmaTiling};
use crate::lang::prelude::*;

/// Elements of padding at the end of each row of the `lhs` tile in shared memory.
pub const PAD_A: u32 = 4;

/// Elements of padding at the end of each row of the `rhs` tile in shared memory.
pub const PAD_B: u32 = 8;

/// Shared memory a cube of `tiling` uses, in bytes.
pub const fn shared_bytes(tiling: &MmaTiling) -> u32 {
    let t = tiling;
    4 * t.stages * (t.tile_m * (t.depth + PAD_A) + t.depth * (t.tile_n + PAD_B))
}

/// `out = lhs × rhs` in TF32 (see the module docs); launched as
/// [`super::matmul_mma::matmul_plane_mma`] is, with the tiling's fields as the compile-time
/// values. The tiling must be [`MmaTiling::is_valid`].
#[cubert_macros::kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_plane_mma_tf32(
    lhs: &Array<f32>,
    rhs: &Array<f32>,
    out: &mut Array<f32>,
    m: u32,
    k: u32,
    n: u32,
    #[comptime] tile_m: u32,
    #[comptime] tile_n: u32,
    #[comptime] planes_m: u32,
    #[comptime] planes_n: u32,
    #[comptime] depth: u32,
    #[comptime] stages: u32,
) {
    let a_stride = depth + PAD_A;
    let b_stride = tile_n + PAD_B;
    let mut a_tiles = SharedMemory::<f32>::new(stages * tile_m * (depth + PAD_A));
    let mut b_tiles = SharedMemory::<f32>::new(stages * depth * (tile_n + PAD_B));
    // The cube's tile of `out`, in groups of GROUP_M tile rows.
    let grid_m = CUBE_COUNT_Y;
    let grid_n = CUBE_COUNT_X;
    let id = CUBE_POS_Y * grid_n + CUBE_POS_X;
    let per_group = GROUP_M * grid_n;
    let first_m = (id / per_group) * GROUP_M;
    let group_m = (grid_m - first_m).min(GROUP_M);
    let in_group = id % per_group;
    let row0 = (first_m + in_group % group_m) * tile_m;
    let col0 = (in_group / group_m) * tile_n;
    // The plane's part of the tile.
    let plane = UNIT_POS / 32u32;
    let plane_row = (plane / planes_n) * (tile_m / planes_m);
    let plane_col = (plane % planes_n) * (tile_n / planes_n);
    let g = UNIT_POS_PLANE / 4u32;
    let t = UNIT_POS_PLANE % 4u32;
    // Lines of 4 of the matrices are lines of 4 of the buffers.
    let lines = k % 4u32 == 0u32 && n % 4u32 == 0u32;
    let steps = (k + depth - 1u32) / depth;
    let mut acc = [0.0f32; 128];
    // Trip `it` starts the copies of step `it` and multiplies step `it - (stages - 1)`.
    for it in 0u32..steps + stages - 1u32 {
        wait_async_copies(stages - 2u32);
        sync_cube();
        if it < steps {
            let a_first = (it % stages) * tile_m * (depth + PAD_A);
            let b_first = (it % stages) * depth * (tile_n + PAD_B);
            let k0 = it * depth;
            for i in 0..tile_m * depth / 4u32 / (32u32 * planes_m * planes_n) {
                let line = UNIT_POS + i * 32u32 * planes_m * planes_n;
                let r = line / (depth / 4u32);
                let c = (line % (depth / 4u32)) * 4u32;
                let row = row0 + r;
                let dst = (a_first + r * a_stride + c) / 4u32;
                if lines {
                    let valid = row < m && k0 + c < k;
                    copy_line_async::<4>(&mut a_tiles, dst, lhs, (row * k + k0 + c) / 4u32, valid);
                } else {
                    for j in 0..4u32 {
                        let valid = row < m && k0 + c + j < k;
                        copy_line_async::<1>(
                            &mut a_tiles,
                            dst * 4u32 + j,
                            lhs,
                            row * k + k0 + c + j,
                            valid,
                        );
                    }
                }
            }
            for i in 0..tile_n * depth / 4u32 / (32u32 * planes_m * planes_n) {
                let line = UNIT_POS + i * 32u32 * planes_m * planes_n;
                let q = line / (tile_n / 4u32);
                let d = (line % (tile_n / 4u32)) * 4u32;
                let col = col0 + d;
                let dst = (b_first + q * b_stride + d) / 4u32;
                if lines {
                    let valid = k0 + q < k && col < n;
                    copy_line_async::<4>(
                        &mut b_tiles,
                        dst,
                        rhs,
                        ((k0 + q) * n + col) / 4u32,
                        valid,
                    );
                } else {
                    for j in 0..4u32 {
                        let valid = k0 + q < k && col + j < n;
                        copy_line_async::<1>(
                            &mut b_tiles,
                            dst * 4u32 + j,
                            rhs,
                            (k0 + q) * n + col + j,
                            valid,
                        );
                    }
                }
            }
        }
        commit_async_copies();
        if it + 1u32 < stages {
            continue;
        }
        let step = it + 1u32 - stages;
        // Per 8 of `k`: the plane's B fragments, then per 16 rows its A fragment times
        // each of them.
        let a_first = (step % stages) * tile_m * (depth + PAD_A);
        let b_first = (step % stages) * depth * (tile_n + PAD_B);
        for ks in 0..depth / 8u32 {
            let mut b_all = [0.0f32; 16];
            for ni in 0..tile_n / planes_n / 8u32 {
                let start = b_first + ks * 8u32 * b_stride + plane_col + ni * 8u32;
                let b = plane_load_b(&b_tiles, start, b_stride);
                for j in 0..2u32 {
                    b_all[ni * 2u32 + j] = b[j];
                }
            }
            for mi in 0..tile_m / planes_m / 16u32 {
                let start = a_first + (plane_row + mi * 16u32) * a_stride + ks * 8u32;
                let a = plane_load_a(&a_tiles, start, a_stride);
                for ni in 0..tile_n / planes_n / 8u32 {
                    let mut b = [0.0f32; 2];
                    for j in 0..2u32 {
                        b[j] = b_all[ni * 2u32 + j];
                    }
                    let base = (mi * (tile_n / planes_n / 8u32) + ni) * 4u32;
                    let mut c = [0.0f32; 4];
                    for j in 0..4u32 {
                        c[j] = acc[base + j];
                    }
                    plane_mma(&mut c, a, b);
                    for j in 0..4u32 {
                        acc[base + j] = c[j];
                    }
                }
            }
        }
    }
    for mi in 0..tile_m / planes_m / 16u32 {
        for ni in 0..tile_n / planes_n / 8u32 {
            let base = (mi * (tile_n / planes_n / 8u32) + ni) * 4u32;
            for j in 0..4u32 {
                let row = row0 + plane_row + mi * 16u32 + g + (j / 2u32) * 8u32;
                let col = col0 + plane_col + ni * 8u32 + 2u32 * t + j % 2u32;
                if row < m && col < n {
                    out[row * n + col] = acc[base + j];
                }
            }
        }
    }
}
