//! Atomic read-modify-writes on global and shared arrays, for `i32`, `u32` and `f32`.
//!
//! Global arrays are shared by the worker threads running a launch's cubes, so their
//! atomics are real atomic instructions (`f32` add, min and max through a compare-exchange
//! loop on the bits). Shared arrays belong to one cube, whose units run on one thread: a
//! plain read-modify-write is atomic there. Each operation returns the previous value; an
//! index out of bounds is reported like any access and gives zero.

use super::array::Array;
use super::cooperative::{SharedMemory, read_bits};
use crate::scalar::Scalar;
use std::sync::atomic::{AtomicU32, Ordering};

/// A type atomics work on: `i32`, `u32`, `f32` (all 32 bits wide).
pub trait AtomicScalar: Scalar {
    /// The value after an atomic add of `v` (wrapping for integers).
    fn atomic_add(x: Self, v: Self) -> Self;
    /// The larger (floats: `f32::max`).
    fn atomic_max(x: Self, v: Self) -> Self;
    /// The smaller (floats: `f32::min`).
    fn atomic_min(x: Self, v: Self) -> Self;
}

macro_rules! atomic_integer {
    ($($ty:ty),*) => {$(
        impl AtomicScalar for $ty {
            fn atomic_add(x: Self, v: Self) -> Self {
                x.wrapping_add(v)
            }
            fn atomic_max(x: Self, v: Self) -> Self {
                x.max(v)
            }
            fn atomic_min(x: Self, v: Self) -> Self {
                x.min(v)
            }
        }
    )*};
}

atomic_integer!(i32, u32);

impl AtomicScalar for f32 {
    fn atomic_add(x: Self, v: Self) -> Self {
        x + v
    }
    fn atomic_max(x: Self, v: Self) -> Self {
        x.max(v)
    }
    fn atomic_min(x: Self, v: Self) -> Self {
        x.min(v)
    }
}

/// An array atomics can target.
pub trait AtomicArray {
    /// The element type.
    type Elem: AtomicScalar;
    /// Replaces element `index` by `update(old)` atomically, unless `update` returns
    /// `None`; returns the old value (zero out of bounds).
    #[track_caller]
    fn update(&self, index: u32, update: impl Fn(Self::Elem) -> Option<Self::Elem>) -> Self::Elem;
}

impl<T: AtomicScalar> AtomicArray for Array<'_, T> {
    type Elem = T;

    #[track_caller]
    fn update(&self, index: u32, update: impl Fn(T) -> Option<T>) -> T {
        let Some(ptr) = self.element_ptr(index, true) else {
            return T::default();
        };
        // SAFETY: `element_ptr` returned an in-bounds element of the launch's buffer,
        // aligned for T (4 bytes), valid for the launch; every access to it by other units
        // is atomic (`Array`'s accesses are).
        let atomic = unsafe { AtomicU32::from_ptr(ptr.cast::<u32>()) };
        let mut old = atomic.load(Ordering::Relaxed);
        loop {
            let Some(new) = update(T::from_bits(u64::from(old))) else {
                return T::from_bits(u64::from(old));
            };
            match atomic.compare_exchange_weak(
                old,
                new.to_bits() as u32,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(previous) => return T::from_bits(u64::from(previous)),
                Err(current) => old = current,
            }
        }
    }
}

impl<T: AtomicScalar> AtomicArray for SharedMemory<'_, T> {
    type Elem = T;

    #[track_caller]
    fn update(&self, index: u32, update: impl Fn(T) -> Option<T>) -> T {
        let Some(ptr) = self.element_ptr(index, true) else {
            return T::default();
        };
        // SAFETY: an in-bounds element of the cube's shared storage (aligned, alive until
        // the cube ends); the cube's units all run on this thread, one at a time, so this
        // read-modify-write can't be interleaved with another unit's access.
        unsafe {
            let old = T::from_bits(read_bits(ptr));
            if let Some(new) = update(old) {
                ptr.write(new);
            }
            old
        }
    }
}

/// `atomic_add(x, i, v)`: `x[i] += v`, returning the old value.
#[track_caller]
pub fn atomic_add<A: AtomicArray>(array: &A, index: u32, value: A::Elem) -> A::Elem {
    array.update(index, |old| Some(A::Elem::atomic_add(old, value)))
}

/// `atomic_max(x, i, v)`: `x[i] = max(x[i], v)`, returning the old value.
#[track_caller]
pub fn atomic_max<A: AtomicArray>(array: &A, index: u32, value: A::Elem) -> A::Elem {
    array.update(index, |old| Some(A::Elem::atomic_max(old, value)))
}

/// `atomic_min(x, i, v)`: `x[i] = min(x[i], v)`, returning the old value.
#[track_caller]
pub fn atomic_min<A: AtomicArray>(array: &A, index: u32, value: A::Elem) -> A::Elem {
    array.update(index, |old| Some(A::Elem::atomic_min(old, value)))
}

/// `atomic_exchange(x, i, v)`: `x[i] = v`, returning the old value.
#[track_caller]
pub fn atomic_exchange<A: AtomicArray>(array: &A, index: u32, value: A::Elem) -> A::Elem {
    array.update(index, |_| Some(value))
}

/// `atomic_compare_exchange(x, i, compare, v)`: `x[i] = v` if `x[i]` has the bits of
/// `compare`; returns the old value either way.
#[track_caller]
pub fn atomic_compare_exchange<A: AtomicArray>(
    array: &A,
    index: u32,
    compare: A::Elem,
    value: A::Elem,
) -> A::Elem {
    array.update(index, |old| {
        (old.to_bits() == compare.to_bits()).then_some(value)
    })
}
