//! `cubert bench tune`: the autotuned matmul (or reduce-sum, `--kernel reduce-sum`) against
//! the default variant, per shape.
//!
//! For each shape (f32; `M×K×N` for matmul, `ROWS×COLS` for reduce-sum), a fresh tuner (in memory only, so every run really tunes)
//! picks among the backend's matmul variants and the tuning time is measured. Then the
//! default variant (the kernel `ops::matmul` launches) and the tuned one run alternately,
//! `--reps` times each after a warm-up, timed on the device (`client.profile`), in the same
//! run on the same buffers; the table shows both medians, GFLOP/s (reduce-sum: GB/s, bytes
//! read and written), the speed-up and the
//! tuning time. The tuned variant's output is checked against the default's: a difference
//! prints `FAIL` and makes the exit code 1. `--verbose` lists every candidate's median and
//! outcome; `--json FILE` writes all of it.
//!
//! For matmul on CUDA, cuBLAS's `sgemm` (loaded at run time; TF32 off, as cubert's f32) runs
//! on the same buffers, checked against the default variant and timed alternately with
//! cubert's: a second table gives its GFLOP/s and the tuned variant's ratio to it. Where
//! cuBLAS isn't found a comment says why and the rest runs.

use super::report::iso8601;
use super::table::{Align, Table};
use super::timing::{median, profile_clock, profiled_seconds};
use crate::backend::{Backend, CliRuntime, ClientJob, VendorMatmul, run_on_default_device};
use crate::error::{CliResult, EXIT_FAILURE};
use cubert::config::AutotuneLevel;
use cubert::kernel::StandardVariant;
use cubert::kernel::standard::StandardKernel;
use cubert::tune::standard::{
    MatmulProblem, ReduceSumProblem, matmul_candidates, matmul_variant, pattern,
    reduce_sum_candidates, reduce_sum_variant,
};
use cubert::tune::{CandidateSet, Outcome, TuneRecord, TuneSettings, Tuner, compare_elements};
use cubert::{ComputeClient, ElemType, Handle, LaunchError, Runtime};
use serde::Serialize;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

/// The command line of `cubert bench tune` (defined with the rest of it).
pub use crate::args::{BenchTool, Level, TuneArgs, TunedKernel};

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
    /// `MxKxN` (matmul) or `ROWSxCOLS` (reduce-sum).
    shape: String,
    default_variant: String,
    tuned_variant: String,
    default_seconds: f64,
    tuned_seconds: f64,
    /// `GFLOP/s` (matmul) or `GB/s` (reduce-sum: bytes read and written).
    rate_unit: &'static str,
    default_rate: f64,
    tuned_rate: f64,
    speedup: f64,
    tuning_seconds: f64,
    benchmark_runs: u64,
    candidates: Vec<CandidateRow>,
    /// The vendor library's product on the same buffers (cuBLAS on CUDA), where measured.
    peer: Option<PeerRow>,
}

/// The vendor library's matmul on one shape, timed alternately with cubert's variants.
#[derive(Clone, Debug, Serialize)]
struct PeerRow {
    name: String,
    seconds: f64,
    rate: f64,
    /// cubert's tuned variant's rate over the peer's.
    tuned_ratio: f64,
}

/// The peer's product of one problem: writes into the handle it is given.
type PeerLaunch<'a> = (
    &'a str,
    &'a dyn Fn(&Handle) -> Result<(), cubert::ServerError>,
);

/// The JSON report.
#[derive(Debug, Serialize)]
struct TuneReport {
    tool: &'static str,
    version: &'static str,
    backend: String,
    device: String,
    date: String,
    timing: &'static str,
    kernel: String,
    level: String,
    budget_ms: u64,
    reps: u32,
    shapes: Vec<ShapeRow>,
    failures: Vec<String>,
}

