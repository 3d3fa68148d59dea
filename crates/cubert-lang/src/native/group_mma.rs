//! `plane_group_mma` on the CPU: the plane group's multiply-accumulate, emulated exactly.
//!
//! The operands are in shared memory, so no unit needs another's registers: each unit
//! computes its own accumulator elements ([`GroupMmaShape::acc`]) from the tiles, as
//! `ACC + Σ A(r, k) · B(k, c)` over `k` in order, in `f32`, rounded after each addition,
//! reading each element as `tile[i]` reads it (bounds and, in validate mode, races
//! checked). The group's barrier semantics need nothing more here: every unit of a cube
//! runs on one thread, and the kernel's `sync_cube` before the call ordered the tiles'
//! writes.

use super::Indexable;
use super::cooperative::SharedMemory;
use super::unit::Unit;
use crate::ir::GroupMmaShape;
use crate::scalar::MmaInput;

/// `plane_group_mma(&mut acc, &a_tile, a_start, &b_tile, b_start, b_panel_stride, n, k)`
/// (see [`crate::ir::group_mma`]). A placement the operation refuses, a type it doesn't
/// multiply or an accumulator of the wrong length is reported to the launch's monitor and
/// leaves `acc` as it is.
/// `plane_group_mma_async` runs here too, `asynchronous` true: the CPU multiplies at once,
/// which is one of the orders its semantics allow.
#[allow(clippy::too_many_arguments)]
pub fn plane_group_mma<T: MmaInput>(
    unit: &Unit,
    acc: &mut [f32],
    a: &SharedMemory<'_, T>,
    a_start: u32,
    b: &SharedMemory<'_, T>,
    b_start: u32,
    b_panel_stride: u32,
    n: u32,
    k: u32,
    _asynchronous: bool,
) {
    let shape = match GroupMmaShape::new(n, k) {
        Ok(shape) if (acc.len() as u64) < u64::from(shape.accumulators()) => {
            a.report(&format!(
                "plane_group_mma into N = {n} columns takes an accumulator of at least {} f32, \
                 not {}",
                shape.accumulators(),
                acc.len()
            ));
            return;
        }
        Ok(shape) if GroupMmaShape::multiplies(T::ELEM) => shape,
        Ok(_) => {
            a.report(&format!(
                "plane_group_mma multiplies bf16 or f16 tiles, not {}",
                T::ELEM
            ));
            return;
        }
        Err(message) => {
            a.report(&message);
            return;
        }
    };
    let placement = shape.check_placement((a_start, a.len()), (b_start, b_panel_stride, b.len()));
    if let Err(message) = placement {
        a.report(&message);
        return;
    }
    let unit_in_group = unit.unit_pos() % 128;
    let used = shape.accumulators() as usize;
    for (i, out) in (0u32..).zip(acc[..used].iter_mut()) {
        let (row, column) = GroupMmaShape::acc(unit_in_group, i);
        *out = (0..shape.k).fold(*out, |sum, kk| {
            let x = a.load(GroupMmaShape::a_index(a_start, row, kk)).mma_value();
            let y = b
                .load(GroupMmaShape::b_index(b_start, b_panel_stride, kk, column))
                .mma_value();
            sum + x * y
        });
    }
}

/// `plane_group_mma_wait(n)`: the CPU's multiplies are done when they return, so there is
/// nothing to wait for.
pub fn plane_group_mma_wait(_pending: u32) {}
