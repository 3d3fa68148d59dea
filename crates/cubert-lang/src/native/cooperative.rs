//! Units of a cube that cooperate: barriers, plane operations and shared memory on the CPU.
//!
//! A kernel that calls `sync_cube`, a plane operation or declares shared memory runs each
//! unit of a cube as a coroutine (`corosensei`) on the worker thread that owns the cube.
//! The scheduler ([`run_cube_cooperative`]) resumes every unit that isn't waiting until it
//! waits or finishes, then releases a wait:
//!
//! - a plane whose live units all wait at a plane operation goes on first (each has put its
//!   value in the exchange buffer before waiting, so each reads its plane's values);
//! - otherwise, once every live unit waits at `sync_cube`, all go on.
//!
//! Units that finished (returned) no longer take part, as on GPUs since Volta. If live
//! units wait at different kinds of barrier and no plane can go on (a barrier in divergent
//! control flow: undefined on a GPU), the launch's monitor gets an error and every unit is
//! released, so the cube ends instead of hanging.
//!
//! Shared memory is one zeroed allocation per declaration site and cube, handed to every
//! unit that reaches the declaration. Every unit of a cube runs on one thread, so shared
//! accesses need no atomics.
//!
//! Stacks are 64 KiB, allocated once per worker thread and reused from cube to cube.
//!
//! When the launch checks for races ([`AccessMonitor::checks_races`], the CPU's validate
//! mode), each shared element has a shadow saying which unit wrote it and which read it
//! since the last `sync_cube` (an epoch). A write after another unit's read or write, or a
//! read after another unit's write, in the same epoch is reported with the unit ids and the
//! kernel's source line. Atomics are exempt (they are the way to share without a barrier).

use super::Indexable;
use super::array::{AccessMonitor, Args};
use super::unit::Unit;
use crate::ir::{MmaOperand, MmaShape};
use crate::scalar::{MmaInput, Scalar};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::panic::Location;

/// Units per plane on the CPU (as on NVIDIA GPUs).
pub const PLANE_DIM: u32 = 32;

const STACK_BYTES: usize = 64 * 1024;

/// What a waiting unit waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Cube,
    Plane,
}

type UnitCoroutine = Coroutine<(), Wait, (), DefaultStack>;

/// The cube being run on this thread: plane exchange buffers and shared memory.
#[derive(Default)]
struct CubeState {
    /// Values offered to plane operations, with the number of the unit's plane operation
    /// they were offered to (its first is 1), in two rounds by that number's parity (a
    /// unit is at most one plane operation ahead of another unit of its plane).
    exchange: [Vec<(u64, u32)>; 2],
    /// How many plane operations each unit reached.
    operations: Vec<u32>,
    /// Shared arrays by declaration site: storage, and the element size it was made for.
    shared: Vec<Option<Vec<u64>>>,
    /// Per declaration site, per element, who touched it since the last barrier (only
    /// when the launch checks for races).
    shadows: Vec<Option<Vec<Shadow>>>,
    /// `sync_cube` barriers the cube passed: accesses in different epochs are ordered.
    epoch: u32,
    /// The unit running now (its `UNIT_POS`).
    current: u32,
}

/// Who touched one shared element in the current epoch: units as `UNIT_POS + 1`, 0 for
/// none, [`MANY`] for several readers.
#[derive(Clone, Copy, Default)]
struct Shadow {
    epoch: u32,
    writer: u32,
    reader: u32,
}

/// More than one unit read the element in this epoch.
const MANY: u32 = u32::MAX;

