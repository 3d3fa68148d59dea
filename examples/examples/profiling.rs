//! Profiling launches: time each one with `client.profile`, collect the times in the
//! device's logger, print the per-kernel summary and write a Chrome trace.
//!
//! `client.profile(work, name)` runs `work` with nothing else on the device and measures
//! the device time of what it queued (here a launch and a sync). Setting
//! `CUBERT_PROFILING_LEVEL=basic` (or `[profiling] level = "basic"` in cubert.toml) instead
//! times every launch automatically.
//!
//! ```text
//! cargo run -p cubert-examples --example profiling
//! ```

use cubert::{Bytes, ComputeClient, CpuRuntime, ElemType, LaunchError, ops};
use std::error::Error;
use std::process::ExitCode;

/// Runs `launch` and a sync inside `client.profile`, and records the time under `name`.
fn timed(
    client: &ComputeClient<CpuRuntime>,
    name: &str,
    launch: impl FnOnce() -> Result<(), LaunchError>,
) -> Result<(), Box<dyn Error>> {
    let (outcome, duration) = client.profile(
        || -> Result<(), Box<dyn Error>> {
            launch()?;
            client.sync()?;
            Ok(())
        },
        name,
    )?;
    outcome?;
    let ticks = duration.resolve_blocking()?;
    client.utilities().logger.record(name, ticks);
    Ok(())
}

fn run() -> Result<(), Box<dyn Error>> {
    let client = cubert::default_client()?;
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001 + 0.5).collect();
    let lhs = client.create(Bytes::from_slice(&x))?;
    let rhs = client.create(Bytes::from_slice(&x))?;
    let out = client.empty(n * size_of::<f32>())?;
    let sums = client.empty(1024 * size_of::<f32>())?;
    let (m, k, p) = (128, 128, 128);
    let a = client.create(Bytes::from_slice(&x[..m * k]))?;
    let b = client.create(Bytes::from_slice(&x[..k * p]))?;
    let c = client.empty(m * p * size_of::<f32>())?;

    for _ in 0..5 {
        timed(&client, "fill_f32", || ops::fill(&client, &out, n, 1.0f32))?;
        timed(&client, "add_f32", || {
            ops::add(&client, &lhs, &rhs, &out, n, ElemType::F32)
        })?;
        timed(&client, "mul_f32", || {
            ops::mul(&client, &lhs, &rhs, &out, n, ElemType::F32)
        })?;
        timed(&client, "reduce_sum_f32", || {
            ops::reduce_sum(&client, &lhs, &sums, 1024, n / 1024, ElemType::F32)
        })?;
        timed(&client, "matmul_f32", || {
            ops::matmul(&client, &a, &b, &c, m, k, p, ElemType::F32)
        })?;
    }

    let logger = &client.utilities().logger;
    let summary = logger.summary();
    let launches: u64 = summary.kernels.iter().map(|k| k.launches).sum();
    println!(
        "{launches} launches profiled on {}:",
        client.properties().name
    );
    print!("{summary}");
    if summary.kernels.len() != 5 || summary.kernels.iter().any(|k| k.launches != 5) {
        return Err("expected 5 kernels with 5 launches each in the summary".into());
    }

    let trace = std::env::temp_dir().join(format!("cubert-profiling-{}.json", std::process::id()));
    logger.write_chrome_trace(&trace)?;
    println!("Chrome trace (open in Perfetto): {}", trace.display());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("profiling: {error}");
            ExitCode::FAILURE
        }
    }
}
