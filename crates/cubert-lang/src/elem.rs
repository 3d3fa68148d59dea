//! Element types.
//!
//! [`ElemType`] names the scalar types a buffer can hold; kernels, casts, collectives and
//! `to_client` use it to know the element size and how to interpret bytes.

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
}

impl ElemType {
    /// Every element type.
    pub const ALL: [ElemType; 13] = [
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
    ];

    /// Size of one element in bytes.
    pub const fn size(&self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 | ElemType::Bool => 1,
            ElemType::F16 | ElemType::BF16 | ElemType::I16 | ElemType::U16 => 2,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(&self) -> bool {
        matches!(
            self,
            ElemType::F16 | ElemType::BF16 | ElemType::F32 | ElemType::F64
        )
    }

    /// The lowercase name (`f32`, `bf16`, ...).
    pub const fn name(&self) -> &'static str {
        match self {
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
