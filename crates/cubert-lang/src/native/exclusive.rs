//! The CPU's fast path for kernels whose units each touch only their own elements.
//!
//! Most kernels a tensor library writes are maps: unit `i` reads element `i` of its inputs
//! and writes element `i` of its outputs (or line `i`: elements `i*N .. i*N+N`). For such a
//! kernel the macro proves, from the kernel's syntax, that every access to an array
//! parameter is at the unit's position (`ABSOLUTE_POS`, or a variable bound once to it),
//! with one line width for the whole kernel, and that the kernel uses no atomics, shared
//! memory or plane operations. It then writes the body a second time over
//! [`ExclusiveArray`]s: plain loads and stores with no bounds check, which the compiler
//! vectorizes like a loop over slices.
//!
//! That body may only run over the units [`exclusive_cubes`] accepted:
//!
//! - every unit's elements are inside every array (so no access needs a check: nothing is
//!   out of bounds, nothing to report): on cubes of one dimension the accepted part of a
//!   run of cubes stops where the shortest array does, and the rest of the run, its tail,
//!   runs the checked body unit by unit ([`ExclusiveRun::run_tail`]), and
//! - no two units touch one element: every array written is either the same view as
//!   another array (same first byte, same element size: unit `i` reads and writes its own
//!   element) or doesn't overlap it. Other units (on other threads) never touch this
//!   unit's elements, so plain accesses can't race within the launch.
//!
//! - for kernels with grid-stride loops (`for i in (ABSOLUTE_POS..end).step_by(CUBE_COUNT *
//!   CUBE_DIM)`), the grid has at least `end` units for every such loop, so each unit's
//!   loop runs at most once, at its own position, and the accepted units are below every
//!   `end` (the part stops there too), so it runs exactly once. The macro evaluates each
//!   loop's `end` from the parameters alone (it allows nothing else there) and writes the
//!   loop in the exclusive body as that one iteration, with no test left to vectorize
//!   around. This is how a kernel that is correct for any
//!   grid (the standard kernels' convention) still runs at the speed of a map when its
//!   grid covers the elements.
//!
//! A read-only array the kernel reads at other indices too (`x[row * cols + c]`: the macro
//! calls it *gathered*) becomes a [`GatheredArray`] in that body: plain loads, each still
//! bounds-checked and reported like the checked body's, since nothing proves those indices
//! in bounds. Plain loads are race-free because [`exclusive_cubes`] requires every written
//! array to be disjoint from it. A line of such an array is checked once for its `N`
//! elements, so a loop over lines vectorizes.
//!
//! Cubes it refuses run the checked body (`Array`: bounds checks, relaxed atomic accesses)
//! as before, so a launch that overruns a buffer still gets its out-of-bounds report. As
//! for every CPU kernel, launches on other streams that write this launch's buffers at the
//! same time are the caller's race to avoid (as on a GPU).

use super::array::{Args, Indexable, RawArray};
use super::unit::Unit;
use crate::scalar::Scalar;
use std::marker::PhantomData;

/// An array parameter as [`exclusive_cubes`] checks it.
#[derive(Clone, Copy, Debug)]
pub struct ExclusiveParam {
    /// Buffer slot.
    pub slot: usize,
    /// Element size in bytes.
    pub elem_size: usize,
    /// Whether the kernel writes it (`&mut Array`).
    pub written: bool,
    /// Whether the kernel reads it at indices other than the position (a read-only array
    /// the macro found *gathered*): its accesses stay bounds-checked, so its length
    /// doesn't bound the run, but no written array may overlap it at all.
    pub gathered: bool,
}

/// The units of a run of cubes the exclusive body may run: absolute positions
/// `start .. end`, every array holding at least `end_element` elements. The run's other
/// units, `end .. tail_end`, run the checked body ([`ExclusiveRun::run_tail`]).
#[derive(Clone, Copy, Debug)]
pub struct ExclusiveRun {
    start: u32,
    end: u32,
    end_element: u64,
    tail_end: u32,
}

