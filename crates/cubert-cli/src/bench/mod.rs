//! `cubert bench`: the figures the anchors measure for the peers, measured for cubert.
//!
//! Every figure is named like its anchor with the prefix `cubert_` and has the same unit, so
//! a run of `cubert bench` and of the anchor scripts compare as ratios (`--compare`, see
//! `compare`). Groups (one file each, with the parts they run): `alloc` (allocation
//! throughput), `transfer` (host to device and back at 1 GiB, then the size sweep of
//! `sweep`), `launch` (launch overhead, then graph replay in `graph`), `bandwidth` (vector
//! add, then device-to-device copy in `copy`), `trace` (replay of an allocation trace) and
//! `mma` (the language's tensor-core matmul next to cuBLAS) and `math` (the throughput of
//! the language's transcendental functions).
//! Each figure is the median of several repetitions after a warm-up, and each is checked: a
//! failed check prints `FAIL ...`, drops the figure, counts in `failures` and makes the exit
//! code 1. A figure the backend can't measure (graphs on the CPU, the trace when no trace
//! file is found) is reported as not measured, which is no failure.
//!
//! `--quick` shrinks sizes and counts (the names then carry the actual size, for example
//! `cubert_h2d_pageable_64MiB`). Big buffers are freed between groups. With `--json FILE`
//! the report is written there, and the transfer sweep is drawn next to it as
//! `<report>.transfer_sweep.svg` (named after the JSON report).
//!
//! Besides the groups, this directory holds what the benchmarks (`cubert bench`, `bench
//! tune`, `bench collective`) share: `recorder` (figures and failures as they are measured,
//! and the progress bar), `timing` (medians, device time through `client.profile`),
//! `bytes_check` (stamps and poison that check the bytes of transfers), `report` (the JSON
//! report), `peers` (reading figure files), `compare`
//! (cubert's figures next to the peers'), `plot` (the SVG of a series), `table` (aligned
//! plain-text columns) and `units` (size labels and number formatting).

mod alloc;
mod bandwidth;
mod bytes_check;
pub mod collective;
mod compare;
mod copy;
mod gather_scatter;
mod graph;
mod launch;
mod math;
mod mma;
mod peers;
mod plot;
mod recorder;
mod report;
mod sweep;
mod table;
mod timing;
mod trace;
mod transfer;
pub mod tune;
mod units;

use crate::backend::{Backend, CliRuntime, ClientJob, run_on_default_device};
use crate::error::{CliResult, EXIT_FAILURE};
use cubert::ComputeClient;
use peers::{FigureFile, FileFigure};
use recorder::Recorder;
use report::{BenchReport, Figure, Figures, Series, SeriesMap, iso8601};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};
use table::{Align, Table};
use units::{format_value, size_label};

/// The sweep plot of the JSON report at `json`: beside it, named after it
/// (`run.json` → `run.transfer_sweep.svg`), so a later run with another report name doesn't
/// overwrite it.
pub fn sweep_plot_path(json: &std::path::Path) -> std::path::PathBuf {
    let stem = json
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bench".to_string());
    json.with_file_name(format!("{stem}.transfer_sweep.svg"))
}

/// A group of figures (defined with the command line).
pub use crate::args::Group;

impl Group {
    /// Every group, in the order they run.
    pub const ALL: [Group; 7] = [
        Group::Alloc,
        Group::Transfer,
        Group::Launch,
        Group::Bandwidth,
        Group::Trace,
        Group::Mma,
        Group::Math,
    ];

