//! Asynchronous global-to-shared copies in the expansion: `copy_line_async::<N>(&mut tile,
//! i, x, j, valid)`, `commit_async_copies()` and `wait_async_copies(n)` record
//! [`Instruction::CopyLineAsync`], [`Instruction::CommitAsyncCopies`] and
//! [`Instruction::WaitAsyncCopies`].

use super::array::ArrayVal;
use super::builder::{error, push};
use super::cooperative::SharedArrayVal;
use super::val::Val;
use crate::ir::Instruction;
use crate::scalar::Scalar;

/// The widths an asynchronous copy may have.
const COPY_WIDTHS: [u32; 5] = [1, 2, 4, 8, 16];

/// `copy_line_async::<N>(&mut tile, shared_line, array, line, valid)`: starts copying line
/// `line` of `array` to line `shared_line` of `tile` (zeros when `valid` is false).
pub fn copy_line_async<T: Scalar>(
    shared: &SharedArrayVal<T>,
    shared_line: Val<u32>,
    array: &ArrayVal<T>,
    line: Val<u32>,
    valid: Val<bool>,
    width: u32,
) {
    if !COPY_WIDTHS.contains(&width) {
        error(format!(
            "an asynchronous copy moves a line of 1, 2, 4, 8 or 16 elements, not {width}"
        ));
        return;
    }
    if T::ELEM == crate::elem::ElemType::Bool {
        error("asynchronous copies of `bool` aren't supported (copy the bytes as `u8`)");
        return;
    }
    push(Instruction::CopyLineAsync {
        shared: shared.var(),
        shared_line: shared_line.value(),
        array: array.slot(),
        line: line.value(),
        width,
        valid: valid.value(),
    });
}

/// `commit_async_copies()`: the copies started since the last commit form a group.
pub fn commit_async_copies() {
    push(Instruction::CommitAsyncCopies);
}

/// `wait_async_copies(n)`: waits until at most `pending` committed groups are in flight.
pub fn wait_async_copies(pending: u32) {
    push(Instruction::WaitAsyncCopies { pending });
}
