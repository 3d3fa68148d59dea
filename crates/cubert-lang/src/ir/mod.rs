//! The language's intermediate representation: what code generators read.
//!
//! A structured IR, printed by a tree walk: a [`Kernel`] has parameters, typed local
//! variables and a body [`Block`]; blocks nest through structured control flow
//! ([`Instruction::If`], [`Instruction::Loop`], [`Instruction::RangeLoop`]). Every computed
//! value is assigned to a variable (`Instruction::Assign`), so a generator prints one
//! statement per instruction and leaves register allocation to the downstream compiler.
//! The expansion of a `#[kernel]` function records it (`crate::expand`); `docs/kernel-language.md`
//! in the repository describes the design.

mod instruction;
mod operation;
mod value;

pub use instruction::{Block, Instruction};
pub use operation::{BinaryOp, Builtin, MathOp, Operation, UnaryOp};
pub use value::{Constant, Type, Value, VarId};

use crate::elem::ElemType;

/// A kernel parameter, in the order the launch binds them. Arrays take buffer slots
/// 0, 1, ... in order; scalars take info words 0, 1, ... in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Param {
    /// A global array of `elem`, written by the kernel if `mutable`.
    Array {
        /// Element type.
        elem: ElemType,
        /// Whether the kernel may write it.
        mutable: bool,
    },
    /// A scalar passed by value.
    Scalar(ElemType),
}

/// One local variable of a kernel: its type and whether it is a named `let` binding (kept
/// readable in generated code) or a temporary.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Local {
    /// The variable's type.
    pub ty: Type,
    /// The Rust name it was bound to, if any.
    pub name: Option<String>,
}

/// A kernel in IR form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// The kernel's name (the Rust function's name).
    pub name: String,
    /// Parameters, in binding order.
    pub params: Vec<Param>,
    /// Local variables, indexed by [`VarId`].
    pub locals: Vec<Local>,
    /// The body.
    pub body: Block,
}

impl Kernel {
    /// The type of variable `id`.
    pub fn local_type(&self, id: VarId) -> Option<Type> {
        self.locals.get(id.index()).map(|local| local.ty)
    }

    /// The buffer slot and element type of each array parameter, in order.
    pub fn arrays(&self) -> impl Iterator<Item = (usize, ElemType, bool)> + '_ {
        self.params
            .iter()
            .filter_map(|param| match param {
                Param::Array { elem, mutable } => Some((*elem, *mutable)),
                Param::Scalar(_) => None,
            })
            .enumerate()
            .map(|(slot, (elem, mutable))| (slot, elem, mutable))
    }

    /// The element type of each scalar parameter, in info-word order.
    pub fn scalars(&self) -> impl Iterator<Item = ElemType> + '_ {
        self.params.iter().filter_map(|param| match param {
            Param::Scalar(elem) => Some(*elem),
            Param::Array { .. } => None,
        })
    }
}