thread_local! {
    static YIELDER: Cell<*const Yielder<(), Wait>> = const { Cell::new(std::ptr::null()) };
    static STATE: RefCell<CubeState> = RefCell::new(CubeState::default());
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

fn stack() -> Option<DefaultStack> {
    STACKS
        .with(|stacks| stacks.borrow_mut().pop())
        .or_else(|| DefaultStack::new(STACK_BYTES).ok())
}

fn recycle(stack: DefaultStack) {
    STACKS.with(|stacks| stacks.borrow_mut().push(stack));
}

/// Suspends the running unit until the scheduler releases `wait`. Outside a cooperative
/// cube (a kernel run without coroutines) it returns at once.
fn suspend(wait: Wait) {
    let yielder = YIELDER.with(Cell::get);
    if yielder.is_null() {
        return;
    }
    // SAFETY: `YIELDER` is set by the coroutine of the unit running on this thread (in
    // `run_cube_cooperative`), to the yielder that coroutine's body received; the
    // coroutine is alive while its body runs, so the yielder is too.
    unsafe { (*yielder).suspend(wait) };
    // Other units ran meanwhile and set their own yielder: this unit's goes back.
    YIELDER.with(|cell| cell.set(yielder));
}

/// Runs every unit of the cube at `cube` as a coroutine (see the module docs).
pub fn run_cube_cooperative(cube: &Unit, args: &Args<'_>, body: impl Fn(&Unit)) {
    let (dx, dy, dz) = cube.cube_dim;
    let units = (dx as usize) * (dy as usize) * (dz as usize);
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        for buffer in &mut state.exchange {
            buffer.clear();
            buffer.resize(units, (0, 0));
        }
        state.operations.clear();
        state.operations.resize(units, 0);
        state.shared.clear();
        state.shadows.clear();
        state.epoch = 0;
    });
    let body = &body;
    let mut fibers: Vec<Option<UnitCoroutine>> = Vec::with_capacity(units);
    let mut waits: Vec<Option<Wait>> = vec![None; units];
    for z in 0..dz {
        for y in 0..dy {
            for x in 0..dx {
                let mut unit = *cube;
                unit.unit_pos = (x, y, z);
                let Some(stack) = stack() else {
                    args.monitor()
                        .kernel_error("can't allocate a stack for a unit of a cooperative cube");
                    return;
                };
                // SAFETY: the coroutine borrows `body` (and, through it, `args`), which
                // outlive it: every coroutine is run to completion or dropped (unwinding
                // its stack) before this function returns.
                let fiber = unsafe {
                    Coroutine::with_stack_unchecked(
                        stack,
                        move |yielder: &Yielder<(), Wait>, ()| {
                            YIELDER.with(|cell| cell.set(yielder));
                            body(&unit);
                        },
                    )
                };
                fibers.push(Some(fiber));
            }
        }
    }
    let plane = PLANE_DIM as usize;
    loop {
        for (index, slot) in fibers.iter_mut().enumerate() {
            if waits[index].is_some() {
                continue;
            }
            let Some(fiber) = slot.as_mut() else { continue };
            STATE.with(|state| state.borrow_mut().current = index as u32);
            match fiber.resume(()) {
                CoroutineResult::Yield(wait) => waits[index] = Some(wait),
                CoroutineResult::Return(()) => {
                    if let Some(done) = slot.take() {
                        recycle(done.into_stack());
                    }
                }
            }
        }
        YIELDER.with(|cell| cell.set(std::ptr::null()));
        if fibers.iter().all(Option::is_none) {
            return;
        }
        let mut released = false;
        for start in (0..units).step_by(plane) {
            let end = (start + plane).min(units);
            let members = (start..end).filter(|&u| fibers[u].is_some());
            let mut any = false;
            let mut all_plane = true;
            for u in members {
                any = true;
                all_plane &= waits[u] == Some(Wait::Plane);
            }
            if any && all_plane {
                for wait in &mut waits[start..end] {
                    *wait = None;
                }
                released = true;
            }
        }
        if released {
            continue;
        }
        let all_cube = fibers
            .iter()
            .zip(&waits)
            .all(|(fiber, wait)| fiber.is_none() || *wait == Some(Wait::Cube));
        if !all_cube {
            args.monitor().kernel_error(
                "units of a cube wait at different barriers (sync_cube or a plane operation in \
                 divergent control flow)",
            );
        }
        waits.fill(None);
        // Every unit passed a barrier: accesses before and after it are ordered.
        STATE.with(|state| {
            let mut state = state.borrow_mut();
            state.epoch = state.epoch.wrapping_add(1);
        });
    }
}

