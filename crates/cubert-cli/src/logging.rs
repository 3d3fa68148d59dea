//! The CLI's log output: a `tracing` subscriber that prints cubert's events (and the `log`
//! records of its dependencies) as text lines.
//!
//! The filter is `RUST_LOG` when it is set (the usual `target=level,...` directives), else
//! `[logging] level` of the configuration. Lines go where `[logging] output` says; a log file
//! that can't be opened is reported once and the lines go to standard error instead.

use cubert::config::{LogOutput, LoggingConfig};
use std::fs::OpenOptions;
use std::io::IsTerminal;
use std::sync::Mutex;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber for the whole process. Does nothing when one is already set.
pub fn install(config: &LoggingConfig) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => {
            EnvFilter::try_new(&directives).unwrap_or_else(|error| {
                eprintln!("cubert: RUST_LOG={directives:?} is not a valid filter ({error}); using `[logging] level`");
                EnvFilter::new(&config.level)
            })
        }
        _ => EnvFilter::new(&config.level),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true);
    let installed = match &config.output {
        LogOutput::Stdout => builder
            .with_ansi(std::io::stdout().is_terminal())
            .with_writer(std::io::stdout)
            .try_init(),
        LogOutput::Stderr => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
        LogOutput::File(path) => match OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => builder
                .with_ansi(false)
                .with_writer(Mutex::new(file))
                .try_init(),
            Err(error) => {
                eprintln!(
                    "cubert: logging.output = {}: can't be opened for writing ({error}); logging to stderr",
                    path.display()
                );
                builder
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr)
                    .try_init()
            }
        },
    };
    // Failing means a subscriber is already installed (a test harness, say): keep it.
    let _ = installed;
}
