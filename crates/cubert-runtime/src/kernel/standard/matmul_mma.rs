//! A matmul on tensor cores, written in the kernel language on `plane_mma`: row-major
//! `lhs` (`m × k`) times row-major `rhs` (`k × n`) into row-major `out` (`m × n`), `bf16`
//! or `f16` in and out, summed in `f32` (what cuBLAS's `cublasGemmEx` with f32 compute
//! does).
//!
//! How it works (the tiling is a [`MmaTiling`], chosen at compile time):
//!
//! - Each cube computes a `tile_m × tile_n` tile of `out` with `planes_m × planes_n`
//!   planes; each plane owns a `tile_m / planes_m × tile_n / planes_n` part of it, as
//!   16 × 8 `plane_mma` tiles whose `f32` accumulators stay in registers.
//! - The operands go through shared memory `depth` columns of `lhs` and rows of `rhs`
//!   at a time, in `stages` buffers: while the cube multiplies one step, the asynchronous
//!   copies (`copy_line_async`, `cp.async` on CUDA) of the next `stages - 1` steps are in
//!   flight. Each unit copies lines of 8 elements (16 bytes); a line past the matrices'
//!   edges is filled with zeros. Where `k` or `n` isn't a multiple of 8 a line of the
//!   matrix isn't a line of the buffer, and the copies go element by element.
//! - Rows in shared memory are padded by 8 elements, so that the eight 16-byte rows that
//!   one `ldmatrix` phase reads fall in distinct banks; the planes read their fragments
//!   with `plane_load_a` / `plane_load_b` (`ldmatrix` on CUDA).
//! - Cubes go through the tiles of `out` in groups of [`GROUP_M`] tile rows (the grid's
//!   linear order walks down a group's rows before moving right), so that the cubes
//!   running together share operand tiles in the L2 cache.
//!
//! `f32` goes through the same tilings as TF32 in [`super::matmul_tf32`].
//!
//! Every shape works: tiles past the edges load zeros and store nothing. Sums are in `f32`
//! in the tensor cores' order; on integer inputs whose sums are exact the result is the
//! exact product on every backend (the CPU emulates `plane_mma` exactly).

use crate::client::ComputeClient;
use crate::elem::ElemType;
use crate::error::{IoError, LaunchError};
use crate::handle::Handle;
use crate::kernel::CubeDim;
use crate::lang::prelude::*;
use crate::runtime::Runtime;

/// Tile rows per group of the cubes' order (see the module docs).
pub const GROUP_M: u32 = 8;

/// Elements of padding at the end of each row of an operand tile in shared memory.
pub const PAD: u32 = 8;

/// The most `f32` accumulators a unit can hold: a plane's part of the tile is at most
/// 64 × 64 (4 × 8 `plane_mma` tiles of 4 per unit).
const MAX_ACCUMULATORS: u32 = 128;

/// How [`matmul_plane_mma`] tiles the product: its compile-time values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaTiling {
    /// Rows of `out` per cube.
    pub tile_m: u32,
    /// Columns of `out` per cube.
    pub tile_n: u32,
    /// Planes along the rows.
    pub planes_m: u32,
    /// Planes along the columns.
    pub planes_n: u32,
    /// Columns of `lhs` (rows of `rhs`) per pipeline step: 32 or 64.
    pub depth: u32,
    /// Shared-memory buffers of the pipeline (at least 2).
    pub stages: u32,
}

impl MmaTiling {
    /// Units per cube: 32 per plane.
    pub const fn units(&self) -> u32 {
        32 * self.planes_m * self.planes_n
    }

    /// The cube grid for an `m × n` product: one cube per tile of `out`.
    pub fn cube_count(&self, m: u32, n: u32) -> crate::CubeCount {
        crate::CubeCount::Static(n.div_ceil(self.tile_n), m.div_ceil(self.tile_m), 1)
    }

