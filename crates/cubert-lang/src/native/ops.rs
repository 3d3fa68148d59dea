//! The language's operations on native values, one function per operation.
//!
//! The macro writes `a + b` in a kernel as `add(a, b)`, `a < b` as `lt(a, b)`, `x as T` as
//! `cast::<T, _>(x)`, and so on, here for the native path and in [`crate::expand`] for the
//! expansion. The semantics are the language's (see [`crate::scalar`]).

use crate::scalar::{Float, Int, Numeric, Scalar};

/// `a + b`.
#[inline]
pub fn add<T: Numeric>(a: T, b: T) -> T {
    T::add(a, b)
}
/// `a - b`.
#[inline]
pub fn sub<T: Numeric>(a: T, b: T) -> T {
    T::sub(a, b)
}
/// `a * b`.
#[inline]
pub fn mul<T: Numeric>(a: T, b: T) -> T {
    T::mul(a, b)
}
/// `a / b`.
#[inline]
pub fn div<T: Numeric>(a: T, b: T) -> T {
    T::div(a, b)
}
/// `a % b`.
#[inline]
pub fn rem<T: Numeric>(a: T, b: T) -> T {
    T::rem(a, b)
}
/// `-a`.
#[inline]
pub fn neg<T: Numeric>(a: T) -> T {
    T::neg(a)
}
/// `!a`: logical not of a `bool`, bitwise not of an integer.
#[inline]
pub fn not<T: Not>(a: T) -> T {
    a.not_value()
}
/// `a & b`.
#[inline]
pub fn bitand<T: Bits>(a: T, b: T) -> T {
    T::and_bits(a, b)
}
/// `a | b`.
#[inline]
pub fn bitor<T: Bits>(a: T, b: T) -> T {
    T::or_bits(a, b)
}
/// `a ^ b`.
#[inline]
pub fn bitxor<T: Bits>(a: T, b: T) -> T {
    T::xor_bits(a, b)
}
/// `a << b` (the amount is a `u32`, taken modulo the bit width).
#[inline]
pub fn shl<T: Int>(a: T, amount: u32) -> T {
    T::shl(a, amount)
}
/// `a >> b` (the amount modulo the bit width).
#[inline]
pub fn shr<T: Int>(a: T, amount: u32) -> T {
    T::shr(a, amount)
}
/// `a == b`.
#[inline]
pub fn eq<T: Scalar>(a: T, b: T) -> bool {
    a == b
}
/// `a != b`.
#[inline]
pub fn ne<T: Scalar>(a: T, b: T) -> bool {
    a != b
}
/// `a < b`.
#[inline]
pub fn lt<T: Scalar>(a: T, b: T) -> bool {
    a < b
}
/// `a <= b`.
#[inline]
pub fn le<T: Scalar>(a: T, b: T) -> bool {
    a <= b
}
/// `a > b`.
#[inline]
pub fn gt<T: Scalar>(a: T, b: T) -> bool {
    a > b
}
/// `a >= b`.
#[inline]
pub fn ge<T: Scalar>(a: T, b: T) -> bool {
    a >= b
}
/// `cond ? a : b`; both are evaluated (they are values already).
#[inline]
pub fn select<T: Scalar>(cond: bool, a: T, b: T) -> T {
    if cond { a } else { b }
}
/// A literal of the type the context asks for (`2.0` in `x * 2.0`).
#[inline]
pub fn lit_float<T: Numeric>(value: f64) -> T {
    T::from_f64(value)
}
/// An integer literal of the type the context asks for.
#[inline]
pub fn lit_int<T: Numeric>(value: i128) -> T {
    T::from_i128(value)
}
/// A `bool` literal.
#[inline]
pub fn lit_bool(value: bool) -> bool {
    value
}
/// A value that is already what the native path needs (a compile-time parameter).
#[inline]
pub fn constant<T: Scalar>(value: T) -> T {
    value
}
/// A `let` binding: the native path copies values by itself.
#[inline]
pub fn bind<T: Copy>(value: T) -> T {
    value
}
/// A local array of `N` copies of `value`.
#[inline]
pub fn local_array<T: Scalar, const N: usize>(value: T) -> [T; N] {
    [value; N]
}
/// `x[i]`.
#[inline]
#[track_caller]
pub fn load<A: super::Indexable>(array: &A, index: u32) -> A::Elem {
    array.load(index)
}
/// `x[i] = value`.
#[inline]
#[track_caller]
pub fn store<A: super::Indexable>(array: &mut A, index: u32, value: A::Elem) {
    array.store(index, value);
}
/// `x.len()`: the number of elements of an array.
#[inline]
pub fn len<A: super::Indexable>(array: &A) -> u32 {
    array.len()
}
/// `x.is_empty()`.
#[inline]
pub fn is_empty<A: super::Indexable>(array: &A) -> bool {
    array.len() == 0
}
/// `x.abs()` (wrapping for integers: `MIN.abs() == MIN`).
#[inline]
pub fn abs<T: Numeric>(a: T) -> T {
    T::abs_of(a)
}
/// `a.min(b)` (floats: the other one if one is NaN).
#[inline]
pub fn min<T: Numeric>(a: T, b: T) -> T {
    T::min_of(a, b)
}
/// `a.max(b)` (floats: the other one if one is NaN).
#[inline]
pub fn max<T: Numeric>(a: T, b: T) -> T {
    T::max_of(a, b)
}
/// `x as T`, with the language's conversions (see [`Scalar::narrow`]); a cast to the same
/// type keeps the bits (a signalling NaN stays one, as in Rust and the CUDA generator).
#[inline]
pub fn cast<T: Scalar, S: Scalar>(value: S) -> T {
    if T::ELEM == S::ELEM {
        return T::from_bits(value.to_bits());
    }
    T::narrow(value.widen())
}

