//! Arithmetic of the element types, as the standard kernels need it.

use cubert_runtime::Element;

/// Addition, multiplication and zero; integers wrap on overflow (as GPU integers do), so a
/// kernel never panics on overflow.
pub trait Numeric: Element {
    /// The additive identity.
    fn zero() -> Self;
    /// `self + other`.
    fn add(self, other: Self) -> Self;
    /// `self * other`.
    fn mul(self, other: Self) -> Self;
}

macro_rules! float_numeric {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            #[inline]
            fn zero() -> Self { <$t>::default() }
            #[inline]
            fn add(self, other: Self) -> Self { self + other }
            #[inline]
            fn mul(self, other: Self) -> Self { self * other }
        }
    )*};
}

macro_rules! int_numeric {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            #[inline]
            fn zero() -> Self { 0 }
            #[inline]
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            #[inline]
            fn mul(self, other: Self) -> Self { self.wrapping_mul(other) }
        }
    )*};
}

float_numeric!(f32, f64, half::f16, half::bf16);
int_numeric!(i8, i16, i32, i64, u8, u16, u32, u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_overflow_wraps_instead_of_panicking() {
        assert_eq!(Numeric::add(i32::MAX, 1), i32::MIN);
        assert_eq!(Numeric::mul(200u8, 2), 144);
    }
}
