//! Copy descriptors: which bytes of a buffer a read or write touches.
//!
//! A [`CopyDescriptor`] pairs a [`Binding`] with a shape, strides (in elements) and an element
//! size. Host data is always dense row-major; the device side may be strided (a pitched
//! tensor, a transposed view). [`CopyDescriptor::validate`] checks that every element the
//! descriptor reaches lies inside the binding, so a wrong stride gives an error instead of
//! touching other memory. [`gather`] and [`scatter`] do the strided host-side copies.
//!
//! [`Handle::copy_descriptor`] is defined here rather than in `handle`, so that this module
//! uses `handle` and not the other way round.

use crate::error::IoError;
use crate::handle::{Binding, Handle};
use crate::shape::{Shape, Strides, is_contiguous};

/// A binding with the shape and strides to read or write it with.
#[derive(Debug, Clone)]
pub struct CopyDescriptor {
    /// The memory.
    pub handle: Binding,
    /// Shape of the data, outermost first.
    pub shape: Shape,
    /// Strides of the data in the binding, in elements.
    pub strides: Strides,
    /// Size of one element in bytes.
    pub elem_size: usize,
}

impl CopyDescriptor {
    /// A new descriptor.
    pub fn new(handle: Binding, shape: Shape, strides: Strides, elem_size: usize) -> Self {
        Self {
            handle,
            shape,
            strides,
            elem_size,
        }
    }

    /// A contiguous byte descriptor covering the whole binding.
    pub fn bytes(handle: Binding) -> Self {
        let size = handle.size() as usize;
        Self::new(handle, Shape::from([size]), Strides::from([1]), 1)
    }

    /// Number of bytes the dense (host) form of the data takes.
    pub fn dense_len(&self) -> Option<usize> {
        self.shape.num_elements()?.checked_mul(self.elem_size)
    }

    /// Whether the device layout is dense row-major.
    pub fn is_contiguous(&self) -> bool {
        is_contiguous(&self.shape, &self.strides)
    }

    /// Checks that the descriptor is well formed and stays inside its binding. Returns the
    /// dense length in bytes.
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] naming what is wrong.
    pub fn validate(&self) -> Result<usize, IoError> {
        if self.elem_size == 0 {
            return Err(IoError::invalid("element size is 0"));
        }
        if self.shape.len() != self.strides.len() {
            return Err(IoError::invalid(format!(
                "shape {:?} has {} dimensions but strides {:?} have {}",
                self.shape.as_slice(),
                self.shape.len(),
                self.strides.as_slice(),
                self.strides.len()
            )));
        }
        let dense = self.dense_len().ok_or_else(|| {
            IoError::invalid(format!("shape {:?} overflows", self.shape.as_slice()))
        })?;
        if dense == 0 {
            return Ok(0);
        }
        let last_element =
            self.shape
                .iter()
                .zip(self.strides.iter())
                .try_fold(0usize, |acc, (&dim, &stride)| {
                    (dim - 1)
                        .checked_mul(stride)
                        .and_then(|span| acc.checked_add(span))
                });
        let end = last_element
            .and_then(|last| last.checked_add(1))
            .and_then(|count| count.checked_mul(self.elem_size));
        match end {
            Some(end) if end as u64 <= self.handle.size() => Ok(dense),
            _ => Err(IoError::invalid(format!(
                "shape {:?} with strides {:?} and {}-byte elements reaches past the end of a {}-byte buffer",
                self.shape.as_slice(),
                self.strides.as_slice(),
                self.elem_size,
                self.handle.size()
            ))),
        }
    }
}

impl Handle {
    /// A copy descriptor of this view with the given shape, strides and element size.
    pub fn copy_descriptor(
        self,
        shape: impl Into<Shape>,
        strides: impl Into<Strides>,
        elem_size: usize,
    ) -> CopyDescriptor {
        CopyDescriptor::new(self.binding(), shape.into(), strides.into(), elem_size)
    }
}