/// The part of the run of cubes `first.cube_pos.x .. + cubes` (with `first`'s y and z)
/// that the exclusive body of a kernel may run, if any: the kernel's units access their own
/// line of `width` elements of each array in `params`, and its grid-stride loops end at
/// `grid_stride_ends`. See the module docs for the conditions. On cubes of one dimension
/// the part may stop short of the run's end (where an array or a loop ends); the units
/// after it are the run's tail, for the checked body.
pub fn exclusive_cubes(
    first: &Unit,
    cubes: u32,
    args: &Args<'_>,
    width: u32,
    params: &[ExclusiveParam],
    grid_stride_ends: &[u32],
) -> Option<ExclusiveRun> {
    if !grid_stride_ends.is_empty() && !grid_covers(first, grid_stride_ends) {
        return None;
    }
    // The units' absolute positions: a contiguous run, unless a wrap in the GPU's u32
    // arithmetic makes two units share one (then the checked body runs).
    if cubes > 1 && (first.cube_count.1, first.cube_count.2) != (1, 1) {
        return None;
    }
    let units_per_cube = u64::from(first.cube_dim());
    let start = u64::from(first.cube_pos()) * units_per_cube;
    let run_end = start + u64::from(cubes) * units_per_cube;
    let (start, run_end) = (u32::try_from(start).ok()?, u32::try_from(run_end).ok()?);
    // Where the exclusive part ends: at the first unit whose line some array doesn't hold
    // or past some grid-stride loop's end.
    let width = u64::from(width.max(1));
    let mut limit = u64::from(run_end);
    let mut views = Vec::with_capacity(params.len());
    for param in params {
        let raw = args.raw(param.slot)?;
        if !(raw.ptr as usize).is_multiple_of(param.elem_size.max(1)) {
            return None;
        }
        if !param.gathered {
            let lines = raw.len as u64 / (param.elem_size.max(1) as u64 * width);
            limit = limit.min(lines);
        }
        views.push((raw, *param));
    }
    for &end in grid_stride_ends {
        limit = limit.min(u64::from(end));
    }
    // Cubes of more than one dimension run whole (their units' positions aren't a range
    // of their cube's x), so they stop nowhere but at the run's end.
    let one_dimensional = (first.cube_dim.1, first.cube_dim.2) == (1, 1);
    if limit <= u64::from(start) || (limit < u64::from(run_end) && !one_dimensional) {
        return None;
    }
    let end = limit as u32;
    let apart = views.iter().enumerate().all(|(i, (written, param))| {
        !param.written
            || views.iter().enumerate().all(|(j, (other, other_param))| {
                i == j
                    || (!other_param.gathered
                        && written.ptr == other.ptr
                        && param.elem_size == other_param.elem_size)
                    || disjoint(written, other)
            })
    });
    apart.then_some(ExclusiveRun {
        start,
        end,
        end_element: u64::from(end) * width,
        tail_end: run_end,
    })
}

/// Whether the grid has at least `end` units for every grid-stride loop end, counted
/// without the wrap of the kernel's `CUBE_COUNT * CUBE_DIM` (a grid of 2^32 units or more
/// is refused: its stride wraps in `u32`).
fn grid_covers(unit: &Unit, grid_stride_ends: &[u32]) -> bool {
    let (x, y, z) = unit.cube_count;
    let (dx, dy, dz) = unit.cube_dim;
    let units = [y, z, dx, dy, dz]
        .into_iter()
        .try_fold(u64::from(x), |units, factor| {
            units.checked_mul(u64::from(factor))
        });
    units
        .filter(|&units| units <= u64::from(u32::MAX))
        .is_some_and(|units| grid_stride_ends.iter().all(|&end| u64::from(end) <= units))
}

pub(crate) fn disjoint(a: &RawArray, b: &RawArray) -> bool {
    let (a0, b0) = (a.ptr as usize, b.ptr as usize);
    a0.saturating_add(a.len) <= b0 || b0.saturating_add(b.len) <= a0
}

