//! The position of one unit in the launch grid.

/// Where a unit is: its cube, its place in the cube, and the launch's geometry. The native
/// kernel reads its builtins from here (`ABSOLUTE_POS` is [`Unit::absolute_pos`], ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unit {
    /// Position in the cube (x, y, z).
    pub unit_pos: (u32, u32, u32),
    /// Position of the cube in the grid.
    pub cube_pos: (u32, u32, u32),
    /// Units per cube along each axis.
    pub cube_dim: (u32, u32, u32),
    /// Cubes along each axis.
    pub cube_count: (u32, u32, u32),
}

#[allow(missing_docs)] // each method is the builtin of the same name in capitals
impl Unit {
    #[inline]
    pub fn unit_pos_x(&self) -> u32 {
        self.unit_pos.0
    }
    #[inline]
    pub fn unit_pos_y(&self) -> u32 {
        self.unit_pos.1
    }
    #[inline]
    pub fn unit_pos_z(&self) -> u32 {
        self.unit_pos.2
    }
    /// Linear index in the cube, x fastest (wrapping like the GPU's `u32` arithmetic).
    #[inline]
    pub fn unit_pos(&self) -> u32 {
        let (x, y, z) = self.unit_pos;
        let (dx, dy, _) = self.cube_dim;
        x.wrapping_add(y.wrapping_mul(dx))
            .wrapping_add(z.wrapping_mul(dx).wrapping_mul(dy))
    }
    #[inline]
    pub fn cube_pos_x(&self) -> u32 {
        self.cube_pos.0
    }
    #[inline]
    pub fn cube_pos_y(&self) -> u32 {
        self.cube_pos.1
    }
    #[inline]
    pub fn cube_pos_z(&self) -> u32 {
        self.cube_pos.2
    }
    /// Linear index of the cube in the grid, x fastest.
    #[inline]
    pub fn cube_pos(&self) -> u32 {
        let (x, y, z) = self.cube_pos;
        let (cx, cy, _) = self.cube_count;
        x.wrapping_add(y.wrapping_mul(cx))
            .wrapping_add(z.wrapping_mul(cx).wrapping_mul(cy))
    }
    #[inline]
    pub fn cube_dim_x(&self) -> u32 {
        self.cube_dim.0
    }
    #[inline]
    pub fn cube_dim_y(&self) -> u32 {
        self.cube_dim.1
    }
    #[inline]
    pub fn cube_dim_z(&self) -> u32 {
        self.cube_dim.2
    }
    /// Units per plane: 32, as on NVIDIA GPUs.
    #[inline]
    pub fn plane_dim(&self) -> u32 {
        super::cooperative::PLANE_DIM
    }
    /// The unit's lane in its plane: planes are runs of 32 units in `UNIT_POS` order.
    #[inline]
    pub fn unit_pos_plane(&self) -> u32 {
        self.unit_pos() % super::cooperative::PLANE_DIM
    }
    /// Units per cube.
    #[inline]
    pub fn cube_dim(&self) -> u32 {
        let (x, y, z) = self.cube_dim;
        x.wrapping_mul(y).wrapping_mul(z)
    }
    #[inline]
    pub fn cube_count_x(&self) -> u32 {
        self.cube_count.0
    }
    #[inline]
    pub fn cube_count_y(&self) -> u32 {
        self.cube_count.1
    }
    #[inline]
    pub fn cube_count_z(&self) -> u32 {
        self.cube_count.2
    }
    /// Cubes in the grid.
    #[inline]
    pub fn cube_count(&self) -> u32 {
        let (x, y, z) = self.cube_count;
        x.wrapping_mul(y).wrapping_mul(z)
    }
    #[inline]
    pub fn absolute_pos_x(&self) -> u32 {
        self.cube_pos
            .0
            .wrapping_mul(self.cube_dim.0)
            .wrapping_add(self.unit_pos.0)
    }
    #[inline]
    pub fn absolute_pos_y(&self) -> u32 {
        self.cube_pos
            .1
            .wrapping_mul(self.cube_dim.1)
            .wrapping_add(self.unit_pos.1)
    }
    #[inline]
    pub fn absolute_pos_z(&self) -> u32 {
        self.cube_pos
            .2
            .wrapping_mul(self.cube_dim.2)
            .wrapping_add(self.unit_pos.2)
    }
    /// Linear index of the unit in the grid: `cube_pos * cube_dim + unit_pos`.
    #[inline]
    pub fn absolute_pos(&self) -> u32 {
        self.cube_pos()
            .wrapping_mul(self.cube_dim())
            .wrapping_add(self.unit_pos())
    }
}

/// Units of a row run by one step of [`run_cube`]'s unrolled loop.
const UNROLL: u32 = 4;

/// Runs `unit_body` for every unit of the cube described by `cube` (its `unit_pos` is
/// ignored), x fastest, and stops early once the launch gave up (see
/// [`super::AccessMonitor::gave_up`]). Generic over the body so that the body inlines into
/// the loop.
///
/// A row runs `UNROLL` (4) units per step: the body of a kernel like a vector add is a few
/// loads, a store and their bounds checks, and the step's counter and exit test would
/// otherwise be a good part of each unit's branches.
#[inline(always)]
pub fn run_cube(cube: &Unit, args: &super::Args<'_>, mut unit_body: impl FnMut(&Unit)) {
    let (dx, dy, dz) = cube.cube_dim;
    let mut unit = *cube;
    for z in 0..dz {
        for y in 0..dy {
            if args.monitor().gave_up() {
                return;
            }
            let mut x = 0;
            while dx - x >= UNROLL {
                for step in 0..UNROLL {
                    unit.unit_pos = (x + step, y, z);
                    unit_body(&unit);
                }
                x += UNROLL;
            }
            while x < dx {
                unit.unit_pos = (x, y, z);
                unit_body(&unit);
                x += 1;
            }
        }
    }
}

/// Runs `unit_body` for every unit of `cube`, one after another (x fastest), like
/// [`run_cube`] but without unrolling: for bodies too large to repeat (the SIMD copy of a
/// kernel's plainly-reading body, where the body is written into the loop).
#[inline(always)]
pub fn run_cube_by_unit(cube: &Unit, args: &super::Args<'_>, mut unit_body: impl FnMut(&Unit)) {
    let (dx, dy, dz) = cube.cube_dim;
    let mut unit = *cube;
    for z in 0..dz {
        for y in 0..dy {
            if args.monitor().gave_up() {
                return;
            }
            for x in 0..dx {
                unit.unit_pos = (x, y, z);
                unit_body(&unit);
            }
        }
    }
}
