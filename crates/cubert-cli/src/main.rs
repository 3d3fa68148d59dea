//! The `cubert` command: device information, a self-checking demo, and benchmarks.
//!
//! ```text
//! cubert info                      backends, devices, properties, configuration
//! cubert demo [--size N]           runs every standard kernel and verifies the results
//! cubert bench [--quick] [--only GROUP] [--json FILE] [--trace FILE] [--compare PEER.json]...
//! cubert bench --from CUBERT.json --compare PEER.json...   compares an earlier run
//! cubert bench tune [--shapes MxKxN,...] [--json FILE]      autotuned matmul vs default
//! cubert bench collective [--quick] [--json FILE]          all-reduce busbw, peer copy GB/s
//! cubert launch --nproc N [--master-addr H:P] -- CMD...    N ranks of a process group
//! ```
//!
//! `--backend cpu|cuda` (default: `[runtime] backend` / `CUBERT_BACKEND`) picks the backend
//! of the demo and the benchmarks. Exit codes: 0 success, 1 a failed check or a runtime
//! error, 2 a bad invocation or a backend that isn't built into this binary.

#[macro_use]
mod output;

mod backend;
mod bench;
mod compare;
mod demo;
mod error;
mod info;
mod launch;
mod peers;
mod plot;
mod report;
mod rng;
mod table;
mod units;
mod verify;

use backend::Backend;
use clap::{Parser, Subcommand};
use error::CliResult;
use std::path::PathBuf;
use std::process::ExitCode;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "cubert",
    version,
    about = "The cubert compute runtime: device information, a self-checking demo, benchmarks"
)]
struct Cli {
    /// Backend to run on [default: `[runtime] backend` of cubert.toml, or CUBERT_BACKEND,
    /// or cpu].
    #[arg(long, global = true, value_enum)]
    backend: Option<Backend>,

    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Lists the backends, the devices and their properties, and the configuration.
    Info,
    /// Runs every standard kernel on the default device and verifies each result.
    Demo {
        /// Number of elements of the elementwise kernels.
        #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1..=(1u64 << 31)))]
        size: u64,
    },
    /// Measures allocation, transfers, launch overhead, bandwidth and an allocation trace,
    /// and compares the figures with the peers'.
    Bench {
        /// A bench tool instead of the figures (`tune`: autotuned matmul vs the default).
        #[command(subcommand)]
        tool: Option<bench::tune::BenchTool>,
        /// Smaller sizes and counts: a few seconds in all.
        #[arg(long)]
        quick: bool,
        /// Writes the figures as JSON to this file, and the transfer sweep's plot next to it
        /// (transfer_sweep.svg).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Runs one group only.
        #[arg(long, value_enum, value_name = "GROUP")]
        only: Option<bench::Group>,
        /// Allocation trace (`alloc ID SIZE` / `free ID` lines) the trace group replays
        /// [default: alloc_trace.txt of ../shared/anchors or .anchors, if found].
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// A peer figure file in the anchors' JSON format (peers.py, native_anchors.cu
        /// output) to compare the figures with, as cubert/peer ratios; repeatable.
        #[arg(long, value_name = "FILE")]
        compare: Vec<PathBuf>,
        /// Compares the figures of this earlier `--json` report instead of measuring
        /// (needs --compare).
        #[arg(
            long,
            value_name = "FILE",
            requires = "compare",
            conflicts_with_all = ["quick", "json", "only", "trace"]
        )]
        from: Option<PathBuf>,
    },
    /// Starts N ranks of a process group on this host (`--nproc N -- COMMAND...`), each
    /// with CUBERT_RANK, CUBERT_WORLD_SIZE, CUBERT_LOCAL_RANK, CUBERT_MASTER_ADDR and
    /// NCCL_NVLS_ENABLE=0; stops them all when one fails and exits with its status.
    Launch(launch::LaunchArgs),
}

fn run(cli: Cli) -> CliResult<ExitCode> {
    let config = cubert::config::global_config();
    cubert::logging::init_logging(&config.logging);
    match cli.command {
        Command::Info => info::run(cli.backend),
        Command::Launch(args) => launch::run(args),
        Command::Demo { size } => {
            let backend = Backend::select(cli.backend)?;
            let size = usize::try_from(size)
                .map_err(|_| error::CliError::usage(format!("--size {size} is too large")))?;
            demo::run(backend, size)
        }
        Command::Bench {
            tool,
            quick,
            json,
            only,
            trace,
            compare,
            from,
        } => {
            if let Some(bench::tune::BenchTool::Tune(args)) = tool {
                return bench::tune::run(Backend::select(cli.backend)?, args);
            }
            if let Some(bench::tune::BenchTool::Collective(args)) = tool {
                return bench::collective::run(Backend::select(cli.backend)?, args);
            }
            if let Some(from) = from {
                return bench::compare_only(&from, &compare);
            }
            let backend = Backend::select(cli.backend)?;
            bench::run(
                backend,
                bench::BenchOptions {
                    quick,
                    json,
                    only,
                    trace,
                    compare,
                },
            )
        }
    }
}

fn main() -> ExitCode {
    launch::keep_nvlink_multicast_off();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(error) => {
            output::write_err(format_args!("cubert: error: {error}"));
            ExitCode::from(error.code)
        }
    };
    if output::stdout_failed() {
        output::write_err(format_args!(
            "cubert: error: standard output was closed; output was lost"
        ));
        return ExitCode::from(error::EXIT_FAILURE);
    }
    code
}
