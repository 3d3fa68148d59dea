//! A matmul on Hopper's warpgroup tensor cores, written in the kernel language on
//! `plane_group_mma`: row-major `lhs` (`m × k`) times row-major `rhs` (`k × n`) into
//! row-major `out` (`m × n`), `bf16` or `f16` in and out, summed in `f32`.
//!
//! How it works (the tiling is a [`GroupMmaTiling`], chosen at compile time):
//!
//! - Each cube computes a `64 · groups × tile_n` tile of `out` with `groups` plane groups
//!   (128 units each) stacked along the rows; each group owns 64 rows × `tile_n` columns,
//!   as one `plane_group_mma` accumulator (`tile_n / 2` `f32` per unit, in registers).
//! - The operands go through shared memory 64 columns of `lhs` and 64 rows of `rhs` at a
//!   time, in `stages` buffers, copied asynchronously (`copy_line_async`, `cp.async` on
//!   CUDA). Each 16-byte line lands at its swizzled place ([`crate::lang::ir::group_mma`]):
//!   `lhs`'s tile as 64-element rows, `rhs`'s as panels of 64 columns, 4096 elements
//!   apart.
//! - Per step each group multiplies its 64 rows by the step's `rhs` tile: one
//!   `plane_group_mma_async` of K = 64 (four `wgmma` on CUDA), which reads both operands
//!   from shared memory directly (no fragment loads, no registers for operands), then waits
//!   for the step before's (`plane_group_mma_wait(1)`): the tensor cores always have the
//!   next multiply queued while the units pass the barrier and start copies.
//! - So at any time one buffer is being multiplied, one may still be read by the multiply
//!   in flight, and the copies run `stages - 2` steps ahead: trip `it` waits for step
//!   `it - (stages - 2)`'s copies, passes a barrier (after which every group is done with
//!   step `it - stages`, whose buffer the trip's copies reuse), starts step `it`'s copies
//!   and multiplies step `it - (stages - 2)`.
//! - Cubes walk the tiles of `out` in groups of [`GROUP_M`] tile rows, as in
//!   [`super::matmul_mma`], so that cubes running together share operands in the L2 cache.
//!
//! Every shape works: tiles past the edges load zeros and store nothing; where `k` or `n`
//! isn't a multiple of 8 the copies go element by element. On integer inputs whose sums
//! are exact the result is the exact product on every backend (the CPU emulates
//! `plane_group_mma` exactly).

use super::matmul_mma::GROUP_M;
use crate::client::ComputeClient;
use crate::elem::ElemType;
use crate::error::{IoError, LaunchError};
use crate::handle::Handle;
use crate::kernel::CubeDim;
use crate::lang::prelude::*;
use crate::runtime::Runtime;

/// Elements of one 64 × 64 block of an operand tile (a panel of `rhs`'s tile).
const BLOCK: u32 = 4096;

/// Columns of `lhs` (rows of `rhs`) per pipeline step: one swizzled row of 16-bit elements.
const DEPTH: u32 = 64;

/// How [`matmul_plane_group_mma`] tiles the product: its compile-time values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupMmaTiling {
    /// Plane groups per cube, stacked along the rows: the tile has `64 · groups` rows.
    pub groups: u32,
    /// Columns of `out` per cube: 64, 128, 192 or 256.
    pub tile_n: u32,
    /// Shared-memory buffers of the pipeline (at least 3: see the module docs).
    pub stages: u32,
}

impl GroupMmaTiling {
    /// Rows of `out` per cube.
    pub const fn tile_m(&self) -> u32 {
        64 * self.groups
    }

    /// Units per cube: 128 per plane group.
    pub const fn units(&self) -> u32 {
        128 * self.groups
    }

    /// The cube grid for an `m × n` product: one cube per tile of `out`.
    pub fn cube_count(&self, m: u32, n: u32) -> crate::CubeCount {
        crate::CubeCount::Static(n.div_ceil(self.tile_n), m.div_ceil(self.tile_m()), 1)
    }

    /// Shared memory a cube uses, in bytes (2-byte elements).
    pub const fn shared_bytes(&self) -> u32 {
        2 * self.stages * DEPTH * (self.tile_m() + self.tile_n)
    }

    /// Whether the kernel supports this tiling: one to four groups, 64 to 256 columns in
    /// whole panels, at least three stages.
    pub const fn is_valid(&self) -> bool {
        self.groups >= 1
            && self.groups <= 4
            && self.tile_n >= 64
            && self.tile_n <= 256
            && self.tile_n.is_multiple_of(64)
            && self.stages >= 3
    }

    /// A short name: `w128x256s3` (`w` for the warpgroup tensor cores, the tile, the
    /// stages).
    pub fn name(&self) -> String {
        format!("w{}x{}s{}", self.tile_m(), self.tile_n, self.stages)
    }
}

