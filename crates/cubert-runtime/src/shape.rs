//! Shapes and strides of tensors.
//!
//! Both are lists of `usize`, outermost dimension first. Strides are counted in elements,
//! not bytes. [`contiguous_strides`] gives the row-major strides of a shape.

use serde::{Deserialize, Serialize};
use std::ops::Deref;

macro_rules! dims_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
        pub struct $name {
            dims: Vec<usize>,
        }

        impl $name {
            /// Builds it from a list of dimensions.
            pub fn new(dims: impl Into<Vec<usize>>) -> Self {
                Self { dims: dims.into() }
            }

            /// The dimensions as a slice.
            pub fn as_slice(&self) -> &[usize] {
                &self.dims
            }

            /// Number of dimensions.
            pub fn rank(&self) -> usize {
                self.dims.len()
            }
        }

        impl Deref for $name {
            type Target = [usize];
            fn deref(&self) -> &[usize] {
                &self.dims
            }
        }

        impl<const N: usize> From<[usize; N]> for $name {
            fn from(value: [usize; N]) -> Self {
                Self { dims: value.to_vec() }
            }
        }

        impl From<Vec<usize>> for $name {
            fn from(value: Vec<usize>) -> Self {
                Self { dims: value }
            }
        }

        impl From<&[usize]> for $name {
            fn from(value: &[usize]) -> Self {
                Self { dims: value.to_vec() }
            }
        }
    };
}

dims_type!(
    /// The size of each dimension of a tensor, outermost first.
    Shape
);
dims_type!(
    /// The distance in elements between neighbours along each dimension, outermost first.
    Strides
);

impl Shape {
    /// Number of elements (the product of the dimensions), or `None` on overflow.
    pub fn num_elements(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(1usize, |acc, &dim| acc.checked_mul(dim))
    }
}

/// Row-major (C order) strides for `shape`, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut strides = vec![1usize; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1].saturating_mul(shape[axis + 1].max(1));
    }
    Strides::new(strides)
}

/// Whether `strides` are the row-major strides of `shape` (size-1 axes may have any stride).
pub fn is_contiguous(shape: &[usize], strides: &[usize]) -> bool {
    if shape.len() != strides.len() {
        return false;
    }
    let mut expected = 1usize;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(dim);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(contiguous_strides(&[2, 3, 4]).as_slice(), &[12, 4, 1]);
        assert!(is_contiguous(&[2, 3, 4], &[12, 4, 1]));
        assert!(!is_contiguous(&[2, 3, 4], &[16, 4, 1]));
        assert!(is_contiguous(&[1, 3], &[99, 1]));
    }

    #[test]
    fn num_elements_reports_overflow() {
        assert_eq!(Shape::from([2, 3]).num_elements(), Some(6));
        assert_eq!(Shape::from([usize::MAX, 2]).num_elements(), None);
    }
}
