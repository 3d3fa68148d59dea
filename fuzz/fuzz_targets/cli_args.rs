//! The `cubert` command line (`cubert_cli::parse_args`, the binary's clap parser): the input
//! is split at NUL bytes into arguments, each an OS string of raw bytes (so arguments that
//! are not UTF-8 are included), after the program name.
//!
//! Properties: parsing never panics, and neither does rendering its error (clap's errors,
//! `--help` and `--version` included, are fine); a command line that parses carries only
//! values in their documented ranges: `demo --size` in 1..=2^31, `launch --nproc` and
//! `--nnodes` in 1..=4096, a `--timeout` that is finite, above 0 and at most a week (what
//! `timeout_from_seconds` accepts), a command after `--`; `bench tune` shapes of positive
//! sizes, `--budget-ms` in 1..=3,600,000, `--reps` in 1..=10,000; `bench collective
//! --devices` in 2..=64; `bench --from` only with `--compare` and without the measuring
//! options.

#![no_main]

use cubert_cli::args::{BenchTool, Command};
use libfuzzer_sys::fuzz_target;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Most arguments taken from one input.
const MAX_ARGS: usize = 64;

fn check(command: &Command) {
    match command {
        Command::Info => {}
        Command::Demo { size } => assert!((1..=1 << 31).contains(size), "--size {size}"),
        Command::Launch(args) => {
            assert!((1..=4096).contains(&args.nproc), "--nproc {}", args.nproc);
            assert!(
                (1..=4096).contains(&args.nnodes),
                "--nnodes {}",
                args.nnodes
            );
            if let Some(seconds) = args.timeout {
                assert!(
                    seconds.is_finite() && seconds > 0.0,
                    "--timeout {seconds} parsed"
                );
                assert!(
                    cubert_runtime::distributed::timeout_from_seconds(seconds).is_ok(),
                    "--timeout {seconds} parsed"
                );
            }
            assert!(!args.command.is_empty(), "launch without a command");
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
            if from.is_some() {
                assert!(!compare.is_empty(), "--from without --compare");
                assert!(
                    !quick && json.is_none() && only.is_none() && trace.is_none(),
                    "--from with a measuring option"
                );
            }
            match tool {
                None => {}
                Some(BenchTool::Tune(args)) => {
                    for &(m, k, n) in &args.shapes {
                        assert!(m > 0 && k > 0 && n > 0, "shape {m}x{k}x{n}");
                    }
                    assert!((1..=3_600_000).contains(&args.budget_ms), "{args:?}");
                    assert!((1..=10_000).contains(&args.reps), "{args:?}");
                }
                Some(BenchTool::Collective(args)) => {
                    if let Some(devices) = args.devices {
                        assert!((2..=64).contains(&devices), "--devices {devices}");
                    }
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let args: Vec<OsString> = std::iter::once(OsString::from("cubert"))
        .chain(
            data.split(|byte| *byte == 0)
                .take(MAX_ARGS)
                .map(|arg| OsString::from_vec(arg.to_vec())),
        )
        .collect();
    match cubert_cli::parse_args(&args) {
        Ok(cli) => check(&cli.command),
        Err(error) => {
            let message = error.render().to_string();
            assert!(
                !message.is_empty(),
                "an empty message for {:?}",
                error.kind()
            );
        }
    }
});
