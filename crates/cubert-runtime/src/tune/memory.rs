//! The in-memory cache of tuning results, shared by every device of a process.
//!
//! Entries are keyed by [`CacheKey`]: the device fingerprint (not the device index, so
//! identical devices share results), the operation, the candidate set's checksum and the
//! tuning key. A slot is either a finished [`TuneRecord`] or a marker that a thread is
//! tuning it right now: [`MemoryCache::claim`] returns the record, or the right to tune
//! ([`TuneClaim`]), and a thread asking for a key another thread is tuning waits until that
//! one finishes instead of tuning it twice. If the tuning thread fails (or panics), its
//! claim is dropped, the previous state is restored and one of the waiters tunes instead.
//! A thread asking again for a key it is tuning itself (a candidate calling its own tuned
//! operation) gets an error instead of a deadlock.

use super::key::TuneKey;
use super::record::TuneRecord;
use crate::config::AutotuneLevel;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

/// What a result is filed under. See the module docs.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct CacheKey {
    /// The device fingerprint's id.
    pub fingerprint: String,
    /// The operation.
    pub operation: String,
    /// The candidate set's checksum.
    pub checksum: u64,
    /// The tuning key.
    pub key: TuneKey,
}

enum Slot {
    Tuning {
        owner: ThreadId,
        previous: Option<Arc<TuneRecord>>,
    },
    Done(Arc<TuneRecord>),
}

/// The in-memory cache. See the module docs.
#[derive(Default)]
pub struct MemoryCache {
    slots: Mutex<HashMap<CacheKey, Slot>>,
    changed: Condvar,
    /// Threads waiting for a key being tuned (checked under `slots`' lock).
    waiting: std::sync::atomic::AtomicUsize,
}

/// What [`MemoryCache::claim`] found.
pub enum Claim<'a> {
    /// A result good for the requested level.
    Found(Arc<TuneRecord>),
    /// No usable result: the caller tunes the key and reports with [`TuneClaim::finish`].
    Tune(TuneClaim<'a>),
}

/// The right to tune one key; dropping it unfinished lets a waiting thread tune instead.
pub struct TuneClaim<'a> {
    cache: &'a MemoryCache,
    key: CacheKey,
    finished: bool,
}

impl TuneClaim<'_> {
    /// Files `record` and wakes the threads waiting for it.
    pub fn finish(mut self, record: Arc<TuneRecord>) {
        self.cache
            .lock()
            .insert(self.key.clone(), Slot::Done(record));
        self.finished = true;
        self.cache.changed.notify_all();
    }
}

impl Drop for TuneClaim<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut slots = self.cache.lock();
        if let Some(Slot::Tuning { previous, .. }) = slots.remove(&self.key)
            && let Some(previous) = previous
        {
            slots.insert(self.key.clone(), Slot::Done(previous));
        }
        drop(slots);
        self.cache.changed.notify_all();
    }
}