    /// Shared memory a cube uses, in bytes, for `elem`: 2-byte elements with this
    /// module's padding, `f32` with the TF32 kernel's ([`super::matmul_tf32`]).
    pub fn shared_bytes(&self, elem: ElemType) -> u32 {
        if elem == ElemType::F32 {
            return super::matmul_tf32::shared_bytes(self);
        }
        2 * self.stages * (self.tile_m * (self.depth + PAD) + self.depth * (self.tile_n + PAD))
    }

    /// Whether the kernel supports this tiling: each plane's part is whole 16 × 8 tiles
    /// and at most 64 × 64, the copies divide evenly among the units, and there are at
    /// least two stages.
    pub const fn is_valid(&self) -> bool {
        if self.planes_m == 0 || self.planes_n == 0 || self.stages < 2 {
            return false;
        }
        if self.depth != 32 && self.depth != 64 {
            return false;
        }
        let plane_m = self.tile_m / self.planes_m;
        let plane_n = self.tile_n / self.planes_n;
        self.tile_m.is_multiple_of(self.planes_m)
            && self.tile_n.is_multiple_of(self.planes_n)
            && plane_m.is_multiple_of(16)
            && plane_n.is_multiple_of(8)
            && plane_m > 0
            && plane_n > 0
            && (plane_m / 16) * (plane_n / 8) * 4 <= MAX_ACCUMULATORS
            && plane_n / 8 <= 8
            && (self.tile_m * self.depth / 8).is_multiple_of(self.units())
            && (self.tile_n * self.depth / 8).is_multiple_of(self.units())
    }

    /// A short name: `t128x128p2x4d32s3`.
    pub fn name(&self) -> String {
        format!(
            "t{}x{}p{}x{}d{}s{}",
            self.tile_m, self.tile_n, self.planes_m, self.planes_n, self.depth, self.stages
        )
    }
}

/// The tilings a GPU tries, the default first: 128 × 128 tiles of eight planes (64 × 32
/// each) with 32 or 64 columns per step and three or four stages, 128 × 256 and 256 × 128
/// of eight planes (64 × 64 each), 64 × 128 and 64 × 64 for products with few tiles, and
/// 64 × 64 in two stages last: the one that fits small shared memories (37 KiB in `f32`,
/// within the CPU's 48 KiB).
pub const MMA_TILINGS: [MmaTiling; 9] = [
    tiling(128, 128, 2, 4, 32, 4),
    tiling(128, 128, 2, 4, 32, 3),
    tiling(128, 128, 2, 4, 64, 3),
    tiling(128, 256, 2, 4, 32, 3),
    tiling(256, 128, 4, 2, 32, 3),
    tiling(128, 256, 2, 4, 64, 3),
    tiling(64, 128, 2, 2, 32, 4),
    tiling(64, 64, 2, 2, 32, 4),
    tiling(64, 64, 2, 2, 32, 2),
];

/// A [`MmaTiling`] from its fields in order.
const fn tiling(
    tile_m: u32,
    tile_n: u32,
    planes_m: u32,
    planes_n: u32,
    depth: u32,
    stages: u32,
) -> MmaTiling {
    MmaTiling {
        tile_m,
        tile_n,
        planes_m,
        planes_n,
        depth,
        stages,
    }
}

