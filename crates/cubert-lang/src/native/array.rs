//! Arrays as the native path sees them, and the launch arguments they come from.
//!
//! An [`Array`] is a typed view of one buffer of a launch. Its accesses are bounds-checked
//! and use relaxed atomic loads and stores for 1-, 2-, 4- and 8-byte elements, so units of
//! different cubes (running on different threads) racing on one element give an unspecified
//! value, never undefined behaviour. An out-of-bounds access is reported to the launch's
//! [`AccessMonitor`] and skipped (a load gives zero), like a checked GPU launch.

use crate::scalar::Scalar;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Where a launch's out-of-bounds accesses go (the CPU backend's access checker).
pub trait AccessMonitor: Sync {
    /// Records an access to element `index` of buffer `buffer`, which has `len` elements,
    /// made by the kernel source line `at`.
    fn out_of_bounds(&self, buffer: usize, index: u64, len: u64, store: bool, at: &Location<'_>);

    /// Whether the launch's outcome is decided (too many out-of-bounds accesses): the
    /// remaining units of a cube don't run.
    fn gave_up(&self) -> bool {
        false
    }

    /// Records an error of the kernel that isn't an access (a barrier in divergent
    /// control flow, ...): the launch fails with it.
    fn kernel_error(&self, message: &str);

    /// Whether shared-memory accesses are checked for data races (the slow checked mode:
    /// `[compilation] bounds_check = "validate"` on the CPU).
    fn checks_races(&self) -> bool {
        false
    }

    /// Records a data race on shared memory (two units touching one element between
    /// barriers, at least one of them writing): the launch fails with it.
    fn data_race(&self, description: &str);
}

/// One buffer of a launch: its first byte and its length in bytes.
#[derive(Clone, Copy, Debug)]
pub struct RawArray {
    /// First byte.
    pub ptr: *mut u8,
    /// Length in bytes.
    pub len: usize,
}

// SAFETY: a RawArray is only dereferenced through `Array` (atomic accesses) or by CPU
// kernels under their contract (disjoint ranges per cube); the memory outlives the launch
// because the launch holds the bindings.
unsafe impl Send for RawArray {}
// SAFETY: as above.
unsafe impl Sync for RawArray {}

impl RawArray {
    /// No buffer: zero bytes at an address aligned for every scalar type, so the array made
    /// of it is empty (every access reports out of bounds) and never dereferenced.
    pub(crate) const MISSING: Self = Self {
        ptr: std::ptr::NonNull::<u128>::dangling().as_ptr().cast(),
        len: 0,
    };
}

/// Buffers and info words an [`Args`] holds by value (the rest it reads from the launch's
/// slices).
const INLINE: usize = 8;

/// The arguments of one launch, as the native kernel reads them: buffers in binding order,
/// scalars as info words.
///
/// The first `INLINE` (8) buffers and info words are copies inside the value: the macro's
/// native function takes its arrays and scalars from `&Args` once per unit, and a kernel's
/// `&Args` parameter is memory nothing writes during the call, so the compiler hoists those
/// reads (and the alignment and length arithmetic of [`Args::array`]) out of
/// [`super::run_cube`]'s loop over the units. Read through the slices, they would be
/// redone for every unit: the kernel's stores (atomic, to `*mut` memory) might, as far as
/// the compiler knows, change the slices' contents.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    arrays: [RawArray; INLINE],
    words: [u64; INLINE],
    buffers: &'a [RawArray],
    info: &'a [u64],
    monitor: &'a dyn AccessMonitor,
    /// Elements every array holds, for the run of an exclusive body (`super::exclusive`);
    /// 0 otherwise.
    pub(crate) exclusive_end: u64,
}