    fn name(self) -> &'static str {
        match self {
            Group::Alloc => "alloc",
            Group::Transfer => "transfer",
            Group::Launch => "launch",
            Group::Bandwidth => "bandwidth",
            Group::Trace => "trace",
            Group::Mma => "mma",
            Group::Math => "math",
        }
    }

    /// How many figures (and series points) the group measures, for the progress bar.
    fn figures(self, quick: bool) -> u64 {
        match self {
            Group::Alloc => alloc::FIGURES,
            Group::Transfer => transfer::figures(quick),
            Group::Launch => launch::FIGURES,
            Group::Bandwidth => bandwidth::FIGURES,
            Group::Trace => trace::FIGURES,
            Group::Mma => mma::FIGURES,
            Group::Math => math::FIGURES,
        }
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What `cubert bench` was asked for.
#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    /// Smaller sizes and counts.
    pub quick: bool,
    /// Where to write the JSON report.
    pub json: Option<PathBuf>,
    /// One group only.
    pub only: Option<Group>,
    /// The allocation trace to replay (default: the anchors', if found).
    pub trace: Option<PathBuf>,
    /// Where to write the generated training traces (`MODEL.txt`), if anywhere.
    pub write_traces: Option<PathBuf>,
    /// Peer figure files to compare the run with.
    pub compare: Vec<PathBuf>,
}

/// Runs the benchmarks on the default device of `backend`, then compares them with the
/// peers' files if asked.
///
/// # Errors
/// A usage error if the backend isn't built in; the device's start error; a JSON report
/// that can't be written; a peer file that can't be read (before anything is measured).
pub fn run(backend: Backend, options: BenchOptions) -> CliResult<ExitCode> {
    let peers = read_peers(&options.compare)?;
    let failures = run_on_default_device(backend, Bench { options, peers })?;
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    })
}

/// Compares the figures of an earlier run (`from`, a `cubert bench --json` file) with the
/// peers' files, without measuring anything.
///
/// # Errors
/// A file that can't be read or isn't in the anchors' format.
pub fn compare_only(from: &Path, compare: &[PathBuf]) -> CliResult<ExitCode> {
    let peers = read_peers(compare)?;
    let run = peers::read(from)?;
    outln!(
        "# cubert bench --from {}: {} figures{}",
        run.label,
        run.figures.len(),
        if run.failures > 0 {
            format!(" (that run reports {} FAILED check(s))", run.failures)
        } else {
            String::new()
        }
    );
    compare::print(&run.figures, &peers);
    Ok(ExitCode::SUCCESS)
}

fn read_peers(paths: &[PathBuf]) -> CliResult<Vec<FigureFile>> {
    paths.iter().map(|path| peers::read(path)).collect()
}

struct Bench {
    options: BenchOptions,
    peers: Vec<FigureFile>,
}

impl ClientJob for Bench {
    type Output = usize;

    fn run<R: CliRuntime>(self, client: &ComputeClient<R>) -> CliResult<usize> {
        bench(client, &self.options, &self.peers)
    }
}

