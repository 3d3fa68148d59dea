//! The operations an `Assign` instruction computes.

use super::value::Value;
use crate::elem::ElemType;

/// A value read from the launch geometry; all are `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // the names are the documentation: see docs/kernel-language.md
pub enum Builtin {
    AbsolutePos,
    AbsolutePosX,
    AbsolutePosY,
    AbsolutePosZ,
    UnitPos,
    UnitPosX,
    UnitPosY,
    UnitPosZ,
    CubePos,
    CubePosX,
    CubePosY,
    CubePosZ,
    CubeDim,
    CubeDimX,
    CubeDimY,
    CubeDimZ,
    CubeCount,
    CubeCountX,
    CubeCountY,
    CubeCountZ,
    /// Units per plane (warp): 32 on CUDA and the CPU.
    PlaneDim,
    /// The unit's lane in its plane (`UNIT_POS % PLANE_DIM`).
    UnitPosPlane,
}

impl Builtin {
    /// The builtin's name in kernel source (`ABSOLUTE_POS`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Builtin::AbsolutePos => "ABSOLUTE_POS",
            Builtin::AbsolutePosX => "ABSOLUTE_POS_X",
            Builtin::AbsolutePosY => "ABSOLUTE_POS_Y",
            Builtin::AbsolutePosZ => "ABSOLUTE_POS_Z",
            Builtin::UnitPos => "UNIT_POS",
            Builtin::UnitPosX => "UNIT_POS_X",
            Builtin::UnitPosY => "UNIT_POS_Y",
            Builtin::UnitPosZ => "UNIT_POS_Z",
            Builtin::CubePos => "CUBE_POS",
            Builtin::CubePosX => "CUBE_POS_X",
            Builtin::CubePosY => "CUBE_POS_Y",
            Builtin::CubePosZ => "CUBE_POS_Z",
            Builtin::CubeDim => "CUBE_DIM",
            Builtin::CubeDimX => "CUBE_DIM_X",
            Builtin::CubeDimY => "CUBE_DIM_Y",
            Builtin::CubeDimZ => "CUBE_DIM_Z",
            Builtin::CubeCount => "CUBE_COUNT",
            Builtin::CubeCountX => "CUBE_COUNT_X",
            Builtin::CubeCountY => "CUBE_COUNT_Y",
            Builtin::CubeCountZ => "CUBE_COUNT_Z",
            Builtin::PlaneDim => "PLANE_DIM",
            Builtin::UnitPosPlane => "UNIT_POS_PLANE",
        }
    }
}

/// A unary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Arithmetic negation (wrapping for integers).
    Neg,
    /// Logical not (bool) or bitwise not (integers).
    Not,
}

/// A binary operation. Both operands have the result's type, except shifts (the amount is
/// `u32`) and comparisons and logic (the result is `bool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // the names are the documentation
pub enum BinaryOp {
    /// Wrapping for integers.
    Add,
    /// Wrapping for integers.
    Sub,
    /// Wrapping for integers.
    Mul,
    /// Integers: truncating, and `x / 0 == 0`; `MIN / -1 == MIN`.
    Div,
    /// Integers: the sign of the dividend, and `x % 0 == 0`; floats: `fmod`.
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    /// The amount is taken modulo the bit width (Rust's `wrapping_shl`).
    Shl,
    /// Arithmetic for signed integers; the amount is taken modulo the bit width.
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// IEEE `minNum`-like: if one operand is NaN, the other (like Rust's `f32::min`).
    Min,
    /// As `Min`.
    Max,
    /// Floats only: `powf`.
    Pow,
}

