//! What a CPU kernel sees while running one cube.
//!
//! A kernel is called once per cube with a [`CubeContext`]: the cube's position and the
//! grid's size, the launch's buffers (typed on request) and info words, and the cube's shared
//! memory. The kernel loops over the cube's units itself ([`CubeContext::units`]), which keeps
//! "synchronize the cube" trivial: finish one loop before starting the next.

use super::KernelError;
use super::access::AccessChecker;
use super::buffer::{Buffer, RawArray};
use cubert_runtime::kernel::standard::decode_scalar;
use cubert_runtime::{CubeDim, Element};

/// Position of a unit, within its cube and in the whole grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitPos {
    /// Position in the cube along x.
    pub x: u32,
    /// Position in the cube along y.
    pub y: u32,
    /// Position in the cube along z.
    pub z: u32,
    /// Linear index in the cube (`x + y * dim.x + z * dim.x * dim.y`).
    pub index: u32,
    /// Absolute position along x (`cube_pos.x * dim.x + x`).
    pub absolute_x: u64,
    /// Absolute position along y.
    pub absolute_y: u64,
    /// Absolute position along z.
    pub absolute_z: u64,
}

/// The running cube's view of a launch. See the module docs.
pub struct CubeContext<'a> {
    pub(crate) cube_pos: (u32, u32, u32),
    /// Cubes this call runs: `cube_pos` and the next ones along x. 1, except for kernels
    /// that take runs of cubes ([`super::CpuKernel::takes_cube_runs`]).
    pub(crate) cubes: u32,
    pub(crate) cube_count: (u32, u32, u32),
    pub(crate) cube_dim: CubeDim,
    pub(crate) buffers: &'a [RawArray],
    pub(crate) info: &'a [u64],
    pub(crate) shared: &'a mut [u128],
    pub(crate) shared_bytes: usize,
    pub(crate) checker: &'a AccessChecker,
}

impl<'a> CubeContext<'a> {
    /// Position of this cube in the grid.
    pub fn cube_pos(&self) -> (u32, u32, u32) {
        self.cube_pos
    }

    /// Linear index of this cube (`x + y * count.x + z * count.x * count.y`).
    pub fn cube_index(&self) -> u64 {
        let (x, y, z) = self.cube_pos;
        let (cx, cy, _) = self.cube_count;
        u64::from(x) + u64::from(y) * u64::from(cx) + u64::from(z) * u64::from(cx) * u64::from(cy)
    }

    /// Size of the grid.
    pub fn cube_count(&self) -> (u32, u32, u32) {
        self.cube_count
    }

    /// Number of cubes in the grid.
    pub fn cube_count_total(&self) -> u64 {
        let (x, y, z) = self.cube_count;
        u64::from(x) * u64::from(y) * u64::from(z)
    }

    /// Units per cube.
    pub fn cube_dim(&self) -> CubeDim {
        self.cube_dim
    }

    /// The units of this cube, x fastest.
    pub fn units(&self) -> impl Iterator<Item = UnitPos> + use<> {
        let dim = self.cube_dim;
        let (cx, cy, cz) = self.cube_pos;
        (0..dim.z).flat_map(move |z| {
            (0..dim.y).flat_map(move |y| {
                (0..dim.x).map(move |x| UnitPos {
                    x,
                    y,
                    z,
                    index: x + y * dim.x + z * dim.x * dim.y,
                    absolute_x: u64::from(cx) * u64::from(dim.x) + u64::from(x),
                    absolute_y: u64::from(cy) * u64::from(dim.y) + u64::from(y),
                    absolute_z: u64::from(cz) * u64::from(dim.z) + u64::from(z),
                })
            })
        })
    }

    /// Number of buffers bound.
    pub fn num_buffers(&self) -> usize {
        self.buffers.len()
    }

    /// Buffer `index` viewed as elements of `T`.
    ///
    /// # Errors
    /// [`KernelError`] if there is no such buffer or it isn't aligned for `T`.
    pub fn buffer<T: Element>(&self, index: usize) -> Result<Buffer<'a, T>, KernelError> {
        let raw = self.buffers.get(index).copied().ok_or_else(|| {
            KernelError::new(format!(
                "buffer {index} is not bound (the launch binds {})",
                self.buffers.len()
            ))
        })?;
        Buffer::new(raw, index, self.checker).ok_or_else(|| {
            KernelError::new(format!("buffer {index} is not aligned for {}", T::ELEM))
        })
    }

    /// The info words (scalars and metadata).
    pub fn info(&self) -> &'a [u64] {
        self.info
    }

    /// Info word `index`.
    ///
    /// # Errors
    /// [`KernelError`] if the launch has fewer words.
    pub fn info_word(&self, index: usize) -> Result<u64, KernelError> {
        self.info.get(index).copied().ok_or_else(|| {
            KernelError::new(format!(
                "info word {index} is missing (the launch passes {})",
                self.info.len()
            ))
        })
    }

    /// Info word `index` as a `usize` count or size.
    ///
    /// # Errors
    /// [`KernelError`] if the word is missing or doesn't fit a `usize`.
    pub fn info_usize(&self, index: usize) -> Result<usize, KernelError> {
        let word = self.info_word(index)?;
        usize::try_from(word)
            .map_err(|_| KernelError::new(format!("info word {index} ({word}) is too large")))
    }

    /// Info word `index` decoded as a scalar of `T`.
    ///
    /// # Errors
    /// [`KernelError`] if the word is missing.
    pub fn scalar<T: Element>(&self, index: usize) -> Result<T, KernelError> {
        Ok(decode_scalar(self.info_word(index)?))
    }

    /// This cube's shared memory as elements of `T` (zeroed when the cube starts).
    pub fn shared<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut *self.shared);
        let bytes = &mut bytes[..self.shared_bytes];
        let whole = bytes.len() / size_of::<T>().max(1) * size_of::<T>();
        bytemuck::cast_slice_mut(&mut bytes[..whole])
    }

    /// The checker of this launch (its mode and violations so far).
    pub fn access(&self) -> &AccessChecker {
        self.checker
    }
}
