//! Bounds checking of buffer accesses during one launch.
//!
//! Every launch gets an [`AccessChecker`] in the launch's [`ExecutionMode`]:
//!
//! - `Checked`: an out-of-bounds access is skipped (a load returns the default value, a store
//!   writes nothing) and counted; the launch then fails with `ServerError::OutOfBounds`.
//! - `Validate`: the same, and each out-of-bounds access is logged as it happens.
//! - `Unchecked`: no checks; the caller of `launch_unchecked` vouched for the kernel.

use cubert_runtime::ExecutionMode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Out-of-bounds accesses after which a checked launch stops: its remaining cubes don't
/// start and long kernel loops may end early (see [`AccessChecker::gave_up`]).
pub const MAX_COUNTED_VIOLATIONS: u64 = 1 << 20;

/// Counts and describes out-of-bounds accesses of one launch.
pub struct AccessChecker {
    mode: ExecutionMode,
    kernel: String,
    violations: AtomicU64,
    first: OnceLock<String>,
    races: AtomicU64,
    first_race: OnceLock<String>,
}

impl AccessChecker {
    /// A checker for a launch of `kernel` in `mode`.
    pub fn new(kernel: &str, mode: ExecutionMode) -> Self {
        Self {
            mode,
            kernel: kernel.to_string(),
            violations: AtomicU64::new(0),
            first: OnceLock::new(),
            races: AtomicU64::new(0),
            first_race: OnceLock::new(),
        }
    }

    /// The launch's mode.
    pub fn mode(&self) -> ExecutionMode {
        self.mode
    }

    /// Whether accesses are checked.
    pub fn checks(&self) -> bool {
        self.mode != ExecutionMode::Unchecked
    }

    /// Whether the launch has counted [`MAX_COUNTED_VIOLATIONS`] out-of-bounds accesses:
    /// its outcome (an `OutOfBounds` error) is decided, so the executor starts no more
    /// cubes and a kernel with long loops over missing data may stop early too.
    pub fn gave_up(&self) -> bool {
        self.violations() >= MAX_COUNTED_VIOLATIONS
    }

    /// Records an out-of-bounds access.
    #[cold]
    pub fn violation(&self, what: impl FnOnce() -> String) {
        self.violations.fetch_add(1, Ordering::Relaxed);
        if self.mode == ExecutionMode::Validate {
            let description = what();
            tracing::warn!("kernel `{}`: out-of-bounds {description}", self.kernel);
            let _ = self.first.set(description);
        } else if self.first.get().is_none() {
            let _ = self.first.set(what());
        }
    }

    /// Records `count` out-of-bounds accesses at once, without making them: for the part of
    /// a kernel's range that lies past every buffer, so a huge length is counted, not
    /// iterated (which would keep the device busy for ages). Does nothing in unchecked mode.
    #[cold]
    pub fn violations_beyond(&self, count: u64, what: impl FnOnce() -> String) {
        if count == 0 || !self.checks() {
            return;
        }
        let before = self.violations.fetch_add(count, Ordering::Relaxed);
        if before.checked_add(count).is_none() {
            self.violations.store(u64::MAX, Ordering::Relaxed);
        }
        if self.mode == ExecutionMode::Validate {
            let description = what();
            tracing::warn!(
                "kernel `{}`: {count} out-of-bounds accesses: {description}",
                self.kernel
            );
            let _ = self.first.set(description);
        } else if self.first.get().is_none() {
            let _ = self.first.set(what());
        }
    }

    /// Number of out-of-bounds accesses so far.
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }

    /// Records a data race on shared memory (validate mode); each is logged.
    #[cold]
    pub fn race(&self, description: &str) {
        self.races.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("kernel `{}`: data race: {description}", self.kernel);
        let _ = self.first_race.set(description.to_string());
    }

    /// Number of data races found so far.
    pub fn races(&self) -> u64 {
        self.races.load(Ordering::Relaxed)
    }

    /// Description of the first data race.
    pub fn first_race(&self) -> Option<&str> {
        self.first_race.get().map(String::as_str)
    }

    /// Description of the first out-of-bounds access.
    pub fn first_violation(&self) -> Option<&str> {
        self.first.get().map(String::as_str)
    }

    /// Name of the kernel.
    pub fn kernel(&self) -> &str {
        &self.kernel
    }
}