/// Runs `cubert bench tune` on the default device of `backend`.
///
/// # Errors
/// A usage error for a shape of the wrong form or if the backend isn't built in; the device's start error; a JSON report
/// that can't be written.
pub fn run(backend: Backend, args: TuneArgs) -> CliResult<ExitCode> {
    let (sizes, form) = match args.kernel {
        TunedKernel::Matmul => (3, "MxKxN"),
        TunedKernel::ReduceSum => (2, "ROWSxCOLS"),
    };
    if let Some(shape) = args.shapes.iter().find(|shape| shape.0.len() != sizes) {
        let text: Vec<String> = shape.0.iter().map(ToString::to_string).collect();
        return Err(crate::error::usage(format!(
            "`{}` is not a shape of this kernel: {form}",
            text.join("x")
        )));
    }
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

fn default_shapes(kernel: TunedKernel, gpu: bool, quick: bool) -> Vec<Vec<usize>> {
    let shapes: &[&[usize]] = match (kernel, gpu, quick) {
        (TunedKernel::Matmul, false, true) => &[&[64, 64, 64], &[128, 128, 128], &[96, 256, 160]],
        (TunedKernel::Matmul, false, false) => &[
            &[128, 128, 128],
            &[256, 256, 256],
            &[512, 512, 512],
            &[384, 1024, 256],
        ],
        (TunedKernel::Matmul, true, true) => {
            &[&[256, 256, 256], &[1024, 1024, 1024], &[4096, 256, 1024]]
        }
        (TunedKernel::Matmul, true, false) => &[
            &[512, 512, 512],
            &[1024, 1024, 1024],
            &[2048, 2048, 2048],
            &[4096, 4096, 4096],
            &[8192, 1024, 4096],
        ],
        (TunedKernel::ReduceSum, false, true) => &[&[256, 256], &[4096, 64], &[16, 16384]],
        (TunedKernel::ReduceSum, false, false) => {
            &[&[1024, 1024], &[65536, 64], &[64, 65536], &[4096, 4096]]
        }
        (TunedKernel::ReduceSum, true, true) => &[&[4096, 4096], &[1 << 20, 32]],
        (TunedKernel::ReduceSum, true, false) => &[
            &[4096, 4096],
            &[16384, 16384],
            &[1 << 20, 64],
            &[1 << 22, 16],
            &[64, 1 << 22],
        ],
    };
    shapes.iter().map(|shape| shape.to_vec()).collect()
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

fn variant_named<R: Runtime>(
    client: &ComputeClient<R>,
    kernel: StandardKernel,
    name: &str,
) -> CliResult<StandardVariant> {
    R::standard_variants(kernel, client.properties())
        .into_iter()
        .find(|variant| variant.name == name)
        .ok_or_else(|| {
            crate::error::failure(format!("the tuner chose an unknown variant `{name}`"))
        })
}

/// `rows × cols` as a count of elements of 4 bytes, or a usage error naming `label`.
fn elements(label: &str, rows: usize, cols: usize) -> CliResult<usize> {
    rows.checked_mul(cols)
        .filter(|len| len.checked_mul(4).is_some())
        .ok_or_else(|| crate::error::usage(format!("the shape {label} is too large")))
}

/// One tuned problem: how to run a variant on it and where its output is.
trait TunedProblem: Clone + Send + Sync + 'static {
    /// The standard kernel it runs.
    fn kernel(&self) -> StandardKernel;
    /// Launches `variant` on it.
    fn launch<R: Runtime>(
        &self,
        client: &ComputeClient<R>,
        variant: &StandardVariant,
    ) -> Result<(), LaunchError>;
    /// Its output.
    fn out(&self) -> &Handle;
    /// The same problem writing to `out`.
    fn with_out(&self, out: Handle) -> Self;
}

/// `TunedProblem` for a standard kernel's problem type: its `StandardKernel` variant and
/// the launch helper of its variants (both problems have `elem` and `out`).
macro_rules! tuned_problem {
    ($problem:ty, $kernel:ident, $launch:path) => {
        impl TunedProblem for $problem {
            fn kernel(&self) -> StandardKernel {
                StandardKernel::$kernel(self.elem)
            }
            fn launch<R: Runtime>(
                &self,
                client: &ComputeClient<R>,
                variant: &StandardVariant,
            ) -> Result<(), LaunchError> {
                $launch(client, variant, self)
            }
            fn out(&self) -> &Handle {
                &self.out
            }
            fn with_out(&self, out: Handle) -> Self {
                Self {
                    out,
                    ..self.clone()
                }
            }
        }
    };
}

tuned_problem!(MatmulProblem, Matmul, matmul_variant);
tuned_problem!(ReduceSumProblem, ReduceSum, reduce_sum_variant);

/// Tunes, checks and times one problem; a failed check is pushed to `failures`. `work`
/// is the problem's FLOPs or bytes, per `rate_unit` (giga-).
#[allow(clippy::too_many_arguments)]
fn measure<R: CliRuntime, P: TunedProblem>(
    client: &ComputeClient<R>,
    args: &TuneArgs,
    label: String,
    problem: P,
    set: &CandidateSet<R, P, ()>,
    (work, rate_unit): (f64, &'static str),
    peer: Option<PeerLaunch<'_>>,
    failures: &mut Vec<String>,
) -> CliResult<ShapeRow> {
    let tuner = Tuner::new(TuneSettings {
        level: args.level.into(),
        cache_dir: None,
        budget: Duration::from_millis(args.budget_ms),
        samples: 5,
        early_stop_ratio: 1.5,
        check: false,
    });
    let start = Instant::now();
    let choice = tuner.choose(client, set, &problem)?;
    let tuning_seconds = start.elapsed().as_secs_f64();
    let record: Option<&TuneRecord> = choice.record.as_deref();
    let kernel = problem.kernel();
    let default = variant_named(client, kernel, StandardVariant::DEFAULT)?;
    let tuned = variant_named(client, kernel, &choice.name)?;

    // The tuned variant must compute what the default computes.
    problem.launch(client, &default)?;
    let reference = client.read_one(problem.out().clone())?;
    let check = problem.with_out(client.empty(problem.out().size() as usize)?);
    check.launch(client, &tuned)?;
    let output = client.read_one(check.out().clone())?;
    if let Err(difference) = compare_elements(ElemType::F32, &reference, &output) {
        failures.push(format!(
            "{label}: `{}` differs from the default: {difference}",
            tuned.name
        ));
    }

    // The peer computes it too (to within f32 rounding: another summation order).
    let peer_out = match peer {
        Some((name, launch)) => {
            let out = client.empty(problem.out().size() as usize)?;
            launch(&out)?;
            let output = client.read_one(out.clone())?;
            if let Err(difference) = compare_elements(ElemType::F32, &reference, &output) {
                failures.push(format!(
                    "{label}: {name} differs from the default: {difference}"
                ));
            }
            Some(out)
        }
        None => None,
    };

    let reps = if args.quick {
        args.reps.min(3)
    } else {
        args.reps
    };
    let (mut default_times, mut tuned_times, mut peer_times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        default_times.push(profiled_seconds(client, "default variant", || {
            problem.launch(client, &default)
        })?);
        tuned_times.push(profiled_seconds(client, "tuned variant", || {
            problem.launch(client, &tuned)
        })?);
        if let (Some((name, launch)), Some(out)) = (peer, &peer_out) {
            peer_times.push(profiled_seconds(client, name, || launch(out))?);
        }
    }
    client.sync()?;
    let (default_seconds, tuned_seconds) = (median(&default_times), median(&tuned_times));
    let rate = |seconds: f64| work / seconds.max(f64::MIN_POSITIVE) / 1e9;
    let peer = peer.filter(|_| !peer_times.is_empty()).map(|(name, _)| {
        let seconds = median(&peer_times);
        PeerRow {
            name: name.to_string(),
            seconds,
            rate: rate(seconds),
            tuned_ratio: rate(tuned_seconds) / rate(seconds),
        }
    });
    Ok(ShapeRow {
        shape: label,
        default_variant: default.name,
        tuned_variant: tuned.name,
        default_seconds,
        tuned_seconds,
        rate_unit,
        default_rate: work / default_seconds.max(f64::MIN_POSITIVE) / 1e9,
        tuned_rate: work / tuned_seconds.max(f64::MIN_POSITIVE) / 1e9,
        speedup: default_seconds / tuned_seconds.max(f64::MIN_POSITIVE),
        tuning_seconds,
        benchmark_runs: record.map_or(0, |r| r.benchmark_runs),
        candidates: record
            .map_or_else(Vec::new, |r| r.candidates.iter().map(outcome_row).collect()),
        peer,
    })
}

/// Tunes, checks and times one shape of `args.kernel`.
fn shape<R: CliRuntime>(
    client: &ComputeClient<R>,
    args: &TuneArgs,
    shape: &[usize],
    vendor: Option<&VendorMatmul<R>>,
    failures: &mut Vec<String>,
) -> CliResult<ShapeRow> {
    let label = shape
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("x");
    match (args.kernel, shape) {
        (TunedKernel::Matmul, &[m, k, n]) => {
            let (lhs_len, rhs_len, out_len) = (
                elements(&label, m, k)?,
                elements(&label, k, n)?,
                elements(&label, m, n)?,
            );
            // The device buffer first: a shape the device can't hold fails there, before
            // any host memory is filled; the host patterns are fallible too (`pattern`
            // refuses more than the host's memory).
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
            let set = matmul_candidates(client, ElemType::F32)?;
            let flops = 2.0 * m as f64 * k as f64 * n as f64;
            let (lhs, rhs) = (problem.lhs.clone(), problem.rhs.clone());
            let launch = vendor.map(|vendor| {
                move |out: &Handle| (vendor.run)(client, (&lhs, &rhs, out), (m, k, n))
            });
            let peer = vendor.zip(launch.as_ref()).map(|(vendor, launch)| {
                (
                    vendor.name.as_str(),
                    launch as &dyn Fn(&Handle) -> Result<(), cubert::ServerError>,
                )
            });
            measure(
                client,
                args,
                label,
                problem,
                &set,
                (flops, "GFLOP/s"),
                peer,
                failures,
            )
        }
        (TunedKernel::ReduceSum, &[rows, cols]) => {
            let len = elements(&label, rows, cols)?;
            let out = client.empty(elements(&label, rows, 1)? * 4)?;
            let problem = ReduceSumProblem {
                input: client.create(pattern(ElemType::F32, len, 13)?)?,
                out,
                rows,
                cols,
                elem: ElemType::F32,
            };
            let set = reduce_sum_candidates(client, ElemType::F32)?;
            let bytes = 4.0 * (len as f64 + rows as f64);
            measure(
                client,
                args,
                label,
                problem,
                &set,
                (bytes, "GB/s"),
                None,
                failures,
            )
        }
        (TunedKernel::Matmul, _) => Err(crate::error::usage(format!(
            "a matmul shape is MxKxN, not {label}"
        ))),
        (TunedKernel::ReduceSum, _) => Err(crate::error::usage(format!(
            "a reduce-sum shape is ROWSxCOLS, not {label}"
        ))),
    }
}

fn bench_tune<R: CliRuntime>(client: &ComputeClient<R>, args: &TuneArgs) -> CliResult<usize> {
    let gpu = client
        .properties()
        .hardware
        .num_streaming_multiprocessors
        .is_some();
    let shapes = if args.shapes.is_empty() {
        default_shapes(args.kernel, gpu, args.quick)
    } else {
        args.shapes.iter().map(|shape| shape.0.clone()).collect()
    };
    let kernel = match args.kernel {
        TunedKernel::Matmul => "f32 matmul",
        TunedKernel::ReduceSum => "f32 reduce-sum",
    };
    let date = iso8601(SystemTime::now());
    outln!(
        "# cubert bench tune: backend {}, {}, {date}; {kernel}, level {:?}, budget {} ms \
         per shape, timing by {}",
        R::name(),
        client.properties().name,
        args.level,
        args.budget_ms,
        profile_clock(client)
    );
    let vendor = match args.kernel {
        TunedKernel::Matmul => R::vendor_matmul(client).unwrap_or_else(|reason| {
            outln!("# the vendor library's matmul is not measured: {reason}");
            None
        }),
        TunedKernel::ReduceSum => None,
    };
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for dims in shapes {
        match shape(client, args, &dims, vendor.as_ref(), &mut failures) {
            Ok(row) => rows.push(row),
            Err(error) => failures.push(format!("{dims:?}: {error:#}")),
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
        kernel: kernel.to_string(),
        level: format!("{:?}", args.level).to_lowercase(),
        budget_ms: args.budget_ms,
        reps: args.reps,
        shapes: rows,
        failures: failures.clone(),
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).map_err(|error| {
            crate::error::failure(format!("can't write {}: {error}", path.display()))
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
    let unit = rows.first().map_or("GFLOP/s", |row| row.rate_unit);
    let (default_rate, tuned_rate) = (format!("{unit} default"), format!("{unit} tuned"));
    let mut table = Table::new(&[
        ("shape", Align::Left),
        ("default ms", Align::Right),
        ("tuned variant", Align::Left),
        ("tuned ms", Align::Right),
        (default_rate.as_str(), Align::Right),
        (tuned_rate.as_str(), Align::Right),
        ("speed-up", Align::Right),
        ("tuning ms", Align::Right),
        ("runs", Align::Right),
    ]);
    for row in rows {
        table.row(vec![
            row.shape.clone(),
            format!("{:.3}", row.default_seconds * 1e3),
            row.tuned_variant.clone(),
            format!("{:.3}", row.tuned_seconds * 1e3),
            format!("{:.1}", row.default_rate),
            format!("{:.1}", row.tuned_rate),
            format!("{:.2}x", row.speedup),
            format!("{:.1}", row.tuning_seconds * 1e3),
            row.benchmark_runs.to_string(),
        ]);
    }
    outln!();
    out!("{}", table.render());
    let peers: Vec<(&ShapeRow, &PeerRow)> = rows
        .iter()
        .filter_map(|row| row.peer.as_ref().map(|peer| (row, peer)))
        .collect();
    if let Some((_, first)) = peers.first() {
        outln!();
        outln!(
            "# next to {} on the same buffers, in the same run",
            first.name
        );
        let mut table = Table::new(&[
            ("shape", Align::Left),
            ("peer ms", Align::Right),
            ("peer GFLOP/s", Align::Right),
            ("tuned GFLOP/s", Align::Right),
            ("tuned / peer", Align::Right),
        ]);
        for (row, peer) in peers {
            table.row(vec![
                row.shape.clone(),
                format!("{:.3}", peer.seconds * 1e3),
                format!("{:.1}", peer.rate),
                format!("{:.1}", row.tuned_rate),
                format!("{:.2}", peer.tuned_ratio),
            ]);
        }
        out!("{}", table.render());
    }
    if !verbose {
        return;
    }
    for row in rows {
        outln!();
        outln!("# candidates for {}", row.shape);
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
