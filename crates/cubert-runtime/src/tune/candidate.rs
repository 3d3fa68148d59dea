//! The candidates of an operation and what identifies the set of them.
//!
//! A [`CandidateSet`] is what an operation hands the tuner: its name, its candidates (the
//! first is the default, used when tuning is off and first in its priority), a function
//! deriving the [`TuneKey`] from the inputs, a function making benchmark inputs, and
//! optionally an [`OutputCheck`] for the check mode.
//!
//! Each [`Candidate`] has a [`Priority`]: the autotune level decides which priorities are
//! tried (`minimal`: high only; `balanced`: high and normal; `full`: all), and higher
//! priorities run first, so cheap or likely winners are measured before the time budget
//! runs out.
//!
//! The set's [`CandidateSet::checksum`] covers the operation's name and every candidate's
//! name, identity (a kernel id, a source hash, a version: whatever changes when the
//! candidate's code does) and priority, hashed with FNV-1a so it is stable across processes.
//! A cached result whose checksum differs is stale: the set changed, so the key is tuned
//! again.

use super::check::OutputCheck;
use super::key::TuneKey;
use crate::client::ComputeClient;
use crate::config::AutotuneLevel;
use crate::error::ServerError;
use crate::kernel::Priority;
use crate::runtime::Runtime;
use std::fmt;
use std::sync::Arc;

/// The function of a candidate: runs the operation on the client's stream.
pub type CandidateFn<R, I, O> =
    dyn Fn(&ComputeClient<R>, &I) -> Result<O, ServerError> + Send + Sync;

/// Derives the tuning key from the inputs.
pub type KeyFn<I> = dyn Fn(&I) -> TuneKey + Send + Sync;

/// Makes the inputs candidates are benchmarked on, from the key and the caller's inputs.
pub type InputsFn<R, I> =
    dyn Fn(&ComputeClient<R>, &TuneKey, &I) -> Result<I, ServerError> + Send + Sync;

/// One way to run an operation.
pub struct Candidate<R: Runtime, I, O> {
    name: String,
    identity: String,
    priority: Priority,
    run: Arc<CandidateFn<R, I, O>>,
}

impl<R: Runtime, I, O> Clone for Candidate<R, I, O> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            identity: self.identity.clone(),
            priority: self.priority,
            run: self.run.clone(),
        }
    }
}

impl<R: Runtime, I, O> fmt::Debug for Candidate<R, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidate")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("priority", &self.priority)
            .finish()
    }
}

impl<R: Runtime, I, O> Candidate<R, I, O> {
    /// A candidate named `name` (unique in its set) of normal priority, whose identity is its
    /// name.
    pub fn new(
        name: impl Into<String>,
        run: impl Fn(&ComputeClient<R>, &I) -> Result<O, ServerError> + Send + Sync + 'static,
    ) -> Self {
        let name = name.into();
        Self {
            identity: name.clone(),
            name,
            priority: Priority::Normal,
            run: Arc::new(run),
        }
    }

    /// The candidate with priority `priority`.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The candidate with `identity` in the set's checksum: text that changes when the
    /// candidate's code does (a kernel id with its source hash, a version).
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The identity hashed into the set's checksum.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Runs the candidate on `client` with `inputs`.
    ///
    /// # Errors
    /// The candidate's error.
    pub fn run(&self, client: &ComputeClient<R>, inputs: &I) -> Result<O, ServerError> {
        (self.run)(client, inputs)
    }
}

/// An operation's candidates and how to key and feed them. See the module docs.
pub struct CandidateSet<R: Runtime, I, O> {
    operation: String,
    candidates: Vec<Candidate<R, I, O>>,
    key: Arc<KeyFn<I>>,
    inputs: Arc<InputsFn<R, I>>,
    check: Option<OutputCheck<R, I>>,
    checksum: u64,
}

impl<R: Runtime, I, O> Clone for CandidateSet<R, I, O> {
    fn clone(&self) -> Self {
        Self {
            operation: self.operation.clone(),
            candidates: self.candidates.clone(),
            key: self.key.clone(),
            inputs: self.inputs.clone(),
            check: self.check.clone(),
            checksum: self.checksum,
        }
    }
}

