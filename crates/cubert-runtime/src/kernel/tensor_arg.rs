//! Tensor arguments of language kernels: a handle with its shape and strides.
//!
//! A `&Tensor<T>` parameter of a `#[kernel]` function is passed at launch as a
//! [`TensorArg`]. The handle becomes a buffer like an array's; the shape and strides travel
//! in the info words after the kernel's scalars ([`TensorArg::metadata`]): one header word
//! per tensor holding the offset of its block, then each block `[rank, shape..., strides...]`.
//! Kernels read them with `x.rank()`, `x.shape(d)`, `x.stride(d)`.

use crate::error::LaunchError;
use crate::handle::Handle;

/// The most dimensions a tensor argument may have.
pub const MAX_TENSOR_RANK: usize = 8;

/// A tensor passed to a language kernel: its memory, and the shape and strides (in
/// elements) the kernel reads. Indexing in the kernel is linear over the handle's memory
/// (`x[i]`), bounds-checked against the handle's size; the strides say how to compute `i`.
#[derive(Clone, Copy, Debug)]
pub struct TensorArg<'a> {
    /// The tensor's memory.
    pub handle: &'a Handle,
    /// The extent of each dimension.
    pub shape: &'a [usize],
    /// The stride of each dimension, in elements.
    pub strides: &'a [usize],
}

impl<'a> TensorArg<'a> {
    /// A tensor argument over `handle` with `shape` and `strides` (checked at launch).
    pub fn new(handle: &'a Handle, shape: &'a [usize], strides: &'a [usize]) -> Self {
        Self {
            handle,
            shape,
            strides,
        }
    }

    /// The info words carrying the metadata of `tensors`, for a kernel whose `scalars`
    /// scalar words come first: one header word per tensor (the info-word index of its
    /// block), then the blocks.
    ///
    /// # Errors
    /// [`LaunchError`] if a tensor's shape and strides differ in length or it has more than
    /// [`MAX_TENSOR_RANK`] dimensions.
    pub fn metadata(scalars: usize, tensors: &[&TensorArg<'_>]) -> Result<Vec<u64>, LaunchError> {
        if tensors.is_empty() {
            return Ok(Vec::new());
        }
        let mut headers = Vec::with_capacity(tensors.len());
        let mut blocks = Vec::new();
        let mut next = scalars + tensors.len();
        for (index, tensor) in tensors.iter().enumerate() {
            let rank = tensor.shape.len();
            if rank != tensor.strides.len() {
                return Err(LaunchError::unknown(format!(
                    "tensor argument {index}: {rank} dimensions in its shape but {} strides",
                    tensor.strides.len()
                )));
            }
            if rank > MAX_TENSOR_RANK {
                return Err(LaunchError::unknown(format!(
                    "tensor argument {index} has {rank} dimensions; kernels take at most \
                     {MAX_TENSOR_RANK}"
                )));
            }
            headers.push(next as u64);
            blocks.push(rank as u64);
            blocks.extend(tensor.shape.iter().map(|&extent| extent as u64));
            blocks.extend(tensor.strides.iter().map(|&stride| stride as u64));
            next += 1 + 2 * rank;
        }
        headers.extend(blocks);
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceId;
    use crate::handle::{HandleFactory, ReleaseQueue};
    use crate::stream::StreamId;

    #[test]
    fn metadata_places_headers_after_the_scalars_then_each_block() {
        let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
        let handle = factory.mint(StreamId::new(0), 64);
        let a = TensorArg::new(&handle, &[2, 3], &[3, 1]);
        let b = TensorArg::new(&handle, &[5], &[2]);
        let words = TensorArg::metadata(2, &[&a, &b]).unwrap();
        // scalars at 0, 1; headers at 2, 3; a's block at 4; b's at 4 + 5 = 9.
        assert_eq!(words, vec![4, 9, 2, 2, 3, 3, 1, 1, 5, 2]);
    }

    #[test]
    fn mismatched_or_too_many_dimensions_are_refused() {
        let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
        let handle = factory.mint(StreamId::new(0), 64);
        let mismatched = TensorArg::new(&handle, &[2, 3], &[1]);
        assert!(TensorArg::metadata(0, &[&mismatched]).is_err());
        let shape = [1usize; 9];
        let deep = TensorArg::new(&handle, &shape, &shape);
        assert!(TensorArg::metadata(0, &[&deep]).is_err());
    }
}