/// The tilings a Hopper GPU tries, the default first: 128 × 128 tiles of two plane groups
/// in three stages (two cubes fit a multiprocessor), then the larger tiles that read fewer
/// operand bytes per product from L2 (the 128 × 128 tiling's limit: see
/// `docs/benchmarks.md`): 256 × 128 of four groups and 192 × 256 of three (the most
/// accumulators 384 units can hold) in three or four stages, 128 × 256 of two; 64 × 128 of
/// one group for products with few tiles, and 64 × 64 in three stages last (48 KiB: the
/// one that fits the CPU).
pub const GROUP_MMA_TILINGS: [GroupMmaTiling; 8] = [
    group_tiling(2, 128, 3),
    group_tiling(4, 128, 4),
    group_tiling(3, 256, 4),
    group_tiling(3, 256, 3),
    group_tiling(4, 128, 3),
    group_tiling(2, 256, 4),
    group_tiling(1, 128, 4),
    group_tiling(1, 64, 3),
];

/// A [`GroupMmaTiling`] from its fields in order.
const fn group_tiling(groups: u32, tile_n: u32, stages: u32) -> GroupMmaTiling {
    GroupMmaTiling {
        groups,
        tile_n,
        stages,
    }
}

/// `out = lhs × rhs` on the plane groups' tensor cores with `tiling`, for row-major `lhs`
/// (`m × k`), `rhs` (`k × n`) and `out` (`m × n`) of `bf16` or `f16`, summed in `f32`. The
/// arguments are checked, then the kernel is launched without bounds checks (its copies
/// and stores are guarded by the matrices' edges, its shared indices by the tiling).
///
/// # Errors
/// - [`IoError::InvalidArgument`] (as a [`LaunchError`]): `elem` isn't `bf16` or `f16`,
///   the tiling isn't [`GroupMmaTiling::is_valid`], a buffer holds fewer elements than its
///   matrix, or a matrix has more than `u32::MAX` elements;
/// - [`LaunchError::Unsupported`] where the device lacks the operation
///   (`Features::plane_group_mma`);
/// - the launch's errors ([`LaunchError::TooManyResources`] for a tiling past the device's
///   shared memory).
#[allow(clippy::too_many_arguments)]
pub fn matmul_group_tensor_cores<R: Runtime>(
    client: &ComputeClient<R>,
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    (m, k, n): (usize, usize, usize),
    elem: ElemType,
    tiling: &GroupMmaTiling,
) -> Result<(), LaunchError> {
    if !matches!(elem, ElemType::BF16 | ElemType::F16) {
        return Err(IoError::invalid(format!(
            "matmul_group_tensor_cores multiplies bf16 or f16, not {elem}"
        ))
        .into());
    }
    if !tiling.is_valid() {
        return Err(IoError::invalid(format!(
            "matmul_group_tensor_cores: {} isn't a valid tiling",
            tiling.name()
        ))
        .into());
    }
    super::matmul_mma::check_operands(
        "matmul_group_tensor_cores",
        (lhs, rhs, out),
        (m, k, n),
        elem,
    )?;
    if !client.features().plane_group_mma {
        return Err(LaunchError::unsupported(format!(
            "matmul_group_tensor_cores: the {} device lacks the plane group's tensor-core \
             operation (Features::plane_group_mma)",
            R::name()
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (m, k, n) = (m as u32, k as u32, n as u32);
    let count = tiling.cube_count(m, n);
    let dim = CubeDim::new_1d(tiling.units());
    let t = tiling;
    // SAFETY: the buffers hold their matrices and every matrix fits u32 indices (checked
    // above), so the kernel's guarded copies and stores stay inside them; a valid tiling
    // keeps every shared index and operand placement inside its array; the loops are
    // bounded.
    unsafe {
        if elem == ElemType::BF16 {
            matmul_plane_group_mma::launch_unchecked::<bf16, R>(
                client, count, dim, lhs, rhs, out, m, k, n, t.groups, t.tile_n, t.stages,
            )
        } else {
            matmul_plane_group_mma::launch_unchecked::<f16, R>(
                client, count, dim, lhs, rhs, out, m, k, n, t.groups, t.tile_n, t.stages,
            )
        }
    }
}

/// `out = lhs × rhs` (see the module docs); launch with cubes of
/// [`GroupMmaTiling::units`] units and the grid of [`GroupMmaTiling::cube_count`], passing
/// the tiling's fields as the compile-time values. The tiling must be
/// [`GroupMmaTiling::is_valid`].
#[cubert_macros::kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_plane_group_mma<T: MmaInput + Float>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
    m: u32,
    k: u32,
    n: u32,
    #[comptime] groups: u32,
    #[comptime] tile_n: u32,
    #[comptime] stages: u32,
) {
    let tile_m = 64u32 * groups;
    let units = 128u32 * groups;
    let mut a_tiles = SharedMemory::<T>::new(stages * 64 * groups * DEPTH);
    let mut b_tiles = SharedMemory::<T>::new(stages * DEPTH * tile_n);
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
    let group = UNIT_POS / 128u32;
    let lines = k % 8u32 == 0u32 && n % 8u32 == 0u32;
    let steps = (k + DEPTH - 1u32) / DEPTH;
    let mut acc = [0.0f32; 128];
    // Trip `it` starts the copies of step `it` and multiplies step `it - ahead`.
    let ahead = stages - 2u32;
    for it in 0u32..steps + ahead {
        // Step `it - ahead`'s copies have landed (the `ahead - 1` groups after it may
        // still be in flight); after the barrier everyone's have, and every group is done
        // with step `it - stages` (each waited for it in the trip before), whose buffer
        // this trip's copies reuse.
        wait_async_copies(stages - 3u32);
        sync_cube();
        if it < steps {
            let a_first = (it % stages) * tile_m * DEPTH;
            let b_first = (it % stages) * DEPTH * tile_n;
            let k0 = it * DEPTH;
            // `lhs`'s tile: `tile_m` rows of 8 lines, row `r` at `a_first + 64 r` (the bound
            // is written out in compile-time values, so that it is a constant and the loop
            // unrolls: `tile_m * DEPTH / 8 / units`).
            for i in 0..64u32 * groups * DEPTH / 8u32 / (128u32 * groups) {
                let line = UNIT_POS + i * units;
                let r = line / 8u32;
                let c = (line % 8u32) * 8u32;
                let row = row0 + r;
                let at = (a_first + r * DEPTH + c) / 8u32;
                let dst = at ^ ((at / 8u32) % 8u32);
                if lines {
                    let valid = row < m && k0 + c < k;
                    copy_line_async::<8>(&mut a_tiles, dst, lhs, (row * k + k0 + c) / 8u32, valid);
                } else {
                    for j in 0..8u32 {
                        let valid = row < m && k0 + c + j < k;
                        copy_line_async::<1>(
                            &mut a_tiles,
                            dst * 8u32 + j,
                            lhs,
                            row * k + k0 + c + j,
                            valid,
                        );
                    }
                }
            }
            // `rhs`'s tile: 64 rows of `tile_n / 8` lines, in panels of 64 columns; the
            // lines may not divide evenly among the units (three groups).
            for i in 0..(DEPTH * tile_n / 8u32 + 128u32 * groups - 1u32) / (128u32 * groups) {
                let line = UNIT_POS + i * units;
                if line >= DEPTH * tile_n / 8u32 {
                    break;
                }
                let q = line / (tile_n / 8u32);
                let d = (line % (tile_n / 8u32)) * 8u32;
                let col = col0 + d;
                let at = (b_first + (d / 64u32) * BLOCK + q * 64u32 + d % 64u32) / 8u32;
                let dst = at ^ ((at / 8u32) % 8u32);
                if lines {
                    let valid = k0 + q < k && col < n;
                    copy_line_async::<8>(
                        &mut b_tiles,
                        dst,
                        rhs,
                        ((k0 + q) * n + col) / 8u32,
                        valid,
                    );
                } else {
                    for j in 0..8u32 {
                        let valid = k0 + q < k && col + j < n;
                        copy_line_async::<1>(
                            &mut b_tiles,
                            dst * 8u32 + j,
                            rhs,
                            (k0 + q) * n + col + j,
                            valid,
                        );
                    }
                }
            }
        }
        commit_async_copies();
        if it >= ahead {
            let step = it - ahead;
            let a_start = (step % stages) * tile_m * DEPTH + group * BLOCK;
            let b_start = (step % stages) * DEPTH * tile_n;
            plane_group_mma_async(
                &mut acc, &a_tiles, a_start, &b_tiles, b_start, BLOCK, tile_n, 64,
            );
            // The step before's multiply is done: its buffer is free after the next barrier.
            plane_group_mma_wait(1);
        }
    }
    plane_group_mma_wait(0);
    // The group's accumulator layout (`GroupMmaShape::acc`).
    let unit = UNIT_POS % 128u32;
    let g = (unit % 32u32) / 4u32;
    let t = unit % 4u32;
    let row_first = row0 + group * 64u32 + (unit / 32u32) * 16u32 + g;
    for i in 0..tile_n / 2u32 {
        let row = row_first + 8u32 * ((i % 4u32) / 2u32);
        let col = col0 + 8u32 * (i / 4u32) + 2u32 * t + i % 2u32;
        if row < m && col < n {
            out[row * n + col] = acc[i] as T;
        }
    }
}