impl<'a> Args<'a> {
    /// The arguments of a launch.
    ///
    /// # Safety
    /// Each buffer's `ptr .. ptr + len` must be memory that stays valid, and is written
    /// only through [`Array`]s or other atomic accesses, while the returned value (and any
    /// array taken from it) lives.
    #[inline]
    pub unsafe fn new(
        buffers: &'a [RawArray],
        info: &'a [u64],
        monitor: &'a dyn AccessMonitor,
    ) -> Self {
        // Fixed-size copies (no call to `memcpy` per cube): missing buffers are empty,
        // missing words zero, as `array` and `scalar` give for slots past the slices.
        let arrays =
            std::array::from_fn(|slot| buffers.get(slot).copied().unwrap_or(RawArray::MISSING));
        let words = std::array::from_fn(|index| info.get(index).copied().unwrap_or(0));
        Self {
            arrays,
            words,
            buffers,
            info,
            monitor,
            exclusive_end: 0,
        }
    }

    /// Buffer `slot` as an array of `T`; a missing or misaligned buffer is an empty array
    /// (every access reports out of bounds), which `KernelDefinition` validation rules out
    /// before launch.
    #[inline(always)]
    pub fn array<T: Scalar>(&self, slot: usize) -> Array<'a, T> {
        let raw = match self.arrays.get(slot) {
            Some(raw) => *raw,
            None => self.buffers.get(slot).copied().unwrap_or(RawArray::MISSING),
        };
        let (ptr, len) = if (raw.ptr as usize).is_multiple_of(align_of::<T>()) {
            (raw.ptr.cast::<T>(), raw.len / size_of::<T>().max(1))
        } else {
            (std::ptr::NonNull::<T>::dangling().as_ptr(), 0)
        };
        Array {
            ptr,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            slot,
            monitor: self.monitor,
            _marker: PhantomData,
        }
    }

    /// Buffer `slot`, if the launch has it.
    #[inline(always)]
    pub fn raw(&self, slot: usize) -> Option<RawArray> {
        match self.arrays.get(slot) {
            Some(raw) if slot < self.buffers.len() => Some(*raw),
            Some(_) => None,
            None => self.buffers.get(slot).copied(),
        }
    }

    /// The launch's access monitor.
    pub fn monitor(&self) -> &'a dyn AccessMonitor {
        self.monitor
    }

    /// Scalar `index` (info word `index`), or zero if the launch passed fewer words.
    #[inline(always)]
    pub fn scalar<T: Scalar>(&self, index: usize) -> T {
        let word = match self.words.get(index) {
            Some(word) => *word,
            None => self.info.get(index).copied().unwrap_or(0),
        };
        T::from_bits(word)
    }
}

/// A kernel's view of one buffer, typed. See the module docs.
pub struct Array<'a, T> {
    ptr: *mut T,
    len: u32,
    slot: usize,
    monitor: &'a dyn AccessMonitor,
    _marker: PhantomData<&'a T>,
}

impl<T> Clone for Array<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Array<'_, T> {}

impl<T: Scalar> Array<'_, T> {
    /// Number of elements (at most `u32::MAX`: kernels index with `u32`).
    #[inline]
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the array has no element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of element `index`, or `None` (reported as out of bounds) past the end.
    #[track_caller]
    pub(crate) fn element_ptr(&self, index: u32, store: bool) -> Option<*mut T> {
        if index < self.len {
            Some(self.ptr.wrapping_add(index as usize))
        } else {
            self.out_of_bounds(index, store, Location::caller());
            None
        }
    }

    #[cold]
    fn out_of_bounds(&self, index: u32, store: bool, at: &Location<'_>) {
        self.monitor
            .out_of_bounds(self.slot, u64::from(index), u64::from(self.len), store, at);
    }
}

/// # Safety
/// `ptr` must be an in-bounds element of an [`Array`] (aligned, valid for the launch).
#[inline]
unsafe fn atomic_load<T: Scalar>(ptr: *mut T) -> T {
    // SAFETY: (all arms) the caller passes an in-bounds, aligned element pointer to memory
    // valid for the launch (`Args::new`'s contract); each atomic type has T's size, and the
    // bits become a T through `from_bits`, so any bit pattern (a `bool` byte of 2 included)
    // gives a valid value.
    unsafe {
        match size_of::<T>() {
            1 => T::from_bits(u64::from(
                AtomicU8::from_ptr(ptr.cast()).load(Ordering::Relaxed),
            )),
            2 => T::from_bits(u64::from(
                AtomicU16::from_ptr(ptr.cast()).load(Ordering::Relaxed),
            )),
            4 => T::from_bits(u64::from(
                AtomicU32::from_ptr(ptr.cast()).load(Ordering::Relaxed),
            )),
            8 => T::from_bits(AtomicU64::from_ptr(ptr.cast()).load(Ordering::Relaxed)),
            _ => ptr.read(),
        }
    }
}

