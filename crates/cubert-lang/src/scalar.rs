//! The scalar traits kernels are generic over: [`Scalar`], [`Numeric`], [`Float`], [`Int`].
//!
//! Each trait carries the native (CPU) semantics of the language's operations, so that the
//! native expansion of a kernel computes exactly what the generated GPU code computes:
//! integers wrap, integer division by zero gives zero, shifts take their amount modulo the
//! bit width, half types compute in `f32` and round back after every operation. The
//! expansion side ([`crate::expand::Val`]) records the same operations as IR.

use crate::elem::ElemType;
use crate::fp8::{e4m3, e5m2};
use half::{bf16, f16};
use std::fmt::Debug;

/// A type a kernel can hold in a variable or an array: the 14 element types and `bool`.
pub trait Scalar: Copy + Default + PartialEq + PartialOrd + Debug + Send + Sync + 'static {
    /// The element type.
    const ELEM: ElemType;

    /// The value's bits, zero-extended (how constants and launch scalars carry it).
    fn to_bits(self) -> u64;

    /// The value of `bits` (the low `ELEM.size()` bytes).
    fn from_bits(bits: u64) -> Self;

    /// The value without loss: integers and `bool` as [`Widened::Int`], floats as
    /// [`Widened::Float`] (the first step of a cast).
    fn widen(self) -> Widened;

    /// `value as Self`, the second step of a cast, with the language's conversions:
    /// integers wrap (Rust `as`); floats to integers saturate and NaN gives 0; a number is
    /// `true` when it isn't zero; to a half type rounds once to nearest even from the f64
    /// value (integers beyond 2^53 round to f64 first, as the CUDA generator's `(double)`
    /// conversion does, so both backends give the same bits).
    fn narrow(value: Widened) -> Self;
}

/// A scalar widened without loss, between the two steps of a cast.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Widened {
    /// An integer or a `bool` (0 or 1).
    Int(i128),
    /// A float (every float type converts to f64 exactly).
    Float(f64),
}

