//! The launch grid: how many cubes ([`CubeCount`]) of how many units ([`CubeDim`]).

use crate::handle::Binding;
use crate::properties::DeviceProperties;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How many cubes a launch dispatches.
#[derive(Clone)]
pub enum CubeCount {
    /// A known count of x, y, z cubes.
    Static(u32, u32, u32),
    /// A count read at launch time from a buffer holding three `u32`: x, y, z.
    Dynamic(Binding),
}

impl CubeCount {
    /// One cube.
    pub fn new_single() -> Self {
        CubeCount::Static(1, 1, 1)
    }

    /// `x` cubes along x.
    pub fn new_1d(x: u32) -> Self {
        CubeCount::Static(x, 1, 1)
    }

    /// `x` by `y` cubes.
    pub fn new_2d(x: u32, y: u32) -> Self {
        CubeCount::Static(x, y, 1)
    }

    /// `x` by `y` by `z` cubes.
    pub fn new_3d(x: u32, y: u32, z: u32) -> Self {
        CubeCount::Static(x, y, z)
    }

    /// Whether the count is known to dispatch nothing.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Static(x, y, z) => *x == 0 || *y == 0 || *z == 0,
            Self::Dynamic(_) => false,
        }
    }
}

impl fmt::Debug for CubeCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CubeCount::Static(x, y, z) => write!(f, "({x}, {y}, {z})"),
            CubeCount::Dynamic(binding) => write!(f, "dynamic({binding:?})"),
        }
    }
}

/// A cube count chosen for a number of cubes within the device's limits.
#[derive(Debug, Clone)]
pub enum CubeCountSelection {
    /// The count dispatches exactly the cubes asked for.
    Exact(CubeCount),
    /// The count dispatches more cubes than asked for (the second field says how many,
    /// saturated at `u32::MAX`); the kernel must skip the extra ones.
    Approx(CubeCount, u32),
}

impl CubeCountSelection {
    /// Spreads `num_cubes` over x, y, z within the device's maximum cube count.
    pub fn from_properties(properties: &DeviceProperties, num_cubes: u32) -> Self {
        let [x, y, z] = cube_count_spread(&properties.hardware.max_cube_count, num_cubes);
        // In u64: the spread may dispatch more than `u32::MAX` cubes, which a saturating
        // u32 product would report as exactly `num_cubes`.
        let actual = u64::from(x)
            .saturating_mul(u64::from(y))
            .saturating_mul(u64::from(z));
        let count = CubeCount::Static(x, y, z);
        if actual == u64::from(num_cubes) {
            CubeCountSelection::Exact(count)
        } else {
            CubeCountSelection::Approx(count, u32::try_from(actual).unwrap_or(u32::MAX))
        }
    }

    /// Whether some cubes will be idle.
    pub fn has_idle(&self) -> bool {
        matches!(self, Self::Approx(..))
    }

    /// The cube count.
    pub fn cube_count(self) -> CubeCount {
        match self {
            CubeCountSelection::Exact(count) | CubeCountSelection::Approx(count, _) => count,
        }
    }
}

impl From<CubeCountSelection> for CubeCount {
    fn from(value: CubeCountSelection) -> Self {
        value.cube_count()
    }
}

/// Spreads `num_cubes` over three axes so that none exceeds `max`, halving x and doubling y
/// (then z) until x fits. The product may exceed `num_cubes` by rounding.
pub fn cube_count_spread(max: &(u32, u32, u32), num_cubes: u32) -> [u32; 3] {
    let max = [max.0.max(1), max.1.max(1), max.2.max(1)];
    let mut count = [num_cubes, 1, 1];
    for axis in 0..2 {
        if count[axis] <= max[axis] {
            break;
        }
        while count[axis] > max[axis] {
            count[axis] = count[axis].div_ceil(2);
            count[axis + 1] = count[axis + 1].saturating_mul(2);
        }
    }
    count
}

/// Units per cube along x, y, z.
#[derive(Debug, PartialEq, Eq, Clone, Copy, Hash, Serialize, Deserialize)]
pub struct CubeDim {
    /// Units along x.
    pub x: u32,
    /// Units along y.
    pub y: u32,
    /// Units along z.
    pub z: u32,
}

impl CubeDim {
    /// A cube dim for `working_units` units of elementwise work on a device: planes of the
    /// device's plane size, as many as the work and the device's limits allow.
    pub fn from_properties(properties: &DeviceProperties, working_units: usize) -> Self {
        let hardware = &properties.hardware;
        let plane = hardware.plane_size_max.max(1);
        let units = u32::try_from(working_units).unwrap_or(u32::MAX);
        let planes = match hardware.num_cpu_cores {
            Some(cores) => cores.min(units).max(1),
            None => {
                let wanted = (units / plane).max(1);
                // A power of two, at most 8 planes.
                1u32 << wanted.ilog2().min(3)
            }
        };
        let limit = (hardware.max_units_per_cube / plane).max(1);
        Self::new_2d(plane, planes.min(limit).max(1))
    }

    /// One unit.
    pub const fn new_single() -> Self {
        Self { x: 1, y: 1, z: 1 }
    }

    /// `x` units.
    pub const fn new_1d(x: u32) -> Self {
        Self { x, y: 1, z: 1 }
    }

    /// `x` by `y` units.
    pub const fn new_2d(x: u32, y: u32) -> Self {
        Self { x, y, z: 1 }
    }

    /// `x` by `y` by `z` units.
    pub const fn new_3d(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z }
    }

    /// Units per cube, or `None` on overflow.
    pub const fn checked_num_elems(&self) -> Option<u32> {
        match self.x.checked_mul(self.y) {
            Some(xy) => xy.checked_mul(self.z),
            None => None,
        }
    }

    /// Units per cube (saturating).
    pub const fn num_elems(&self) -> u32 {
        match self.checked_num_elems() {
            Some(n) => n,
            None => u32::MAX,
        }
    }

    /// Whether this cube dim can contain `other` along every axis.
    pub const fn can_contain(&self, other: CubeDim) -> bool {
        self.x >= other.x && self.y >= other.y && self.z >= other.z
    }
}

impl From<(u32, u32, u32)> for CubeDim {
    fn from(value: (u32, u32, u32)) -> Self {
        CubeDim::new_3d(value.0, value.1, value.2)
    }
}

impl From<CubeDim> for (u32, u32, u32) {
    fn from(value: CubeDim) -> Self {
        (value.x, value.y, value.z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_fits_an_even_count() {
        assert_eq!(cube_count_spread(&(32, 32, 32), 2048), [32, 32, 2]);
    }

    #[test]
    fn spread_rounds_an_odd_count_up() {
        assert_eq!(cube_count_spread(&(48, 32, 16), 3177), [25, 32, 4]);
    }

    #[test]
    fn spread_leaves_small_counts_alone() {
        assert_eq!(cube_count_spread(&(65535, 65535, 65535), 7), [7, 1, 1]);
    }
}
