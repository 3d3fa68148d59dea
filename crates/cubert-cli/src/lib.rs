//! The command line of the `cubert` binary, as a library: the clap types ([`args`]) and
//! [`parse_args`], and nothing else. It exists so the parser can be fuzzed
//! (`fuzz/fuzz_targets/cli_args.rs`); the commands themselves are the binary's
//! (`src/main.rs`), which compiles the same `args` module as one of its own.

pub mod args;

pub use args::Cli;
use clap::Parser;
use std::ffi::OsString;

/// Parses a command line as `cubert` does (`args` starts with the program name), without
/// printing or exiting.
///
/// # Errors
/// Clap's error for a command line the binary refuses (its exit code would be 2), or for
/// `--help` and `--version` (the binary prints the text and exits 0).
pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    Cli::try_parse_from(args)
}