/// # Safety
/// As [`atomic_load`].
#[inline]
unsafe fn atomic_store<T: Scalar>(ptr: *mut T, value: T) {
    let bits = value.to_bits();
    // SAFETY: (all arms) as in `atomic_load`; the value is written as its bits.
    unsafe {
        match size_of::<T>() {
            1 => AtomicU8::from_ptr(ptr.cast()).store(bits as u8, Ordering::Relaxed),
            2 => AtomicU16::from_ptr(ptr.cast()).store(bits as u16, Ordering::Relaxed),
            4 => AtomicU32::from_ptr(ptr.cast()).store(bits as u32, Ordering::Relaxed),
            8 => AtomicU64::from_ptr(ptr.cast()).store(bits, Ordering::Relaxed),
            _ => ptr.write(value),
        }
    }
}

/// What kernel code can index: arrays, local arrays. `x[i]` in a kernel is
/// `Indexable::load(&x, i)`, `x[i] = v` is `Indexable::store(&mut x, i, v)`.
#[allow(clippy::len_without_is_empty)] // `is_empty` is the free function of the same name
pub trait Indexable {
    /// The element type.
    type Elem: Scalar;
    /// Number of elements.
    fn len(&self) -> u32;
    /// Element `index`; out of bounds: zero (and reported, for global and shared arrays,
    /// with the caller's source line).
    #[track_caller]
    fn load(&self, index: u32) -> Self::Elem;
    /// Sets element `index`; out of bounds: nothing is written (and it is reported, for
    /// global and shared arrays, with the caller's source line).
    #[track_caller]
    fn store(&mut self, index: u32, value: Self::Elem);
    /// Elements `first .. first + N` (a line): each as [`Indexable::load`] gives it, so an
    /// element out of bounds loads zero and is reported. Arrays that can check the whole
    /// run at once override it.
    #[inline]
    #[track_caller]
    fn load_run<const N: usize>(&self, first: u32) -> [Self::Elem; N] {
        let mut out = [Self::Elem::default(); N];
        for (k, element) in out.iter_mut().enumerate() {
            *element = self.load(first.saturating_add(k as u32));
        }
        out
    }
}

impl<T: Scalar> Indexable for Array<'_, T> {
    type Elem = T;

    #[inline]
    fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    #[track_caller]
    fn load(&self, index: u32) -> T {
        if index < self.len {
            // SAFETY: `index < len`, so the element is inside the buffer `Args::array` made
            // this view of.
            unsafe { atomic_load(self.ptr.add(index as usize)) }
        } else {
            self.out_of_bounds(index, false, Location::caller());
            T::default()
        }
    }

    #[inline]
    #[track_caller]
    fn store(&mut self, index: u32, value: T) {
        if index < self.len {
            // SAFETY: as in `load`.
            unsafe { atomic_store(self.ptr.add(index as usize), value) };
        } else {
            self.out_of_bounds(index, true, Location::caller());
        }
    }
}

impl<T: Scalar, const N: usize> Indexable for [T; N] {
    type Elem = T;

    #[inline]
    fn len(&self) -> u32 {
        u32::try_from(N).unwrap_or(u32::MAX)
    }

    #[inline]
    #[track_caller]
    fn load(&self, index: u32) -> T {
        self.get(index as usize).copied().unwrap_or_default()
    }

    #[inline]
    #[track_caller]
    fn store(&mut self, index: u32, value: T) {
        if let Some(slot) = self.get_mut(index as usize) {
            *slot = value;
        }
    }
}