/// A scalar with arithmetic: every type but `bool` and the 8-bit floats.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no arithmetic in a kernel",
    label = "arithmetic needs a numeric type here",
    note = "`bool`, `e4m3` and `e5m2` are storage types: load, store, compare and cast them; \
            for arithmetic on an 8-bit float, cast it first (`x as f32`) and back after"
)]
pub trait Numeric: Scalar {
    /// `a + b` (wrapping for integers).
    fn add(a: Self, b: Self) -> Self;
    /// `a - b` (wrapping for integers).
    fn sub(a: Self, b: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn mul(a: Self, b: Self) -> Self;
    /// `a / b`; integers truncate, `x / 0 == 0` and `MIN / -1 == MIN`.
    fn div(a: Self, b: Self) -> Self;
    /// `a % b`; integers: `x % 0 == 0`; floats: `fmod`.
    fn rem(a: Self, b: Self) -> Self;
    /// `-a` (wrapping for integers).
    fn neg(a: Self) -> Self;
    /// The smaller of `a` and `b` (floats: the other one if one is NaN).
    fn min_of(a: Self, b: Self) -> Self;
    /// The larger of `a` and `b` (floats: the other one if one is NaN).
    fn max_of(a: Self, b: Self) -> Self;
    /// `|a|` (wrapping for integers: `MIN.abs() == MIN`).
    fn abs_of(a: Self) -> Self;
    /// The value of `value`, converted as a kernel literal is (`as` semantics).
    fn from_f64(value: f64) -> Self;
    /// The value of the integer literal `value` (wrapping into the type).
    fn from_i128(value: i128) -> Self;
    /// `self * a + b`: rounded once for floats (a fused multiply-add on every backend; the
    /// half types compute it in `f32` and round to the type once more), wrapping for
    /// integers.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

/// An integer type.
pub trait Int: Numeric + Ord + Eq + crate::native::Bits + crate::native::Not {
    /// `a & b`.
    fn bitand(a: Self, b: Self) -> Self;
    /// `a | b`.
    fn bitor(a: Self, b: Self) -> Self;
    /// `a ^ b`.
    fn bitxor(a: Self, b: Self) -> Self;
    /// `!a`.
    fn bitnot(a: Self) -> Self;
    /// `a << (amount % bits)`.
    fn shl(a: Self, amount: u32) -> Self;
    /// `a >> (amount % bits)`, arithmetic for signed types.
    fn shr(a: Self, amount: u32) -> Self;
    /// The value as a `u32` index (wrapping).
    fn as_u32(self) -> u32;
}

/// A floating-point type: `f16`, `bf16`, `f32`, `f64`. Its methods have the names of Rust's
/// `f32` methods, so a kernel generic over `F: Float` reads like ordinary float code.
#[allow(missing_docs)] // each method is the `f32` method of the same name
pub trait Float: Numeric {
    /// The float nearest `value`.
    fn new(value: f64) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
    fn trunc(self) -> Self;
    fn recip(self) -> Self;
    fn abs(self) -> Self;
    fn powf(self, exponent: Self) -> Self;
    fn min(self, other: Self) -> Self;
    fn max(self, other: Self) -> Self;
    fn is_nan(self) -> bool;
}

impl Scalar for bool {
    const ELEM: ElemType = ElemType::Bool;
    fn to_bits(self) -> u64 {
        u64::from(self)
    }
    fn from_bits(bits: u64) -> Self {
        bits & 0xff != 0
    }
    fn widen(self) -> Widened {
        Widened::Int(i128::from(self))
    }
    fn narrow(value: Widened) -> Self {
        match value {
            Widened::Int(v) => v != 0,
            Widened::Float(v) => v != 0.0,
        }
    }
}

macro_rules! int_scalar {
    ($($ty:ty => $elem:ident, $unsigned:ty;)*) => {$(
        impl Scalar for $ty {
            const ELEM: ElemType = ElemType::$elem;
            fn to_bits(self) -> u64 {
                u64::from(self as $unsigned)
            }
            fn from_bits(bits: u64) -> Self {
                bits as $unsigned as $ty
            }
            #[inline]
            fn widen(self) -> Widened {
                Widened::Int(self as i128)
            }
            #[inline]
            fn narrow(value: Widened) -> Self {
                match value {
                    Widened::Int(v) => v as $ty,
                    Widened::Float(v) => v as $ty,
                }
            }
        }

        impl Numeric for $ty {
            #[inline]
            fn add(a: Self, b: Self) -> Self { a.wrapping_add(b) }
            #[inline]
            fn sub(a: Self, b: Self) -> Self { a.wrapping_sub(b) }
            #[inline]
            fn mul(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
            #[inline]
            fn div(a: Self, b: Self) -> Self { if b == 0 { 0 } else { a.wrapping_div(b) } }
            #[inline]
            fn rem(a: Self, b: Self) -> Self { if b == 0 { 0 } else { a.wrapping_rem(b) } }
            #[inline]
            #[allow(clippy::unnecessary_cast)]
            fn neg(a: Self) -> Self { (0 as $ty).wrapping_sub(a) }
            #[inline]
            fn min_of(a: Self, b: Self) -> Self { Ord::min(a, b) }
            #[inline]
            fn max_of(a: Self, b: Self) -> Self { Ord::max(a, b) }
            #[inline]
            #[allow(unused_comparisons)]
            fn abs_of(a: Self) -> Self { if a < 0 { Self::neg(a) } else { a } }
            fn from_f64(value: f64) -> Self { value as $ty }
            fn from_i128(value: i128) -> Self { value as $ty }
            #[inline]
            fn mul_add(self, a: Self, b: Self) -> Self { self.wrapping_mul(a).wrapping_add(b) }
        }

        impl Int for $ty {
            #[inline]
            fn bitand(a: Self, b: Self) -> Self { a & b }
            #[inline]
            fn bitor(a: Self, b: Self) -> Self { a | b }
            #[inline]
            fn bitxor(a: Self, b: Self) -> Self { a ^ b }
            #[inline]
            fn bitnot(a: Self) -> Self { !a }
            #[inline]
            fn shl(a: Self, amount: u32) -> Self { a.wrapping_shl(amount) }
            #[inline]
            fn shr(a: Self, amount: u32) -> Self { a.wrapping_shr(amount) }
            #[inline]
            fn as_u32(self) -> u32 { self as u32 }
        }
    )*};
}

int_scalar! {
    i8 => I8, u8;
    i16 => I16, u16;
    i32 => I32, u32;
    i64 => I64, u64;
    u8 => U8, u8;
    u16 => U16, u16;
    u32 => U32, u32;
    u64 => U64, u64;
}

/// `f32`/`f64` float methods, spelled once for both.
macro_rules! native_float {
    ($($ty:ty => $elem:ident, $bits:ty;)*) => {$(
        impl Scalar for $ty {
            const ELEM: ElemType = ElemType::$elem;
            fn to_bits(self) -> u64 {
                u64::from(<$ty>::to_bits(self))
            }
            fn from_bits(bits: u64) -> Self {
                <$ty>::from_bits(bits as $bits)
            }
            #[inline]
            fn widen(self) -> Widened {
                Widened::Float(self as f64)
            }
            #[inline]
            fn narrow(value: Widened) -> Self {
                // i128 -> f32 rounds once (an i64 through f64 would round twice).
                match value {
                    Widened::Int(v) => v as $ty,
                    Widened::Float(v) => v as $ty,
                }
            }
        }

        impl Numeric for $ty {
            #[inline]
            fn add(a: Self, b: Self) -> Self { a + b }
            #[inline]
            fn sub(a: Self, b: Self) -> Self { a - b }
            #[inline]
            fn mul(a: Self, b: Self) -> Self { a * b }
            #[inline]
            fn div(a: Self, b: Self) -> Self { a / b }
            #[inline]
            fn rem(a: Self, b: Self) -> Self { a % b }
            #[inline]
            fn neg(a: Self) -> Self { -a }
            #[inline]
            fn min_of(a: Self, b: Self) -> Self { <$ty>::min(a, b) }
            #[inline]
            fn max_of(a: Self, b: Self) -> Self { <$ty>::max(a, b) }
            #[inline]
            fn abs_of(a: Self) -> Self { <$ty>::abs(a) }
            fn from_f64(value: f64) -> Self { value as $ty }
            fn from_i128(value: i128) -> Self { value as $ty }
            #[inline]
            fn mul_add(self, a: Self, b: Self) -> Self { <$ty>::mul_add(self, a, b) }
        }

        impl Float for $ty {
            fn new(value: f64) -> Self { value as $ty }
            #[inline] fn sqrt(self) -> Self { <$ty>::sqrt(self) }
            #[inline] fn exp(self) -> Self { <$ty>::exp(self) }
            #[inline] fn ln(self) -> Self { <$ty>::ln(self) }
            #[inline] fn log2(self) -> Self { <$ty>::log2(self) }
            #[inline] fn log10(self) -> Self { <$ty>::log10(self) }
            #[inline] fn sin(self) -> Self { <$ty>::sin(self) }
            #[inline] fn cos(self) -> Self { <$ty>::cos(self) }
            #[inline] fn tan(self) -> Self { <$ty>::tan(self) }
            #[inline] fn tanh(self) -> Self { <$ty>::tanh(self) }
            #[inline] fn erf(self) -> Self { erf_f64(f64::from(self)) as $ty }
            #[inline] fn floor(self) -> Self { <$ty>::floor(self) }
            #[inline] fn ceil(self) -> Self { <$ty>::ceil(self) }
            #[inline] fn round(self) -> Self { <$ty>::round(self) }
            #[inline] fn trunc(self) -> Self { <$ty>::trunc(self) }
            #[inline] fn recip(self) -> Self { <$ty>::recip(self) }
            #[inline] fn abs(self) -> Self { <$ty>::abs(self) }
            #[inline] fn powf(self, exponent: Self) -> Self { <$ty>::powf(self, exponent) }
            #[inline] fn min(self, other: Self) -> Self { <$ty>::min(self, other) }
            #[inline] fn max(self, other: Self) -> Self { <$ty>::max(self, other) }
            #[inline] fn is_nan(self) -> bool { <$ty>::is_nan(self) }
        }
    )*};
}

native_float! {
    f32 => F32, u32;
    f64 => F64, u64;
}

/// Half types: every operation computes in `f32` and rounds back once, as the CUDA
/// generator does.
macro_rules! half_float {
    ($($ty:ty => $elem:ident, $from_f64:path;)*) => {$(
        impl Scalar for $ty {
            const ELEM: ElemType = ElemType::$elem;
            fn to_bits(self) -> u64 {
                u64::from(<$ty>::to_bits(self))
            }
            fn from_bits(bits: u64) -> Self {
                <$ty>::from_bits(bits as u16)
            }
            #[inline]
            fn widen(self) -> Widened {
                Widened::Float(self.to_f64())
            }
            #[inline]
            fn narrow(value: Widened) -> Self {
                match value {
                    Widened::Int(v) => $from_f64(v as f64),
                    Widened::Float(v) => $from_f64(v),
                }
            }
        }

        impl Numeric for $ty {
            #[inline]
            fn add(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32() + b.to_f32()) }
            #[inline]
            fn sub(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32() - b.to_f32()) }
            #[inline]
            fn mul(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32() * b.to_f32()) }
            #[inline]
            fn div(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32() / b.to_f32()) }
            #[inline]
            fn rem(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32() % b.to_f32()) }
            #[inline]
            fn neg(a: Self) -> Self { -a }
            #[inline]
            fn min_of(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32().min(b.to_f32())) }
            #[inline]
            fn max_of(a: Self, b: Self) -> Self { <$ty>::from_f32(a.to_f32().max(b.to_f32())) }
            #[inline]
            fn abs_of(a: Self) -> Self { <$ty>::from_bits(a.to_bits() & 0x7fff) }
            fn from_f64(value: f64) -> Self { $from_f64(value) }
            fn from_i128(value: i128) -> Self { $from_f64(value as f64) }
            #[inline]
            fn mul_add(self, a: Self, b: Self) -> Self {
                Self::from_f32(self.to_f32().mul_add(a.to_f32(), b.to_f32()))
            }
        }

        impl Float for $ty {
            fn new(value: f64) -> Self { $from_f64(value) }
            #[inline] fn sqrt(self) -> Self { Self::from_f32(self.to_f32().sqrt()) }
            #[inline] fn exp(self) -> Self { Self::from_f32(self.to_f32().exp()) }
            #[inline] fn ln(self) -> Self { Self::from_f32(self.to_f32().ln()) }
            #[inline] fn log2(self) -> Self { Self::from_f32(self.to_f32().log2()) }
            #[inline] fn log10(self) -> Self { Self::from_f32(self.to_f32().log10()) }
            #[inline] fn sin(self) -> Self { Self::from_f32(self.to_f32().sin()) }
            #[inline] fn cos(self) -> Self { Self::from_f32(self.to_f32().cos()) }
            #[inline] fn tan(self) -> Self { Self::from_f32(self.to_f32().tan()) }
            #[inline] fn tanh(self) -> Self { Self::from_f32(self.to_f32().tanh()) }
            #[inline] fn erf(self) -> Self { Self::from_f32(erf_f64(self.to_f64()) as f32) }
            #[inline] fn floor(self) -> Self { Self::from_f32(self.to_f32().floor()) }
            #[inline] fn ceil(self) -> Self { Self::from_f32(self.to_f32().ceil()) }
            #[inline] fn round(self) -> Self { Self::from_f32(self.to_f32().round()) }
            #[inline] fn trunc(self) -> Self { Self::from_f32(self.to_f32().trunc()) }
            #[inline] fn recip(self) -> Self { Self::from_f32(self.to_f32().recip()) }
            #[inline] fn abs(self) -> Self { Self::abs_of(self) }
            #[inline] fn powf(self, e: Self) -> Self { Self::from_f32(self.to_f32().powf(e.to_f32())) }
            #[inline] fn min(self, other: Self) -> Self { Self::min_of(self, other) }
            #[inline] fn max(self, other: Self) -> Self { Self::max_of(self, other) }
            #[inline] fn is_nan(self) -> bool { <$ty>::is_nan(self) }
        }
    )*};
}

