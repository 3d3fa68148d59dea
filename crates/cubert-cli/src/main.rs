//! The `cubert` command: device information, a self-checking demo, and benchmarks.
//!
//! ```text
//! cubert info                      backends, devices, properties, configuration
//! cubert demo [--size N]           runs every standard kernel and verifies the results
//! cubert bench [--quick] [--only GROUP] [--json FILE] [--trace FILE] [--write-traces DIR] [--compare PEER.json]...
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

mod args;
mod backend;
mod bench;
mod demo;
mod error;
mod info;
mod logging;
mod process_launcher;
mod rng;
mod verify;

use args::{Cli, Command};
use backend::Backend;
use clap::Parser;
use error::CliResult;
use std::process::ExitCode;

fn run(cli: Cli) -> CliResult<ExitCode> {
    let config = cubert::config::global_config();
    logging::install(&config.logging);
    match cli.command {
        Command::Info => info::run(cli.backend),
        Command::Launch(args) => process_launcher::run(args),
        Command::Demo { size } => {
            let backend = Backend::select(cli.backend)?;
            let size = usize::try_from(size)
                .map_err(|_| error::usage(format!("--size {size} is too large")))?;
            demo::run(backend, size)
        }
        Command::Bench {
            tool,
            quick,
            json,
            only,
            trace,
            write_traces,
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
                    write_traces,
                    compare,
                },
            )
        }
    }
}

fn main() -> ExitCode {
    process_launcher::keep_nvlink_multicast_off();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(error) => {
            output::write_err(format_args!("cubert: error: {error:#}"));
            ExitCode::from(error::exit_code(&error))
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