/// The values of `start .. end`, by one: `range(start, end, 1, false)` as a loop the
/// compiler counts (a value below `end` always has a successor, so no wrap can end it).
#[inline]
pub fn range_by_one<T: Int>(start: T, end: T) -> RangeByOne<T> {
    RangeByOne { next: start, end }
}

/// The iterator of [`range_by_one`].
#[derive(Clone, Debug)]
pub struct RangeByOne<T> {
    next: T,
    end: T,
}

impl<T: Int> Iterator for RangeByOne<T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.next < self.end {
            let value = self.next;
            self.next = T::add(value, T::from_i128(1));
            Some(value)
        } else {
            None
        }
    }
}

/// The values of `start .. end` (or `..= end`) by `step`; a zero step counts as 1, so a
/// loop always ends (the generated GPU code does the same).
#[inline]
pub fn range<T: Int>(start: T, end: T, step: T, inclusive: bool) -> RangeIter<T> {
    let one = T::from_i128(1);
    RangeIter {
        next: start,
        end,
        step: if step <= T::from_i128(0) { one } else { step },
        inclusive,
        done: false,
    }
}

/// The iterator of [`range`].
#[derive(Clone, Debug)]
pub struct RangeIter<T> {
    next: T,
    end: T,
    step: T,
    inclusive: bool,
    done: bool,
}

impl<T: Int> Iterator for RangeIter<T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        let inside = if self.inclusive {
            self.next <= self.end
        } else {
            self.next < self.end
        };
        if self.done || !inside {
            return None;
        }
        let value = self.next;
        let next = T::add(value, self.step);
        // Wrapped past the type's end: that was the last value.
        self.done = next <= value;
        self.next = next;
        Some(value)
    }
}

/// Logical or bitwise not.
pub trait Not: Scalar {
    /// `!self`.
    fn not_value(self) -> Self;
}

impl Not for bool {
    fn not_value(self) -> Self {
        !self
    }
}

/// Bitwise and/or/xor: integers and `bool`.
pub trait Bits: Scalar {
    /// `a & b`.
    fn and_bits(a: Self, b: Self) -> Self;
    /// `a | b`.
    fn or_bits(a: Self, b: Self) -> Self;
    /// `a ^ b`.
    fn xor_bits(a: Self, b: Self) -> Self;
}

impl Bits for bool {
    fn and_bits(a: Self, b: Self) -> Self {
        a & b
    }
    fn or_bits(a: Self, b: Self) -> Self {
        a | b
    }
    fn xor_bits(a: Self, b: Self) -> Self {
        a ^ b
    }
}

macro_rules! int_bits {
    ($($ty:ty),*) => {$(
        impl Not for $ty {
            #[inline]
            fn not_value(self) -> Self { !self }
        }
        impl Bits for $ty {
            #[inline]
            fn and_bits(a: Self, b: Self) -> Self { a & b }
            #[inline]
            fn or_bits(a: Self, b: Self) -> Self { a | b }
            #[inline]
            fn xor_bits(a: Self, b: Self) -> Self { a ^ b }
        }
    )*};
}
int_bits!(i8, i16, i32, i64, u8, u16, u32, u64);

/// `Float::new` spelled as a function (for `F::new(x)` on the expansion side too).
#[inline]
pub fn float_new<F: Float>(value: f64) -> F {
    F::new(value)
}
