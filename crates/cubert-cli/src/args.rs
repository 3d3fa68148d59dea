//! The command line of `cubert`: the clap types of every subcommand and the parsers of
//! their values, and nothing that runs a command.
//!
//! This file is compiled twice: as a module of the binary (`src/main.rs`, which runs the
//! commands) and as the only module of the library (`src/lib.rs`, so a fuzz target can
//! reach the parser). It must therefore not use the binary's other modules; the methods
//! the commands need on these types (`Backend::select`, `Group::figures`, ...) live next to
//! the commands, which re-export the types from here.
//!
//! Values are checked where they are parsed: a command line that parses carries only values
//! in the documented ranges (numbers in range, positive shapes, a finite timeout of at most
//! a week). Checks that relate several arguments (`--node-rank` below `--nnodes`) are the
//! command's.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "cubert",
    version,
    about = "The cubert compute runtime: device information, a self-checking demo, benchmarks"
)]
pub struct Cli {
    /// Backend to run on [default: `[runtime] backend` of cubert.toml, or CUBERT_BACKEND,
    /// or cpu].
    #[arg(long, global = true, value_enum)]
    pub backend: Option<Backend>,

    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
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
        tool: Option<BenchTool>,
        /// Smaller sizes and counts: a few seconds in all.
        #[arg(long)]
        quick: bool,
        /// Writes the figures as JSON to this file, and the transfer sweep's plot next to it,
        /// named after it (`run.json` → `run.transfer_sweep.svg`).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Runs one group only.
        #[arg(long, value_enum, value_name = "GROUP")]
        only: Option<Group>,
        /// Allocation trace (`alloc ID SIZE` / `free ID` lines) the trace group replays
        /// [default: `alloc_trace.txt` in `../shared/anchors/` or `.anchors/` of the working
        /// directory, if there is one; else the trace group is skipped].
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Also writes the generated training-loop traces the trace group replays to
        /// `DIR/MODEL.txt` (transformer, mlp, convnet), for peers to replay.
        #[arg(long, value_name = "DIR")]
        write_traces: Option<PathBuf>,
        /// A peer figure file to compare the figures with, as cubert/peer ratios; repeatable.
        /// JSON: `{"tool": NAME, "figures": {FIGURE: {"value": V, "unit": U}}}`, the format
        /// `--json` writes; figures are matched to cubert's by what they measure.
        #[arg(long, value_name = "FILE")]
        compare: Vec<PathBuf>,
        /// Compares the figures of this earlier `--json` report instead of measuring
        /// (needs --compare).
        #[arg(
            long,
            value_name = "FILE",
            requires = "compare",
            conflicts_with_all = ["quick", "json", "only", "trace", "write_traces"]
        )]
        from: Option<PathBuf>,
    },
    /// Starts N ranks of a process group on this host (`--nproc N -- COMMAND...`), each
    /// with CUBERT_RANK, CUBERT_WORLD_SIZE, CUBERT_LOCAL_RANK, CUBERT_MASTER_ADDR and
    /// NCCL_NVLS_ENABLE=0; stops them all when one fails and exits with its status.
    Launch(LaunchArgs),
}

/// A backend the CLI knows about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The CPU backend (always built in).
    Cpu,
    /// NVIDIA GPUs through CUDA.
    Cuda,
    /// Vulkan, Metal and DX12 devices through wgpu.
    Wgpu,
}

/// A group of figures of `cubert bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Group {
    /// Allocation + free throughput, 4 KiB to 1 GiB.
    Alloc,
    /// Host-to-device (pinned, pageable, slice, file) and device-to-host transfers, and
    /// GB/s against size.
    Transfer,
    /// Launch overhead: back-to-back, submit only, launch + sync, graph replay.
    Launch,
    /// f32 vector add and device-to-device copy bandwidth.
    Bandwidth,
    /// Replay of allocation traces (the anchors' and generated training loops): peak
    /// reserved against peak live, replay time, device allocations.
    Trace,
    /// The kernel language's tensor-core bf16 matmul next to cuBLAS (GPUs with tensor
    /// cores only).
    Mma,
    /// Throughput of the kernel language's transcendental functions (`exp`, `ln`, `sin`,
    /// `tanh`, `powf`) in f32 and f64, next to a plain copy.
    Math,
}

/// The tools under `cubert bench`.
#[derive(Debug, Subcommand)]
pub enum BenchTool {
    /// Autotuned matmul (or reduce-sum) against the default variant, for a few shapes
    /// (speed-up, tuning time).
    Tune(TuneArgs),
    /// All-reduce bus bandwidth (1 MiB to 4 GiB) and peer-copy bandwidth across devices,
    /// every result checked.
    Collective(CollectiveArgs),
}

/// The standard kernel `cubert bench tune` tunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TunedKernel {
    /// f32 matmul, shapes MxKxN.
    Matmul,
    /// f32 row sums, shapes ROWSxCOLS.
    ReduceSum,
}

