//! A re-entrant lock serializing inline-mode work per device.
//!
//! In inline mode every call runs on the caller's thread while holding the gate; an
//! `exclusive` section holds it for its whole duration, so no other thread's work interleaves.
//! The owning thread may enter again (nested calls from inside the section).
//!
//! Leaving wakes waiting threads only when there are some: a condition variable's notify is
//! a system call on every exit otherwise, which cost more than the rest of an inline
//! allocation.

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::ThreadId;

#[derive(Default)]
struct GateState {
    owner: Option<ThreadId>,
    depth: usize,
    /// Threads blocked in [`ReentrantGate::enter`].
    waiting: usize,
}

/// See the module docs.
#[derive(Default)]
pub struct ReentrantGate {
    state: Mutex<GateState>,
    released: Condvar,
}

/// Holds the gate until dropped.
pub struct GateGuard<'a> {
    gate: &'a ReentrantGate,
}

impl ReentrantGate {
    /// Enters the gate, waiting while another thread holds it.
    pub fn enter(&self) -> GateGuard<'_> {
        let me = std::thread::current().id();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.owner.is_some_and(|owner| owner != me) {
            state.waiting += 1;
            state = self
                .released
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
        state.owner = Some(me);
        state.depth += 1;
        GateGuard { gate: self }
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        let mut state = self
            .gate
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.depth = state.depth.saturating_sub(1);
        if state.depth == 0 {
            state.owner = None;
            if state.waiting > 0 {
                self.gate.released.notify_all();
            }
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
        while gate.state.lock().unwrap().waiting < 3 {
            std::thread::yield_now();
        }
        drop(held);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(gate.state.lock().unwrap().waiting, 0);
    }
}
