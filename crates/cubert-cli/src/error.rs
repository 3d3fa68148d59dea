//! The error every command returns: a message and the process exit code it maps to.
//!
//! Any runtime error (`ServerError`, `IoError`, `LaunchError`, I/O, JSON...) converts into a
//! [`CliError`] with exit code 1 through `?`. An unusable backend is exit code 2, like a
//! usage error.

use std::fmt;

/// Exit code of a failed check or a runtime error.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code of a backend that isn't built into this binary (or a bad invocation).
pub const EXIT_USAGE: u8 = 2;

/// A failure of a command: what to print and how to exit.
#[derive(Debug)]
pub struct CliError {
    /// Process exit code.
    pub code: u8,
    /// What went wrong, in one or more lines.
    pub message: String,
}

impl CliError {
    /// An error with exit code 1.
    pub fn failure(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILURE,
            message: message.into(),
        }
    }

    /// An error with exit code 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// The same error with `context` in front of the message.
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            code: self.code,
            message: format!("{context}: {}", self.message),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

// `CliError` deliberately doesn't implement `std::error::Error`, so every error type can
// convert into it (as `anyhow` does).
impl<E: std::error::Error> From<E> for CliError {
    fn from(error: E) -> Self {
        Self::failure(error.to_string())
    }
}

/// The result of a command.
pub type CliResult<T> = Result<T, CliError>;
