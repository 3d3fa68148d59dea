//! [`Val`]: a typed IR operand, and the float methods kernels call on it.

use super::builder::compute;
use crate::ir::{BinaryOp, Constant, MathOp, Operation, Type, Value};
use crate::scalar::{Float, Numeric, Scalar};
use std::marker::PhantomData;

/// A value of type `T` in the kernel being recorded: a variable, a constant or a scalar
/// parameter. Cheap to copy; copying doesn't copy the variable (a `let` does, through
/// [`super::bind`]).
pub struct Val<T> {
    pub(crate) value: Value,
    _marker: PhantomData<T>,
}

impl<T> Clone for Val<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Val<T> {}

impl<T> std::fmt::Debug for Val<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: Scalar> Val<T> {
    pub(crate) fn from_value(value: Value) -> Self {
        Self {
            value,
            _marker: PhantomData,
        }
    }

    /// The constant `value`.
    pub fn constant(value: T) -> Self {
        Self::from_value(Value::Const(Constant {
            elem: T::ELEM,
            bits: value.to_bits(),
        }))
    }

    /// The IR operand.
    pub fn value(self) -> Value {
        self.value
    }

    pub(crate) fn ty() -> Type {
        Type::Scalar(T::ELEM)
    }

    pub(crate) fn compute(op: Operation) -> Self {
        Self::from_value(compute(Self::ty(), op))
    }
}

impl<T: Numeric> Val<T> {
    /// The smaller of `self` and `other` (floats: the other one if one is NaN).
    pub fn min(self, other: Self) -> Self {
        Self::compute(Operation::Binary(BinaryOp::Min, self.value, other.value))
    }

    /// The larger of `self` and `other`.
    pub fn max(self, other: Self) -> Self {
        Self::compute(Operation::Binary(BinaryOp::Max, self.value, other.value))
    }

    /// `|self|` (wrapping for integers).
    pub fn abs(self) -> Self {
        Self::compute(Operation::Math(MathOp::Abs, self.value))
    }

    /// `self * a + b`: rounded once for floats, wrapping for integers.
    pub fn mul_add(self, a: Self, b: Self) -> Self {
        Self::compute(Operation::Fma(self.value, a.value, b.value))
    }
}

macro_rules! math_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        #[allow(missing_docs)] // each is the `f32` method of the same name
        impl<T: Float> Val<T> {
            $(
                pub fn $name(self) -> Self {
                    Self::compute(Operation::Math(MathOp::$op, self.value))
                }
            )*
        }
    };
}

math_methods!(
    sqrt => Sqrt, exp => Exp, ln => Ln, log2 => Log2, log10 => Log10, sin => Sin,
    cos => Cos, tan => Tan, tanh => Tanh, erf => Erf, floor => Floor, ceil => Ceil,
    round => Round, trunc => Trunc, recip => Recip,
);

impl<T: Float> Val<T> {
    /// The float nearest `value` (`F::new(0.5)` in a kernel).
    pub fn new(value: f64) -> Self {
        Self::constant(T::new(value))
    }

    /// `self` to the power `exponent`.
    pub fn powf(self, exponent: Self) -> Self {
        Self::compute(Operation::Binary(BinaryOp::Pow, self.value, exponent.value))
    }

    /// Whether `self` is NaN.
    pub fn is_nan(self) -> Val<bool> {
        Val::compute(Operation::Binary(BinaryOp::Ne, self.value, self.value))
    }
}