fn bench<R: CliRuntime>(
    client: &ComputeClient<R>,
    options: &BenchOptions,
    peers: &[FigureFile],
) -> CliResult<usize> {
    let date = iso8601(SystemTime::now());
    let groups: Vec<Group> = match options.only {
        Some(group) => vec![group],
        None => Group::ALL.to_vec(),
    };
    let quick = options.quick;
    outln!(
        "# cubert bench{}: backend {}, {}, {date}",
        if quick { " --quick" } else { "" },
        R::name(),
        client.properties().name
    );
    let trace_path = if groups.contains(&Group::Trace) {
        options.trace.clone().or_else(trace::default_trace)
    } else {
        None
    };
    let mut recorder = Recorder::new(groups.iter().map(|g| g.figures(quick)).sum());
    for group in groups {
        let start = Instant::now();
        recorder.info(&format!("group {group}"));
        let outcome = match group {
            Group::Alloc => alloc::run(client, quick, &mut recorder),
            Group::Transfer => transfer::run(client, quick, &mut recorder),
            Group::Launch => launch::run(client, quick, &mut recorder),
            Group::Bandwidth => bandwidth::run(client, quick, &mut recorder),
            Group::Trace => trace::run::<R>(
                trace_path.as_deref(),
                options.write_traces.as_deref(),
                &mut recorder,
            ),
            Group::Mma => mma::run(client, quick, &mut recorder),
            Group::Math => math::run(client, quick, &mut recorder),
        };
        if let Err(error) = outcome {
            recorder.fail(&format!("group {group} stopped: {error:#}"));
        }
        // The group's buffers are dropped by now: give their memory back before the next.
        client.memory_cleanup();
        if let Err(error) = client.sync() {
            recorder.fail(&format!("group {group}: error at the final sync: {error}"));
        }
        let memory = match client.memory_usage() {
            Ok(usage) => format!("device memory after cleanup: {usage}"),
            Err(error) => format!("device memory unknown: {error}"),
        };
        recorder.info(&format!(
            "group {group} took {:.1} s; {memory}",
            start.elapsed().as_secs_f64()
        ));
    }
    recorder.finish();

    let (figures, series, failures) = recorder.into_parts();
    outln!();
    print_figures(&figures);
    print_series(&series);
    let report = BenchReport {
        tool: "cubert",
        version: env!("CARGO_PKG_VERSION"),
        device: client.properties().name.clone(),
        backend: R::name().to_string(),
        date: date.clone(),
        quick,
        figures: Figures(figures),
        series: SeriesMap(series),
        failures: failures.len(),
        failed_checks: failures.clone(),
    };
    if let Some(path) = &options.json {
        report.write(path)?;
        outln!("# wrote {}", path.display());
        let sweep: Vec<Series> = report
            .series
            .0
            .iter()
            .filter(|series| !series.points.is_empty())
            .cloned()
            .collect();
        if !sweep.is_empty() {
            let plot_path = sweep_plot_path(path);
            let title = format!(
                "cubert transfers, {} ({}), {date}",
                report.device, report.backend
            );
            plot::write(&plot_path, &sweep, &title, "GB/s")?;
            outln!("# wrote {}", plot_path.display());
        }
    }
    if !peers.is_empty() {
        let measured: Vec<FileFigure> = report
            .figures
            .0
            .iter()
            .map(|figure| FileFigure {
                name: figure.name.clone(),
                value: figure.value,
                unit: figure.unit.clone(),
            })
            .collect();
        compare::print(&measured, peers);
    }
    if failures.is_empty() {
        outln!("# cubert bench: all checks passed");
    } else {
        outln!("# cubert bench: {} FAILURE(S)", failures.len());
        for failure in &failures {
            outln!("FAIL {failure}");
        }
    }
    Ok(failures.len())
}

/// Prints how each figure was measured. The values were printed once each, as measured
/// (`name value unit`, the anchors' format); this table doesn't repeat them.
fn print_figures(figures: &[Figure]) {
    let mut table = Table::new(&[
        ("figure", Align::Left),
        ("how it was measured", Align::Left),
    ]);
    for figure in figures {
        table.row(vec![figure.name.clone(), figure.note.clone()]);
    }
    if table.is_empty() {
        outln!("no figures");
    } else {
        out!("{}", table.render());
    }
}

/// Prints the series as one table: a row per size, a column per series.
fn print_series(series: &[Series]) {
    let series: Vec<&Series> = series.iter().filter(|s| !s.points.is_empty()).collect();
    if series.is_empty() {
        return;
    }
    let mut sizes: Vec<u64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.bytes))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut columns = vec![("size", Align::Right)];
    columns.extend(series.iter().map(|s| (s.name.as_str(), Align::Right)));
    let mut table = Table::new(&columns);
    for bytes in sizes {
        let mut row = vec![size_label(bytes as usize)];
        for s in &series {
            row.push(
                s.points
                    .iter()
                    .find(|p| p.bytes == bytes)
                    .map(|p| format_value(p.value))
                    .unwrap_or_default(),
            );
        }
        table.row(row);
    }
    outln!();
    outln!(
        "# GB/s against size ({})",
        series
            .iter()
            .map(|s| format!("{}: {}", s.name, s.note))
            .collect::<Vec<_>>()
            .join("; ")
    );
    out!("{}", table.render());
}
