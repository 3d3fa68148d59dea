//! `cubert bench tune`: the autotuned matmul against the default variant, per shape.
//!
//! For each `M×K×N` shape (f32), a fresh tuner (in memory only, so every run really tunes)
//! picks among the backend's matmul variants and the tuning time is measured. Then the
//! default variant (the kernel `ops::matmul` launches) and the tuned one run alternately,
//! `--reps` times each after a warm-up, timed on the device (`client.profile`), in the same
//! run on the same buffers; the table shows both medians, GFLOP/s, the speed-up and the
//! tuning time. The tuned variant's output is checked against the default's: a difference
//! prints `FAIL` and makes the exit code 1. `--verbose` lists every candidate's median and
//! outcome; `--json FILE` writes all of it.

use super::report::iso8601;
use super::table::{Align, Table};
use super::timing::{median, profile_clock, profiled_seconds};
use crate::backend::{Backend, CliRuntime, ClientJob, run_on_default_device};
use crate::error::{CliError, CliResult, EXIT_FAILURE};
use cubert::config::AutotuneLevel;
use cubert::kernel::StandardVariant;
use cubert::kernel::standard::StandardKernel;
use cubert::tune::standard::{MatmulProblem, matmul_candidates, matmul_variant, pattern};
use cubert::tune::{Outcome, TuneRecord, TuneSettings, Tuner, compare_elements};
use cubert::{ComputeClient, ElemType, Runtime};
use serde::Serialize;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

/// The command line of `cubert bench tune` (defined with the rest of it).
pub use crate::args::{BenchTool, Level, TuneArgs};

impl From<Level> for AutotuneLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Minimal => AutotuneLevel::Minimal,
            Level::Balanced => AutotuneLevel::Balanced,
            Level::Full => AutotuneLevel::Full,
        }
    }
}

/// One candidate of one shape, for the JSON report.
#[derive(Clone, Debug, Serialize)]
struct CandidateRow {
    name: String,
    outcome: &'static str,
    median_seconds: Option<f64>,
    samples: usize,
    note: String,
}

/// One shape, for the table and the JSON report.
#[derive(Clone, Debug, Serialize)]
struct ShapeRow {
    m: usize,
    k: usize,
    n: usize,
    default_variant: String,
    tuned_variant: String,
    default_seconds: f64,
    tuned_seconds: f64,
    default_gflops: f64,
    tuned_gflops: f64,
    speedup: f64,
    tuning_seconds: f64,
    benchmark_runs: u64,
    candidates: Vec<CandidateRow>,
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct TuneReport {
    tool: &'static str,
    version: &'static str,
    backend: String,
    device: String,
    date: String,
    timing: &'static str,
    level: String,
    budget_ms: u64,
    reps: u32,
    shapes: Vec<ShapeRow>,
    failures: Vec<String>,
}

/// Runs `cubert bench tune` on the default device of `backend`.
///
/// # Errors
/// A usage error if the backend isn't built in; the device's start error; a JSON report
/// that can't be written.
pub fn run(backend: Backend, args: TuneArgs) -> CliResult<ExitCode> {
    let failures = run_on_default_device(backend, TuneJob { args })?;
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    })
}

struct TuneJob {
    args: TuneArgs,
}

impl ClientJob for TuneJob {
    type Output = usize;

    fn run<R: CliRuntime>(self, client: &ComputeClient<R>) -> CliResult<usize> {
        bench_tune(client, &self.args)
    }
}

fn default_shapes(gpu: bool, quick: bool) -> Vec<(usize, usize, usize)> {
    match (gpu, quick) {
        (false, true) => vec![(64, 64, 64), (128, 128, 128), (96, 256, 160)],
        (false, false) => vec![
            (128, 128, 128),
            (256, 256, 256),
            (512, 512, 512),
            (384, 1024, 256),
        ],
        (true, true) => vec![(256, 256, 256), (1024, 1024, 1024), (4096, 256, 1024)],
        (true, false) => vec![
            (512, 512, 512),
            (1024, 1024, 1024),
            (2048, 2048, 2048),
            (4096, 4096, 4096),
            (8192, 1024, 4096),
        ],
    }
}

