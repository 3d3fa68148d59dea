//! Arrays in the expansion: parameters ([`ArrayVal`]) and local arrays ([`LocalArrayVal`]).

use super::builder::{array_is_mutable, error, new_var, push};
use super::val::Val;
use crate::ir::{Instruction, Operation, Type, Value, VarId};
use crate::scalar::Scalar;
use std::marker::PhantomData;

/// An array parameter of the kernel being recorded: its buffer slot.
pub struct ArrayVal<T> {
    slot: u32,
    _marker: PhantomData<T>,
}

impl<T> Clone for ArrayVal<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ArrayVal<T> {}

impl<T: Scalar> ArrayVal<T> {
    /// Declares the next array parameter of the kernel.
    pub fn param(mutable: bool) -> Self {
        let slot = super::builder::array_param(crate::ir::Param::Array {
            elem: T::ELEM,
            mutable,
        });
        Self {
            slot,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> Val<u32> {
        Val::compute(Operation::Length { array: self.slot })
    }

    /// The buffer slot.
    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> Val<bool> {
        super::ops::eq(self.len(), Val::constant(0))
    }
}

/// A fixed-size local array of the kernel being recorded.
pub struct LocalArrayVal<T> {
    var: VarId,
    len: u32,
    _marker: PhantomData<T>,
}

impl<T> Clone for LocalArrayVal<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for LocalArrayVal<T> {}

impl<T: Scalar> LocalArrayVal<T> {
    /// A new local array of `len` copies of `value`.
    pub fn new(value: Val<T>, len: u32) -> Self {
        let var = new_var(Type::LocalArray(T::ELEM, len), None);
        let array = Self {
            var,
            len,
            _marker: PhantomData,
        };
        let value = value.value();
        super::control::range_loop(
            Val::<u32>::constant(0),
            Val::constant(len),
            Val::constant(1),
            false,
            |i| {
                push(Instruction::LocalStore {
                    array: var,
                    index: i.value(),
                    value,
                })
            },
        );
        array
    }

    /// A copy of this array (what `let b = a;` makes).
    pub fn copy(self) -> Self {
        let copy = Self {
            var: new_var(Type::LocalArray(T::ELEM, self.len), None),
            len: self.len,
            _marker: PhantomData,
        };
        super::control::range_loop(
            Val::<u32>::constant(0),
            Val::constant(self.len),
            Val::constant(1),
            false,
            |i| {
                let element = self.load(i);
                push(Instruction::LocalStore {
                    array: copy.var,
                    index: i.value(),
                    value: element.value(),
                })
            },
        );
        copy
    }

    fn operand(&self) -> Value {
        Value::Var(self.var, Type::LocalArray(T::ELEM, self.len))
    }

    /// A new local array of `len` elements, left as the next instruction writes it.
    pub(crate) fn uninitialized(len: u32) -> Self {
        Self {
            var: new_var(Type::LocalArray(T::ELEM, len), None),
            len,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> Val<u32> {
        Val::constant(self.len)
    }

    /// The variable and the number of elements, for operations on whole local arrays.
    pub(crate) fn var_and_len(&self) -> (VarId, u32) {
        (self.var, self.len)
    }
}

/// What kernel code can index in the expansion (the counterpart of
/// [`crate::native::Indexable`]).
#[allow(clippy::len_without_is_empty)] // `is_empty` is the free function of the same name
pub trait Indexable {
    /// The element type.
    type Elem: Scalar;
    /// The number of elements.
    fn len(&self) -> Val<u32>;
    /// Records a load of element `index`.
    fn load(&self, index: Val<u32>) -> Val<Self::Elem>;
    /// Records a store of `value` to element `index`.
    fn store(&self, index: Val<u32>, value: Val<Self::Elem>);
}

impl<T: Scalar> Indexable for ArrayVal<T> {
    type Elem = T;

    fn len(&self) -> Val<u32> {
        ArrayVal::len(self)
    }

    fn load(&self, index: Val<u32>) -> Val<T> {
        Val::compute(Operation::Load {
            array: self.slot,
            index: index.value(),
        })
    }

    fn store(&self, index: Val<u32>, value: Val<T>) {
        if !array_is_mutable(self.slot) {
            error(format!(
                "array parameter {} is read-only (`&Array`); take it as `&mut Array` to write it",
                self.slot
            ));
        }
        push(Instruction::Store {
            array: self.slot,
            index: index.value(),
            value: value.value(),
        });
    }
}

impl<T: Scalar> Indexable for LocalArrayVal<T> {
    type Elem = T;

    fn len(&self) -> Val<u32> {
        LocalArrayVal::len(self)
    }

    fn load(&self, index: Val<u32>) -> Val<T> {
        Val::compute(Operation::LocalLoad {
            array: self.operand(),
            index: index.value(),
        })
    }

    fn store(&self, index: Val<u32>, value: Val<T>) {
        push(Instruction::LocalStore {
            array: self.var,
            index: index.value(),
            value: value.value(),
        });
    }
}

/// The widths a line may have.
const LINE_WIDTHS: [u32; 4] = [1, 2, 4, 8];

fn check_line<T: Scalar>(width: u32) -> bool {
    if !LINE_WIDTHS.contains(&width) {
        error(format!("a line is 1, 2, 4 or 8 elements wide, not {width}"));
        return false;
    }
    if T::ELEM == crate::elem::ElemType::Bool {
        error("lines of `bool` aren't supported (load the bytes as `u8`)");
        return false;
    }
    true
}

/// `x.line::<N>(i)`: line `i` of `array` (elements `i * N .. i * N + N`) as a local array.
pub fn load_line<T: Scalar>(array: &ArrayVal<T>, index: Val<u32>, width: u32) -> LocalArrayVal<T> {
    let line = LocalArrayVal::uninitialized(width);
    if check_line::<T>(width) {
        push(Instruction::LoadLine {
            out: line.var,
            array: array.slot,
            index: index.value(),
        });
    }
    line
}

/// `y.set_line(i, v)`: stores local array `value` to line `i` of `array`.
pub fn store_line<T: Scalar>(array: &ArrayVal<T>, index: Val<u32>, value: &LocalArrayVal<T>) {
    if !array_is_mutable(array.slot) {
        error(format!(
            "array parameter {} is read-only (`&Array`); take it as `&mut Array` to write it",
            array.slot
        ));
        return;
    }
    if check_line::<T>(value.len) {
        push(Instruction::StoreLine {
            array: array.slot,
            index: index.value(),
            value: value.var,
        });
    }
}
