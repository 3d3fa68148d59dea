//! A re-entrant lock serializing inline-mode work per device.
//!
//! In inline mode every call runs on the caller's thread while holding the gate; an
//! `exclusive` section holds it for its whole duration, so no other thread's work interleaves.
//! The owning thread may enter again (nested calls from inside the section).

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::ThreadId;

#[derive(Default)]
struct GateState {
    owner: Option<ThreadId>,
    depth: usize,
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
            state = self
                .released
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
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
            self.gate.released.notify_all();
        }
    }
}