impl BinaryOp {
    /// Whether the result is `bool` whatever the operands.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// A float math function of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // the names are those of Rust's `f32` methods
pub enum MathOp {
    Abs,
    Sqrt,
    Exp,
    Ln,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Tanh,
    Erf,
    Floor,
    Ceil,
    Round,
    Trunc,
    Recip,
}

impl MathOp {
    /// The Rust method name (`sqrt`, `ln`, ...).
    pub fn name(self) -> &'static str {
        match self {
            MathOp::Abs => "abs",
            MathOp::Sqrt => "sqrt",
            MathOp::Exp => "exp",
            MathOp::Ln => "ln",
            MathOp::Log2 => "log2",
            MathOp::Log10 => "log10",
            MathOp::Sin => "sin",
            MathOp::Cos => "cos",
            MathOp::Tan => "tan",
            MathOp::Tanh => "tanh",
            MathOp::Erf => "erf",
            MathOp::Floor => "floor",
            MathOp::Ceil => "ceil",
            MathOp::Round => "round",
            MathOp::Trunc => "trunc",
            MathOp::Recip => "recip",
        }
    }
}

/// A plane (warp) operation over the values of every active unit of the unit's plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlaneOp {
    /// The sum, in lane order (so float sums are the same on every backend).
    Sum,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// Whether every value is `true`.
    All,
    /// Whether some value is `true`.
    Any,
}

/// An atomic read-modify-write; each returns the element's previous value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `x += v`.
    Add,
    /// `x = max(x, v)`.
    Max,
    /// `x = min(x, v)`.
    Min,
    /// `x = v`.
    Exchange,
    /// `if x == compare { x = v }` (floats compare bits).
    CompareExchange,
}

/// What a tensor's metadata read returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorField {
    /// The number of dimensions.
    Rank,
    /// The extent of a dimension (1 past the rank).
    Shape,
    /// The stride of a dimension, in elements (0 past the rank).
    Stride,
}

/// What an atomic operation works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicTarget {
    /// Array parameter in buffer slot `0`.
    Global(u32),
    /// A shared array variable.
    Shared(Value),
}

/// What an `Assign` computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// A copy of the operand.
    Copy(Value),
    /// A unary operation.
    Unary(UnaryOp, Value),
    /// A binary operation.
    Binary(BinaryOp, Value, Value),
    /// A float math function (integers: `Abs` only).
    Math(MathOp, Value),
    /// `a * b + c`: rounded once for floats, wrapping for integers.
    Fma(Value, Value, Value),
    /// A conversion to `to` (saturating float to integer, NaN gives 0, as Rust's `as`).
    Cast(Value, ElemType),
    /// `cond ? a : b`, both evaluated.
    Select(Value, Value, Value),
    /// A builtin of the launch geometry.
    Builtin(Builtin),
    /// Element `index` (`u32`) of array parameter `array` (its buffer slot).
    Load {
        /// The array's buffer slot.
        array: u32,
        /// The element index.
        index: Value,
    },
    /// Element `index` of the local array in variable `array`.
    LocalLoad {
        /// The local array.
        array: Value,
        /// The element index.
        index: Value,
    },
    /// The number of elements of array parameter `array`, as `u32`.
    Length {
        /// The array's buffer slot.
        array: u32,
    },
    /// A `u32` of tensor `tensor`'s metadata (its ordinal among the kernel's tensors).
    ///
    /// The launch passes the metadata in the info words after the scalars: word
    /// `scalars + tensor` holds the offset `o` of the tensor's block, and the block is
    /// `[rank, shape_0 .. shape_{rank-1}, stride_0 .. stride_{rank-1}]`. Values above
    /// `u32::MAX` read as `u32::MAX`.
    TensorMeta {
        /// The tensor's ordinal.
        tensor: u32,
        /// What is read.
        field: TensorField,
        /// The dimension (`u32`), for `Shape` and `Stride`.
        dim: Option<Value>,
    },
    /// A reduction over the unit's plane.
    Plane(PlaneOp, Value),
    /// The value of `value` in lane `lane` of the unit's plane.
    PlaneShuffle {
        /// The value each unit offers.
        value: Value,
        /// The lane read (`u32`).
        lane: Value,
    },
    /// An atomic read-modify-write of element `index`; the result is the previous value.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// The array.
        target: AtomicTarget,
        /// The element index (`u32`).
        index: Value,
        /// The operand.
        value: Value,
        /// The value compared with, for `CompareExchange`.
        compare: Option<Value>,
    },
}
