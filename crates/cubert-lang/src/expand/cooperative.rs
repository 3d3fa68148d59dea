//! Barriers, plane operations, shared memory and atomics in the expansion.

use super::array::{ArrayVal, Indexable, LocalArrayVal};
use super::builder::{error, new_var, push};
use super::val::Val;
use crate::ir::{
    AtomicOp, AtomicTarget, GroupMmaShape, Instruction, MmaOperand, MmaShape, Operation, PlaneOp,
    Type, Value, VarId,
};
use crate::native::AtomicScalar;
use crate::scalar::{MmaInput, Numeric, Scalar};
use std::marker::PhantomData;

/// A shared array of the kernel being recorded.
pub struct SharedArrayVal<T> {
    var: VarId,
    len: u32,
    _marker: PhantomData<T>,
}

impl<T> Clone for SharedArrayVal<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedArrayVal<T> {}

impl<T: Scalar> SharedArrayVal<T> {
    /// The array's variable.
    pub(crate) fn var(&self) -> VarId {
        self.var
    }

    fn operand(&self) -> Value {
        Value::Var(self.var, Type::SharedArray(T::ELEM, self.len))
    }
}

impl<T: Scalar> Indexable for SharedArrayVal<T> {
    type Elem = T;

    fn len(&self) -> Val<u32> {
        Val::constant(self.len)
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

impl<T: Scalar> super::ops::Bind for SharedArrayVal<T> {
    fn bind_named(self, _name: &str) -> Self {
        self
    }
}

/// `SharedMemory::<T>::new(len)`: the site number is the native side's; the expansion
/// declares one shared array per call (a declaration in a loop is recorded once per
/// iteration of the expansion, which runs loops once, so once).
pub fn shared_array<T: Scalar>(_site: usize, len: u32) -> SharedArrayVal<T> {
    SharedArrayVal {
        var: new_var(Type::SharedArray(T::ELEM, len), None),
        len,
        _marker: PhantomData,
    }
}

/// `sync_cube()`.
pub fn sync_cube() {
    push(Instruction::SyncCube);
}

fn plane<T: Scalar>(op: PlaneOp, value: Val<T>) -> Val<T> {
    Val::compute(Operation::Plane(op, value.value()))
}

/// `plane_sum(v)`.
pub fn plane_sum<T: Numeric>(value: Val<T>) -> Val<T> {
    plane(PlaneOp::Sum, value)
}

/// `plane_min(v)`.
pub fn plane_min<T: Numeric>(value: Val<T>) -> Val<T> {
    plane(PlaneOp::Min, value)
}

/// `plane_max(v)`.
pub fn plane_max<T: Numeric>(value: Val<T>) -> Val<T> {
    plane(PlaneOp::Max, value)
}

/// `plane_all(b)`.
pub fn plane_all(value: Val<bool>) -> Val<bool> {
    plane(PlaneOp::All, value)
}

/// `plane_any(b)`.
pub fn plane_any(value: Val<bool>) -> Val<bool> {
    plane(PlaneOp::Any, value)
}

/// `plane_shuffle(v, lane)`.
pub fn plane_shuffle<T: Scalar>(value: Val<T>, lane: Val<u32>) -> Val<T> {
    Val::compute(Operation::PlaneShuffle {
        value: value.value(),
        lane: lane.value(),
    })
}

/// `plane_broadcast(v, lane)`.
pub fn plane_broadcast<T: Scalar>(value: Val<T>, lane: Val<u32>) -> Val<T> {
    plane_shuffle(value, lane)
}

/// What atomics can target in the expansion.
pub trait AtomicArray {
    /// The element type.
    type Elem: AtomicScalar;
    /// The IR target.
    fn target(&self) -> AtomicTarget;
}

impl<T: AtomicScalar> AtomicArray for ArrayVal<T> {
    type Elem = T;
    fn target(&self) -> AtomicTarget {
        if !super::builder::array_is_mutable(self.slot()) {
            error("atomics write their array: take it as `&mut Array`");
        }
        AtomicTarget::Global(self.slot())
    }
}

impl<T: AtomicScalar> AtomicArray for SharedArrayVal<T> {
    type Elem = T;
    fn target(&self) -> AtomicTarget {
        AtomicTarget::Shared(self.operand())
    }
}

fn atomic<A: AtomicArray>(
    op: AtomicOp,
    array: &A,
    index: Val<u32>,
    value: Val<A::Elem>,
    compare: Option<Val<A::Elem>>,
) -> Val<A::Elem> {
    let ty = Type::Scalar(A::Elem::ELEM);
    let out = new_var(ty, None);
    push(Instruction::Assign {
        out,
        op: Operation::Atomic {
            op,
            target: array.target(),
            index: index.value(),
            value: value.value(),
            compare: compare.map(Val::value),
        },
    });
    Val::from_value(Value::Var(out, ty))
}

/// `atomic_add(x, i, v)`.
pub fn atomic_add<A: AtomicArray>(array: &A, index: Val<u32>, value: Val<A::Elem>) -> Val<A::Elem> {
    atomic(AtomicOp::Add, array, index, value, None)
}

/// `atomic_max(x, i, v)`.
pub fn atomic_max<A: AtomicArray>(array: &A, index: Val<u32>, value: Val<A::Elem>) -> Val<A::Elem> {
    atomic(AtomicOp::Max, array, index, value, None)
}

/// `atomic_min(x, i, v)`.
pub fn atomic_min<A: AtomicArray>(array: &A, index: Val<u32>, value: Val<A::Elem>) -> Val<A::Elem> {
    atomic(AtomicOp::Min, array, index, value, None)
}

/// `atomic_exchange(x, i, v)`.
pub fn atomic_exchange<A: AtomicArray>(
    array: &A,
    index: Val<u32>,
    value: Val<A::Elem>,
) -> Val<A::Elem> {
    atomic(AtomicOp::Exchange, array, index, value, None)
}

/// `atomic_compare_exchange(x, i, compare, v)`.
pub fn atomic_compare_exchange<A: AtomicArray>(
    array: &A,
    index: Val<u32>,
    compare: Val<A::Elem>,
    value: Val<A::Elem>,
) -> Val<A::Elem> {
    atomic(
        AtomicOp::CompareExchange,
        array,
        index,
        value,
        Some(compare),
    )
}

/// `plane_mma(&mut acc, a, b)`: records the plane's matrix multiply-accumulate
/// ([`Instruction::PlaneMma`]); the accumulator holds 4 `f32`, the fragments the lengths
/// of their type's shape ([`MmaShape`]), and `A` and `B` are of one type (or both 8-bit
/// floats).
pub fn plane_mma<A: MmaInput, B: MmaInput>(
    acc: &LocalArrayVal<f32>,
    a: LocalArrayVal<A>,
    b: LocalArrayVal<B>,
) {
    let (acc, acc_len) = acc.var_and_len();
    let (a, a_len) = a.var_and_len();
    let (b, b_len) = b.var_and_len();
    let Some(shape) = MmaShape::of_pair(A::ELEM, B::ELEM) else {
        error(format!(
            "plane_mma multiplies fragments of one type (or two 8-bit floats), not {} by {}",
            A::ELEM,
            B::ELEM
        ));
        return;
    };
    let want = (
        4,
        shape.fragment_len(MmaOperand::A),
        shape.fragment_len(MmaOperand::B),
    );
    if (acc_len, a_len, b_len) != want {
        error(format!(
            "plane_mma on {} takes fragments of 4 f32 (the accumulator), {} and {} elements \
             (A and B), not {acc_len}, {a_len} and {b_len}",
            A::ELEM,
            want.1,
            want.2
        ));
        return;
    }
    push(Instruction::PlaneMma { acc, a, b });
}

/// `plane_load_a(&tile, start, stride)`: the unit's fragment of the 16 × K `A` operand
/// (K and the fragment's length by the type: [`MmaShape`]) whose element `(r, c)` is
/// `tile[start + r * stride + c]`
/// ([`Instruction::PlaneLoadFragment`]).
pub fn plane_load_a<T: MmaInput>(
    shared: &SharedArrayVal<T>,
    start: Val<u32>,
    stride: Val<u32>,
) -> LocalArrayVal<T> {
    load_fragment(MmaOperand::A, shared, start, stride)
}

/// `plane_load_b(&tile, start, stride)`: the unit's fragment of the K × 8 `B` operand
/// whose element `(k, n)` is `tile[start + k * stride + n]`
/// ([`Instruction::PlaneLoadFragment`]).
pub fn plane_load_b<T: MmaInput>(
    shared: &SharedArrayVal<T>,
    start: Val<u32>,
    stride: Val<u32>,
) -> LocalArrayVal<T> {
    load_fragment(MmaOperand::B, shared, start, stride)
}

fn load_fragment<T: MmaInput>(
    operand: MmaOperand,
    shared: &SharedArrayVal<T>,
    start: Val<u32>,
    stride: Val<u32>,
) -> LocalArrayVal<T> {
    let len = MmaShape::of(T::ELEM).map_or(0, |shape| shape.fragment_len(operand));
    let out = LocalArrayVal::<T>::uninitialized(len);
    push(Instruction::PlaneLoadFragment {
        out: out.var_and_len().0,
        operand,
        shared: shared.var(),
        start: start.value(),
        stride: stride.value(),
    });
    out
}

/// `plane_group_mma(&mut acc, &a_tile, a_start, &b_tile, b_start, b_panel_stride, n, k)`:
/// records the plane group's multiply-accumulate ([`Instruction::PlaneGroupMma`]); N is 64,
/// 128, 192 or 256 and K 16, 32, 48 or 64 ([`GroupMmaShape`]), the accumulator holds at
/// least N / 2 `f32`, and the tiles are of one 16-bit float type. `asynchronous` records
/// `plane_group_mma_async` (the macro passes it).
#[allow(clippy::too_many_arguments)]
pub fn plane_group_mma<T: MmaInput>(
    acc: &LocalArrayVal<f32>,
    a: &SharedArrayVal<T>,
    a_start: Val<u32>,
    b: &SharedArrayVal<T>,
    b_start: Val<u32>,
    b_panel_stride: Val<u32>,
    n: u32,
    k: u32,
    asynchronous: bool,
) {
    if !GroupMmaShape::multiplies(T::ELEM) {
        error(format!(
            "plane_group_mma multiplies bf16 or f16 tiles, not {}",
            T::ELEM
        ));
        return;
    }
    let (acc, acc_len) = acc.var_and_len();
    let shape = match GroupMmaShape::new(n, k) {
        Ok(shape) => shape,
        Err(message) => {
            error(message);
            return;
        }
    };
    if acc_len < shape.accumulators() {
        error(format!(
            "plane_group_mma into N = {n} columns takes an accumulator of at least {} f32, \
             not {acc_len}",
            shape.accumulators()
        ));
        return;
    }
    push(Instruction::PlaneGroupMma {
        acc,
        a: a.var(),
        a_start: a_start.value(),
        b: b.var(),
        b_start: b_start.value(),
        b_panel_stride: b_panel_stride.value(),
        n,
        k,
        asynchronous,
    });
}

/// `plane_group_mma_wait(n)`: records the wait for the plane group's asynchronous
/// multiplies ([`Instruction::PlaneGroupMmaWait`]).
pub fn plane_group_mma_wait(pending: u32) {
    push(Instruction::PlaneGroupMmaWait { pending });
}
