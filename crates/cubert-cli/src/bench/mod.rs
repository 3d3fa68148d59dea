//! `cubert bench`: the figures the anchors measure for the peers, measured for cubert.
//!
//! Every figure is named like its anchor with the prefix `cubert_` and has the same unit, so
//! a run of `cubert bench` and of the anchor scripts compare as ratios. Groups (one file
//! each): `alloc` (allocation throughput), `transfer` (host to device and back), `launch`
//! (launch overhead) and `bandwidth` (vector add). Each figure is the median of several
//! repetitions after a warm-up, and each is checked: a failed check prints `FAIL ...`, drops
//! the figure, counts in `failures` and makes the exit code 1.
//!
//! `--quick` shrinks sizes and counts (the names then carry the actual size, for example
//! `cubert_h2d_pageable_64MiB`). Big buffers are freed between groups.

mod alloc;
mod bandwidth;
mod launch;
mod recorder;
mod timing;
mod transfer;

use crate::backend::{Backend, ClientJob, run_on_default_device};
use crate::error::{CliResult, EXIT_FAILURE};
use crate::report::{BenchReport, Figures, iso8601};
use crate::table::{Align, Table};
use crate::units::format_value;
use clap::ValueEnum;
use cubert::{ComputeClient, Runtime};
use recorder::Recorder;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

/// A group of figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Group {
    /// Allocation + free throughput, 4 KiB to 1 GiB.
    Alloc,
    /// Host-to-device (pageable, pinned, file) and device-to-host transfers.
    Transfer,
    /// Launch overhead: back-to-back, submit only, launch + sync.
    Launch,
    /// f32 vector add bandwidth.
    Bandwidth,
}

impl Group {
    /// Every group, in the order they run.
    pub const ALL: [Group; 4] = [
        Group::Alloc,
        Group::Transfer,
        Group::Launch,
        Group::Bandwidth,
    ];

    fn name(self) -> &'static str {
        match self {
            Group::Alloc => "alloc",
            Group::Transfer => "transfer",
            Group::Launch => "launch",
            Group::Bandwidth => "bandwidth",
        }
    }

    /// How many figures the group measures (for the progress bar).
    fn figures(self) -> u64 {
        match self {
            Group::Alloc => alloc::FIGURES,
            Group::Transfer => transfer::FIGURES,
            Group::Launch => launch::FIGURES,
            Group::Bandwidth => bandwidth::FIGURES,
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
}

/// Runs the benchmarks on the default device of `backend`.
///
/// # Errors
/// A usage error if the backend isn't built in; the device's start error; a JSON report
/// that can't be written.
pub fn run(backend: Backend, options: BenchOptions) -> CliResult<ExitCode> {
    let failures = run_on_default_device(backend, Bench { options })?;
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    })
}

struct Bench {
    options: BenchOptions,
}

impl ClientJob for Bench {
    type Output = usize;

    fn run<R: Runtime>(self, client: &ComputeClient<R>) -> CliResult<usize> {
        bench(client, &self.options)
    }
}

fn bench<R: Runtime>(client: &ComputeClient<R>, options: &BenchOptions) -> CliResult<usize> {
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
    let mut recorder = Recorder::new(groups.iter().map(|g| g.figures()).sum());
    for group in groups {
        let start = Instant::now();
        recorder.info(&format!("group {group}"));
        let outcome = match group {
            Group::Alloc => alloc::run(client, quick, &mut recorder),
            Group::Transfer => transfer::run(client, quick, &mut recorder),
            Group::Launch => launch::run(client, quick, &mut recorder),
            Group::Bandwidth => bandwidth::run(client, quick, &mut recorder),
        };
        if let Err(error) = outcome {
            recorder.fail(&format!("group {group} stopped: {error}"));
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

    let (figures, failures) = recorder.into_parts();
    outln!();
    let mut table = Table::new(&[
        ("figure", Align::Left),
        ("value", Align::Right),
        ("unit", Align::Left),
        ("note", Align::Left),
    ]);
    for figure in &figures {
        table.row(vec![
            figure.name.clone(),
            format_value(figure.value),
            figure.unit.clone(),
            figure.note.clone(),
        ]);
    }
    if table.is_empty() {
        outln!("no figures");
    } else {
        out!("{}", table.render());
    }
    let report = BenchReport {
        tool: "cubert",
        version: env!("CARGO_PKG_VERSION"),
        device: client.properties().name.clone(),
        backend: R::name().to_string(),
        date,
        quick,
        figures: Figures(figures),
        failures: failures.len(),
        failed_checks: failures.clone(),
    };
    if let Some(path) = &options.json {
        report.write(path)?;
        outln!("# wrote {}", path.display());
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
