//! The language's operations recorded as IR, one function per operation, with the names
//! and arities of [`crate::native`]'s.

use super::array::{Indexable, LocalArrayVal};
use super::builder::{compute, new_var, push};
use super::val::Val;
use crate::ir::{BinaryOp, Builtin, Instruction, Operation, Type, UnaryOp, Value};
use crate::native::{Bits, Not};
use crate::scalar::{Int, Numeric, Scalar};

fn binary<T: Scalar, O: Scalar>(op: BinaryOp, a: Val<T>, b: Val<T>) -> Val<O> {
    Val::compute(Operation::Binary(op, a.value(), b.value()))
}

macro_rules! arithmetic {
    ($($name:ident => $op:ident, $bound:ident;)*) => {$(
        #[doc = concat!("Records `", stringify!($name), "(a, b)`.")]
        pub fn $name<T: $bound>(a: Val<T>, b: Val<T>) -> Val<T> {
            binary(BinaryOp::$op, a, b)
        }
    )*};
}

/// `op(a, b)` computed now when both are integer constants (with the language's integer
/// arithmetic: the native path's), so that a loop bound made of compile-time values is a
/// constant in the IR, which generators unroll; `None` otherwise.
fn fold<T: Numeric>(a: Val<T>, b: Val<T>, op: fn(T, T) -> T) -> Option<Val<T>> {
    match (a.value(), b.value()) {
        (Value::Const(x), Value::Const(y)) if !T::ELEM.is_float() => Some(Val::constant(op(
            T::from_bits(x.bits),
            T::from_bits(y.bits),
        ))),
        _ => None,
    }
}

macro_rules! integer_folding {
    ($($name:ident => $op:ident;)*) => {$(
        #[doc = concat!(
            "Records `", stringify!($name), "(a, b)`; two integer constants give a constant."
        )]
        pub fn $name<T: Numeric>(a: Val<T>, b: Val<T>) -> Val<T> {
            fold(a, b, T::$name).unwrap_or_else(|| binary(BinaryOp::$op, a, b))
        }
    )*};
}

integer_folding! {
    add => Add;
    sub => Sub;
    mul => Mul;
    div => Div;
    rem => Rem;
}

arithmetic! {
    bitand => BitAnd, Bits;
    bitor => BitOr, Bits;
    bitxor => BitXor, Bits;
}

macro_rules! comparison {
    ($($name:ident => $op:ident;)*) => {$(
        #[doc = concat!("Records the comparison `", stringify!($name), "(a, b)`.")]
        pub fn $name<T: Scalar>(a: Val<T>, b: Val<T>) -> Val<bool> {
            binary(BinaryOp::$op, a, b)
        }
    )*};
}

comparison! {
    eq => Eq;
    ne => Ne;
    lt => Lt;
    le => Le;
    gt => Gt;
    ge => Ge;
}

/// Records `a << amount` (the amount modulo the bit width).
pub fn shl<T: Int>(a: Val<T>, amount: Val<u32>) -> Val<T> {
    Val::compute(Operation::Binary(BinaryOp::Shl, a.value(), amount.value()))
}

/// Records `a >> amount` (the amount modulo the bit width).
pub fn shr<T: Int>(a: Val<T>, amount: Val<u32>) -> Val<T> {
    Val::compute(Operation::Binary(BinaryOp::Shr, a.value(), amount.value()))
}

/// Records `-a`.
pub fn neg<T: Numeric>(a: Val<T>) -> Val<T> {
    Val::compute(Operation::Unary(UnaryOp::Neg, a.value()))
}

/// Records `!a`.
pub fn not<T: Not>(a: Val<T>) -> Val<T> {
    Val::compute(Operation::Unary(UnaryOp::Not, a.value()))
}

/// Records `cond ? a : b`.
pub fn select<T: Scalar>(cond: Val<bool>, a: Val<T>, b: Val<T>) -> Val<T> {
    Val::compute(Operation::Select(cond.value(), a.value(), b.value()))
}

