//! Tensor parameters on the native path: an [`Array`] with a shape and strides.
//!
//! The metadata comes in the launch's info words after the scalars (see
//! `ir::Operation::TensorMeta` for the layout). A block the launch didn't pass reads as
//! rank 0; `shape(d)` past the rank is 1 and `stride(d)` is 0, on every backend.

use super::Indexable;
use super::array::{Args, Array};
use crate::scalar::Scalar;

/// A tensor parameter: its buffer (indexed linearly, like an [`Array`]) and its metadata.
pub struct Tensor<'a, T> {
    array: Array<'a, T>,
    args: Args<'a>,
    block: usize,
    rank: u32,
}

/// A metadata word as `u32`, saturating.
fn word_u32(word: u64) -> u32 {
    u32::try_from(word).unwrap_or(u32::MAX)
}

impl<'a, T: Scalar> Tensor<'a, T> {
    /// Tensor `tensor` of the launch, in buffer slot `slot`, for a kernel with `scalars`
    /// scalar parameters.
    pub fn param(args: &Args<'a>, slot: usize, tensor: usize, scalars: usize) -> Self {
        let block = usize::try_from(args.scalar::<u64>(scalars + tensor)).unwrap_or(usize::MAX);
        let rank = if block == 0 {
            0
        } else {
            word_u32(args.scalar::<u64>(block))
        };
        Self {
            array: args.array::<T>(slot),
            args: *args,
            block,
            rank,
        }
    }

    /// `x.rank()`.
    #[inline]
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// `x.shape(d)`: 1 past the rank.
    #[inline]
    pub fn shape(&self, dim: u32) -> u32 {
        if dim >= self.rank {
            return 1;
        }
        word_u32(self.args.scalar::<u64>(self.block + 1 + dim as usize))
    }

    /// `x.stride(d)`: 0 past the rank.
    #[inline]
    pub fn stride(&self, dim: u32) -> u32 {
        if dim >= self.rank {
            return 0;
        }
        let index = self.block + 1 + self.rank as usize + dim as usize;
        word_u32(self.args.scalar::<u64>(index))
    }
}

impl<T: Scalar> Indexable for Tensor<'_, T> {
    type Elem = T;

    #[inline]
    fn len(&self) -> u32 {
        self.array.len()
    }

    #[inline]
    #[track_caller]
    fn load(&self, index: u32) -> T {
        self.array.load(index)
    }

    #[inline]
    #[track_caller]
    fn store(&mut self, index: u32, value: T) {
        self.array.store(index, value);
    }
}

/// `x.rank()`.
#[inline]
pub fn rank<T: Scalar>(tensor: &Tensor<'_, T>) -> u32 {
    tensor.rank()
}

/// `x.shape(d)`.
#[inline]
pub fn shape<T: Scalar>(tensor: &Tensor<'_, T>, dim: u32) -> u32 {
    tensor.shape(dim)
}

/// `x.stride(d)`.
#[inline]
pub fn stride<T: Scalar>(tensor: &Tensor<'_, T>, dim: u32) -> u32 {
    tensor.stride(dim)
}