fn outcome_row(report: &cubert::tune::CandidateReport) -> CandidateRow {
    let (outcome, samples, note) = match &report.outcome {
        Outcome::Measured {
            samples,
            stopped_early,
        } => (
            "measured",
            samples.len(),
            if *stopped_early {
                "stopped early: clearly slower".to_string()
            } else {
                String::new()
            },
        ),
        Outcome::Failed { reason } => ("failed", 0, reason.clone()),
        Outcome::Mismatch { reason } => ("mismatch", 0, reason.clone()),
        Outcome::Skipped { reason } => ("skipped", 0, reason.clone()),
    };
    CandidateRow {
        name: report.name.clone(),
        outcome,
        median_seconds: report.score(),
        samples,
        note: note.lines().next().unwrap_or_default().to_string(),
    }
}

fn variant_named<R: Runtime>(client: &ComputeClient<R>, name: &str) -> CliResult<StandardVariant> {
    R::standard_variants(StandardKernel::Matmul(ElemType::F32), client.properties())
        .into_iter()
        .find(|variant| variant.name == name)
        .ok_or_else(|| CliError::failure(format!("the tuner chose an unknown variant `{name}`")))
}

/// Tunes, checks and times one shape; a failed check is pushed to `failures`.
fn shape<R: CliRuntime>(
    client: &ComputeClient<R>,
    args: &TuneArgs,
    (m, k, n): (usize, usize, usize),
    failures: &mut Vec<String>,
) -> CliResult<ShapeRow> {
    let label = format!("{m}x{k}x{n}");
    let elements = |rows: usize, cols: usize| {
        rows.checked_mul(cols)
            .filter(|len| len.checked_mul(4).is_some())
            .ok_or_else(|| CliError::usage(format!("the shape {label} is too large")))
    };
    let (lhs_len, rhs_len, out_len) = (elements(m, k)?, elements(k, n)?, elements(m, n)?);
    // The device buffer first: a shape the device can't hold fails there, before any host
    // memory is filled; the host patterns are fallible too (`pattern` refuses more than
    // the host's memory).
    let out = client.empty(out_len * 4)?;
    let problem = MatmulProblem {
        lhs: client.create(pattern(ElemType::F32, lhs_len, 11)?)?,
        rhs: client.create(pattern(ElemType::F32, rhs_len, 12)?)?,
        out,
        m,
        k,
        n,
        elem: ElemType::F32,
    };
    let tuner = Tuner::new(TuneSettings {
        level: args.level.into(),
        cache_dir: None,
        budget: Duration::from_millis(args.budget_ms),
        samples: 5,
        early_stop_ratio: 1.5,
        check: false,
    });
    let set = matmul_candidates(client, ElemType::F32)?;
    let start = Instant::now();
    let choice = tuner.choose(client, &set, &problem)?;
    let tuning_seconds = start.elapsed().as_secs_f64();
    let record: Option<&TuneRecord> = choice.record.as_deref();
    let default = variant_named(client, StandardVariant::DEFAULT)?;
    let tuned = variant_named(client, &choice.name)?;

    // The tuned variant must compute what the default computes.
    matmul_variant(client, &default, &problem)?;
    let reference = client.read_one(problem.out.clone())?;
    let check = MatmulProblem {
        out: client.empty(out_len * 4)?,
        ..problem.clone()
    };
    matmul_variant(client, &tuned, &check)?;
    let output = client.read_one(check.out.clone())?;
    if let Err(difference) = compare_elements(ElemType::F32, &reference, &output) {
        failures.push(format!(
            "{label}: `{}` differs from the default: {difference}",
            tuned.name
        ));
    }

    let reps = if args.quick {
        args.reps.min(3)
    } else {
        args.reps
    };
    let (mut default_times, mut tuned_times) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        default_times.push(profiled_seconds(client, "matmul default", || {
            matmul_variant(client, &default, &problem)
        })?);
        tuned_times.push(profiled_seconds(client, "matmul tuned", || {
            matmul_variant(client, &tuned, &problem)
        })?);
    }
    client.sync()?;
    let (default_seconds, tuned_seconds) = (median(&default_times), median(&tuned_times));
    let flops = 2.0 * m as f64 * k as f64 * n as f64;
    Ok(ShapeRow {
        m,
        k,
        n,
        default_variant: default.name,
        tuned_variant: tuned.name,
        default_seconds,
        tuned_seconds,
        default_gflops: flops / default_seconds.max(f64::MIN_POSITIVE) / 1e9,
        tuned_gflops: flops / tuned_seconds.max(f64::MIN_POSITIVE) / 1e9,
        speedup: default_seconds / tuned_seconds.max(f64::MIN_POSITIVE),
        tuning_seconds,
        benchmark_runs: record.map_or(0, |r| r.benchmark_runs),
        candidates: record
            .map_or_else(Vec::new, |r| r.candidates.iter().map(outcome_row).collect()),
    })
}

