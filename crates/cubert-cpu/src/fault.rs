//! Fault injection for the CPU backend's storage: chosen host allocations fail, so tests can
//! check that the runtime answers with `IoError::OutOfMemory`, keeps serving, and keeps the
//! data it already holds intact.
//!
//! A [`FaultPlan`] is shared and thread-safe: clones see one state, so a test keeps a clone
//! and hands another to [`HostStorage::with_fault_plan`](crate::storage::HostStorage) or
//! [`CpuServer::with_fault_plan`](crate::CpuServer::with_fault_plan). Every allocation the
//! storage is asked for is one *attempt*, numbered from 0 in order. An attempt fails when
//!
//! - its number was given to [`FaultPlan::fail_attempts`], or
//! - [`FaultPlan::fail_next`] armed it (the next `n` attempts fail), or
//! - [`FaultPlan::fail_randomly`] picks it (a seeded, reproducible one-in-`n` choice).
//!
//! A failed attempt allocates nothing and returns `IoError::OutOfMemory`, as a full device
//! would, so the memory manager's own recovery (give back cached segments, retry, retry with
//! an exact-size segment) runs as it does for a real shortage. The plan counts attempts and
//! injected failures and logs [`StorageEvent`]s (bounded to [`MAX_EVENTS`]), from which a
//! test tells which allocation site of the memory manager it hit.
//!
//! Production servers have no plan; the check costs one branch per storage allocation.

use cubert_runtime::IoError;
use cubert_runtime::backtrace::BackTrace;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Most events the log keeps between two [`FaultPlan::take_events`]; later ones are counted
/// in [`FaultPlan::dropped_events`] only.
pub const MAX_EVENTS: usize = 1 << 16;

/// What the storage did, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageEvent {
    /// An allocation attempt.
    Alloc {
        /// The attempt's number (from 0).
        attempt: u64,
        /// Bytes asked for.
        size: u64,
        /// Whether the plan made it fail.
        injected: bool,
    },
    /// An allocation was given back.
    Dealloc {
        /// Its size in bytes.
        size: u64,
    },
}

#[derive(Debug, Default)]
struct State {
    attempts: u64,
    injected: u64,
    chosen: BTreeSet<u64>,
    next: u64,
    random: Option<(u64, u64)>,
    events: Vec<StorageEvent>,
    dropped_events: u64,
}

impl State {
    fn log(&mut self, event: StorageEvent) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(event);
        } else {
            self.dropped_events += 1;
        }
    }
}

/// Which storage allocations fail. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    state: Arc<Mutex<State>>,
}

/// A 64-bit mix of `seed` and `attempt` (splitmix64), for reproducible random choices.
fn mix(seed: u64, attempt: u64) -> u64 {
    let mut z = seed ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl FaultPlan {
    /// A plan that fails nothing until told to.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails the attempts with these numbers (counted from 0 since the plan was made).
    pub fn fail_attempts(&self, attempts: impl IntoIterator<Item = u64>) {
        self.lock().chosen.extend(attempts);
    }

    /// Fails the next `count` attempts (replacing an earlier `fail_next`).
    pub fn fail_next(&self, count: u64) {
        self.lock().next = count;
    }

    /// Fails about one attempt in `one_in`, chosen by `seed` and the attempt's number, so the
    /// same seed fails the same attempts. `one_in` of 0 turns random failures off.
    pub fn fail_randomly(&self, seed: u64, one_in: u64) {
        self.lock().random = (one_in > 0).then_some((seed, one_in));
    }

    /// Clears every rule: later attempts succeed. Counts and the log are kept.
    pub fn disarm(&self) {
        let mut state = self.lock();
        state.chosen.clear();
        state.next = 0;
        state.random = None;
    }

    /// Allocation attempts so far.
    pub fn attempts(&self) -> u64 {
        self.lock().attempts
    }

    /// Attempts the plan made fail so far.
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    /// Takes the events logged since the last call.
    pub fn take_events(&self) -> Vec<StorageEvent> {
        std::mem::take(&mut self.lock().events)
    }

    /// Events not logged because the log was full.
    pub fn dropped_events(&self) -> u64 {
        self.lock().dropped_events
    }

    /// Called by the storage before it allocates `size` bytes: the error to return instead,
    /// if the plan fails this attempt.
    pub(crate) fn on_alloc(&self, size: u64) -> Option<IoError> {
        let mut state = self.lock();
        let attempt = state.attempts;
        state.attempts += 1;
        let mut injected = state.chosen.remove(&attempt);
        if !injected && state.next > 0 {
            state.next -= 1;
            injected = true;
        }
        if !injected && let Some((seed, one_in)) = state.random {
            injected = mix(seed, attempt).is_multiple_of(one_in);
        }
        state.log(StorageEvent::Alloc {
            attempt,
            size,
            injected,
        });
        if !injected {
            return None;
        }
        state.injected += 1;
        Some(IoError::OutOfMemory {
            requested: size,
            reserved: 0,
            free: 0,
            reason: format!("fault injected: allocation attempt #{attempt} failed by the plan"),
            backtrace: BackTrace::capture(),
        })
    }

    /// Called by the storage when it gives back an allocation of `size` bytes.
    pub(crate) fn on_dealloc(&self, size: u64) {
        self.lock().log(StorageEvent::Dealloc { size });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(plan: &FaultPlan, count: usize) -> Vec<bool> {
        (0..count).map(|_| plan.on_alloc(8).is_some()).collect()
    }

    #[test]
    fn chosen_and_next_attempts_fail_and_are_counted() {
        let plan = FaultPlan::new();
        plan.fail_attempts([1, 3]);
        assert_eq!(outcomes(&plan, 5), [false, true, false, true, false]);
        plan.fail_next(2);
        assert_eq!(outcomes(&plan, 3), [true, true, false]);
        assert_eq!((plan.attempts(), plan.injected()), (8, 4));
        let events = plan.take_events();
        assert_eq!(events.len(), 8);
        assert_eq!(
            events[1],
            StorageEvent::Alloc {
                attempt: 1,
                size: 8,
                injected: true
            }
        );
        assert!(plan.take_events().is_empty());
    }

    #[test]
    fn random_failures_are_reproducible_and_disarm_stops_them() {
        let (a, b) = (FaultPlan::new(), FaultPlan::new());
        a.fail_randomly(7, 4);
        b.fail_randomly(7, 4);
        let first = outcomes(&a, 400);
        assert_eq!(first, outcomes(&b, 400));
        let failed = first.iter().filter(|f| **f).count();
        assert!((60..140).contains(&failed), "{failed} of 400 failed");
        a.disarm();
        assert!(outcomes(&a, 100).iter().all(|f| !f));
    }

    #[test]
    fn clones_share_one_state_and_injected_errors_are_out_of_memory() {
        let plan = FaultPlan::new();
        let clone = plan.clone();
        clone.fail_next(1);
        let error = plan.on_alloc(4096).unwrap();
        assert!(
            matches!(
                error,
                IoError::OutOfMemory {
                    requested: 4096,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(clone.injected(), 1);
        plan.on_dealloc(4096);
        assert_eq!(
            clone.take_events().last(),
            Some(&StorageEvent::Dealloc { size: 4096 })
        );
    }
}