/// A unit of an [`ExclusiveRun`]: the [`Unit`] (its builtins), with the absolute position
/// counted by the run's loop, so the compiler sees consecutive units touch consecutive
/// elements, all in bounds.
#[derive(Clone, Copy, Debug)]
pub struct ExclusiveUnit {
    unit: Unit,
    absolute: u32,
    end: u32,
}

impl ExclusiveUnit {
    /// `ABSOLUTE_POS`.
    #[inline(always)]
    pub fn absolute_pos(&self) -> u32 {
        // SAFETY: `ExclusiveRun::run` makes units with `absolute` in `start .. end` only.
        unsafe { std::hint::assert_unchecked(self.absolute < self.end) };
        self.absolute
    }
}

impl std::ops::Deref for ExclusiveUnit {
    type Target = Unit;

    fn deref(&self) -> &Unit {
        &self.unit
    }
}

impl ExclusiveRun {
    /// Runs `checked_body` (the kernel's checked body) for the run's tail: the units after
    /// the exclusive part, on cubes of one dimension (`exclusive_cubes` makes a tail only
    /// there).
    pub fn run_tail<'a>(
        &self,
        first: &Unit,
        args: &Args<'a>,
        mut checked_body: impl FnMut(&Unit, &Args<'a>),
    ) {
        let dx = first.cube_dim.0.max(1);
        let mut unit = *first;
        for absolute in self.end..self.tail_end {
            let offset = absolute - self.start;
            unit.unit_pos = (offset % dx, 0, 0);
            unit.cube_pos.0 = first.cube_pos.0.wrapping_add(offset / dx);
            checked_body(&unit, args);
        }
    }

    /// Runs `unit_body` for every unit of the run, x fastest, one cube after the other,
    /// with `args` telling the exclusive arrays how many elements they hold. `width` is the
    /// line width the run was checked for (a constant in the macro's code, so the compiler
    /// relates the positions to the arrays' lengths); a run checked for another width
    /// runs nothing. Generic over the body so that it inlines into the loop, which the
    /// compiler vectorizes.
    #[inline(always)]
    pub fn run<'a>(
        &self,
        first: &Unit,
        args: &Args<'a>,
        width: u32,
        mut unit_body: impl FnMut(&ExclusiveUnit, &Args<'a>),
    ) {
        let end_element = u64::from(self.end) * u64::from(width);
        if end_element != self.end_element {
            return;
        }
        let mut args = *args;
        args.exclusive_end = end_element;
        let (dx, dy, dz) = first.cube_dim;
        let mut unit = ExclusiveUnit {
            unit: *first,
            absolute: self.start,
            end: self.end,
        };
        if dy == 1 && dz == 1 && dx > 0 {
            // One loop over the run's positions (the unit's position in its cube and the
            // cube's are derived, and dropped by the compiler where the body doesn't read
            // them).
            for absolute in self.start..self.end {
                let offset = absolute - self.start;
                unit.unit.unit_pos = (offset % dx, 0, 0);
                unit.unit.cube_pos.0 = first.cube_pos.0.wrapping_add(offset / dx);
                unit.absolute = absolute;
                unit_body(&unit, &args);
            }
            return;
        }
        let mut absolute = self.start;
        let cubes = (self.end - self.start) / first.cube_dim().max(1);
        for cube in 0..cubes {
            unit.unit.cube_pos.0 = first.cube_pos.0.wrapping_add(cube);
            for z in 0..dz {
                for y in 0..dy {
                    if args.monitor().gave_up() {
                        return;
                    }
                    for x in 0..dx {
                        unit.unit.unit_pos = (x, y, z);
                        unit.absolute = absolute;
                        absolute += 1;
                        unit_body(&unit, &args);
                    }
                }
            }
        }
    }
}

