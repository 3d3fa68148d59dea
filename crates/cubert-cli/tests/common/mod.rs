//! Running the `cubert` binary from the CLI's integration tests.

use std::path::Path;
use std::process::{Command, Output};

/// A command for the `cubert` binary with every `CUBERT_*` variable of the caller removed,
/// so the test's environment can't change its settings. `TEST_CUBERT_BIN` points at the
/// binary when the tests run away from the build tree (`scripts/gpu-test` bundles both).
pub fn cubert_command() -> Command {
    let binary =
        std::env::var_os("TEST_CUBERT_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_cubert").into());
    let mut command = Command::new(binary);
    for (name, _) in std::env::vars_os() {
        if name.as_encoded_bytes().starts_with(b"CUBERT_") {
            command.env_remove(name);
        }
    }
    command
}

/// Runs `cubert args` in `dir` and collects its output.
#[allow(dead_code, reason = "not every test binary runs cubert this way")]
pub fn cubert(dir: &Path, args: &[&str]) -> std::io::Result<Output> {
    cubert_command().args(args).current_dir(dir).output()
}
