//! Lines on the native path: `x.line::<N>(i)` and `y.set_line(i, v)`.
//!
//! A line is `N` consecutive elements (`i * N .. i * N + N`) moved as one local array
//! `[T; N]`. Natively each element goes through the array's checked access (an element out
//! of bounds is reported and loads zero), in a fixed-size loop the compiler unrolls and
//! vectorizes (a gathered array of the exclusive body checks the line once:
//! `Indexable::load_run`); the GPU backends turn the line into vector loads and stores.

use super::Indexable;

/// The first element of line `line` of width `N`, saturating (an index past `u32::MAX` is
/// out of bounds of every array, and reported as such).
#[inline]
fn first<const N: usize>(line: u32) -> u32 {
    line.saturating_mul(N as u32)
}

/// `x.line::<N>(i)`: elements `i * N .. i * N + N` of `array`.
#[inline]
#[track_caller]
pub fn load_line<A: Indexable, const N: usize>(array: &A, line: u32) -> [A::Elem; N] {
    array.load_run::<N>(first::<N>(line))
}

/// `y.set_line(i, v)`: stores `value` to elements `i * N .. i * N + N` of `array`.
#[inline]
#[track_caller]
pub fn store_line<A: Indexable, const N: usize>(array: &mut A, line: u32, value: &[A::Elem; N]) {
    let first = first::<N>(line);
    for (k, element) in value.iter().enumerate() {
        array.store(first.saturating_add(k as u32), *element);
    }
}