half_float! {
    f16 => F16, crate::half_rounding::f64_to_f16;
    bf16 => BF16, crate::half_rounding::f64_to_bf16;
}

/// The element types of `plane_mma`'s `A` and `B` fragments: `bf16` and `f16` (16 × 16 by
/// 16 × 8), `f32` multiplied as TF32 (16 × 8 by 8 × 8) and the 8-bit floats `e4m3` and
/// `e5m2` (16 × 32 by 32 × 8); see [`crate::ir::MmaShape`].
pub trait MmaInput: Scalar {
    /// A unit's fragment of `A` in a kernel run natively: `[Self; 4 · per register]`.
    type FragmentA: MmaFragment<Self>;
    /// A unit's fragment of `B` in a kernel run natively: `[Self; 2 · per register]`.
    type FragmentB: MmaFragment<Self>;

    /// The value the tensor cores multiply, in `f32`: exact for the 16- and 8-bit types
    /// (so is every product of two of them); an `f32` rounded to TF32 (10 mantissa bits,
    /// to nearest, ties away from zero: PTX's `cvt.rna.tf32.f32`), whose products are
    /// exact in `f32` too.
    fn mma_value(self) -> f32;
}

/// What a native fragment is: a local array of its elements.
pub trait MmaFragment<T: Scalar>:
    crate::native::Indexable<Elem = T> + Copy + Default + AsRef<[T]> + AsMut<[T]>
{
}

