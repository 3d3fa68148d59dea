//! Structured control flow in the expansion: each construct records a nested block around
//! a closure.

use super::builder::{in_block, new_var, push};
use super::val::Val;
use crate::ir::{Instruction, Operation, UnaryOp, Value};
use crate::scalar::{Int, Scalar};

/// `if cond { then } else { otherwise }`.
pub fn if_else(cond: Val<bool>, then: impl FnOnce(), otherwise: impl FnOnce()) {
    let then = in_block(then);
    let otherwise = in_block(otherwise);
    push(Instruction::If {
        cond: cond.value(),
        then,
        otherwise,
    });
}

/// `if cond { then } else { otherwise }` used as a value.
pub fn if_value<T: Scalar>(
    cond: Val<bool>,
    then: impl FnOnce() -> Val<T>,
    otherwise: impl FnOnce() -> Val<T>,
) -> Val<T> {
    let out = new_var(Val::<T>::ty(), None);
    let then = in_block(|| {
        let value = then();
        push(Instruction::Assign {
            out,
            op: Operation::Copy(value.value()),
        });
    });
    let otherwise = in_block(|| {
        let value = otherwise();
        push(Instruction::Assign {
            out,
            op: Operation::Copy(value.value()),
        });
    });
    push(Instruction::If {
        cond: cond.value(),
        then,
        otherwise,
    });
    Val::from_value(Value::Var(out, Val::<T>::ty()))
}

/// `a && b`, evaluating `b` only if `a` holds.
pub fn and(a: Val<bool>, b: impl FnOnce() -> Val<bool>) -> Val<bool> {
    if_value(a, b, || Val::constant(false))
}

/// `a || b`, evaluating `b` only if `a` doesn't hold.
pub fn or(a: Val<bool>, b: impl FnOnce() -> Val<bool>) -> Val<bool> {
    if_value(a, || Val::constant(true), b)
}

/// `for i in (start..end).step_by(step) { body(i) }` (`..=` if `inclusive`); a step of
/// zero or less counts as 1.
pub fn range_loop<T: Int>(
    start: Val<T>,
    end: Val<T>,
    step: Val<T>,
    inclusive: bool,
    body: impl FnOnce(Val<T>),
) {
    let var = new_var(Val::<T>::ty(), None);
    let counter = Val::from_value(Value::Var(var, Val::<T>::ty()));
    let body = in_block(|| body(counter));
    push(Instruction::RangeLoop {
        var,
        start: start.value(),
        end: end.value(),
        step: step.value(),
        inclusive,
        body,
    });
}

/// `while cond { body }`.
pub fn while_loop(cond: impl FnOnce() -> Val<bool>, body: impl FnOnce()) {
    let body = in_block(|| {
        let holds = cond();
        let stop = Val::<bool>::compute(Operation::Unary(UnaryOp::Not, holds.value()));
        let leave = in_block(|| push(Instruction::Break));
        push(Instruction::If {
            cond: stop.value(),
            then: leave,
            otherwise: Default::default(),
        });
        body();
    });
    push(Instruction::Loop { body });
}

/// `loop { body }`.
pub fn loop_(body: impl FnOnce()) {
    let body = in_block(body);
    push(Instruction::Loop { body });
}

/// `break`.
pub fn break_() {
    push(Instruction::Break);
}

/// `continue`.
pub fn continue_() {
    push(Instruction::Continue);
}

/// `return` (the unit's work ends).
pub fn return_() {
    push(Instruction::Return);
}

/// Notes that the statements recorded next come from `file:line` of the kernel's source
/// (the macro calls it before each statement). A note directly after another replaces it.
pub fn source_line(file: &'static str, line: u32) {
    let note = Instruction::SourceLine { file, line };
    super::builder::replace_last_or_push(note, |last| {
        matches!(last, Instruction::SourceLine { .. })
    });
}