/// The element at `ptr`, read plainly as its bits (so any bit pattern, a `bool` byte of 2
/// included, becomes a valid value through `from_bits`).
///
/// # Safety
/// `ptr` is an aligned element of a launch's buffer that no other thread writes during the
/// read.
#[inline(always)]
unsafe fn read_plain<T: Scalar>(ptr: *const T) -> T {
    // SAFETY: (all arms) the caller's contract: an aligned element nothing else writes;
    // each read has T's size.
    unsafe {
        match size_of::<T>() {
            1 => T::from_bits(u64::from(ptr.cast::<u8>().read())),
            2 => T::from_bits(u64::from(ptr.cast::<u16>().read())),
            4 => T::from_bits(u64::from(ptr.cast::<u32>().read())),
            8 => T::from_bits(ptr.cast::<u64>().read()),
            _ => ptr.read(),
        }
    }
}

/// An array parameter of a cube run that [`exclusive_cubes`] accepted: plain accesses, no
/// bounds check (see the module docs).
pub struct ExclusiveArray<'a, T> {
    ptr: *mut T,
    len: u32,
    _marker: PhantomData<&'a T>,
}

impl<T> Clone for ExclusiveArray<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ExclusiveArray<'_, T> {}

impl<'a> Args<'a> {
    /// Buffer `slot` as an [`ExclusiveArray`] of `T`.
    ///
    /// # Safety
    /// Only for the body of a kernel the macro proved exclusive (every access at the
    /// unit's own line), with the `args` [`ExclusiveRun::run`] passes it for a run
    /// [`exclusive_cubes`] accepted for this kernel's parameters and line width: then
    /// every access is in bounds and no other thread touches its element during the
    /// launch.
    #[inline(always)]
    pub unsafe fn exclusive_array<T: Scalar>(&self, slot: usize) -> ExclusiveArray<'a, T> {
        let raw = self.raw(slot).unwrap_or(RawArray::MISSING);
        let len = u32::try_from(raw.len / size_of::<T>().max(1)).unwrap_or(u32::MAX);
        // SAFETY: `exclusive_cubes` accepted the run only if this array holds at least
        // `exclusive_end` elements (`len` saturates at u32::MAX, hence the `min`). Telling
        // the compiler lets it drop a body's `i < x.len()` test.
        unsafe {
            std::hint::assert_unchecked(
                u64::from(len) >= self.exclusive_end.min(u64::from(u32::MAX)),
            );
        }
        ExclusiveArray {
            ptr: raw.ptr.cast::<T>(),
            len,
            _marker: PhantomData,
        }
    }
}

impl<T: Scalar> Indexable for ExclusiveArray<'_, T> {
    type Elem = T;

    #[inline(always)]
    fn len(&self) -> u32 {
        self.len
    }

    #[inline(always)]
    fn load(&self, index: u32) -> T {
        debug_assert!(index < self.len, "exclusive load out of bounds");
        // SAFETY: `exclusive_array`'s contract: the index is the unit's own element, in
        // bounds, and no other thread writes it during the launch.
        unsafe { read_plain(self.ptr.add(index as usize)) }
    }

    #[inline(always)]
    fn store(&mut self, index: u32, value: T) {
        debug_assert!(index < self.len, "exclusive store out of bounds");
        let bits = value.to_bits();
        // SAFETY: as in `load`; the value is written as its bits.
        unsafe {
            let ptr = self.ptr.add(index as usize);
            match size_of::<T>() {
                1 => ptr.cast::<u8>().write(bits as u8),
                2 => ptr.cast::<u16>().write(bits as u16),
                4 => ptr.cast::<u32>().write(bits as u32),
                8 => ptr.cast::<u64>().write(bits),
                _ => ptr.write(value),
            }
        }
    }
}

/// A read-only array the exclusive body reads at any index: bounds-checked plain loads
/// (see the module docs).
pub struct GatheredArray<'a, T> {
    ptr: *const T,
    len: u32,
    slot: usize,
    monitor: &'a dyn super::AccessMonitor,
}

impl<T> Clone for GatheredArray<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for GatheredArray<'_, T> {}

