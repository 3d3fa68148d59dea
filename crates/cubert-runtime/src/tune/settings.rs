//! How a tuner searches and where it keeps results.
//!
//! [`TuneSettings`] come from `[autotune]` of `cubert.toml`, overridden by
//! `CUBERT_AUTOTUNE_*` variables (`level`, `disk_cache`, `cache_dir`, `budget_ms`, `check`),
//! plus two knobs only code sets: the samples per candidate and the early-stop ratio.

use super::disk::default_cache_dir;
use crate::config::{AutotuneConfig, AutotuneLevel};
use std::path::PathBuf;
use std::time::Duration;

/// How a tuner searches and where it keeps results.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneSettings {
    /// Which candidates are tried (`off`: none, the default is used).
    pub level: AutotuneLevel,
    /// Directory of the on-disk cache; `None` keeps results in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Time budget per key, counted from the start of its tuning.
    pub budget: Duration,
    /// Timed samples per candidate at most.
    pub samples: u32,
    /// A candidate clearly slower than the best so far (the fastest of its first two or
    /// more samples above this many times the best median) stops sampling.
    pub early_stop_ratio: f64,
    /// Check mode: compare every candidate's output with the first one's.
    pub check: bool,
}

impl TuneSettings {
    /// The settings `[autotune]` describes (the disk cache in `cache_dir`, else the
    /// platform cache directory, when `disk_cache` is on).
    pub fn from_config(config: &AutotuneConfig) -> Self {
        Self {
            level: config.level,
            cache_dir: if config.disk_cache {
                config.cache_dir.clone().or_else(default_cache_dir)
            } else {
                None
            },
            budget: Duration::from_millis(config.budget_ms),
            samples: 5,
            early_stop_ratio: 1.5,
            check: config.check,
        }
    }

    /// In-memory settings at `level`: no disk cache, the default budget and samples.
    pub fn in_memory(level: AutotuneLevel) -> Self {
        Self {
            level,
            cache_dir: None,
            ..Self::from_config(&AutotuneConfig::default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_config_from;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn settings_follow_cubert_toml_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cubert.toml"),
            "[autotune]\nlevel = \"full\"\nbudget_ms = 123\ncache_dir = \"/tmp/tuned\"\n",
        )
        .unwrap();
        let from_file =
            TuneSettings::from_config(&load_config_from(dir.path(), env(&[])).config.autotune);
        assert_eq!(from_file.level, AutotuneLevel::Full);
        assert_eq!(from_file.budget, Duration::from_millis(123));
        assert_eq!(from_file.cache_dir, Some(PathBuf::from("/tmp/tuned")));
        assert!(!from_file.check);

        let overridden = load_config_from(
            dir.path(),
            env(&[
                ("CUBERT_AUTOTUNE_LEVEL", "minimal"),
                ("CUBERT_AUTOTUNE_DISK_CACHE", "false"),
                ("CUBERT_AUTOTUNE_CHECK", "true"),
            ]),
        );
        assert!(overridden.warnings.is_empty(), "{:?}", overridden.warnings);
        let settings = TuneSettings::from_config(&overridden.config.autotune);
        assert_eq!(settings.level, AutotuneLevel::Minimal);
        assert_eq!(settings.cache_dir, None, "the disk cache is off");
        assert!(settings.check);
    }
}