impl<R: Runtime, I, O> fmt::Debug for CandidateSet<R, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CandidateSet")
            .field("operation", &self.operation)
            .field("candidates", &self.candidates)
            .field("checksum", &format_args!("{:016x}", self.checksum))
            .finish()
    }
}

/// The FNV-1a hash of no bytes (where a checksum starts).
fn fnv_offset() -> u64 {
    std::hash::Hasher::finish(&fnv::FnvHasher::default())
}

/// FNV-1a of `bytes`, continuing from `hash`.
fn fnv_extend(hash: u64, bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::with_key(hash);
    hasher.write(bytes);
    hasher.finish()
}

/// Hashes `text` with its length, so concatenations can't collide.
fn hash_field(hash: u64, text: &str) -> u64 {
    let hash = fnv_extend(hash, &(text.len() as u64).to_le_bytes());
    fnv_extend(hash, text.as_bytes())
}

impl<R: Runtime, I, O> CandidateSet<R, I, O> {
    /// An empty set for `operation` (a name unique among operations, with what the key
    /// doesn't say, such as the element type: `matmul_f32`), keyed by `key` and benchmarked
    /// on the inputs `inputs` makes.
    pub fn new(
        operation: impl Into<String>,
        key: impl Fn(&I) -> TuneKey + Send + Sync + 'static,
        inputs: impl Fn(&ComputeClient<R>, &TuneKey, &I) -> Result<I, ServerError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        let operation = operation.into();
        Self {
            checksum: hash_field(fnv_offset(), &operation),
            operation,
            candidates: Vec::new(),
            key: Arc::new(key),
            inputs: Arc::new(inputs),
            check: None,
        }
    }

    /// Adds a candidate (the first one added is the default).
    pub fn push(&mut self, candidate: Candidate<R, I, O>) {
        let mut hash = hash_field(self.checksum, &candidate.name);
        hash = hash_field(hash, &candidate.identity);
        self.checksum = hash_field(hash, candidate.priority.name());
        self.candidates.push(candidate);
    }

    /// The set with `candidate` added.
    pub fn with(mut self, candidate: Candidate<R, I, O>) -> Self {
        self.push(candidate);
        self
    }

    /// The set with an output check, used when the tuner's check mode is on.
    pub fn with_check(mut self, check: OutputCheck<R, I>) -> Self {
        self.check = Some(check);
        self
    }

    /// The operation's name.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The candidates, the default first.
    pub fn candidates(&self) -> &[Candidate<R, I, O>] {
        &self.candidates
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Whether the set has no candidate.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// Index of the candidate named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.candidates.iter().position(|c| c.name == name)
    }

    /// The output check, if any.
    pub fn check(&self) -> Option<&OutputCheck<R, I>> {
        self.check.as_ref()
    }

    /// The key of `inputs`.
    pub fn key(&self, inputs: &I) -> TuneKey {
        (self.key)(inputs)
    }

    /// Benchmark inputs for `key`, made from the caller's `inputs`.
    ///
    /// # Errors
    /// The input function's error.
    pub fn make_inputs(
        &self,
        client: &ComputeClient<R>,
        key: &TuneKey,
        inputs: &I,
    ) -> Result<I, ServerError> {
        (self.inputs)(client, key, inputs)
    }

    /// The checksum of the set (see the module docs).
    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    /// Indices of the candidates tried at `level`, in the order they are tried: high
    /// priority first, declaration order within a priority.
    pub fn run_order(&self, level: AutotuneLevel) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.candidates.len())
            .filter(|&i| self.candidates[i].priority.tried_at(level))
            .collect();
        order.sort_by_key(|&i| self.candidates[i].priority);
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_hashed_with_their_length() {
        let ab_c = hash_field(hash_field(fnv_offset(), "ab"), "c");
        let a_bc = hash_field(hash_field(fnv_offset(), "a"), "bc");
        assert_ne!(ab_c, a_bc);
    }
}