impl<'a> Args<'a> {
    /// Buffer `slot` as a [`GatheredArray`] of `T`.
    ///
    /// # Safety
    /// Only for an array the kernel never writes (the macro found it gathered, or read
    /// plainly: `super::plain_reads`), with `args` of a launch where no array the kernel
    /// writes overlaps it and it is aligned for `T`: a run [`exclusive_cubes`] accepted
    /// (with the `args` [`ExclusiveRun::run`] passes), or a launch
    /// [`plain_reads_allowed`](super::plain_reads_allowed) accepted. Then no unit of the
    /// launch writes the array, so plain loads can't race within it.
    #[inline(always)]
    pub unsafe fn gathered_array<T: Scalar>(&self, slot: usize) -> GatheredArray<'a, T> {
        let raw = self.raw(slot).unwrap_or(RawArray::MISSING);
        // `exclusive_cubes` checked the alignment of every array of the run.
        GatheredArray {
            ptr: raw.ptr.cast::<T>(),
            len: u32::try_from(raw.len / size_of::<T>().max(1)).unwrap_or(u32::MAX),
            slot,
            monitor: self.monitor(),
        }
    }
}

impl<T: Scalar> GatheredArray<'_, T> {
    /// Element `index`, which must be below `len`.
    ///
    /// # Safety
    /// `index < self.len`.
    #[inline(always)]
    unsafe fn read(&self, index: u32) -> T {
        // SAFETY: the caller keeps `index` below the length `gathered_array` took from the
        // buffer.
        unsafe { read_plain(self.ptr.add(index as usize)) }
    }

    /// Elements `first .. first + N` into `line`, each checked (out of bounds: zero, and
    /// reported as made at `at`). Never inlined: the caller reads the line back from
    /// memory, so its fast path's line stays one vector load.
    #[cold]
    #[inline(never)]
    fn fill_slowly<const N: usize>(
        &self,
        first: u32,
        line: &mut [T; N],
        at: &std::panic::Location<'_>,
    ) {
        for (k, element) in line.iter_mut().enumerate() {
            let index = first.saturating_add(k as u32);
            *element = if index < self.len {
                // SAFETY: `index < len`.
                unsafe { self.read(index) }
            } else {
                self.out_of_bounds(index, at);
                T::default()
            };
        }
    }

    #[cold]
    #[inline(never)]
    fn out_of_bounds(&self, index: u32, at: &std::panic::Location<'_>) {
        self.monitor
            .out_of_bounds(self.slot, u64::from(index), u64::from(self.len), false, at);
    }
}

