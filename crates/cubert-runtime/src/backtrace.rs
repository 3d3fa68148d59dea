//! A cheaply clonable backtrace attached to runtime errors.
//!
//! Capture follows the standard library's rules (`RUST_BACKTRACE` / `RUST_LIB_BACKTRACE`), so
//! with the variables unset a capture costs almost nothing. Errors are serializable; the
//! backtrace is not part of the serialized form and deserializes as "not captured".

use std::backtrace::{Backtrace, BacktraceStatus};
use std::fmt;
use std::sync::Arc;

/// A backtrace captured where an error was created.
#[derive(Clone, Default)]
pub struct BackTrace {
    inner: Option<Arc<Backtrace>>,
}

impl BackTrace {
    /// Captures the current backtrace if the environment enables backtraces.
    pub fn capture() -> Self {
        let backtrace = Backtrace::capture();
        match backtrace.status() {
            BacktraceStatus::Captured => Self {
                inner: Some(Arc::new(backtrace)),
            },
            _ => Self { inner: None },
        }
    }

    /// A backtrace that holds nothing (used for deserialized errors).
    pub const fn none() -> Self {
        Self { inner: None }
    }

    /// Whether frames were captured.
    pub fn is_captured(&self) -> bool {
        self.inner.is_some()
    }
}

impl fmt::Display for BackTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Some(backtrace) => write!(f, "{backtrace}"),
            None => f.write_str("(backtrace not captured; set RUST_BACKTRACE=1 to capture it)"),
        }
    }
}

impl fmt::Debug for BackTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
