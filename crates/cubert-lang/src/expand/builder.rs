//! The thread-local IR builder the expansion records into.
//!
//! [`record`] installs a builder, runs the expansion, and takes the kernel out. Operations
//! append to the innermost open block; [`in_block`] opens a nested one for structured
//! control flow. An operation the IR can't express (a store to a read-only array, ...)
//! records an error instead of panicking, and `record` returns the first one.

use crate::ir::{Block, Instruction, Kernel, Local, Operation, Param, Type, Value, VarId};
use std::cell::RefCell;
use std::fmt;

/// Why a kernel's expansion failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpandError {
    /// The kernel's name.
    pub kernel: String,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel `{}`: {}", self.kernel, self.message)
    }
}

impl std::error::Error for ExpandError {}

struct Builder {
    params: Vec<Param>,
    locals: Vec<Local>,
    blocks: Vec<Block>,
    arrays: u32,
    scalars: u32,
    tensors: u32,
    error: Option<String>,
}

thread_local! {
    static BUILDER: RefCell<Option<Builder>> = const { RefCell::new(None) };
}

/// Runs `expansion` and returns the kernel it recorded.
///
/// # Errors
/// [`ExpandError`] if the expansion recorded an error, or if an expansion is already
/// running on this thread (a kernel's expansion can't launch another).
pub fn record(name: &str, expansion: impl FnOnce()) -> Result<Kernel, ExpandError> {
    let fail = |message: String| ExpandError {
        kernel: name.to_string(),
        message,
    };
    let busy = BUILDER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_some() {
            return true;
        }
        *slot = Some(Builder {
            params: Vec::new(),
            locals: Vec::new(),
            blocks: vec![Block::default()],
            arrays: 0,
            scalars: 0,
            tensors: 0,
            error: None,
        });
        false
    });
    if busy {
        return Err(fail(
            "an expansion is already running on this thread".into(),
        ));
    }
    // Take the builder out even if the expansion panics (a bug in user code that the
    // native path would hit too), so the thread can record again.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BUILDER.with(|cell| cell.borrow_mut().take());
        }
    }
    let reset = Reset;
    expansion();
    let builder = BUILDER.with(|cell| cell.borrow_mut().take());
    drop(reset);
    let Some(mut builder) = builder else {
        return Err(fail("the builder disappeared during the expansion".into()));
    };
    if let Some(message) = builder.error {
        return Err(fail(message));
    }
    let body = builder.blocks.pop().unwrap_or_default();
    if !builder.blocks.is_empty() {
        return Err(fail("a block was left open".into()));
    }
    Ok(Kernel {
        name: name.to_string(),
        params: builder.params,
        locals: builder.locals,
        tensors: builder.tensors,
        body,
    })
}

fn with<R>(default: R, f: impl FnOnce(&mut Builder) -> R) -> R {
    BUILDER.with(|cell| match cell.borrow_mut().as_mut() {
        Some(builder) => f(builder),
        None => default,
    })
}

/// Records an error; the expansion goes on (its IR is discarded), so the first error is
/// the one reported.
pub fn error(message: impl Into<String>) {
    let message = message.into();
    with((), |builder| {
        builder.error.get_or_insert(message);
    });
}

/// A new local variable of type `ty`, named `name` in generated code if given.
pub fn new_var(ty: Type, name: Option<&str>) -> VarId {
    with(VarId(0), |builder| {
        let id = VarId(u32::try_from(builder.locals.len()).unwrap_or(u32::MAX));
        builder.locals.push(Local {
            ty,
            name: name.map(str::to_string),
        });
        id
    })
}

/// Appends `instruction` to the current block.
pub fn push(instruction: Instruction) {
    with((), |builder| {
        if let Some(block) = builder.blocks.last_mut() {
            block.instructions.push(instruction);
        }
    });
}

/// Replaces the current block's last instruction with `instruction` if `replaces` says so
/// for it, else appends `instruction`.
pub fn replace_last_or_push(instruction: Instruction, replaces: impl Fn(&Instruction) -> bool) {
    with((), |builder| {
        if let Some(block) = builder.blocks.last_mut() {
            match block.instructions.last_mut() {
                Some(last) if replaces(last) => *last = instruction,
                _ => block.instructions.push(instruction),
            }
        }
    });
}

/// Computes `op` into a new temporary of type `ty` and returns it.
pub fn compute(ty: Type, op: Operation) -> Value {
    let out = new_var(ty, None);
    push(Instruction::Assign { out, op });
    Value::Var(out, ty)
}

/// Runs `body` with a fresh current block and returns that block.
pub fn in_block(body: impl FnOnce()) -> Block {
    with((), |builder| builder.blocks.push(Block::default()));
    body();
    with(Block::default(), |builder| {
        // `record` opened the outermost block, so there is always one to pop here.
        if builder.blocks.len() > 1 {
            builder.blocks.pop().unwrap_or_default()
        } else {
            Block::default()
        }
    })
}

/// Declares the next array parameter and returns its buffer slot.
pub fn array_param(param: Param) -> u32 {
    with(0, |builder| {
        builder.params.push(param);
        let slot = builder.arrays;
        builder.arrays += 1;
        slot
    })
}

/// Declares that the array parameter just declared is a tensor; returns its ordinal among
/// the kernel's tensors.
pub fn tensor_param() -> u32 {
    with(0, |builder| {
        let ordinal = builder.tensors;
        builder.tensors += 1;
        ordinal
    })
}

/// Declares the next scalar parameter and returns its info-word index.
pub fn scalar_param(param: Param) -> u32 {
    with(0, |builder| {
        builder.params.push(param);
        let index = builder.scalars;
        builder.scalars += 1;
        index
    })
}

/// Whether array `slot` was declared mutable.
pub fn array_is_mutable(slot: u32) -> bool {
    with(false, |builder| {
        builder
            .params
            .iter()
            .filter_map(|param| match param {
                Param::Array { mutable, .. } => Some(*mutable),
                Param::Scalar(_) => None,
            })
            .nth(slot as usize)
            .unwrap_or(false)
    })
}