/// `sync_cube()`: waits until every live unit of the cube got here.
pub fn sync_cube() {
    suspend(Wait::Cube);
}

/// Offers `value` to the unit's plane, waits for the plane, and folds the values the
/// plane's units offered to the same operation (units that finished before it offered
/// none), in lane order, with `fold`. Lanes that offered nothing are `None`.
fn exchange<T: Scalar, R>(unit: &Unit, value: T, fold: impl FnOnce(&[Option<T>]) -> R) -> R {
    let index = unit.unit_pos() as usize;
    let operation = STATE.with(|state| {
        let mut state = state.borrow_mut();
        let Some(count) = state.operations.get_mut(index) else {
            return 0;
        };
        *count = count.wrapping_add(1);
        let operation = *count;
        if let Some(slot) = state.exchange[(operation & 1) as usize].get_mut(index) {
            *slot = (value.to_bits(), operation);
        }
        operation
    });
    suspend(Wait::Plane);
    STATE.with(|state| {
        let state = state.borrow();
        let offers = &state.exchange[(operation & 1) as usize];
        let plane = PLANE_DIM as usize;
        let start = (index / plane * plane).min(offers.len());
        let end = (start + plane).min(offers.len());
        let lanes: Vec<Option<T>> = offers[start..end]
            .iter()
            .map(|&(bits, offered)| (offered == operation).then(|| T::from_bits(bits)))
            .collect();
        fold(&lanes)
    })
}

/// `plane_sum(v)`: the sum of the plane's values, in lane order from zero.
pub fn plane_sum<T: crate::Numeric>(unit: &Unit, value: T) -> T {
    exchange(unit, value, |lanes| {
        lanes
            .iter()
            .flatten()
            .fold(T::from_i128(0), |acc, v| T::add(acc, *v))
    })
}

/// `plane_min(v)`: the smallest of the plane's values.
pub fn plane_min<T: crate::Numeric>(unit: &Unit, value: T) -> T {
    exchange(unit, value, |lanes| {
        lanes
            .iter()
            .flatten()
            .copied()
            .reduce(T::min_of)
            .unwrap_or(value)
    })
}

/// `plane_max(v)`: the largest of the plane's values.
pub fn plane_max<T: crate::Numeric>(unit: &Unit, value: T) -> T {
    exchange(unit, value, |lanes| {
        lanes
            .iter()
            .flatten()
            .copied()
            .reduce(T::max_of)
            .unwrap_or(value)
    })
}

/// `plane_all(b)`: whether `b` holds for every unit of the plane.
pub fn plane_all(unit: &Unit, value: bool) -> bool {
    exchange(unit, value, |lanes| lanes.iter().flatten().all(|b| *b))
}

/// `plane_any(b)`: whether `b` holds for some unit of the plane.
pub fn plane_any(unit: &Unit, value: bool) -> bool {
    exchange(unit, value, |lanes| lanes.iter().flatten().any(|b| *b))
}

/// `plane_shuffle(v, lane)`: the value of `v` in lane `lane % PLANE_DIM` of the plane (a
/// lane whose unit didn't take part gives zero).
pub fn plane_shuffle<T: Scalar>(unit: &Unit, value: T, lane: u32) -> T {
    exchange(unit, value, |lanes| {
        lanes
            .get((lane % PLANE_DIM) as usize)
            .copied()
            .flatten()
            .unwrap_or_default()
    })
}

/// `plane_broadcast(v, lane)`: `plane_shuffle` with a lane the same for every unit.
pub fn plane_broadcast<T: Scalar>(unit: &Unit, value: T, lane: u32) -> T {
    plane_shuffle(unit, value, lane)
}

