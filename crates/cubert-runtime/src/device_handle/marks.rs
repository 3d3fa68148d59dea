//! Per-thread marks: which devices this thread is inside of.
//!
//! A thread *borrows* a device while it runs one of the device's server tasks (it holds the
//! server lock), and *owns* a device while it runs an `exclusive` section. Calls made from
//! inside either are re-entrant and must not go through the queue or the lock again.

use std::cell::RefCell;

thread_local! {
    static BORROWED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static OWNED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
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

/// Whether this thread is running a server task of device `key`.
pub fn is_borrowed(key: u64) -> bool {
    contains(&BORROWED, key)
}

/// Whether this thread is in an exclusive section of device `key`.
pub fn is_owned(key: u64) -> bool {
    contains(&OWNED, key)
}

/// Marks the current thread as running a server task of `key` until dropped.
pub struct BorrowMark(u64);

impl BorrowMark {
    /// Sets the mark.
    pub fn new(key: u64) -> Self {
        push(&BORROWED, key);
        Self(key)
    }
}

impl Drop for BorrowMark {
    fn drop(&mut self) {
        remove(&BORROWED, self.0);
    }
}

/// Marks the current thread as owning `key` until dropped.
pub struct OwnMark(u64);

impl OwnMark {
    /// Sets the mark.
    pub fn new(key: u64) -> Self {
        push(&OWNED, key);
        Self(key)
    }
}

impl Drop for OwnMark {
    fn drop(&mut self) {
        remove(&OWNED, self.0);
    }
}
