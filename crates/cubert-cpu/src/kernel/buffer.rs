//! Typed views of a launch's buffers.
//!
//! A [`Buffer`] is what a kernel reads and writes. Its safe accessors (`load`, `store`) are
//! bounds-checked in checked modes and use relaxed atomic accesses for 1-, 2-, 4- and 8-byte
//! elements, so units of different cubes touching the same element (a racy kernel) give an
//! unspecified value, never undefined behaviour. The `unsafe` slice accessors are the fast
//! path for kernels that partition their output: each cube takes a disjoint range.

use super::access::AccessChecker;
use cubert_runtime::Element;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// A raw buffer of a launch: start and length in bytes (the language's type, shared so that
/// native kernels of the language read the same buffers as hand-written ones).
pub use cubert_lang::native::RawArray;

/// A typed view of one buffer of a launch.
pub struct Buffer<'a, T: Element> {
    ptr: *mut T,
    len: usize,
    index: usize,
    checker: &'a AccessChecker,
    _marker: PhantomData<&'a T>,
}

impl<T: Element> Clone for Buffer<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Element> Copy for Buffer<'_, T> {}

#[inline]
unsafe fn atomic_load<T: Element>(ptr: *mut T) -> T {
    // SAFETY: (all arms) `ptr` is in bounds and aligned for T (checked by the caller and by
    // `Buffer::new`); T is plain old data of the matching size.
    unsafe {
        match size_of::<T>() {
            1 => std::mem::transmute_copy(&AtomicU8::from_ptr(ptr.cast()).load(Ordering::Relaxed)),
            2 => std::mem::transmute_copy(&AtomicU16::from_ptr(ptr.cast()).load(Ordering::Relaxed)),
            4 => std::mem::transmute_copy(&AtomicU32::from_ptr(ptr.cast()).load(Ordering::Relaxed)),
            8 => std::mem::transmute_copy(&AtomicU64::from_ptr(ptr.cast()).load(Ordering::Relaxed)),
            _ => ptr.read(),
        }
    }
}

#[inline]
unsafe fn atomic_store<T: Element>(ptr: *mut T, value: T) {
    // SAFETY: (all arms) as in `atomic_load`.
    unsafe {
        match size_of::<T>() {
            1 => AtomicU8::from_ptr(ptr.cast())
                .store(std::mem::transmute_copy(&value), Ordering::Relaxed),
            2 => AtomicU16::from_ptr(ptr.cast())
                .store(std::mem::transmute_copy(&value), Ordering::Relaxed),
            4 => AtomicU32::from_ptr(ptr.cast())
                .store(std::mem::transmute_copy(&value), Ordering::Relaxed),
            8 => AtomicU64::from_ptr(ptr.cast())
                .store(std::mem::transmute_copy(&value), Ordering::Relaxed),
            _ => ptr.write(value),
        }
    }
}

impl<'a, T: Element> Buffer<'a, T> {
    /// A view of `raw` as elements of `T`, or `None` if its start isn't aligned for `T`.
    /// Trailing bytes that don't make a whole element are not part of the view.
    pub(crate) fn new(raw: RawArray, index: usize, checker: &'a AccessChecker) -> Option<Self> {
        if !(raw.ptr as usize).is_multiple_of(align_of::<T>()) {
            return None;
        }
        Some(Self {
            ptr: raw.ptr.cast(),
            len: raw.len / size_of::<T>().max(1),
            index,
            checker,
            _marker: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i`. Out of bounds (checked modes): the default value, and the launch fails.
    #[inline]
    pub fn load(&self, i: usize) -> T {
        if i < self.len {
            // SAFETY: `i` is in bounds.
            unsafe { atomic_load(self.ptr.add(i)) }
        } else if self.checker.checks() {
            self.out_of_bounds("load", i);
            T::default()
        } else {
            // SAFETY: unchecked mode: the caller of `launch_unchecked` guarantees the access
            // is valid.
            unsafe { atomic_load(self.ptr.add(i)) }
        }
    }

    /// Sets element `i`. Out of bounds (checked modes): nothing is written, and the launch
    /// fails.
    #[inline]
    pub fn store(&self, i: usize, value: T) {
        if i < self.len {
            // SAFETY: `i` is in bounds.
            unsafe { atomic_store(self.ptr.add(i), value) }
        } else if self.checker.checks() {
            self.out_of_bounds("store", i);
        } else {
            // SAFETY: unchecked mode: the caller of `launch_unchecked` guarantees the access
            // is valid.
            unsafe { atomic_store(self.ptr.add(i), value) }
        }
    }

    #[cold]
    fn out_of_bounds(&self, what: &str, i: usize) {
        let (index, len) = (self.index, self.len);
        self.checker.violation(|| {
            format!("{what} of element {i} of buffer {index}, which has {len} elements")
        });
    }

    /// Whether every index of `range` is in bounds (records nothing). Kernels test this
    /// before taking the unchecked fast path and fall back to `load`/`store` otherwise, so
    /// each out-of-bounds element is reported.
    pub fn covers(&self, range: &Range<usize>) -> bool {
        range.start <= range.end && range.end <= self.len
    }

    /// Whether this buffer's memory overlaps `other`'s (the same handle bound twice, or two
    /// views of one allocation). Kernels that take slices check this first.
    pub fn overlaps<U: Element>(&self, other: &Buffer<'_, U>) -> bool {
        let (a_start, a_end) = (
            self.ptr as usize,
            self.ptr as usize + self.len * size_of::<T>(),
        );
        let (b_start, b_end) = (
            other.ptr as usize,
            other.ptr as usize + other.len * size_of::<U>(),
        );
        a_start < b_end && b_start < a_end
    }

    /// The elements of `range`, read-only.
    ///
    /// # Safety
    /// `range` must be in bounds, and no unit of this launch may write these elements while
    /// the slice lives.
    #[inline]
    pub unsafe fn slice(&self, range: Range<usize>) -> &'a [T] {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(self.ptr.add(range.start), range.end - range.start) }
    }

    /// The elements of `range`, writable.
    ///
    /// # Safety
    /// `range` must be in bounds, and no other unit of this launch may read or write these
    /// elements while the slice lives (each cube takes a disjoint range).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, range: Range<usize>) -> &'a mut [T] {
        // SAFETY: guaranteed by the caller.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.end - range.start)
        }
    }

    /// The first element's address, for kernels that need raw access.
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }
}