/// An array in the cube's shared memory (see the module docs). Cheap to copy. An index
/// out of bounds is reported to the launch's monitor (the launch fails) and skipped; a
/// load then gives zero. When the launch checks for races, every access also checks that
/// no other unit touched the element since the last barrier in a conflicting way.
#[derive(Clone, Copy)]
pub struct SharedMemory<'a, T> {
    ptr: *mut T,
    len: u32,
    site: usize,
    races: bool,
    monitor: &'a dyn AccessMonitor,
}

impl<'a, T: Scalar> SharedMemory<'a, T> {
    /// The shared array of declaration site `site`, `len` elements, zeroed when the cube
    /// starts; every unit of the cube that reaches the site gets the same array.
    pub fn at_site(args: &Args<'a>, site: usize, len: u32) -> Self {
        let words = (len as usize * size_of::<T>()).div_ceil(8).max(1);
        let races = args.monitor().checks_races();
        let ptr = STATE.with(|state| {
            let mut state = state.borrow_mut();
            if state.shared.len() <= site {
                state.shared.resize_with(site + 1, || None);
                state.shadows.resize_with(site + 1, || None);
            }
            if races && state.shadows[site].is_none() {
                state.shadows[site] = Some(vec![Shadow::default(); len as usize]);
            }
            let storage = state.shared[site].get_or_insert_with(|| vec![0u64; words]);
            if storage.len() < words {
                storage.resize(words, 0);
            }
            storage.as_mut_ptr().cast::<T>()
        });
        Self {
            ptr,
            len,
            site,
            races,
            monitor: args.monitor(),
        }
    }

    /// The address of element `index`, or `None` (reported) past the end.
    #[track_caller]
    pub(crate) fn element_ptr(&self, index: u32, store: bool) -> Option<*mut T> {
        if index < self.len {
            Some(self.ptr.wrapping_add(index as usize))
        } else {
            self.out_of_bounds(index, store, Location::caller());
            None
        }
    }

    /// Reports `message` to the launch's monitor (the launch fails).
    pub(crate) fn report(&self, message: &str) {
        self.monitor.kernel_error(message);
    }

    #[cold]
    fn out_of_bounds(&self, index: u32, store: bool, at: &Location<'_>) {
        let access = if store { "store" } else { "load" };
        self.monitor.kernel_error(&format!(
            "{access} of a shared array, element {index} of {}, at {at}",
            self.len
        ));
    }

    /// Notes an access of element `index` by the running unit and reports a race with an
    /// access of another unit since the last barrier.
    #[track_caller]
    fn check_race(&self, index: u32, store: bool) {
        let at = Location::caller();
        let conflict = STATE.with(|state| {
            let mut state = state.borrow_mut();
            let (epoch, unit) = (state.epoch, state.current.wrapping_add(1));
            let shadow = state
                .shadows
                .get_mut(self.site)?
                .as_mut()?
                .get_mut(index as usize)?;
            if shadow.epoch != epoch {
                *shadow = Shadow {
                    epoch,
                    ..Shadow::default()
                };
            }
            let other_writer = shadow.writer != 0 && shadow.writer != unit;
            let other_reader = shadow.reader != 0 && shadow.reader != unit;
            let conflict = if store {
                (other_writer || other_reader).then(|| {
                    let other = if other_writer {
                        shadow.writer
                    } else {
                        shadow.reader
                    };
                    let verb = if other_writer { "wrote" } else { "read" };
                    (other, verb)
                })
            } else {
                other_writer.then_some((shadow.writer, "wrote"))
            };
            if store {
                shadow.writer = unit;
            } else {
                shadow.reader = match shadow.reader {
                    0 => unit,
                    reader if reader == unit => unit,
                    _ => MANY,
                };
            }
            conflict.map(|(other, verb)| (unit - 1, other, verb))
        });
        if let Some((unit, other, verb)) = conflict {
            let access = if store { "writes" } else { "reads" };
            let other = if other == MANY {
                "other units".to_string()
            } else {
                format!("unit {}", other - 1)
            };
            self.monitor.data_race(&format!(
                "unit {unit} {access} element {index} of a shared array at {at}, which {other} \
                 {verb} since the last sync_cube"
            ));
        }
    }
}

