//! Statistics of repeated measurements, and device time through `client.profile`.

use crate::error::CliResult;
use cubert::properties::TimingMethod;
use cubert::{ComputeClient, Runtime};
use std::time::{Duration, Instant};

/// Least wall time the warm-up of a bandwidth figure runs its work for. A GPU lowers its
/// clocks while it idles and raises them again only under sustained work: on the H200, the
/// NVIDIA Vulkan driver let the SM clock fall from 1980 MHz to 345-735 MHz within seconds of
/// the host preparing data, and two millisecond-long warm-up runs did not raise it, so
/// every figure after them measured the idle clock (`docs/wgpu.md`). CUDA keeps its clocks
/// up while a context lives, so there it changes nothing.
pub const WARM_UP: Duration = Duration::from_millis(500);

/// Runs `work` and waits for it, at least twice and until [`WARM_UP`] has passed, so what
/// is timed next runs at the clocks the device gives sustained work.
///
/// # Errors
/// `work`'s error, or the sync's.
pub fn warm_up<R: Runtime, E: std::error::Error + Send + Sync + 'static>(
    client: &ComputeClient<R>,
    mut work: impl FnMut() -> Result<(), E>,
) -> CliResult<()> {
    let start = Instant::now();
    let mut runs = 0;
    while runs < 2 || start.elapsed() < WARM_UP {
        work()?;
        client.sync()?;
        runs += 1;
    }
    Ok(())
}

/// The median of `values` (the mean of the two middle ones for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Gigabytes (1e9 bytes) per second for `bytes` moved in `seconds`.
pub fn gb_per_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(f64::MIN_POSITIVE) / 1e9
}

/// Seconds the device spent on what `work` queued, measured by `client.profile` (device
/// events on backends that have them, the host clock around finished work otherwise).
///
/// # Errors
/// `work`'s error, or the profile's.
pub fn profiled_seconds<R: Runtime, E: std::error::Error + Send + Sync + 'static>(
    client: &ComputeClient<R>,
    name: &str,
    work: impl FnOnce() -> Result<(), E>,
) -> CliResult<f64> {
    let (outcome, duration) = client.profile(work, name)?;
    outcome?;
    Ok(duration.resolve_blocking()?.duration().as_secs_f64())
}

/// How `client.profile` measures on `client`'s device, for notes.
pub fn profile_clock<R: Runtime>(client: &ComputeClient<R>) -> &'static str {
    match client.properties().timing_method {
        TimingMethod::Device => "device events",
        TimingMethod::System => "host clock around the finished work",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn gigabytes_are_decimal() {
        assert_eq!(gb_per_s(2_000_000_000, 2.0), 1.0);
    }
}
