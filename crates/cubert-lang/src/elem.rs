//! Element types.
//!
//! [`ElemType`] names the scalar types a buffer can hold; kernels, casts, collectives and
//! `to_client` use it to know the element size and how to interpret bytes.
//!
//! The 8-bit floats ([`ElemType::E4M3`], [`ElemType::E5M2`]) are storage types: they are
//! loaded, stored, copied, filled and cast to and from every other type, but no arithmetic
//! (add, mul, reduce, matmul, collectives' reductions) is defined on them. Their formats
//! and conversions (round to nearest even, saturating; NaN to `0x7f`) are described in
//! [`crate::fp8`].

use serde::{Deserialize, Serialize};
use std::fmt;

/// A scalar element type.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    /// IEEE 754 half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE 754 single precision.
    F32,
    /// IEEE 754 double precision.
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean stored as one byte.
    Bool,
    /// 8-bit float "E4M3FN" ([`crate::fp8::e4m3`]): bias 7, 3 mantissa bits, no
    /// infinities, NaN `0x7f`/`0xff`, largest finite 448. A storage type (no arithmetic).
    E4M3,
    /// 8-bit float "E5M2" ([`crate::fp8::e5m2`]): bias 15, 2 mantissa bits, infinities,
    /// largest finite 57344. A storage type (no arithmetic).
    E5M2,
}

impl ElemType {
    /// Every element type.
    pub const ALL: [ElemType; 15] = [
        ElemType::F16,
        ElemType::BF16,
        ElemType::F32,
        ElemType::F64,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
        ElemType::Bool,
        ElemType::E4M3,
        ElemType::E5M2,
    ];

    /// Size of one element in bytes.
    pub const fn size(&self) -> usize {
        match self {
            ElemType::E4M3 | ElemType::E5M2 => 1,
            ElemType::I8 | ElemType::U8 | ElemType::Bool => 1,
            ElemType::F16 | ElemType::BF16 | ElemType::I16 | ElemType::U16 => 2,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
        }
    }

    /// Whether this is a floating-point type (the 8-bit floats included).
    pub const fn is_float(&self) -> bool {
        matches!(
            self,
            ElemType::E4M3
                | ElemType::E5M2
                | ElemType::F16
                | ElemType::BF16
                | ElemType::F32
                | ElemType::F64
        )
    }

    /// Whether this is an 8-bit float ([`ElemType::E4M3`], [`ElemType::E5M2`]): a type
    /// without arithmetic.
    pub const fn is_fp8(&self) -> bool {
        matches!(self, ElemType::E4M3 | ElemType::E5M2)
    }

    /// Whether arithmetic (add, mul, reductions, matmul) is defined on this type: every
    /// type but `bool` and the 8-bit floats.
    pub const fn has_arithmetic(&self) -> bool {
        !matches!(self, ElemType::Bool | ElemType::E4M3 | ElemType::E5M2)
    }

    /// The lowercase name (`f32`, `bf16`, ...).
    pub const fn name(&self) -> &'static str {
        match self {
            ElemType::E4M3 => "e4m3",
            ElemType::E5M2 => "e5m2",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
            ElemType::Bool => "bool",
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that maps to an [`ElemType`].
pub trait Element:
    bytemuck::Pod + Default + Send + Sync + fmt::Debug + PartialEq + 'static
{
    /// The element type of `Self`.
    const ELEM: ElemType;
}

macro_rules! impl_element {
    ($($ty:ty => $elem:ident),* $(,)?) => {
        $(impl Element for $ty { const ELEM: ElemType = ElemType::$elem; })*
    };
}

impl_element!(
    crate::fp8::e4m3 => E4M3,
    crate::fp8::e5m2 => E5M2,
    half::f16 => F16,
    half::bf16 => BF16,
    f32 => F32,
    f64 => F64,
    i8 => I8,
    i16 => I16,
    i32 => I32,
    i64 => I64,
    u8 => U8,
    u16 => U16,
    u32 => U32,
    u64 => U64,
);