/// `out = lhs × rhs` on tensor cores with `tiling`, for row-major `lhs` (`m × k`), `rhs`
/// (`k × n`) and `out` (`m × n`) of `elem`, summed in `f32`: `bf16` or `f16`
/// ([`matmul_plane_mma`]), or `f32` multiplied as TF32
/// ([`super::matmul_tf32::matmul_plane_mma_tf32`]). The arguments are checked, then the
/// kernel is launched without bounds checks (its accesses are in bounds for every checked
/// shape: copies and stores are guarded by the matrices' edges, shared indices by the
/// tiling).
///
/// # Errors
/// - [`IoError::InvalidArgument`] (as a [`LaunchError`]): `elem` isn't `bf16`, `f16` or
///   `f32`,
///   the tiling isn't [`MmaTiling::is_valid`], a buffer holds fewer elements than its
///   matrix, or a matrix has more than `u32::MAX` elements;
/// - [`LaunchError::Unsupported`] where the device has no tensor cores
///   (`Features::plane_mma`);
/// - the launch's errors ([`LaunchError::TooManyResources`] for a tiling past the device's
///   shared memory).
#[allow(clippy::too_many_arguments)]
pub fn matmul_tensor_cores<R: Runtime>(
    client: &ComputeClient<R>,
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    (m, k, n): (usize, usize, usize),
    elem: ElemType,
    tiling: &MmaTiling,
) -> Result<(), LaunchError> {
    if !matches!(elem, ElemType::BF16 | ElemType::F16 | ElemType::F32) {
        return Err(IoError::invalid(format!(
            "matmul_tensor_cores multiplies bf16, f16 or f32 (as TF32), not {elem}"
        ))
        .into());
    }
    if !tiling.is_valid() {
        return Err(IoError::invalid(format!(
            "matmul_tensor_cores: {} isn't a valid tiling",
            tiling.name()
        ))
        .into());
    }
    check_operands("matmul_tensor_cores", (lhs, rhs, out), (m, k, n), elem)?;
    if !client.features().plane_mma {
        return Err(LaunchError::unsupported(format!(
            "matmul_tensor_cores: the {} device has no tensor cores (Features::plane_mma)",
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
    // above), so the kernel's guarded copies and stores stay inside them, and a valid
    // tiling keeps every shared index inside its array; the kernel's loops are bounded.
    unsafe {
        match elem {
            ElemType::BF16 => matmul_plane_mma::launch_unchecked::<bf16, R>(
                client, count, dim, lhs, rhs, out, m, k, n, t.tile_m, t.tile_n, t.planes_m,
                t.planes_n, t.depth, t.stages,
            ),
            ElemType::F16 => matmul_plane_mma::launch_unchecked::<f16, R>(
                client, count, dim, lhs, rhs, out, m, k, n, t.tile_m, t.tile_n, t.planes_m,
                t.planes_n, t.depth, t.stages,
            ),
            _ => super::matmul_tf32::matmul_plane_mma_tf32::launch_unchecked::<R>(
                client, count, dim, lhs, rhs, out, m, k, n, t.tile_m, t.tile_n, t.planes_m,
                t.planes_n, t.depth, t.stages,
            ),
        }
    }
}

/// Checks a tensor-core matmul's buffers against its `m × k × n` shape
/// (`ops::check_matmul`) and that every matrix fits the kernels' `u32` indices; `name`
/// names the caller in the error.
///
/// # Errors
/// [`IoError::InvalidArgument`] (as a [`LaunchError`]) for a buffer smaller than its
/// matrix or a matrix past `u32::MAX` elements.
pub(crate) fn check_operands(
    name: &str,
    (lhs, rhs, out): (&Handle, &Handle, &Handle),
    (m, k, n): (usize, usize, usize),
    elem: ElemType,
) -> Result<(), LaunchError> {
    crate::ops::check_matmul(lhs, rhs, out, (m, k, n), elem)?;
    let fits = |x: usize, y: usize| {
        x.checked_mul(y)
            .is_some_and(|count| count <= u32::MAX as usize)
    };
    if !(fits(m, k) && fits(k, n) && fits(m, n)) {
        return Err(IoError::invalid(format!(
            "{name}: a {m}×{k}×{n} product has a matrix past u32::MAX elements"
        ))
        .into());
    }
    Ok(())
}

/// `out = lhs × rhs` (see the module docs); launch with cubes of
/// [`MmaTiling::units`] units and the grid of [`MmaTiling::cube_count`], passing the
/// tiling's fields as the compile-time values. The tiling must be
/// [`MmaTiling::is_valid`].
#[cubert_macros::kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_plane_mma<T: MmaInput + Float>(
    lhs: &Array<T>,
    rhs: &Array<T>,
    out: &mut Array<T>,
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
    let a_stride = depth + PAD;
    let b_stride = tile_n + PAD;
    let mut a_tiles = SharedMemory::<T>::new(stages * tile_m * (depth + PAD));
    let mut b_tiles = SharedMemory::<T>::new(stages * depth * (tile_n + PAD));
    // The cube's tile of `out`, in groups of GROUP_M tile rows (see the module docs).
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
    // Lines of 8 of the matrices are lines of 8 of the buffers.
    let lines = k % 8u32 == 0u32 && n % 8u32 == 0u32;
    let steps = (k + depth - 1u32) / depth;
    let mut acc = [0.0f32; 128];
    // Trip `it` starts the copies of step `it` and multiplies step `it - (stages - 1)`,
    // whose copies, `stages - 1` groups back, have landed.
    for it in 0u32..steps + stages - 1u32 {
        // This unit's copies of the step to multiply have landed; after the barrier
        // everyone's have, and every plane is done with the step before, whose buffer
        // the copies below reuse.
        wait_async_copies(stages - 2u32);
        sync_cube();
        if it < steps {
            let a_first = (it % stages) * tile_m * (depth + PAD);
            let b_first = (it % stages) * depth * (tile_n + PAD);
            let k0 = it * depth;
            for i in 0..tile_m * depth / 8u32 / (32u32 * planes_m * planes_n) {
                let line = UNIT_POS + i * 32u32 * planes_m * planes_n;
                let r = line / (depth / 8u32);
                let c = (line % (depth / 8u32)) * 8u32;
                let row = row0 + r;
                let dst = (a_first + r * a_stride + c) / 8u32;
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
            for i in 0..tile_n * depth / 8u32 / (32u32 * planes_m * planes_n) {
                let line = UNIT_POS + i * 32u32 * planes_m * planes_n;
                let q = line / (tile_n / 8u32);
                let d = (line % (tile_n / 8u32)) * 8u32;
                let col = col0 + d;
                let dst = (b_first + q * b_stride + d) / 8u32;
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
        if it + 1u32 < stages {
            continue;
        }
        let step = it + 1u32 - stages;
        // Multiply the step's tiles: per 16 of `k`, the plane's B fragments, then per 16
        // rows its A fragment times each of them.
        let a_first = (step % stages) * tile_m * (depth + PAD);
        let b_first = (step % stages) * depth * (tile_n + PAD);
        for ks in 0..depth / 16u32 {
            let mut b_all = [T::new(0.0); 32];
            for ni in 0..tile_n / planes_n / 8u32 {
                let start = b_first + ks * 16u32 * b_stride + plane_col + ni * 8u32;
                let b = plane_load_b(&b_tiles, start, b_stride);
                for j in 0..4u32 {
                    b_all[ni * 4u32 + j] = b[j];
                }
            }
            for mi in 0..tile_m / planes_m / 16u32 {
                let start = a_first + (plane_row + mi * 16u32) * a_stride + ks * 16u32;
                let a = plane_load_a(&a_tiles, start, a_stride);
                for ni in 0..tile_n / planes_n / 8u32 {
                    let mut b = [T::new(0.0); 4];
                    for j in 0..4u32 {
                        b[j] = b_all[ni * 4u32 + j];
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
    // No copy is in flight past the last step (the groups after it are empty).
    for mi in 0..tile_m / planes_m / 16u32 {
        for ni in 0..tile_n / planes_n / 8u32 {
            let base = (mi * (tile_n / planes_n / 8u32) + ni) * 4u32;
            for j in 0..4u32 {
                let row = row0 + plane_row + mi * 16u32 + g + (j / 2u32) * 8u32;
                let col = col0 + plane_col + ni * 8u32 + 2u32 * t + j % 2u32;
                if row < m && col < n {
                    out[row * n + col] = acc[base + j] as T;
                }
            }
        }
    }
}
