//! The result of tuning one key: the winner and what each candidate measured.
//!
//! A [`TuneRecord`] is what the caches hold (in memory, and as JSON on disk) and what the
//! tuner returns, so callers and tests can see every measurement the choice was based on:
//! each candidate's [`Outcome`] (its timed samples, or why it was skipped). The winner is
//! the candidate with the lowest [`CandidateReport::score`], the median of its samples.

use super::key::{DeviceFingerprint, TuneKey};
use crate::config::AutotuneLevel;
use serde::{Deserialize, Serialize};

/// What happened to one candidate while tuning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// Timed: the device time of each sample in seconds. `stopped_early` when sampling
    /// stopped because the first sample was clearly slower than the best so far.
    Measured {
        /// Seconds of each timed run.
        samples: Vec<f64>,
        /// Whether sampling stopped early.
        stopped_early: bool,
    },
    /// Failed to compile, launch or run; skipped.
    Failed {
        /// The error.
        reason: String,
    },
    /// Its output differed from the first candidate's (check mode); skipped.
    Mismatch {
        /// How the outputs differ.
        reason: String,
    },
    /// Not run: the level excludes it, the budget was spent, or it was the only one.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One candidate's part of a [`TuneRecord`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateReport {
    /// The candidate's name.
    pub name: String,
    /// What happened to it.
    pub outcome: Outcome,
}

impl CandidateReport {
    /// The median of the candidate's samples in seconds, if it was measured.
    pub fn score(&self) -> Option<f64> {
        match &self.outcome {
            Outcome::Measured { samples, .. } if !samples.is_empty() => Some(median(samples)),
            _ => None,
        }
    }

    /// Whether the candidate was timed.
    pub fn measured(&self) -> bool {
        self.score().is_some()
    }
}

/// The median of `values` (mean of the middle two for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The outcome of tuning one key on one kind of device. See the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    /// The operation (`matmul_f32`).
    pub operation: String,
    /// The key tuned.
    pub key: TuneKey,
    /// The kind of device it was tuned on.
    pub fingerprint: DeviceFingerprint,
    /// The candidate set's checksum when it was tuned.
    pub checksum: u64,
    /// The level it was tuned at: it answers requests at this level or below.
    pub level: AutotuneLevel,
    /// The chosen candidate's name.
    pub winner: String,
    /// Every candidate of the set, in the set's order.
    pub candidates: Vec<CandidateReport>,
    /// Wall time spent tuning, in seconds (making inputs, warm-ups and samples).
    pub tuning_seconds: f64,
    /// Candidate runs made while tuning (warm-ups and timed samples).
    pub benchmark_runs: u64,
}

impl TuneRecord {
    /// The report of the candidate named `name`.
    pub fn report(&self, name: &str) -> Option<&CandidateReport> {
        self.candidates.iter().find(|c| c.name == name)
    }

    /// The measured candidate with the lowest score (the first of equal ones).
    pub fn fastest_measured(&self) -> Option<&CandidateReport> {
        self.candidates
            .iter()
            .filter_map(|c| c.score().map(|score| (c, score)))
            .fold(
                None,
                |best: Option<(&CandidateReport, f64)>, (c, score)| match best {
                    Some((_, best_score)) if best_score <= score => best,
                    _ => Some((c, score)),
                },
            )
            .map(|(c, _)| c)
    }

    /// The winner's score (median seconds), if it was measured.
    pub fn winner_score(&self) -> Option<f64> {
        self.report(&self.winner).and_then(CandidateReport::score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(name: &str, samples: &[f64]) -> CandidateReport {
        CandidateReport {
            name: name.into(),
            outcome: Outcome::Measured {
                samples: samples.to_vec(),
                stopped_early: false,
            },
        }
    }

    #[test]
    fn fastest_measured_is_the_lowest_median_and_ignores_skipped_candidates() {
        let record = TuneRecord {
            operation: "op".into(),
            key: TuneKey::new("n=1"),
            fingerprint: DeviceFingerprint::new("cpu", 1, ""),
            checksum: 7,
            level: AutotuneLevel::Full,
            winner: "b".into(),
            candidates: vec![
                measured("a", &[3.0, 1.0, 9.0]),
                measured("b", &[2.0, 2.0, 2.5]),
                CandidateReport {
                    name: "c".into(),
                    outcome: Outcome::Failed {
                        reason: "no".into(),
                    },
                },
            ],
            tuning_seconds: 0.1,
            benchmark_runs: 8,
        };
        assert_eq!(record.fastest_measured().unwrap().name, "b");
        assert_eq!(record.winner_score(), Some(2.0));
        let json = serde_json::to_string(&record).unwrap();
        let back: TuneRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
