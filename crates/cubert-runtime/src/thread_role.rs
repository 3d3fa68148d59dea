//! Per-thread marks: which devices this thread is inside of, and whether it is a runner.
//!
//! A thread *borrows* a device while it runs one of the device's server tasks (it holds the
//! server lock), and *owns* a device while it runs an `exclusive` section. Calls made from
//! inside either are re-entrant and must not go through the queue or the lock again. A
//! device's runner thread (threaded device handle) is marked as such for its whole life.
//!
//! The device handle sets the marks; backends read them ([`on_runner_thread`]) and carry a
//! task's mark to helper threads ([`TaskScope`]). A leaf module (it uses only `std`), so
//! backends need not reach into the dispatcher for them; `device_handle` re-exports the
//! public items under their old paths.

use std::cell::{Cell, RefCell};

thread_local! {
    /// Whether this thread is a device's runner thread.
    static RUNNER: Cell<bool> = const { Cell::new(false) };
    /// The device whose task this thread runs (0: none). One level is enough: a task of one
    /// device never runs a task of another device on the same thread.
    static BORROWED: Cell<u64> = const { Cell::new(0) };
    static OWNED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// How many marks `OWNED` holds: every call asks whether its thread owns the device,
    /// and nearly always none does; this answers that without the list (a `Vec` in a
    /// thread-local has a destructor, so each access of it checks its registration too).
    static OWNED_COUNT: Cell<usize> = const { Cell::new(0) };
}

fn contains(set: &'static std::thread::LocalKey<RefCell<Vec<u64>>>, key: u64) -> bool {
    set.with(|keys| keys.borrow().contains(&key))
}

fn push(set: &'static std::thread::LocalKey<RefCell<Vec<u64>>>, key: u64) {
    set.with(|keys| keys.borrow_mut().push(key));
}

fn remove(set: &'static std::thread::LocalKey<RefCell<Vec<u64>>>, key: u64) {
    set.with(|keys| {
        let mut keys = keys.borrow_mut();
        if let Some(position) = keys.iter().rposition(|k| *k == key) {
            keys.remove(position);
        }
    });
}

/// Whether the calling thread is the runner thread of a threaded device handle: a server
/// task running here may wait for other threads without stopping its caller (a task of an
/// inline handle runs on its caller's thread, which may be the one that must make the next
/// call).
pub fn on_runner_thread() -> bool {
    RUNNER.with(Cell::get)
}

/// Marks the calling thread as a device's runner thread, for the rest of its life.
pub(crate) fn mark_runner_thread() {
    RUNNER.with(|runner| runner.set(true));
}

/// Whether this thread is running a server task of device `key`.
pub(crate) fn is_borrowed(key: u64) -> bool {
    BORROWED.with(Cell::get) == key
}

/// Whether this thread is in an exclusive section of device `key`.
pub(crate) fn is_owned(key: u64) -> bool {
    OWNED_COUNT.with(Cell::get) > 0 && contains(&OWNED, key)
}

/// Marks the current thread as running a server task of `key` until dropped (restoring the
/// previous mark, if tasks nest).
pub(crate) struct BorrowMark(u64);

impl BorrowMark {
    /// Sets the mark.
    pub(crate) fn new(key: u64) -> Self {
        Self(BORROWED.with(|cell| cell.replace(key)))
    }
}

impl Drop for BorrowMark {
    fn drop(&mut self) {
        BORROWED.with(|cell| cell.set(self.0));
    }
}

/// Marks the current thread as owning `key` until dropped.
pub(crate) struct OwnMark(u64);

impl OwnMark {
    /// Sets the mark.
    pub(crate) fn new(key: u64) -> Self {
        push(&OWNED, key);
        OWNED_COUNT.with(|count| count.set(count.get() + 1));
        Self(key)
    }
}

impl Drop for OwnMark {
    fn drop(&mut self) {
        remove(&OWNED, self.0);
        OWNED_COUNT.with(|count| count.set(count.get().saturating_sub(1)));
    }
}

/// The device whose server task the calling thread runs, as a token for helper threads.
///
/// Work a helper thread does on a task's behalf (a CPU kernel's cubes on the device's worker
/// threads) is part of that task: a blocking call to the same device from there must be
/// refused as [`CallError::Reentrant`](crate::device_handle::CallError::Reentrant) exactly as on the
/// task's own thread, never queued behind the task it is part of (a deadlock). A backend
/// takes the scope where the task runs and enters it on each helper thread for the time
/// the helper works for the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskScope(u64);

impl TaskScope {
    /// The scope of the task running on this thread (none if no task runs here).
    pub fn current() -> Self {
        Self(BORROWED.with(Cell::get))
    }

    /// Marks this thread as part of the task until the guard drops (guards nest).
    pub fn enter(self) -> TaskScopeGuard {
        TaskScopeGuard {
            _mark: BorrowMark::new(self.0),
        }
    }
}

/// Keeps a helper thread inside a [`TaskScope`]; leaving (dropping it) restores the
/// thread's previous mark.
#[derive(Debug)]
pub struct TaskScopeGuard {
    _mark: BorrowMark,
}

impl std::fmt::Debug for BorrowMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BorrowMark").field(&self.0).finish()
    }
}