impl<T: Scalar> Indexable for GatheredArray<'_, T> {
    type Elem = T;

    #[inline(always)]
    fn len(&self) -> u32 {
        self.len
    }

    #[inline(always)]
    #[track_caller]
    fn load(&self, index: u32) -> T {
        if index < self.len {
            // SAFETY: `index < len`.
            unsafe { self.read(index) }
        } else {
            self.out_of_bounds(index, std::panic::Location::caller());
            T::default()
        }
    }

    /// Never called: the macro finds only arrays the kernel can't write gathered.
    #[inline(always)]
    #[track_caller]
    fn store(&mut self, index: u32, _: T) {
        self.monitor.kernel_error(&format!(
            "a store to element {index} of read-only buffer {}",
            self.slot
        ));
    }

    #[inline(always)]
    #[track_caller]
    fn load_run<const N: usize>(&self, first: u32) -> [T; N] {
        let mut slow = [T::default(); N];
        if T::ELEM == crate::ElemType::Bool {
            for (k, element) in slow.iter_mut().enumerate() {
                *element = self.load(first.saturating_add(k as u32));
            }
            return slow;
        }
        // The line is read from the array where it is inside, else from `slow`, filled
        // element by element: one load from either address, so the compiler keeps the
        // line in a vector register (a branch joining two loaded arrays would split it
        // into its elements).
        let inside = u64::from(first) + N as u64 <= u64::from(self.len);
        let source: *const [T; N] = if inside {
            // SAFETY: `first + N <= len`: the elements are in the buffer.
            unsafe { self.ptr.add(first as usize) }.cast()
        } else {
            self.fill_slowly(first, &mut slow, std::panic::Location::caller());
            slow.as_ptr().cast()
        };
        // SAFETY: `source` is the line inside the buffer (no unit of the launch writes it:
        // `gathered_array`'s contract) or `slow`; every bit pattern is a value of the
        // non-boolean scalar types (integers, floats, halves).
        unsafe { source.read_unaligned() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::AccessMonitor;
    use std::panic::Location;

    struct Quiet;
    impl AccessMonitor for Quiet {
        fn out_of_bounds(&self, _: usize, _: u64, _: u64, _: bool, _: &Location<'_>) {}
        fn kernel_error(&self, _: &str) {}
        fn data_race(&self, _: &str) {}
    }

    /// Cubes of 4 units in a grid of `cubes` along x.
    fn first_cube(cubes: u32) -> Unit {
        Unit {
            unit_pos: (0, 0, 0),
            cube_pos: (0, 0, 0),
            cube_dim: (4, 1, 1),
            cube_count: (cubes, 1, 1),
        }
    }

    fn param(slot: usize, written: bool) -> ExclusiveParam {
        ExclusiveParam {
            slot,
            elem_size: 4,
            written,
            gathered: false,
        }
    }

    fn view(memory: &mut [u32], start: usize, len: usize) -> RawArray {
        RawArray {
            ptr: memory[start..].as_mut_ptr().cast(),
            len: len * 4,
        }
    }

    #[test]
    fn runs_inside_disjoint_or_identical_views_are_exclusive() {
        let mut memory = vec![0u32; 64];
        let (a, out) = (view(&mut memory, 0, 16), view(&mut memory, 16, 16));
        let buffers = [a, out];
        // SAFETY: the views are inside `memory`, which outlives `args`.
        let args = unsafe { Args::new(&buffers, &[], &Quiet) };
        let params = [param(0, false), param(1, true)];
        let run = exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[]).unwrap();
        assert_eq!(
            (run.start, run.end, run.end_element, run.tail_end),
            (0, 16, 16, 16)
        );
        assert!(exclusive_cubes(&first_cube(4), 2, &args, 2, &params, &[]).is_some());
        let same = [a, a];
        // SAFETY: as above.
        let args = unsafe { Args::new(&same, &[], &Quiet) };
        assert!(exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[]).is_some());
    }

    #[test]
    fn short_overlapping_or_missing_views_are_not() {
        let mut memory = vec![0u32; 64];
        let (a, shifted) = (view(&mut memory, 0, 16), view(&mut memory, 1, 16));
        let params = [param(0, false), param(1, true)];
        let overlapping = [a, shifted];
        // SAFETY: the views are inside `memory`, which outlives `args`.
        let args = unsafe { Args::new(&overlapping, &[], &Quiet) };
        assert!(exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[]).is_none());
        let disjoint = [a, view(&mut memory, 16, 16)];
        // SAFETY: as above.
        let args = unsafe { Args::new(&disjoint, &[], &Quiet) };
        // 5 cubes of 4 units need 20 elements: the first 16 units are exclusive, the last
        // 4 the tail; lines of 2 need 32 for 4 cubes: 8 exclusive units.
        let run = exclusive_cubes(&first_cube(5), 5, &args, 1, &params, &[]).unwrap();
        assert_eq!((run.start, run.end, run.tail_end), (0, 16, 20));
        let run = exclusive_cubes(&first_cube(4), 4, &args, 2, &params, &[]).unwrap();
        assert_eq!((run.end, run.end_element, run.tail_end), (8, 16, 16));
        // A run starting past the arrays' end has no exclusive part.
        let mut late = first_cube(8);
        late.cube_pos.0 = 4;
        assert!(exclusive_cubes(&late, 4, &args, 1, &params, &[]).is_none());
        // Cubes of two dimensions run whole or not at all.
        let mut square = first_cube(5);
        square.cube_dim = (2, 2, 1);
        assert!(exclusive_cubes(&square, 5, &args, 1, &params, &[]).is_none());
        assert!(exclusive_cubes(&square, 4, &args, 1, &params, &[]).is_some());
        // A buffer the launch doesn't have.
        let missing = [param(0, false), param(2, true)];
        assert!(exclusive_cubes(&first_cube(4), 4, &args, 1, &missing, &[]).is_none());
        // Positions past u32::MAX wrap on a GPU: never exclusive.
        let mut far = first_cube(u32::MAX);
        far.cube_pos.0 = u32::MAX / 4;
        assert!(exclusive_cubes(&far, 2, &args, 1, &[], &[]).is_none());
    }

    #[test]
    fn gathered_arrays_must_be_apart_from_written_ones_but_bound_nothing() {
        let mut memory = vec![0u32; 64];
        let (table, out) = (view(&mut memory, 0, 4), view(&mut memory, 16, 16));
        let gathered = ExclusiveParam {
            gathered: true,
            ..param(0, false)
        };
        let params = [gathered, param(1, true)];
        let buffers = [table, out];
        // SAFETY: the views are inside `memory`, which outlives `args`.
        let args = unsafe { Args::new(&buffers, &[], &Quiet) };
        // A 4-element table doesn't stop 16 units: its loads are checked.
        let run = exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[]).unwrap();
        assert_eq!((run.end, run.tail_end), (16, 16));
        // The written array may not even be the same view as a gathered one.
        let same = [out, out];
        // SAFETY: as above.
        let args = unsafe { Args::new(&same, &[], &Quiet) };
        assert!(exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[]).is_none());
    }

    #[test]
    fn gathered_loads_are_checked_and_lines_read_whole_or_element_by_element() {
        use std::sync::atomic::{AtomicU32, Ordering};
        struct Count(AtomicU32);
        impl AccessMonitor for Count {
            fn out_of_bounds(&self, _: usize, _: u64, _: u64, _: bool, _: &Location<'_>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
            fn kernel_error(&self, _: &str) {}
            fn data_race(&self, _: &str) {}
        }
        let mut memory: Vec<u32> = (0..10).collect();
        let buffers = [view(&mut memory, 0, 10)];
        let count = Count(AtomicU32::new(0));
        // SAFETY: the view is inside `memory`, which outlives `args`.
        let args = unsafe { Args::new(&buffers, &[], &count) };
        // SAFETY: nothing writes the array.
        let table = unsafe { args.gathered_array::<u32>(0) };
        assert_eq!(table.load(9), 9);
        assert_eq!(table.load(10), 0);
        assert_eq!(table.load_run::<4>(4), [4, 5, 6, 7]);
        assert_eq!(table.load_run::<4>(8), [8, 9, 0, 0]);
        assert_eq!(table.load_run::<2>(u32::MAX), [0, 0]);
        assert_eq!(count.0.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn grid_stride_loops_are_exclusive_only_where_the_grid_covers_their_ends() {
        let mut memory = vec![0u32; 64];
        let buffers = [view(&mut memory, 0, 16), view(&mut memory, 16, 16)];
        // SAFETY: the views are inside `memory`, which outlives `args`.
        let args = unsafe { Args::new(&buffers, &[], &Quiet) };
        let params = [param(0, false), param(1, true)];
        // 4 cubes of 4 units: 16 units cover loops ending at 16 or before; units past
        // the nearest end are the tail.
        let run = exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[16, 3]).unwrap();
        assert_eq!((run.end, run.tail_end), (3, 16));
        assert!(exclusive_cubes(&first_cube(4), 4, &args, 1, &params, &[17]).is_none());
        // A smaller grid runs the first 2 cubes here: their units would loop twice.
        assert!(exclusive_cubes(&first_cube(2), 2, &args, 1, &params, &[16]).is_none());
        // A grid of 2^32 units or more: `CUBE_COUNT * CUBE_DIM` wraps, never exclusive.
        let mut huge = first_cube(1 << 30);
        huge.cube_count.1 = 4;
        assert!(exclusive_cubes(&huge, 1, &args, 1, &params, &[1]).is_none());
    }
}