/// A shape on the command line: positive sizes separated by `x` (MxKxN, ROWSxCOLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

/// Tuning effort of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Level {
    /// High-priority variants only.
    Minimal,
    /// Most variants.
    Balanced,
    /// Every variant.
    Full,
}

/// `cubert bench tune` options.
#[derive(Clone, Debug, Args)]
pub struct TuneArgs {
    /// The kernel tuned.
    #[arg(long, value_enum, default_value_t = TunedKernel::Matmul)]
    pub kernel: TunedKernel,
    /// Shapes, comma-separated: MxKxN for matmul, ROWSxCOLS for reduce-sum [default: a few
    /// shapes sized for the backend].
    #[arg(long, value_delimiter = ',', value_parser = parse_shape, value_name = "SHAPE")]
    pub shapes: Vec<Shape>,
    /// Which variants are tried.
    #[arg(long, value_enum, default_value_t = Level::Full)]
    pub level: Level,
    /// Tuning time budget per shape, in milliseconds (at most one hour).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub budget_ms: u64,
    /// Timed runs of the default and of the tuned variant, alternating.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub reps: u32,
    /// Smaller default shapes and fewer runs: a few seconds.
    #[arg(long)]
    pub quick: bool,
    /// Lists every candidate's median and outcome per shape.
    #[arg(long)]
    pub verbose: bool,
    /// Writes the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// The arguments of `cubert bench collective`.
#[derive(Debug, Args)]
pub struct CollectiveArgs {
    /// Smaller sizes and fewer repetitions.
    #[arg(long)]
    pub quick: bool,
    /// Writes the figures as JSON (the anchors' format) to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Devices taking part [default: every GPU on CUDA, 2 virtual devices on the CPU].
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub devices: Option<u32>,
}

/// The arguments of `cubert launch`.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Processes (ranks) to start on this host, typically one per GPU.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nproc: u32,
    /// Hosts taking part; each runs `cubert launch` with the same --nproc.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nnodes: u32,
    /// This host's index among the hosts (0 is the host of rank 0).
    #[arg(long, default_value_t = 0)]
    pub node_rank: u32,
    /// `host:port` where rank 0 listens for the rendezvous [default: 127.0.0.1 and a free
    /// port; required with --nnodes above 1].
    #[arg(long, value_name = "HOST:PORT")]
    pub master_addr: Option<String>,
    /// Seconds a rank waits for the others at a rendezvous or a collective
    /// (CUBERT_COLLECTIVE_TIMEOUT) [default: 300].
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub timeout: Option<f64>,
    /// The program each rank runs, and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `M×K×N` of `--shapes`: three positive sizes separated by `x`.
fn parse_shape(text: &str) -> Result<Shape, String> {
    let parts: Vec<usize> = text
        .split(['x', 'X'])
        .map(|part| part.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("`{text}` is not a shape (e.g. 512x512x512 or 4096x1024)"))?;
    if (2..=3).contains(&parts.len()) && parts.iter().all(|&size| size > 0) {
        Ok(Shape(parts))
    } else {
        Err(format!(
            "`{text}` is not a shape of two or three positive sizes (e.g. 512x512x512 or \
             4096x1024)"
        ))
    }
}

/// Seconds of `--timeout`: a number that `cubert::distributed::timeout_from_seconds`
/// accepts (finite, above 0, at most a week). Clap quotes the value; the message doesn't
/// repeat it (`1e300` would print as 301 digits).
fn parse_timeout(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| "not a number of seconds".to_string())?;
    match cubert::distributed::timeout_from_seconds(seconds) {
        Ok(_) => Ok(seconds),
        Err(_) => Err(format!(
            "not a timeout: give seconds above 0 and at most {} (one week)",
            cubert::distributed::MAX_TIMEOUT.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn shapes_parse_as_two_or_three_positive_sizes() {
        assert_eq!(parse_shape("512x256x128"), Ok(Shape(vec![512, 256, 128])));
        assert_eq!(parse_shape("4X4X4"), Ok(Shape(vec![4, 4, 4])));
        assert_eq!(parse_shape("512x256"), Ok(Shape(vec![512, 256])));
        assert!(parse_shape("512").is_err());
        assert!(parse_shape("1x2x3x4").is_err());
        assert!(parse_shape("0x1x1").is_err());
        assert!(parse_shape("ax1x1").is_err());
    }

    #[test]
    fn timeouts_are_checked_where_they_are_parsed() {
        assert_eq!(parse_timeout("30"), Ok(30.0));
        assert_eq!(parse_timeout("604800"), Ok(604_800.0));
        for bad in ["0", "-1", "nan", "inf", "1e300", "604801", "", "x"] {
            let error = parse_timeout(bad).unwrap_err();
            assert!(error.len() < 100, "{bad}: {error}");
        }
    }
}