fn bench_tune<R: CliRuntime>(client: &ComputeClient<R>, args: &TuneArgs) -> CliResult<usize> {
    let gpu = client
        .properties()
        .hardware
        .num_streaming_multiprocessors
        .is_some();
    let shapes = if args.shapes.is_empty() {
        default_shapes(gpu, args.quick)
    } else {
        args.shapes.clone()
    };
    let date = iso8601(SystemTime::now());
    outln!(
        "# cubert bench tune: backend {}, {}, {date}; f32 matmul, level {:?}, budget {} ms \
         per shape, timing by {}",
        R::name(),
        client.properties().name,
        args.level,
        args.budget_ms,
        profile_clock(client)
    );
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for dims in shapes {
        match shape(client, args, dims, &mut failures) {
            Ok(row) => rows.push(row),
            Err(error) => failures.push(format!("{}x{}x{}: {error}", dims.0, dims.1, dims.2)),
        }
        client.memory_cleanup();
    }
    print_rows(&rows, args.verbose);
    let report = TuneReport {
        tool: "cubert",
        version: env!("CARGO_PKG_VERSION"),
        backend: R::name().to_string(),
        device: client.properties().name.clone(),
        date,
        timing: profile_clock(client),
        level: format!("{:?}", args.level).to_lowercase(),
        budget_ms: args.budget_ms,
        reps: args.reps,
        shapes: rows,
        failures: failures.clone(),
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).map_err(|error| {
            CliError::failure(format!("can't write {}: {error}", path.display()))
        })?;
        outln!("# wrote {}", path.display());
    }
    if failures.is_empty() {
        outln!("# cubert bench tune: all checks passed");
    } else {
        outln!("# cubert bench tune: {} FAILURE(S)", failures.len());
        for failure in &failures {
            outln!("FAIL {failure}");
        }
    }
    Ok(failures.len())
}

fn print_rows(rows: &[ShapeRow], verbose: bool) {
    let mut table = Table::new(&[
        ("shape MxKxN", Align::Left),
        ("default ms", Align::Right),
        ("tuned variant", Align::Left),
        ("tuned ms", Align::Right),
        ("GFLOP/s default", Align::Right),
        ("GFLOP/s tuned", Align::Right),
        ("speed-up", Align::Right),
        ("tuning ms", Align::Right),
        ("runs", Align::Right),
    ]);
    for row in rows {
        table.row(vec![
            format!("{}x{}x{}", row.m, row.k, row.n),
            format!("{:.3}", row.default_seconds * 1e3),
            row.tuned_variant.clone(),
            format!("{:.3}", row.tuned_seconds * 1e3),
            format!("{:.1}", row.default_gflops),
            format!("{:.1}", row.tuned_gflops),
            format!("{:.2}x", row.speedup),
            format!("{:.1}", row.tuning_seconds * 1e3),
            row.benchmark_runs.to_string(),
        ]);
    }
    outln!();
    out!("{}", table.render());
    if !verbose {
        return;
    }
    for row in rows {
        outln!();
        outln!("# candidates for {}x{}x{}", row.m, row.k, row.n);
        let mut table = Table::new(&[
            ("variant", Align::Left),
            ("outcome", Align::Left),
            ("median ms", Align::Right),
            ("samples", Align::Right),
            ("note", Align::Left),
        ]);
        for candidate in &row.candidates {
            table.row(vec![
                candidate.name.clone(),
                candidate.outcome.to_string(),
                candidate
                    .median_seconds
                    .map(|s| format!("{:.3}", s * 1e3))
                    .unwrap_or_default(),
                candidate.samples.to_string(),
                candidate.note.clone(),
            ]);
        }
        out!("{}", table.render());
    }
}