/// Records `value as T`.
pub fn cast<T: Scalar, S: Scalar>(value: Val<S>) -> Val<T> {
    if T::ELEM == S::ELEM {
        return Val::from_value(value.value());
    }
    Val::compute(Operation::Cast(value.value(), T::ELEM))
}

/// A float literal of the type the context asks for.
pub fn lit_float<T: Numeric>(value: f64) -> Val<T> {
    Val::constant(T::from_f64(value))
}

/// An integer literal of the type the context asks for.
pub fn lit_int<T: Numeric>(value: i128) -> Val<T> {
    Val::constant(T::from_i128(value))
}

/// A `bool` literal.
pub fn lit_bool(value: bool) -> Val<bool> {
    Val::constant(value)
}

/// A compile-time parameter used as a value: a constant.
pub fn constant<T: Scalar>(value: T) -> Val<T> {
    Val::constant(value)
}

/// What a `let` binding does with its value: scalars get a variable of their own (so
/// `let b = a; a += 1;` leaves `b` alone), local arrays are copied, array parameters stay
/// the same array.
pub trait Bind: Sized {
    /// The bound value.
    fn bind_named(self, name: &str) -> Self;
}

impl<T: Scalar> Bind for Val<T> {
    fn bind_named(self, name: &str) -> Self {
        let out = new_var(Val::<T>::ty(), Some(name));
        push(Instruction::Assign {
            out,
            op: Operation::Copy(self.value()),
        });
        Val::from_value(Value::Var(out, Val::<T>::ty()))
    }
}

impl<T: Scalar> Bind for super::ArrayVal<T> {
    fn bind_named(self, _name: &str) -> Self {
        self
    }
}

impl<T: Scalar> Bind for LocalArrayVal<T> {
    fn bind_named(self, _name: &str) -> Self {
        self.copy()
    }
}

/// `let name = value;`.
pub fn bind<B: Bind>(value: B, name: &str) -> B {
    value.bind_named(name)
}

/// `target = value;` for a local variable.
pub fn assign<T: Scalar>(target: &Val<T>, value: Val<T>) {
    match target.value() {
        Value::Var(out, _) => push(Instruction::Assign {
            out,
            op: Operation::Copy(value.value()),
        }),
        _ => super::builder::error(
            "only local variables can be assigned (a parameter or constant can't)",
        ),
    }
}

/// A local array of `N` copies of `value`.
pub fn local_array<T: Scalar, const N: usize>(value: Val<T>) -> LocalArrayVal<T> {
    LocalArrayVal::new(value, u32::try_from(N).unwrap_or(u32::MAX))
}

/// Records `array[index]`.
pub fn load<A: Indexable>(array: &A, index: Val<u32>) -> Val<A::Elem> {
    array.load(index)
}

/// Records `array[index] = value`.
pub fn store<A: Indexable>(array: &A, index: Val<u32>, value: Val<A::Elem>) {
    array.store(index, value);
}

/// `array.len()`.
pub fn len<A: Indexable>(array: &A) -> Val<u32> {
    array.len()
}

/// `array.is_empty()`.
pub fn is_empty<A: Indexable>(array: &A) -> Val<bool> {
    eq(array.len(), Val::constant(0))
}

/// Records a read of a launch-geometry builtin.
pub fn builtin(builtin: Builtin) -> Val<u32> {
    Val::from_value(compute(
        Type::Scalar(u32::ELEM),
        Operation::Builtin(builtin),
    ))
}

/// Declares the next scalar parameter of the kernel.
pub fn scalar_param<T: Scalar>() -> Val<T> {
    let index = super::builder::scalar_param(crate::ir::Param::Scalar(T::ELEM));
    Val::from_value(Value::Scalar(index, T::ELEM))
}

/// `Float::new` as a function.
pub fn float_new<F: crate::Float>(value: f64) -> Val<F> {
    Val::new(value)
}
