//! Range loops with constant bounds print unrolled: the body once per counter value, each
//! copy after the counter's assignment to that constant.
//!
//! A kernel's small constant loops mostly index local arrays (a line's four elements, a
//! unit's register tile). Printed as WGSL `for` loops, the indices stay dynamic for the
//! driver, which then keeps the local arrays in memory instead of registers: on the H200
//! (NVIDIA's Vulkan driver) the vector add by lines ran at about half the bandwidth of the
//! same add without local arrays (`docs/wgpu.md`). Unrolled, every index is a constant
//! after the assignment, which the driver folds, as CUDA's `#pragma unroll` does.
//!
//! [`trips`] gives the counter values of a loop that unrolls: `start`, `end` and `step`
//! constants (a step below 1 counts as 1, as the loop does), at most [`MAX_TRIPS`] values
//! within `i32`, a body that doesn't `break` or `continue` this loop, and at most
//! [`MAX_COPIES`] instructions printed in all (nested loops that unroll count theirs).

use cubert_lang::ir::{Block, Instruction, Value};

/// Most iterations a loop unrolls into.
pub(super) const MAX_TRIPS: i64 = 16;

/// Most instructions the unrolled copies of one loop's body may hold.
pub(super) const MAX_COPIES: usize = 4096;

/// The counter values of a range loop that unrolls, or `None`.
pub(super) fn trips(
    start: Value,
    end: Value,
    step: Value,
    inclusive: bool,
    body: &Block,
) -> Option<Vec<i64>> {
    let (Value::Const(start), Value::Const(end), Value::Const(step)) = (start, end, step) else {
        return None;
    };
    let in_i32 = |value: i64| i64::from(i32::MIN) <= value && value <= i64::from(i32::MAX);
    let (first, last, step) = (start.as_i64(), end.as_i64(), step.as_i64().max(1));
    if !(in_i32(first) && in_i32(last) && in_i32(step)) || breaks_out(body) {
        return None;
    }
    let mut values = Vec::new();
    let mut value = first;
    while value < last || (inclusive && value == last) {
        if values.len() as i64 == MAX_TRIPS {
            return None;
        }
        values.push(value);
        value += step;
    }
    (weight(body).saturating_mul(values.len()) <= MAX_COPIES).then_some(values)
}

/// Whether `block` breaks or continues the loop it is the body of (not an inner one).
fn breaks_out(block: &Block) -> bool {
    block
        .instructions
        .iter()
        .any(|instruction| match instruction {
            Instruction::Break | Instruction::Continue => true,
            Instruction::If {
                then, otherwise, ..
            } => breaks_out(then) || breaks_out(otherwise),
            _ => false,
        })
}

/// The instructions `block` prints, inner loops that unroll counted once per copy.
fn weight(block: &Block) -> usize {
    block
        .instructions
        .iter()
        .map(|instruction| match instruction {
            Instruction::If {
                then, otherwise, ..
            } => 1 + weight(then) + weight(otherwise),
            Instruction::Loop { body } => 1 + weight(body),
            Instruction::RangeLoop {
                start,
                end,
                step,
                inclusive,
                body,
                ..
            } => match trips(*start, *end, *step, *inclusive, body) {
                Some(values) => 1 + weight(body).saturating_mul(values.len()),
                None => 1 + weight(body),
            },
            _ => 1,
        })
        .fold(0, usize::saturating_add)
}
