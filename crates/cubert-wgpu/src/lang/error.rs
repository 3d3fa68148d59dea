//! Why a kernel can't be printed as WGSL.

use std::fmt;

/// Why the generator can't print a kernel: IR it doesn't know how to lower, or (see
/// [`GenerateError::is_unsupported`]) a type or operation the target adapter can't run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateError {
    message: String,
    unsupported: bool,
}

impl GenerateError {
    /// IR the generator can't print (a generator or expansion bug).
    pub(super) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            unsupported: false,
        }
    }

    /// A kernel the target adapter can't run (a missing feature).
    pub(super) fn unsupported(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            unsupported: true,
        }
    }

    /// The same error, its message prefixed with `context` (`kernel `name`: ...`).
    pub(super) fn context(self, context: &str) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
            unsupported: self.unsupported,
        }
    }

    /// Whether the kernel is valid but needs something the target adapter lacks (64-bit
    /// types without `shader_int64`/`shader_f64`, plane operations without `subgroups`, or
    /// an `f64` function WGSL has no implementation of): the server reports it as
    /// unsupported rather than as a failure.
    pub fn is_unsupported(&self) -> bool {
        self.unsupported
    }
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GenerateError {}

/// `Err(GenerateError::new(message))`.
pub(super) fn fail<T>(message: impl Into<String>) -> Result<T, GenerateError> {
    Err(GenerateError::new(message))
}
