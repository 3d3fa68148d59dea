//! The tuner: finds the fastest candidate of a key once, and remembers it.
//!
//! [`Tuner::choose`] answers "which candidate for these inputs?":
//!
//! 1. At level `off`, the default (first) candidate, with nothing measured.
//! 2. The in-memory cache, keyed by device fingerprint, operation, set checksum and key. If
//!    another thread is tuning the same key (on this device or another of the same kind),
//!    the call waits for its result instead of tuning twice.
//! 3. The disk cache (when enabled), for a record of this set and a level at least as high.
//! 4. Otherwise the key is tuned: inside `exclusive` (no other work on the device), the
//!    queued work of the caller's stream is synced first (its errors are the caller's and
//!    are returned as they are), benchmark inputs are made, and the candidates the level
//!    allows run in priority order: a warm-up (failures are logged and skipped), the output
//!    check in check mode, then timed samples (see `measure`). Candidates not started
//!    before the budget runs out are skipped; the first one always runs. The fastest median
//!    wins; the record goes to both caches.
//!
//! [`Tuner::execute`] chooses, then runs the chosen candidate on the caller's inputs.
//! [`global_tuner`] is the process's tuner, configured by `[autotune]`.

use super::candidate::{Candidate, CandidateSet};
use super::check::OutputCheck;
use super::disk::DiskCache;
use super::key::{DeviceFingerprint, TuneKey};
use super::measure::{self, SamplePlan};
use super::memory::{CacheKey, Claim, MemoryCache};
use super::record::{CandidateReport, Outcome, TuneRecord, median};
use super::settings::TuneSettings;
use crate::bytes::Bytes;
use crate::client::ComputeClient;
use crate::config::{AutotuneLevel, global_config};
use crate::error::ServerError;
use crate::runtime::Runtime;
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Counters of a tuner, since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TuneStats {
    /// Keys tuned (benchmarked or chosen as the only candidate).
    pub tunes: u64,
    /// Candidate runs made while tuning (warm-ups and timed samples).
    pub benchmark_runs: u64,
    /// Choices answered from memory.
    pub memory_hits: u64,
    /// Choices answered from disk.
    pub disk_hits: u64,
    /// Choices that waited for another thread tuning the same key.
    pub waits: u64,
}

/// Where a choice came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Tuning is off: the default candidate.
    Untuned,
    /// The in-memory cache.
    Memory,
    /// The on-disk cache.
    Disk,
    /// Tuned by this call.
    Tuned,
}

/// The candidate to run for a key, and how it was found.
#[derive(Clone, Debug)]
pub struct Choice {
    /// Index of the candidate in its set.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Where the choice came from.
    pub source: Source,
    /// The tuning record (none when tuning is off).
    pub record: Option<Arc<TuneRecord>>,
}

#[derive(Default)]
struct Counters {
    tunes: AtomicU64,
    benchmark_runs: AtomicU64,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    waits: AtomicU64,
}

/// Chooses among candidates by measuring them. See the module docs.
pub struct Tuner {
    settings: TuneSettings,
    memory: MemoryCache,
    disk: Option<DiskCache>,
    counters: Counters,
    /// Fingerprints by runtime and properties checksum: computing one may read files.
    fingerprints: Mutex<HashMap<(TypeId, u64), DeviceFingerprint>>,
}

impl std::fmt::Debug for Tuner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuner")
            .field("settings", &self.settings)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The process's tuner, configured by `[autotune]` (and `CUBERT_AUTOTUNE_*`).