impl<T: Scalar, const N: usize> MmaFragment<T> for [T; N] where [T; N]: Default {}

impl MmaInput for bf16 {
    type FragmentA = [bf16; 8];
    type FragmentB = [bf16; 4];
    fn mma_value(self) -> f32 {
        self.to_f32()
    }
}

impl MmaInput for f16 {
    type FragmentA = [f16; 8];
    type FragmentB = [f16; 4];
    fn mma_value(self) -> f32 {
        self.to_f32()
    }
}

impl MmaInput for f32 {
    type FragmentA = [f32; 4];
    type FragmentB = [f32; 2];
    fn mma_value(self) -> f32 {
        round_to_tf32(self)
    }
}

impl MmaInput for e4m3 {
    type FragmentA = [e4m3; 16];
    type FragmentB = [e4m3; 8];
    fn mma_value(self) -> f32 {
        self.to_f32()
    }
}

impl MmaInput for e5m2 {
    type FragmentA = [e5m2; 16];
    type FragmentB = [e5m2; 8];
    fn mma_value(self) -> f32 {
        self.to_f32()
    }
}

/// `value` rounded to TF32 as `cvt.rna.tf32.f32` rounds it: the 13 low mantissa bits
/// dropped, to nearest with ties away from zero (a carry may reach the exponent, and past
/// the largest finite value gives infinity); infinities stay, a NaN stays a NaN.
pub fn round_to_tf32(value: f32) -> f32 {
    if value.is_nan() {
        return f32::NAN;
    }
    if value.is_infinite() {
        return value;
    }
    f32::from_bits(value.to_bits().wrapping_add(0x1000) & !0x1fff)
}

