//! Types, variables and constants of the IR.

use crate::elem::ElemType;
use std::fmt;

/// The type of an IR value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Type {
    /// One scalar.
    Scalar(ElemType),
    /// A fixed-size local array of `len` scalars (a unit's registers or local memory).
    LocalArray(ElemType, u32),
    /// An array of `len` scalars in the cube's shared memory: one per cube, seen by all
    /// its units.
    SharedArray(ElemType, u32),
}

impl Type {
    /// The scalar element type (of the array, for arrays).
    pub fn elem(self) -> ElemType {
        match self {
            Type::Scalar(elem) | Type::LocalArray(elem, _) | Type::SharedArray(elem, _) => elem,
        }
    }
}

/// A local variable's index in [`super::Kernel::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub(crate) u32);

impl VarId {
    /// The index into the kernel's locals.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for VarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// A constant scalar, stored as the bits of its type (zero-extended to 64 bits), so that
/// constants compare and hash exactly (NaN payloads and signed zeros included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Constant {
    /// The constant's type.
    pub elem: ElemType,
    /// Its bits, in the low `elem.size()` bytes.
    pub bits: u64,
}

impl Constant {
    /// The constant as f64 (exact for every float type and every integer up to 2^53).
    pub fn as_f64(self) -> f64 {
        match self.elem {
            ElemType::F16 => half::f16::from_bits(self.bits as u16).to_f64(),
            ElemType::BF16 => half::bf16::from_bits(self.bits as u16).to_f64(),
            ElemType::E4M3 => crate::fp8::e4m3::from_bits(self.bits as u8).to_f64(),
            ElemType::E5M2 => crate::fp8::e5m2::from_bits(self.bits as u8).to_f64(),
            ElemType::F32 => f64::from(f32::from_bits(self.bits as u32)),
            ElemType::F64 => f64::from_bits(self.bits),
            ElemType::I8 | ElemType::I16 | ElemType::I32 | ElemType::I64 => self.as_i64() as f64,
            _ => self.bits as f64,
        }
    }

    /// The constant as a sign-extended integer (for signed types) or its bits.
    pub fn as_i64(self) -> i64 {
        match self.elem {
            ElemType::I8 => i64::from(self.bits as u8 as i8),
            ElemType::I16 => i64::from(self.bits as u16 as i16),
            ElemType::I32 => i64::from(self.bits as u32 as i32),
            _ => self.bits as i64,
        }
    }
}

/// An operand: a variable or a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// A local variable of the given type.
    Var(VarId, Type),
    /// A scalar constant.
    Const(Constant),
    /// The scalar parameter in info word `index`.
    Scalar(u32, ElemType),
}

impl Value {
    /// The operand's type.
    pub fn ty(self) -> Type {
        match self {
            Value::Var(_, ty) => ty,
            Value::Const(constant) => Type::Scalar(constant.elem),
            Value::Scalar(_, elem) => Type::Scalar(elem),
        }
    }

    /// The operand's scalar element type.
    pub fn elem(self) -> ElemType {
        self.ty().elem()
    }
}