pub fn global_tuner() -> &'static Tuner {
    static TUNER: OnceLock<Tuner> = OnceLock::new();
    TUNER.get_or_init(|| Tuner::new(TuneSettings::from_config(&global_config().autotune)))
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Tuner {
    /// A tuner with `settings` and empty in-memory cache.
    pub fn new(settings: TuneSettings) -> Self {
        Self {
            disk: settings.cache_dir.clone().map(DiskCache::new),
            settings,
            memory: MemoryCache::default(),
            counters: Counters::default(),
            fingerprints: Mutex::new(HashMap::new()),
        }
    }

    /// The fingerprint of `client`'s device, computed once per kind of device.
    fn fingerprint<R: Runtime>(&self, client: &ComputeClient<R>) -> DeviceFingerprint {
        let id = (TypeId::of::<R>(), client.utilities().properties_hash);
        let mut known = self
            .fingerprints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        known
            .entry(id)
            .or_insert_with(|| R::tune_fingerprint(client.properties(), client.info()))
            .clone()
    }

    /// The settings.
    pub fn settings(&self) -> &TuneSettings {
        &self.settings
    }

    /// The counters so far.
    pub fn stats(&self) -> TuneStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        TuneStats {
            tunes: read(&self.counters.tunes),
            benchmark_runs: read(&self.counters.benchmark_runs),
            memory_hits: read(&self.counters.memory_hits),
            disk_hits: read(&self.counters.disk_hits),
            waits: read(&self.counters.waits),
        }
    }

    /// Forgets the in-memory results (the disk cache stays).
    pub fn clear_memory(&self) {
        self.memory.clear();
    }

    /// Number of results in memory.
    pub fn cached_results(&self) -> usize {
        self.memory.len()
    }

    /// Number of threads waiting right now for a key another thread is tuning.
    pub fn waiting(&self) -> usize {
        self.memory.waiting()
    }

    /// The in-memory result for `inputs`' key on `client`'s kind of device, if any. Tunes
    /// nothing and doesn't wait.
    pub fn cached<R: Runtime, I, O>(
        &self,
        client: &ComputeClient<R>,
        set: &CandidateSet<R, I, O>,
        inputs: &I,
    ) -> Option<Arc<TuneRecord>> {
        let fingerprint = self.fingerprint(client);
        self.memory
            .get(&Self::cache_key(&fingerprint, set, &set.key(inputs)))
    }

    fn cache_key<R: Runtime, I, O>(
        fingerprint: &DeviceFingerprint,
        set: &CandidateSet<R, I, O>,
        key: &TuneKey,
    ) -> CacheKey {
        CacheKey {
            fingerprint: fingerprint.id(),
            operation: set.operation().to_string(),
            checksum: set.checksum(),
            key: key.clone(),
        }
    }

    /// Runs the candidate [`Self::choose`] picks for `inputs`, on `inputs`.
    ///
    /// # Errors
    /// As [`Self::choose`], or the chosen candidate's error.
    pub fn execute<R: Runtime, I, O>(
        &self,
        client: &ComputeClient<R>,
        set: &CandidateSet<R, I, O>,
        inputs: &I,
    ) -> Result<O, ServerError> {
        let choice = self.choose(client, set, inputs)?;
        let candidate = set.candidates().get(choice.index).ok_or_else(|| {
            ServerError::generic(format!(
                "`{}` has no candidate {}",
                set.operation(),
                choice.index
            ))
        })?;
        candidate.run(client, inputs)
    }

    /// The candidate to run for `inputs` on `client`'s device, tuning the key first if no
    /// result is known (see the module docs).
    ///
    /// A call for a key another thread is tuning waits for it; so don't hold an
    /// `exclusive` section of a device while asking for a key that another thread may be
    /// tuning on that same device (that thread needs the section to measure).
    ///
    /// # Errors
    /// [`ServerError::Generic`] for an empty set, when every candidate failed (the message
    /// lists why), or when a candidate calls its own tuned operation; the error of work
    /// queued on the caller's stream before the call; the benchmark inputs' error.
    pub fn choose<R: Runtime, I, O>(
        &self,
        client: &ComputeClient<R>,
        set: &CandidateSet<R, I, O>,
        inputs: &I,
    ) -> Result<Choice, ServerError> {
        let Some(default) = set.candidates().first() else {
            return Err(ServerError::generic(format!(
                "`{}` has no candidate to run",
                set.operation()
            )));
        };
        let level = self.settings.level;
        if level == AutotuneLevel::Off {
            return Ok(Choice {
                index: 0,
                name: default.name().to_string(),
                source: Source::Untuned,
                record: None,
            });
        }
        let key = set.key(inputs);
        let fingerprint = self.fingerprint(client);
        let cache_key = Self::cache_key(&fingerprint, set, &key);
        let (claim, waited) = self
            .memory
            .claim(&cache_key, level)
            .map_err(ServerError::generic)?;
        if waited {
            bump(&self.counters.waits, 1);
        }
        let claim = match claim {
            Claim::Found(record) => {
                bump(&self.counters.memory_hits, 1);
                return Self::chosen(set, record, Source::Memory);
            }
            Claim::Tune(claim) => claim,
        };
        if let Some(record) = self.disk.as_ref().and_then(|disk| disk.load(&cache_key))
            && record.level >= level
            && set.position(&record.winner).is_some()
        {
            bump(&self.counters.disk_hits, 1);
            let record = Arc::new(record);
            claim.finish(record.clone());
            return Self::chosen(set, record, Source::Disk);
        }
        let record = Arc::new(self.tune(client, set, &key, inputs, fingerprint)?);
        bump(&self.counters.tunes, 1);
        if let Some(disk) = &self.disk
            && record.benchmark_runs > 0
            && let Err(error) = disk.store(&cache_key, &record)
        {
            tracing::warn!("autotune: the result isn't cached on disk: {error}");
        }
        claim.finish(record.clone());
        Self::chosen(set, record, Source::Tuned)
    }

    fn chosen<R: Runtime, I, O>(
        set: &CandidateSet<R, I, O>,
        record: Arc<TuneRecord>,
        source: Source,
    ) -> Result<Choice, ServerError> {
        let index = set.position(&record.winner).ok_or_else(|| {
            ServerError::generic(format!(
                "the autotune record of `{}` names `{}`, which the set doesn't have",
                set.operation(),
                record.winner
            ))
        })?;
        Ok(Choice {
            index,
            name: record.winner.clone(),
            source,
            record: Some(record),
        })
    }

    fn tune<R: Runtime, I, O>(
        &self,
        client: &ComputeClient<R>,
        set: &CandidateSet<R, I, O>,
        key: &TuneKey,
        inputs: &I,
        fingerprint: DeviceFingerprint,
    ) -> Result<TuneRecord, ServerError> {
        let level = self.settings.level;
        let start = Instant::now();
        let order = set.run_order(level);
        let mut outcomes: Vec<Option<Outcome>> = vec![None; set.len()];
        let mut runs = 0u64;
        let winner = match order.as_slice() {
            [] => 0,
            [only] => {
                outcomes[*only] = Some(Outcome::Skipped {
                    reason: format!("the only candidate at level {level:?}: not measured"),
                });
                *only
            }
            _ => {
                let outcome = client.exclusive(|| {
                    self.benchmark(client, set, key, inputs, &order, &mut outcomes, &mut runs)
                });
                bump(&self.counters.benchmark_runs, runs);
                outcome??
            }
        };
        let candidates = set
            .candidates()
            .iter()
            .zip(outcomes)
            .map(|(candidate, outcome)| CandidateReport {
                name: candidate.name().to_string(),
                outcome: outcome.unwrap_or_else(|| Outcome::Skipped {
                    reason: format!(
                        "{} priority is not tried at level {level:?}",
                        candidate.priority()
                    ),
                }),
            })
            .collect();
        let record = TuneRecord {
            operation: set.operation().to_string(),
            key: key.clone(),
            fingerprint,
            checksum: set.checksum(),
            level,
            winner: set
                .candidates()
                .get(winner)
                .map(|c| c.name().to_string())
                .unwrap_or_default(),
            candidates,
            tuning_seconds: start.elapsed().as_secs_f64(),
            benchmark_runs: runs,
        };
        tracing::info!(
            "autotune `{}` [{key}] on {}: `{}` ({}) in {:.1} ms, {runs} run(s)",
            record.operation,
            record.fingerprint,
            record.winner,
            record
                .winner_score()
                .map(|s| format!("{:.3} ms", s * 1e3))
                .unwrap_or_else(|| "not measured".into()),
            record.tuning_seconds * 1e3
        );
        Ok(record)
    }

    /// Measures the candidates of `order` (inside `exclusive`); returns the winner's index.
    #[allow(clippy::too_many_arguments)]
    fn benchmark<R: Runtime, I, O>(
        &self,
        client: &ComputeClient<R>,
        set: &CandidateSet<R, I, O>,
        key: &TuneKey,
        inputs: &I,
        order: &[usize],
        outcomes: &mut [Option<Outcome>],
        runs: &mut u64,
    ) -> Result<usize, ServerError> {
        let start = Instant::now();
        client.sync()?;
        let check = set.check().filter(|_| self.settings.check);
        // In check mode every candidate gets fresh inputs (see `check`).
        let shared = match check {
            None => Some(set.make_inputs(client, key, inputs)?),
            Some(_) => None,
        };
        let plan = SamplePlan {
            samples: self.settings.samples,
            early_stop_ratio: self.settings.early_stop_ratio,
            // A budget past what `Instant` can hold means "no deadline" in practice.
            deadline: start
                .checked_add(self.settings.budget)
                .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600)),
        };
        let mut best: Option<(usize, f64)> = None;
        let mut reference: Option<Bytes> = None;
        for &index in order {
            let Some(candidate) = set.candidates().get(index) else {
                continue;
            };
            if best.is_some() && Instant::now() >= plan.deadline {
                outcomes[index] = Some(Outcome::Skipped {
                    reason: format!(
                        "the budget of {} ms per key was spent",
                        self.settings.budget.as_millis()
                    ),
                });
                continue;
            }
            let fresh;
            let bench_inputs = match &shared {
                Some(shared) => shared,
                None => {
                    fresh = set.make_inputs(client, key, inputs)?;
                    &fresh
                }
            };
            let outcome = Self::measure_one(
                client,
                candidate,
                bench_inputs,
                check.map(|check| (check, &mut reference)),
                &plan,
                best.map(|(_, score)| score),
                runs,
            );
            match &outcome {
                Outcome::Measured { samples, .. } => {
                    let score = median(samples);
                    if best.is_none_or(|(_, best)| score < best) {
                        best = Some((index, score));
                    }
                }
                Outcome::Failed { reason } | Outcome::Mismatch { reason } => tracing::warn!(
                    "autotune `{}` [{key}]: candidate `{}` skipped: {reason}",
                    set.operation(),
                    candidate.name()
                ),
                Outcome::Skipped { .. } => {}
            }
            outcomes[index] = Some(outcome);
        }
        best.map(|(index, _)| index).ok_or_else(|| {
            let reasons: Vec<String> = order
                .iter()
                .filter_map(|&i| match (&set.candidates()[i], &outcomes[i]) {
                    (c, Some(Outcome::Failed { reason } | Outcome::Mismatch { reason })) => {
                        Some(format!("`{}`: {reason}", c.name()))
                    }
                    _ => None,
                })
                .collect();
            ServerError::generic(format!(
                "no candidate of `{}` [{key}] ran: {}",
                set.operation(),
                reasons.join("; ")
            ))
        })
    }

    fn measure_one<R: Runtime, I, O>(
        client: &ComputeClient<R>,
        candidate: &Candidate<R, I, O>,
        inputs: &I,
        check: Option<(&OutputCheck<R, I>, &mut Option<Bytes>)>,
        plan: &SamplePlan,
        best: Option<f64>,
        runs: &mut u64,
    ) -> Outcome {
        if let Err(reason) = measure::warm_up(client, candidate, inputs, runs) {
            return Outcome::Failed { reason };
        }
        if let Some((check, reference)) = check {
            let output = match check.read(client, inputs) {
                Ok(output) => output,
                Err(error) => {
                    return Outcome::Failed {
                        reason: format!("its output can't be read: {error}"),
                    };
                }
            };
            match reference {
                None => *reference = Some(output),
                Some(reference) => {
                    if let Err(reason) = check.compare(reference, &output) {
                        return Outcome::Mismatch { reason };
                    }
                }
            }
        }
        measure::sample(client, candidate, inputs, plan, best, runs)
    }
}
