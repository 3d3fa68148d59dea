//! The language's intermediate representation: what code generators read.
//!
//! A structured IR, printed by a tree walk: a [`Kernel`] has parameters, typed local
//! variables and a body [`Block`]; blocks nest through structured control flow
//! ([`Instruction::If`], [`Instruction::Loop`], [`Instruction::RangeLoop`]). Every computed
//! value is assigned to a variable (`Instruction::Assign`), so a generator prints one
//! statement per instruction and leaves register allocation to the downstream compiler.
//! The expansion of a `#[kernel]` function records it (`crate::expand`).

pub mod group_mma;
mod instruction;
mod mma;
mod operation;
mod value;

pub use group_mma::GroupMmaShape;
pub use instruction::{Block, Instruction};
pub use mma::{MmaOperand, MmaShape};
pub use operation::{
    AtomicOp, AtomicTarget, BinaryOp, Builtin, MathOp, Operation, PlaneOp, TensorField, UnaryOp,
};
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
    /// Local variables, indexed by [`VarId`] (shared arrays included: one per cube).
    pub locals: Vec<Local>,
    /// How many of the array parameters are tensors (arrays with a shape and strides;
    /// see [`Operation::TensorMeta`]).
    pub tensors: u32,
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

    /// Each shared array: its variable, element type, length, and the byte offset where
    /// it starts in the cube's shared memory (in declaration order, every array aligned to
    /// [`Self::shared_alignment`] bytes). Backends lay shared memory out this way.
    pub fn shared_arrays(&self) -> Vec<(VarId, ElemType, u32, usize)> {
        let align = self.shared_alignment();
        let mut offset = 0usize;
        let mut arrays = Vec::new();
        for (index, local) in self.locals.iter().enumerate() {
            if let Type::SharedArray(elem, len) = local.ty {
                arrays.push((VarId(index as u32), elem, len, offset));
                offset += (elem.size() * len as usize).next_multiple_of(align);
            }
        }
        arrays
    }

    /// The alignment of each shared array in bytes: 1024 in a kernel that calls
    /// `plane_group_mma` (its swizzled layouts repeat every 1024 bytes: [`group_mma`]), 16
    /// otherwise.
    pub fn shared_alignment(&self) -> usize {
        if self.uses_plane_group_mma() {
            1024
        } else {
            16
        }
    }

    /// Whether the kernel calls `plane_group_mma` (or its asynchronous form or wait:
    /// `Features::plane_group_mma`).
    pub fn uses_plane_group_mma(&self) -> bool {
        block_uses_group_mma(&self.body)
    }

    /// The bytes of shared memory one cube needs (see [`Self::shared_arrays`]).
    pub fn shared_memory_bytes(&self) -> usize {
        self.shared_arrays()
            .last()
            .map(|&(_, elem, len, offset)| {
                offset + (elem.size() * len as usize).next_multiple_of(self.shared_alignment())
            })
            .unwrap_or(0)
    }

    /// Whether the units of a cube cooperate: the kernel declares shared memory, waits at
    /// `sync_cube` or uses a plane operation. The CPU runs such a kernel's units as
    /// coroutines instead of one after the other.
    pub fn is_cooperative(&self) -> bool {
        !self.shared_arrays().is_empty() || block_cooperates(&self.body)
    }

    /// The element types of the `plane_mma` fragments and fragment loads in the kernel,
    /// each once: what a backend's tensor cores must multiply for the kernel to run
    /// (`Features::plane_mma`, `Features::plane_mma_fp8`).
    pub fn mma_inputs(&self) -> Vec<ElemType> {
        let mut inputs = Vec::new();
        block_mma_inputs(self, &self.body, &mut inputs);
        inputs
    }

    /// The element type of each scalar parameter, in info-word order.
    pub fn scalars(&self) -> impl Iterator<Item = ElemType> + '_ {
        self.params.iter().filter_map(|param| match param {
            Param::Scalar(elem) => Some(*elem),
            Param::Array { .. } => None,
        })
    }
}

/// Whether `block` (nested blocks included) holds a `sync_cube` or a plane operation
/// (`plane_mma` included).
fn block_cooperates(block: &Block) -> bool {
    block
        .instructions
        .iter()
        .any(|instruction| match instruction {
            Instruction::SyncCube
            | Instruction::PlaneMma { .. }
            | Instruction::PlaneGroupMma { .. }
            | Instruction::PlaneGroupMmaWait { .. }
            | Instruction::PlaneLoadFragment { .. } => true,
            Instruction::Assign {
                op: Operation::Plane(..) | Operation::PlaneShuffle { .. },
                ..
            } => true,
            Instruction::If {
                then, otherwise, ..
            } => block_cooperates(then) || block_cooperates(otherwise),
            Instruction::Loop { body } | Instruction::RangeLoop { body, .. } => {
                block_cooperates(body)
            }
            _ => false,
        })
}

/// Whether `block` (nested blocks included) holds a `plane_group_mma`.
fn block_uses_group_mma(block: &Block) -> bool {
    block
        .instructions
        .iter()
        .any(|instruction| match instruction {
            Instruction::PlaneGroupMma { .. } | Instruction::PlaneGroupMmaWait { .. } => true,
            Instruction::If {
                then, otherwise, ..
            } => block_uses_group_mma(then) || block_uses_group_mma(otherwise),
            Instruction::Loop { body } | Instruction::RangeLoop { body, .. } => {
                block_uses_group_mma(body)
            }
            _ => false,
        })
}

/// Adds to `inputs` the fragment element types of `block`'s tensor-core instructions
/// (nested blocks included) not in it yet.
fn block_mma_inputs(kernel: &Kernel, block: &Block, inputs: &mut Vec<ElemType>) {
    for instruction in &block.instructions {
        let vars = match instruction {
            Instruction::PlaneMma { a, b, .. } => vec![*a, *b],
            Instruction::PlaneLoadFragment { shared, .. } => vec![*shared],
            Instruction::PlaneGroupMma { a, b, .. } => vec![*a, *b],
            Instruction::If {
                then, otherwise, ..
            } => {
                block_mma_inputs(kernel, then, inputs);
                block_mma_inputs(kernel, otherwise, inputs);
                continue;
            }
            Instruction::Loop { body } | Instruction::RangeLoop { body, .. } => {
                block_mma_inputs(kernel, body, inputs);
                continue;
            }
            _ => continue,
        };
        for elem in vars.into_iter().filter_map(|var| kernel.local_type(var)) {
            let elem = elem.elem();
            if !inputs.contains(&elem) {
                inputs.push(elem);
            }
        }
    }
}