impl<T: Scalar> super::Indexable for SharedMemory<'_, T> {
    type Elem = T;

    #[inline]
    fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    #[track_caller]
    fn load(&self, index: u32) -> T {
        match self.element_ptr(index, false) {
            Some(ptr) => {
                if self.races {
                    self.check_race(index, false);
                }
                // SAFETY: in bounds of the site's storage, which lives in this thread's cube
                // state until the next cube starts (after every unit of this one finished);
                // only this thread touches it; u64 storage is aligned for every scalar.
                unsafe { T::from_bits(read_bits(ptr)) }
            }
            None => T::default(),
        }
    }

    #[inline]
    #[track_caller]
    fn store(&mut self, index: u32, value: T) {
        if let Some(ptr) = self.element_ptr(index, true) {
            if self.races {
                self.check_race(index, true);
            }
            // SAFETY: as in `load`.
            unsafe { ptr.write(value) }
        }
    }
}

/// Reads a scalar's bits (a `bool` byte that isn't 0 or 1 can't be made by `store`, but the
/// bits path keeps any byte valid).
///
/// # Safety
/// `ptr` must be valid for reads and aligned.
pub(crate) unsafe fn read_bits<T: Scalar>(ptr: *const T) -> u64 {
    // SAFETY: guaranteed by the caller; the bytes are read as an unsigned integer of T's
    // size, which every bit pattern is.
    unsafe {
        match size_of::<T>() {
            1 => u64::from(ptr.cast::<u8>().read()),
            2 => u64::from(ptr.cast::<u16>().read()),
            4 => u64::from(ptr.cast::<u32>().read()),
            _ => ptr.cast::<u64>().read(),
        }
    }
}

/// `SharedMemory::<T>::new(len)` at declaration site `site` (numbered by the macro).
pub fn shared_array<'a, T: Scalar>(args: &Args<'a>, site: usize, len: u32) -> SharedMemory<'a, T> {
    SharedMemory::at_site(args, site, len)
}

/// `plane_mma(&mut acc, a, b)`: `ACC = A·B + ACC` over the unit's plane, each unit holding
/// its fragments in the layout of the inputs' [`MmaShape`]. The plane's fragments are
/// gathered through the plane exchange (lanes absent or finished count as zeros); each
/// element of `D` is `ACC` plus the K products of the inputs' [`MmaInput::mma_value`]s,
/// in `k` order, in `f32`, rounded after each addition. Fragments of the wrong types or
/// lengths (which the expansion refuses before a launch) leave `acc` as it is.
pub fn plane_mma<A: MmaInput, B: MmaInput>(
    unit: &Unit,
    acc: &mut [f32; 4],
    a: impl AsRef<[A]>,
    b: impl AsRef<[B]>,
) {
    let (a, b) = (a.as_ref(), b.as_ref());
    let Some(shape) = MmaShape::of_pair(A::ELEM, B::ELEM) else {
        return;
    };
    let (a_len, b_len) = (
        shape.fragment_len(MmaOperand::A) as usize,
        shape.fragment_len(MmaOperand::B) as usize,
    );
    if a.len() != a_len || b.len() != b_len {
        return;
    }
    // The unit's values in order: A's fragment, B's, then the accumulator; an even count.
    let mut mine: Vec<f32> = a.iter().map(|x| x.mma_value()).collect();
    mine.extend(b.iter().map(|x| x.mma_value()));
    mine.extend_from_slice(acc);
    let plane = PLANE_DIM as usize;
    let mut lanes = vec![vec![0f32; mine.len()]; plane];
    for pair in 0..mine.len() / 2 {
        let packed =
            u64::from(mine[2 * pair].to_bits()) | (u64::from(mine[2 * pair + 1].to_bits()) << 32);
        let offered: Vec<Option<u64>> = exchange(unit, packed, <[Option<u64>]>::to_vec);
        for (lane, value) in lanes.iter_mut().zip(offered) {
            if let Some(bits) = value {
                lane[2 * pair] = f32::from_bits(bits as u32);
                lane[2 * pair + 1] = f32::from_bits((bits >> 32) as u32);
            }
        }
    }
    let k = shape.k() as usize;
    let mut matrix_a = vec![0f32; 16 * k];
    let mut matrix_b = vec![0f32; k * 8];
    let mut matrix_c = [0f32; 16 * 8];
    for (lane, fragment) in (0u32..).zip(&lanes) {
        for (i, value) in (0u32..).zip(&fragment[..a_len]) {
            let (row, column) = shape.a(lane, i);
            matrix_a[row as usize * k + column as usize] = *value;
        }
        for (i, value) in (0u32..).zip(&fragment[a_len..a_len + b_len]) {
            let (row, column) = shape.b(lane, i);
            matrix_b[row as usize * 8 + column as usize] = *value;
        }
        for (i, value) in (0u32..).zip(&fragment[a_len + b_len..]) {
            let (row, column) = MmaShape::acc(lane, i);
            matrix_c[row as usize * 8 + column as usize] = *value;
        }
    }
    let lane = unit.unit_pos_plane();
    for (i, out) in (0u32..).zip(acc.iter_mut()) {
        let (row, column) = MmaShape::acc(lane, i);
        let (row, column) = (row as usize, column as usize);
        *out = (0..k).fold(matrix_c[row * 8 + column], |sum, kk| {
            sum + matrix_a[row * k + kk] * matrix_b[kk * 8 + column]
        });
    }
}

