//! Instructions and blocks: the statements of the IR.

use super::MmaOperand;
use super::operation::Operation;
use super::value::{Value, VarId};

/// A sequence of instructions run in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Block {
    /// The instructions.
    pub instructions: Vec<Instruction>,
}

/// One statement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Instruction {
    /// The instructions that follow come from line `line` of the kernel's Rust source file
    /// `file`. No effect on what runs; generators note it next to the code they print, so
    /// a compiler's error on the printed code can name the Rust line.
    SourceLine {
        /// The source file (as `file!()` gives it).
        file: &'static str,
        /// The line in it.
        line: u32,
    },
    /// `out = op`.
    Assign {
        /// The variable written.
        out: VarId,
        /// What is computed.
        op: Operation,
    },
    /// Writes `value` to element `index` of array parameter `array`.
    Store {
        /// The array's buffer slot.
        array: u32,
        /// The element index (`u32`).
        index: Value,
        /// The value written.
        value: Value,
    },
    /// Loads line `index` of array parameter `array`, elements `index * n .. index * n + n`,
    /// into the local array `out` of `n` elements (n is 1, 2, 4 or 8), with vector accesses
    /// where the line is in bounds and aligned; elements out of bounds load zero and are
    /// reported like any load.
    LoadLine {
        /// The local array written (its length is the line's width).
        out: VarId,
        /// The array's buffer slot.
        array: u32,
        /// The line index (`u32`).
        index: Value,
    },
    /// Stores the local array `value` of `n` elements to line `index` of array parameter
    /// `array` (elements `index * n ..`), as [`Instruction::LoadLine`] loads it.
    StoreLine {
        /// The array's buffer slot.
        array: u32,
        /// The line index (`u32`).
        index: Value,
        /// The local array stored.
        value: VarId,
    },
    /// Writes `value` to element `index` of the local array in variable `array`.
    LocalStore {
        /// The local array variable.
        array: VarId,
        /// The element index (`u32`).
        index: Value,
        /// The value written.
        value: Value,
    },
    /// Runs `then` if `cond` (a `bool`) holds, `otherwise` if not.
    If {
        /// The condition.
        cond: Value,
        /// Run when it holds.
        then: Block,
        /// Run when it doesn't.
        otherwise: Block,
    },
    /// Runs `body` until a `Break`.
    Loop {
        /// The body.
        body: Block,
    },
    /// `for var in (start..end).step_by(step)` (`..=` if `inclusive`); `var` is assigned
    /// each value in turn and must not be written by the body. `step` is positive.
    RangeLoop {
        /// The counter.
        var: VarId,
        /// First value.
        start: Value,
        /// Bound (exclusive unless `inclusive`).
        end: Value,
        /// Step, at least 1.
        step: Value,
        /// Whether `end` is included.
        inclusive: bool,
        /// The body.
        body: Block,
    },
    /// Leaves the innermost loop.
    Break,
    /// Starts the innermost loop's next iteration.
    Continue,
    /// Ends the unit's work.
    Return,
    /// Waits until every unit of the cube got here; their shared-memory writes are then
    /// visible to all.
    SyncCube,
    /// The plane's matrix multiply-accumulate (tensor cores): `ACC = A·B + ACC` for a
    /// 16 × K `A`, a K × 8 `B` and a 16 × 8 `f32` accumulator, which the 32 units of the
    /// plane hold together, each its fragment. K and the fragments' layout follow the
    /// inputs' type ([`super::MmaShape`]): 16 for `bf16`/`f16`, 8 for `f32` (multiplied as
    /// TF32), 32 for `e4m3`/`e5m2`. A plane operation: every unit of the plane runs it.
    PlaneMma {
        /// The unit's accumulator fragment: a local array of 4 `f32`, read and written.
        acc: VarId,
        /// The unit's fragment of `A`: a local array of
        /// [`super::MmaShape::fragment_len`] elements.
        a: VarId,
        /// The unit's fragment of `B`: a local array of `A`'s element type (or, for 8-bit
        /// floats, the other 8-bit float), [`super::MmaShape::fragment_len`] elements.
        b: VarId,
    },
    /// The plane loads its fragments of one `plane_mma` operand from a shared array
    /// (`ldmatrix` on CUDA where it applies): the operand's element `(r, c)` is element
    /// `start + r * stride + c` of `shared`, and each unit gets its fragment of it
    /// ([`MmaOperand`] says which operand; the shared array's type, the shape). A plane
    /// operation: every unit of the plane runs it with the same `start` and `stride`.
    PlaneLoadFragment {
        /// The local array written: [`super::MmaShape::fragment_len`] elements.
        out: VarId,
        /// Which operand the fragment belongs to.
        operand: MmaOperand,
        /// The shared array read.
        shared: VarId,
        /// Element of `shared` at the operand's row 0, column 0 (`u32`).
        start: Value,
        /// Elements of `shared` from one row of the operand to the next (`u32`).
        stride: Value,
    },
    /// The plane group's matrix multiply-accumulate (`wgmma` on Hopper): the four planes of
    /// a plane group compute `ACC = A·B + ACC` for a 64 × `k` `A` and a `k` × N `B` of
    /// 16-bit floats read from shared memory in the swizzled layouts of
    /// [`super::group_mma`], into a 64 × N `f32` accumulator of which each unit holds N / 2
    /// elements (the first N / 2 of `acc`). Every unit of the group runs it with the same
    /// values. Synchronous (`plane_group_mma`): when the units go on, `acc` holds the sum and
    /// the shared arrays may be written. Asynchronous (`plane_group_mma_async`): the
    /// multiply belongs to the group's next batch, and `acc` and the operands' shared
    /// elements may be touched only after a [`Instruction::PlaneGroupMmaWait`] covers it.
    PlaneGroupMma {
        /// The unit's accumulator: a local array of at least N / 2 `f32`, read and written.
        acc: VarId,
        /// The shared array holding `A`.
        a: VarId,
        /// Where `A` starts in it (`u32`, before the swizzle).
        a_start: Value,
        /// The shared array holding `B` (`A`'s element type).
        b: VarId,
        /// Where `B` starts in it (`u32`, before the swizzle).
        b_start: Value,
        /// Elements from one 64-column panel of `B` to the next (`u32`).
        b_panel_stride: Value,
        /// N: 64, 128, 192 or 256.
        n: u32,
        /// K: 16, 32, 48 or 64.
        k: u32,
        /// Whether the units go on before the multiply is done (`plane_group_mma_async`).
        asynchronous: bool,
    },
    /// Waits until at most `pending` of the plane group's asynchronous multiplies
    /// (`plane_group_mma_async`, one batch each) are still in flight, the most recent ones;
    /// `0` waits for all. A plane-group operation: its four planes run it together.
    PlaneGroupMmaWait {
        /// Batches that may still be in flight.
        pending: u32,
    },
    /// Starts copying line `line` of array parameter `array` (elements `line * width ..`)
    /// to line `shared_line` of the shared array `shared`, asynchronously (`cp.async` on
    /// CUDA); when `valid` is false the shared line is filled with zeros and the array is
    /// not read. The copy belongs to the unit's next group
    /// ([`Instruction::CommitAsyncCopies`]); its shared elements hold their new values for
    /// the unit once [`Instruction::WaitAsyncCopies`] has waited for that group, and for
    /// the other units of the cube after a `sync_cube` that follows that wait.
    CopyLineAsync {
        /// The shared array written.
        shared: VarId,
        /// The line of it written (`u32`).
        shared_line: Value,
        /// The array parameter's buffer slot.
        array: u32,
        /// The line of it read (`u32`).
        line: Value,
        /// Elements per line: 1, 2, 4, 8 or 16.
        width: u32,
        /// Whether to copy (`bool`); zeros when not.
        valid: Value,
    },
    /// Closes the unit's current group of asynchronous copies: the copies started since
    /// the last commit form one group, which a later wait can name.
    CommitAsyncCopies,
    /// Waits until at most `pending` of the unit's committed groups of asynchronous copies
    /// are still in flight (the most recent ones); `0` waits for all.
    WaitAsyncCopies {
        /// Groups that may still be in flight.
        pending: u32,
    },
}
