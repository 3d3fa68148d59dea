//! A re-entrant lock serializing inline-mode work per device.
//!
//! In inline mode every call runs on the caller's thread while holding the gate; an
//! `exclusive` section holds it for its whole duration, so no other thread's work interleaves.
//! The owning thread may enter again (nested calls from inside the section).
//!
//! How it works: the gate is an atomic word holding its owner's [`thread_token`] (0 when
//! free). Entering a free gate is one compare-and-swap, entering again a load and the
//! owner's own depth count, leaving a store: no lock and no system call when threads don't
//! contend, which is every inline allocation of a single-threaded program (a mutex taken
//! and released on entering and again on leaving cost about a fifth of an inline
//! allocation and free). A thread that finds the gate held waits on a condition variable;
//! it counts itself in `waiting` under the mutex before trying the word again, and the
//! leaving owner frees the word before reading `waiting` (both sequentially consistent), so
//! either the waiter's try succeeds or the owner sees it waiting and wakes it: no wake-up is
//! lost. Leaving notifies only when some thread waits.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// A token naming the calling thread, never 0 and never given to another thread (unlike a
/// thread-local's address, which a later thread may reuse). A thread whose thread-locals are
/// being destroyed gets a fresh token instead of a panic.
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN
        .try_with(|token| *token)
        .unwrap_or_else(|_| NEXT.fetch_add(1, Ordering::Relaxed))
}

/// See the module docs.
#[derive(Default)]
pub struct ReentrantGate {
    /// The owner's token; 0 while the gate is free.
    owner: AtomicU64,
    /// How many times the owner entered; read and written by the owner only.
    depth: AtomicUsize,
    /// Threads blocked in [`ReentrantGate::enter`].
    waiting: AtomicUsize,
    /// Held by a waiting thread from counting itself until it waits, and by a leaving owner
    /// to notify.
    lock: Mutex<()>,
    released: Condvar,
}

/// Holds the gate until dropped.
pub struct GateGuard<'a> {
    gate: &'a ReentrantGate,
}

impl ReentrantGate {
    /// Enters the gate, waiting while another thread holds it.
    pub fn enter(&self) -> GateGuard<'_> {
        let me = thread_token();
        // Only this thread ever stores its own token, so seeing it means it holds the gate.
        if self.owner.load(Ordering::Relaxed) == me {
            self.depth.fetch_add(1, Ordering::Relaxed);
            return GateGuard { gate: self };
        }
        if self
            .owner
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            self.wait_to_enter(me);
        }
        self.depth.store(1, Ordering::Relaxed);
        GateGuard { gate: self }
    }

    /// Blocks until this thread (`me`) takes the free gate.
    fn wait_to_enter(&self, me: u64) {
        let mut lock = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while self
            .owner
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            lock = self
                .released
                .wait(lock)
                .unwrap_or_else(PoisonError::into_inner);
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        let gate = self.gate;
        let depth = gate.depth.load(Ordering::Relaxed).saturating_sub(1);
        gate.depth.store(depth, Ordering::Relaxed);
        if depth > 0 {
            return;
        }
        gate.owner.store(0, Ordering::SeqCst);
        if gate.waiting.load(Ordering::SeqCst) > 0 {
            let _lock = gate.lock.lock().unwrap_or_else(PoisonError::into_inner);
            gate.released.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn the_holder_enters_again_without_waiting() {
        let gate = ReentrantGate::default();
        let outer = gate.enter();
        let inner = gate.enter();
        drop(inner);
        drop(outer);
        drop(gate.enter());
    }

    #[test]
    fn threads_waiting_at_the_gate_enter_once_the_holder_leaves() {
        let gate = Arc::new(ReentrantGate::default());
        let inside = Arc::new(AtomicBool::new(false));
        let held = gate.enter();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let (gate, inside) = (gate.clone(), inside.clone());
                std::thread::spawn(move || {
                    let _guard = gate.enter();
                    // Alone inside: nobody else holds the gate now.
                    assert!(!inside.swap(true, Ordering::SeqCst));
                    std::thread::sleep(Duration::from_millis(2));
                    inside.store(false, Ordering::SeqCst);
                })
            })
            .collect();
        // Let the threads block on the gate before it is left.
        while gate.waiting.load(Ordering::SeqCst) < 3 {
            std::thread::yield_now();
        }
        drop(held);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(gate.waiting.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn one_thread_at_a_time_is_inside_however_many_contend_and_nest() {
        let gate = Arc::new(ReentrantGate::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let entries = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (gate, inside, entries) = (gate.clone(), inside.clone(), entries.clone());
                std::thread::spawn(move || {
                    for round in 0..5_000 {
                        let _outer = gate.enter();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                        if round % 3 == 0 {
                            // Nested entries of the holder don't wait and don't let anyone in.
                            let _inner = gate.enter();
                            let _innermost = gate.enter();
                            std::thread::yield_now();
                        }
                        entries.fetch_add(1, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(entries.load(Ordering::SeqCst), 6 * 5_000);
        assert_eq!(gate.owner.load(Ordering::SeqCst), 0, "left free");
        assert_eq!(gate.waiting.load(Ordering::SeqCst), 0);
    }
}