/// `plane_load_a(&tile, start, stride)`: the unit's fragment of the 16 × K `A` operand
/// whose element `(r, c)` is `tile[start + r * stride + c]`, in [`MmaShape::a`]'s order.
/// Each element is read as `tile[i]` reads it (out of bounds: zero, reported).
#[track_caller]
pub fn plane_load_a<T: MmaInput>(
    unit: &Unit,
    tile: &SharedMemory<'_, T>,
    start: u32,
    stride: u32,
) -> T::FragmentA {
    let mut fragment = T::FragmentA::default();
    load_fragment(unit, MmaOperand::A, tile, start, stride, fragment.as_mut());
    fragment
}

/// `plane_load_b(&tile, start, stride)`: the unit's fragment of the K × 8 `B` operand
/// whose element `(k, n)` is `tile[start + k * stride + n]`, in [`MmaShape::b`]'s order.
#[track_caller]
pub fn plane_load_b<T: MmaInput>(
    unit: &Unit,
    tile: &SharedMemory<'_, T>,
    start: u32,
    stride: u32,
) -> T::FragmentB {
    let mut fragment = T::FragmentB::default();
    load_fragment(unit, MmaOperand::B, tile, start, stride, fragment.as_mut());
    fragment
}

/// Fills `fragment` with the unit's elements of `operand` (see [`plane_load_a`]).
#[track_caller]
fn load_fragment<T: MmaInput>(
    unit: &Unit,
    operand: MmaOperand,
    tile: &SharedMemory<'_, T>,
    start: u32,
    stride: u32,
    fragment: &mut [T],
) {
    let Some(shape) = MmaShape::of(T::ELEM) else {
        return;
    };
    let lane = unit.unit_pos_plane();
    for (i, element) in (0u32..).zip(fragment.iter_mut()) {
        let (row, column) = shape.element(operand, lane, i);
        *element = tile.load(fragment_index(start, stride, row, column));
    }
}

/// `start + row * stride + column`, saturating: an index past `u32::MAX` is out of bounds
/// of every shared array, and reported as such.
fn fragment_index(start: u32, stride: u32, row: u32, column: u32) -> u32 {
    start
        .saturating_add(row.saturating_mul(stride))
        .saturating_add(column)
}
