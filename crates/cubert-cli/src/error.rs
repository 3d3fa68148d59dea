//! The error every command returns, an [`anyhow::Error`], and the exit code it maps to.
//!
//! Any runtime error (`ServerError`, `IoError`, `LaunchError`, I/O, JSON...) converts into
//! it through `?`, and `.context(...)` says what was being done. A bad invocation, or a
//! backend that isn't built into this binary, is made by [`usage`]: it carries a
//! [`UsageError`] that [`exit_code`] finds and maps to exit code 2; everything else is 1.

use std::fmt;

/// Exit code of a failed check or a runtime error.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code of a backend that isn't built into this binary (or a bad invocation).
pub const EXIT_USAGE: u8 = 2;

/// The result of a command.
pub type CliResult<T> = anyhow::Result<T>;

/// The marker of a bad invocation inside an error's chain (see [`exit_code`]).
#[derive(Debug)]
pub struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A runtime failure (exit code 1) saying `message`.
pub fn failure(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::msg(message.into())
}

/// A bad invocation (exit code 2) saying `message`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// The process exit code of `error`: 2 when a [`UsageError`] is in its chain, else 1.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    if error.chain().any(|cause| cause.is::<UsageError>()) {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn usage_errors_keep_exit_code_two_under_context() {
        let error = Err::<(), _>(usage("--size is too large"))
            .context("demo")
            .unwrap_err();
        assert_eq!(exit_code(&error), EXIT_USAGE);
        assert_eq!(format!("{error:#}"), "demo: --size is too large");
        assert_eq!(exit_code(&failure("no device")), EXIT_FAILURE);
        let io = anyhow::Error::from(std::io::Error::other("disk full"));
        assert_eq!(exit_code(&io), EXIT_FAILURE);
    }
}
