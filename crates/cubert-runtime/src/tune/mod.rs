//! Autotuning: pick the fastest of several candidates for an operation, once per input key
//! and kind of device, and remember it.
//!
//! An operation describes itself as a [`CandidateSet`]: a name, candidates (the first is the
//! default) with [`Priority`]s, a function deriving a [`TuneKey`] from its inputs (shapes,
//! element types, rounded as it chooses, see [`anchor`]), and a function making benchmark
//! inputs. [`Tuner::execute`] runs the candidate [`Tuner::choose`] picks:
//!
//! - the first call for a key benchmarks the candidates the level allows, inside
//!   `exclusive`, with device timing (`ComputeClient::profile`); the fastest median wins.
//!   Candidates that fail (compile, launch, run) are skipped with a log line; in check mode
//!   candidates whose output differs from the first one's are skipped too;
//! - cost is bounded: a time budget per key, few samples, and a candidate clearly slower
//!   than the best so far stops sampling early;
//! - results are cached in memory (keyed by [`DeviceFingerprint`], so identical devices tune
//!   once, and concurrent callers of one key wait for the first) and on disk (one JSON file
//!   per key, written atomically, so several processes share results safely), together
//!   with the candidate set's checksum: a changed set tunes again.
//!
//! Settings come from `[autotune]` in `cubert.toml` and `CUBERT_AUTOTUNE_*`:
//! `level` (`off`, `minimal`, `balanced`, `full`), `disk_cache`, `cache_dir`, `budget_ms`,
//! `check`. [`global_tuner`] uses them; tests and tools make their own [`Tuner`].
//!
//! The standard matmul and reduce-sum kernels have variants on every backend and go
//! through the tuner in [`standard`].
//!
//! Files: `key` (keys and fingerprints), `candidate` (candidates, checksum), `measure`
//! (warm-up and timed samples), `check` (output comparison), `record` (what a tuning found),
//! `memory` and `disk` (the caches), `settings`, `tuner` (the orchestration), `standard`
//! (the standard kernels' variants). [`Priority`] is defined with the kernel variants that
//! carry it (`kernel::variant`) and re-exported here.

mod candidate;
mod check;
mod disk;
mod key;
mod measure;
mod memory;
mod record;
mod settings;
pub mod standard;
pub mod tensor_cores;
mod tuner;

pub use candidate::{Candidate, CandidateFn, CandidateSet, InputsFn, KeyFn};
// Defined with the kernel variants that carry it (`kernel::variant`); this is its old path.
pub use crate::kernel::Priority;
pub use check::{CompareFn, OutputCheck, ReadFn, compare_elements};
pub use disk::{DiskCache, FORMAT_VERSION, default_cache_dir};
pub use key::{DeviceFingerprint, TuneKey, alignment, anchor};
pub use memory::CacheKey;
pub use record::{CandidateReport, Outcome, TuneRecord, median};
pub use settings::TuneSettings;
pub use tuner::{Choice, Source, TuneStats, Tuner, global_tuner};
