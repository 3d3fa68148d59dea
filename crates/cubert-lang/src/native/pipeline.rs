//! Asynchronous global-to-shared copies on the native path.
//!
//! A unit's copy may land any time before the unit's wait for its group
//! (`docs/kernel-language.md`); on the CPU it lands at once, which is one of the orders the
//! GPUs allow. Commits and waits therefore have nothing to do here. Every element goes
//! through the arrays' checked accesses, so an element out of bounds is reported as a load
//! or store of it would be, and the shared stores take part in race detection.

use super::Indexable;
use super::cooperative::SharedMemory;
use super::line::load_line;
use crate::scalar::Scalar;

/// `copy_line_async::<N>(&mut tile, shared_line, array, line, valid)`: line `line` of
/// `array` (zeros when `valid` is false, without reading `array`) into line `shared_line`
/// of `tile`.
#[track_caller]
pub fn copy_line_async<T: Scalar, A: Indexable<Elem = T>, const N: usize>(
    tile: &SharedMemory<'_, T>,
    shared_line: u32,
    array: &A,
    line: u32,
    valid: bool,
) {
    let values = if valid {
        load_line::<A, N>(array, line)
    } else {
        [T::default(); N]
    };
    let mut tile = *tile;
    let first = shared_line.saturating_mul(N as u32);
    for (k, value) in (0u32..).zip(values) {
        tile.store(first.saturating_add(k), value);
    }
}

/// `commit_async_copies()`: nothing to do, every copy has landed.
#[inline]
pub fn commit_async_copies() {}

/// `wait_async_copies(n)`: nothing to wait for, every copy has landed.
#[inline]
pub fn wait_async_copies(_pending: u32) {}