/// The 8-bit floats: storage types with conversions and no arithmetic (they are
/// [`Scalar`] but not [`Numeric`], so `a + b` on them doesn't compile in a kernel). To a
/// type of these, a float rounds once from its `f64` value to nearest even and saturates
/// (NaN gives `0x7f`), an integer through `f64` as for the half types.
macro_rules! fp8_scalar {
    ($($ty:ty => $elem:ident;)*) => {$(
        impl Scalar for $ty {
            const ELEM: ElemType = ElemType::$elem;
            fn to_bits(self) -> u64 {
                u64::from(<$ty>::to_bits(self))
            }
            fn from_bits(bits: u64) -> Self {
                <$ty>::from_bits(bits as u8)
            }
            #[inline]
            fn widen(self) -> Widened {
                Widened::Float(self.to_f64())
            }
            #[inline]
            fn narrow(value: Widened) -> Self {
                match value {
                    Widened::Int(v) => <$ty>::from_f64(v as f64),
                    Widened::Float(v) => <$ty>::from_f64(v),
                }
            }
        }
    )*};
}

fp8_scalar! {
    e4m3 => E4M3;
    e5m2 => E5M2;
}

/// The error function, through the `libm` crate (a port of FreeBSD's `s_erf.c`): the
/// standard library has none.
fn erf_f64(x: f64) -> f64 {
    libm::erf(x)
}
