//! A matmul on tensor cores, written in the kernel language on `plane_mma`: row-major
//! `lhs` (`m × k`) times row-major `rhs` (`k × n`) into row-major `out` (`m × n`), `bf16`
//! or `f16` in and out, summed in `f32` (what cuBLAS's `cublasGemmEx` with f32 compute
//! does).
//!
//! Each cube of 128 units (four planes) computes a 64 × 64 tile of `out`: per step of 32
//! along `k`, the cube copies a 64 × 32 tile of `lhs` and a 32 × 64 tile of `rhs` into
//! shared memory (rows padded by 8 elements so that the planes' fragment reads hit
//! distinct banks; lines of 8 elements where `k` and `n` allow, zeros past the matrices'
//! ends), then each plane multiplies its 32 × 32 quarter: two 16-row by four 8-column
//! `plane_mma` tiles per 16 of `k`, its accumulators in registers. Every shape works: tiles
//! past the edges load zeros and store nothing.
//!
//! It is the first step of issue 16: no asynchronous copies yet (each step loads, waits,
//! multiplies), no tuning of the tile. `cubert bench --only mma` measures it next to cuBLAS.

use crate::lang::prelude::*;

/// Rows and columns of a cube's tile of `out`.
pub const TILE: u32 = 64;

/// Units per cube (four planes, 2 × 2 over the tile).
pub const UNITS: u32 = 128;

/// `out = lhs × rhs` (see the module docs); launch with cubes of [`UNITS`] units, a grid
/// of `⌈n / 64⌉ × ⌈m / 64⌉` cubes.
#[cubert_macros::kernel(crate = crate)]
pub fn matmul_plane_mma<T: MmaInput>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    m: u32,
    k: u32,
    n: u32,
) {
    // Rows padded by 8 elements (see the module docs).
    let mut a_tile = SharedMemory::<T>::new(64 * 40);
    let mut b_tile = SharedMemory::<T>::new(32 * 72);
    let row0 = CUBE_POS_Y * 64u32;
    let col0 = CUBE_POS_X * 64u32;
    let plane = UNIT_POS / 32u32;
    let plane_row = (plane / 2u32) * 32u32;
    let plane_col = (plane % 2u32) * 32u32;
    let g = UNIT_POS_PLANE / 4u32;
    let t = UNIT_POS_PLANE % 4u32;
    let lines = k % 8u32 == 0u32 && n % 8u32 == 0u32;
    let mut acc = [0.0f32; 32];
    for k0 in (0u32..k).step_by(32u32) {
        // 256 lines of 8 elements of each operand, two per unit.
        for half in 0..2u32 {
            let line = UNIT_POS + half * 128u32;
            // lhs: row `line / 4`, columns `(line % 4) * 8 ..` of the 64 × 32 tile.
            let r = line / 4u32;
            let c = (line % 4u32) * 8u32;
            if lines && row0 + r < m && k0 + c < k {
                let values = lhs.line::<8>(((row0 + r) * k + k0 + c) / 8u32);
                for j in 0..8u32 {
                    a_tile[r * 40u32 + c + j] = values[j];
                }
            } else {
                for j in 0..8u32 {
                    let mut value = T::new(0.0);
                    if row0 + r < m && k0 + c + j < k {
                        value = lhs[(row0 + r) * k + k0 + c + j];
                    }
                    a_tile[r * 40u32 + c + j] = value;
                }
            }
            // rhs: row `line / 8`, columns `(line % 8) * 8 ..` of the 32 × 64 tile.
            let q = line / 8u32;
            let d = (line % 8u32) * 8u32;
            if lines && k0 + q < k && col0 + d < n {
                let values = rhs.line::<8>(((k0 + q) * n + col0 + d) / 8u32);
                for j in 0..8u32 {
                    b_tile[q * 72u32 + d + j] = values[j];
                }
            } else {
                for j in 0..8u32 {
                    let mut value = T::new(0.0);
                    if k0 + q < k && col0 + d + j < n {
                        value = rhs[(k0 + q) * n + col0 + d + j];
                    }
                    b_tile[q * 72u32 + d + j] = value;
                }
            }
        }
        sync_cube();
        for ks in 0..2u32 {
            let kk = ks * 16u32 + 2u32 * t;
            for mi in 0..2u32 {
                let r = plane_row + mi * 16u32 + g;
                let mut a = [T::new(0.0); 8];
                a[0] = a_tile[r * 40u32 + kk];
                a[1] = a_tile[r * 40u32 + kk + 1u32];
                a[2] = a_tile[(r + 8u32) * 40u32 + kk];
                a[3] = a_tile[(r + 8u32) * 40u32 + kk + 1u32];
                a[4] = a_tile[r * 40u32 + kk + 8u32];
                a[5] = a_tile[r * 40u32 + kk + 9u32];
                a[6] = a_tile[(r + 8u32) * 40u32 + kk + 8u32];
                a[7] = a_tile[(r + 8u32) * 40u32 + kk + 9u32];
                for ni in 0..4u32 {
                    let c = plane_col + ni * 8u32 + g;
                    let mut b = [T::new(0.0); 4];
                    b[0] = b_tile[kk * 72u32 + c];
                    b[1] = b_tile[(kk + 1u32) * 72u32 + c];
                    b[2] = b_tile[(kk + 8u32) * 72u32 + c];
                    b[3] = b_tile[(kk + 9u32) * 72u32 + c];
                    let base = (mi * 4u32 + ni) * 4u32;
                    let mut c_frag = [0.0f32; 4];
                    for i in 0..4u32 {
                        c_frag[i] = acc[base + i];
                    }
                    plane_mma(&mut c_frag, a, b);
                    for i in 0..4u32 {
                        acc[base + i] = c_frag[i];
                    }
                }
            }
        }
        sync_cube();
    }
    for mi in 0..2u32 {
        for ni in 0..4u32 {
            let base = (mi * 4u32 + ni) * 4u32;
            for i in 0..4u32 {
                let row = row0 + plane_row + mi * 16u32 + g + (i / 2u32) * 8u32;
                let col = col0 + plane_col + ni * 8u32 + 2u32 * t + i % 2u32;
                if row < m && col < n {
                    out[row * n + col] = acc[base + i] as T;
                }
            }
        }
    }
}