/// Visits every run of contiguous bytes of a validated descriptor: calls `visit(src_offset,
/// dense_offset, len)` in row-major order, where `src_offset` is relative to the binding.
pub fn for_each_run(
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
    mut visit: impl FnMut(usize, usize, usize),
) {
    if shape.contains(&0) {
        return;
    }
    if shape.is_empty() {
        visit(0, 0, elem_size);
        return;
    }
    // Merge trailing dimensions that are dense into one run.
    let mut run_elems = 1usize;
    let mut outer = shape.len();
    while outer > 0 && strides[outer - 1] == run_elems {
        run_elems *= shape[outer - 1];
        outer -= 1;
    }
    if outer == 0 {
        visit(0, 0, run_elems * elem_size);
        return;
    }
    let (run_elems, inner_stride, outer) = if run_elems == 1 {
        // The innermost axis is strided: copy element by element along it.
        (1usize, strides[shape.len() - 1], shape.len())
    } else {
        (run_elems, 0, outer)
    };
    let run_bytes = run_elems * elem_size;
    let mut index = vec![0usize; outer];
    let mut dense = 0usize;
    loop {
        let base: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        if inner_stride == 0 {
            visit(base * elem_size, dense, run_bytes);
            dense += run_bytes;
        } else {
            // `outer` includes the innermost axis here; its index is in `base` already.
            visit(base * elem_size, dense, elem_size);
            dense += elem_size;
        }
        // Increment the multi-index.
        let mut axis = outer;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// Copies the elements a validated descriptor describes from `source` (the binding's bytes)
/// into the dense buffer `dense`.
pub fn gather(
    source: &[u8],
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
    dense: &mut [u8],
) {
    for_each_run(shape, strides, elem_size, |src, dst, len| {
        dense[dst..dst + len].copy_from_slice(&source[src..src + len]);
    });
}

/// Copies the dense buffer `dense` into `target` (the binding's bytes) at the positions a
/// validated descriptor describes.
pub fn scatter(
    dense: &[u8],
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
    target: &mut [u8],
) {
    for_each_run(shape, strides, elem_size, |dst, src, len| {
        target[dst..dst + len].copy_from_slice(&dense[src..src + len]);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceId;
    use crate::handle::{HandleFactory, ReleaseQueue};
    use crate::stream::StreamId;

    fn binding(size: u64) -> Binding {
        HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new())
            .mint(StreamId::new(0), size)
            .binding()
    }

    #[test]
    fn validate_rejects_strides_that_leave_the_buffer() {
        let desc = CopyDescriptor::new(binding(24), [2, 3].into(), [4, 1].into(), 4);
        assert!(desc.validate().is_err(), "row pitch 4 needs 28 bytes");
        let desc = CopyDescriptor::new(binding(28), [2, 3].into(), [4, 1].into(), 4);
        assert_eq!(desc.validate().unwrap(), 24);
    }

    #[test]
    fn validate_rejects_rank_mismatch() {
        let desc = CopyDescriptor::new(binding(64), [2, 3].into(), [1].into(), 4);
        assert!(desc.validate().is_err());
    }

    #[test]
    fn gather_reads_pitched_rows() {
        // 2 rows of 3 bytes with a pitch of 4 bytes.
        let source = [1u8, 2, 3, 0, 4, 5, 6, 0];
        let mut dense = [0u8; 6];
        gather(&source, &[2, 3], &[4, 1], 1, &mut dense);
        assert_eq!(dense, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn gather_reads_transposed_views() {
        // A 2x3 row-major matrix read as its 3x2 transpose.
        let source = [1u8, 2, 3, 4, 5, 6];
        let mut dense = [0u8; 6];
        gather(&source, &[3, 2], &[1, 3], 1, &mut dense);
        assert_eq!(dense, [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn scatter_is_the_inverse_of_gather() {
        let dense = [1u8, 2, 3, 4, 5, 6];
        let mut target = [0u8; 8];
        scatter(&dense, &[2, 3], &[4, 1], 1, &mut target);
        assert_eq!(target, [1, 2, 3, 0, 4, 5, 6, 0]);
    }
}
