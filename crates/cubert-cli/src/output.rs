//! Writing to standard output without panicking.
//!
//! `println!` panics when standard output is gone (`cubert bench | head -3` closes the pipe
//! early). The `outln!` and `out!` macros write through [`write_out`] instead: the first
//! failed write is remembered, later output is dropped, and the command carries on (so
//! temporary files are still removed); `main` then exits with code 1.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static BROKEN: AtomicBool = AtomicBool::new(false);

/// Writes `args` to standard output, unless a previous write failed.
pub fn write_out(args: fmt::Arguments<'_>) {
    if BROKEN.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_fmt(args)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        BROKEN.store(true, Ordering::Relaxed);
    }
}

/// Whether a write to standard output failed.
pub fn stdout_failed() -> bool {
    BROKEN.load(Ordering::Relaxed)
}

/// Writes a line to standard error, ignoring failure.
pub fn write_err(args: fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_fmt(args);
    let _ = stderr.write_all(b"\n");
}

/// `outln!` that never panics (see the module docs).
macro_rules! outln {
    () => {
        $crate::output::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that never panics (see the module docs).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!($($arg)*))
    };
}
