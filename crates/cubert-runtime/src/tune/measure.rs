//! Measuring one candidate: a warm-up run, then timed samples with device timing.
//!
//! The warm-up runs the candidate once and waits for it: the first launch compiles the
//! kernel (CUDA) and warms caches, and an error here (a compile error, a launch refused by
//! the device's limits, a kernel failing) skips the candidate. The samples then run it under
//! `ComputeClient::profile`, which measures device time (device events on GPUs). Sampling
//! stops early when the fastest of two or more samples is clearly slower than the best
//! candidate so far (more than `early_stop_ratio` times its median), and when the key's
//! time budget is spent (after at least one sample). A final sync catches errors of the
//! timed runs.
//!
//! Both functions run inside the tuner's `exclusive` section, so nothing else runs on the
//! device meanwhile.

use super::candidate::Candidate;
use super::record::Outcome;
use crate::client::ComputeClient;
use crate::runtime::Runtime;
use std::time::Instant;

/// How a candidate is sampled.
#[derive(Clone, Copy, Debug)]
pub struct SamplePlan {
    /// Timed runs at most.
    pub samples: u32,
    /// A candidate whose fastest sample exceeds this many times the best median so far
    /// stops sampling.
    pub early_stop_ratio: f64,
    /// When the key's budget is spent.
    pub deadline: Instant,
}

/// Runs `candidate` once on `inputs` and waits for it. Counts the run in `runs`.
///
/// # Errors
/// The candidate's error, or the error its work queued on the stream, as text.
pub fn warm_up<R: Runtime, I, O>(
    client: &ComputeClient<R>,
    candidate: &Candidate<R, I, O>,
    inputs: &I,
    runs: &mut u64,
) -> Result<(), String> {
    *runs += 1;
    candidate
        .run(client, inputs)
        .map_err(|error| error.to_string())?;
    client.sync().map_err(|error| error.to_string())
}

/// Times `candidate` on `inputs` as `plan` says, given the best median so far. Counts the
/// runs in `runs`.
pub fn sample<R: Runtime, I, O>(
    client: &ComputeClient<R>,
    candidate: &Candidate<R, I, O>,
    inputs: &I,
    plan: &SamplePlan,
    best: Option<f64>,
    runs: &mut u64,
) -> Outcome {
    let failed = |reason: String| Outcome::Failed { reason };
    let mut samples = Vec::new();
    let mut fastest = f64::INFINITY;
    let mut stopped_early = false;
    for _ in 0..plan.samples.max(1) {
        *runs += 1;
        let (output, duration) =
            match client.profile(|| candidate.run(client, inputs), candidate.name()) {
                Ok(measured) => measured,
                Err(error) => return failed(format!("profiling failed: {error}")),
            };
        if let Err(error) = output {
            return failed(error.to_string());
        }
        let seconds = match duration.resolve_blocking() {
            Ok(ticks) => ticks.duration().as_secs_f64(),
            Err(error) => return failed(format!("timing failed: {error}")),
        };
        samples.push(seconds);
        fastest = fastest.min(seconds);
        // Two samples at least: one slow sample may be noise (another process, a page
        // fault), two are a trend.
        let clearly_slower = best.is_some_and(|best| fastest > best * plan.early_stop_ratio);
        if clearly_slower && samples.len() >= 2.min(plan.samples as usize) {
            stopped_early = true;
            break;
        }
        if Instant::now() >= plan.deadline {
            break;
        }
    }
    if let Err(error) = client.sync() {
        return failed(error.to_string());
    }
    Outcome::Measured {
        samples,
        stopped_early,
    }
}