impl MemoryCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<CacheKey, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The result for `key` if one tuned at `level` or above is filed; else the right to
    /// tune it. Waits while another thread tunes the same key. The flag says whether it
    /// waited.
    ///
    /// # Errors
    /// A message when the calling thread is already tuning `key` (re-entrant tuning).
    pub fn claim(&self, key: &CacheKey, level: AutotuneLevel) -> Result<(Claim<'_>, bool), String> {
        let me = std::thread::current().id();
        let mut waited = false;
        let mut slots = self.lock();
        loop {
            match slots.get(key) {
                Some(Slot::Done(record)) if record.level >= level => {
                    return Ok((Claim::Found(record.clone()), waited));
                }
                Some(Slot::Tuning { owner, .. }) if *owner == me => {
                    return Err(format!(
                        "`{}` [{}] is being tuned by this very thread: a candidate may not call \
                         its own tuned operation",
                        key.operation, key.key
                    ));
                }
                Some(Slot::Tuning { .. }) => {
                    waited = true;
                    self.waiting.fetch_add(1, Ordering::SeqCst);
                    slots = self
                        .changed
                        .wait(slots)
                        .unwrap_or_else(PoisonError::into_inner);
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                }
                _ => {
                    let previous = match slots.remove(key) {
                        Some(Slot::Done(record)) => Some(record),
                        _ => None,
                    };
                    slots.insert(
                        key.clone(),
                        Slot::Tuning {
                            owner: me,
                            previous,
                        },
                    );
                    let claim = TuneClaim {
                        cache: self,
                        key: key.clone(),
                        finished: false,
                    };
                    return Ok((Claim::Tune(claim), waited));
                }
            }
        }
    }

    /// The finished result for `key`, whatever its level.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<TuneRecord>> {
        match self.lock().get(key) {
            Some(Slot::Done(record)) => Some(record.clone()),
            Some(Slot::Tuning { previous, .. }) => previous.clone(),
            None => None,
        }
    }

    /// Forgets every finished result (keys being tuned stay claimed).
    pub fn clear(&self) {
        self.lock()
            .retain(|_, slot| matches!(slot, Slot::Tuning { .. }));
    }

    /// Number of threads waiting for a key another thread is tuning.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Number of finished results.
    pub fn len(&self) -> usize {
        self.lock()
            .values()
            .filter(|slot| matches!(slot, Slot::Done(_)))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::key::DeviceFingerprint;
    use std::time::{Duration, Instant};

    fn key() -> CacheKey {
        CacheKey {
            fingerprint: "cpu-1".into(),
            operation: "op".into(),
            checksum: 1,
            key: TuneKey::new("n=1"),
        }
    }

    fn record(level: AutotuneLevel, winner: &str) -> Arc<TuneRecord> {
        Arc::new(TuneRecord {
            operation: "op".into(),
            key: TuneKey::new("n=1"),
            fingerprint: DeviceFingerprint::new("cpu", 1, ""),
            checksum: 1,
            level,
            winner: winner.into(),
            candidates: Vec::new(),
            tuning_seconds: 0.0,
            benchmark_runs: 0,
        })
    }

    #[test]
    fn a_second_thread_waits_for_the_first_and_gets_its_result() {
        let cache = Arc::new(MemoryCache::default());
        let Ok((Claim::Tune(claim), false)) = cache.claim(&key(), AutotuneLevel::Balanced) else {
            panic!("the first claim tunes");
        };
        let waiter = {
            let cache = cache.clone();
            std::thread::spawn(move || match cache.claim(&key(), AutotuneLevel::Balanced) {
                Ok((Claim::Found(record), waited)) => (record.winner.clone(), waited),
                _ => panic!("the waiter finds the result"),
            })
        };
        let start = Instant::now();
        while cache.waiting() == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the waiter never waited"
            );
            std::thread::yield_now();
        }
        claim.finish(record(AutotuneLevel::Balanced, "fast"));
        assert_eq!(waiter.join().unwrap(), ("fast".to_string(), true));
    }

    #[test]
    fn a_dropped_claim_restores_the_previous_result_and_lets_another_tune() {
        let cache = MemoryCache::default();
        let Ok((Claim::Tune(claim), _)) = cache.claim(&key(), AutotuneLevel::Minimal) else {
            panic!("tunes");
        };
        claim.finish(record(AutotuneLevel::Minimal, "a"));
        // A higher level re-tunes; failing keeps the minimal result.
        let Ok((Claim::Tune(claim), _)) = cache.claim(&key(), AutotuneLevel::Full) else {
            panic!("a higher level tunes again");
        };
        drop(claim);
        assert_eq!(cache.get(&key()).unwrap().winner, "a");
        assert!(matches!(
            cache.claim(&key(), AutotuneLevel::Minimal),
            Ok((Claim::Found(_), false))
        ));
    }

    #[test]
    fn re_entrant_claim_by_the_tuning_thread_is_an_error() {
        let cache = MemoryCache::default();
        let first = cache.claim(&key(), AutotuneLevel::Balanced).unwrap();
        let again = cache.claim(&key(), AutotuneLevel::Balanced);
        assert!(again.is_err());
        drop(first);
        assert_eq!(cache.len(), 0);
    }
}
