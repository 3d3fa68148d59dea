//! Tensor parameters in the expansion: an array parameter with a shape and strides.

use super::array::{ArrayVal, Indexable};
use super::val::Val;
use crate::ir::{Operation, TensorField};
use crate::scalar::Scalar;

/// A tensor parameter of the kernel being recorded: its buffer and its ordinal among the
/// kernel's tensors (which places its metadata in the info words).
pub struct TensorVal<T> {
    array: ArrayVal<T>,
    tensor: u32,
}

impl<T> Clone for TensorVal<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TensorVal<T> {}

impl<T: Scalar> TensorVal<T> {
    /// Declares the next parameter as a tensor (`&Tensor<T>`, or `&mut` if `mutable`).
    pub fn param(mutable: bool) -> Self {
        let array = ArrayVal::param(mutable);
        Self {
            array,
            tensor: super::builder::tensor_param(),
        }
    }

    fn meta(&self, field: TensorField, dim: Option<Val<u32>>) -> Val<u32> {
        Val::compute(Operation::TensorMeta {
            tensor: self.tensor,
            field,
            dim: dim.map(Val::value),
        })
    }
}

impl<T: Scalar> Indexable for TensorVal<T> {
    type Elem = T;

    fn len(&self) -> Val<u32> {
        self.array.len()
    }

    fn load(&self, index: Val<u32>) -> Val<T> {
        self.array.load(index)
    }

    fn store(&self, index: Val<u32>, value: Val<T>) {
        self.array.store(index, value);
    }
}

impl<T: Scalar> super::ops::Bind for TensorVal<T> {
    fn bind_named(self, _name: &str) -> Self {
        self
    }
}

/// `x.rank()`.
pub fn rank<T: Scalar>(tensor: &TensorVal<T>) -> Val<u32> {
    tensor.meta(TensorField::Rank, None)
}

/// `x.shape(d)`.
pub fn shape<T: Scalar>(tensor: &TensorVal<T>, dim: Val<u32>) -> Val<u32> {
    tensor.meta(TensorField::Shape, Some(dim))
}

/// `x.stride(d)`.
pub fn stride<T: Scalar>(tensor: &TensorVal<T>, dim: Val<u32>) -> Val<u32> {
    tensor.meta(TensorField::Stride, Some(dim))
}
