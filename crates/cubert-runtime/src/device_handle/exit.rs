//! Holding every device while the process exits.
//!
//! When `main` returns (or `std::process::exit` runs), other threads keep running while
//! the C library runs the exit handlers and the drivers tear themselves down. A runner
//! still working through queued work then calls into a driver that is being destroyed:
//! on an H200 with NVIDIA's Vulkan driver, a program that queued launches on a registered
//! wgpu client and returned from `main` without a sync crashed (SIGSEGV on the runner
//! thread) in 4 runs of 5 and hung in the fifth.
//!
//! So every threaded device handle is listed here, and the first one registers an
//! `atexit` handler. Registered after the driver was loaded (the server that started
//! first has already opened it), it runs before the driver's own teardown: for each
//! handle still alive it waits, up to [`EXIT_WAIT`] in all, for the server to be free
//! (the task running on it to end) and then keeps it locked, so no thread reaches the
//! driver through a server again. Work still queued is abandoned, as the exit would
//! abandon it anyway; a thread that uses a device after that blocks until the process
//! ends. A handle dropped before the exit has joined its runner already (see the drop of
//! `HandleInner`) and is skipped.

use std::sync::{Mutex, Once, PoisonError, Weak};
use std::time::{Duration, Instant};

/// How long the exit handler waits, in all, for servers busy with a task.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// A device handle the exit handler can hold.
pub(super) trait HoldAtExit: Send + Sync {
    /// Waits until `deadline` for the server to be free, then keeps it locked for the rest
    /// of the process. Returns whether it holds it.
    fn hold(&self, deadline: Instant) -> bool;
}

/// The threaded handles created so far (dead ones are pruned as handles are added).
static HANDLES: Mutex<Vec<Weak<dyn HoldAtExit>>> = Mutex::new(Vec::new());

/// Lists `handle` for the exit handler (registering the handler the first time).
pub(super) fn hold_at_exit(handle: Weak<dyn HoldAtExit>) {
    static HANDLER: Once = Once::new();
    {
        let mut handles = HANDLES.lock().unwrap_or_else(PoisonError::into_inner);
        handles.retain(|handle| handle.strong_count() > 0);
        handles.push(handle);
    }
    HANDLER.call_once(|| {
        // SAFETY: `hold_all` takes no argument, returns nothing and never unwinds (it
        // catches every panic), as `atexit` requires of its handlers.
        if unsafe { libc::atexit(hold_all) } != 0 {
            tracing::warn!("can't register the exit handler: runners may still be busy at exit");
        }
    });
}

/// The exit handler: holds every live device.
extern "C" fn hold_all() {
    // A panic can't cross the C boundary; whatever is left is left to the exit.
    let _ = std::panic::catch_unwind(|| {
        let deadline = Instant::now() + EXIT_WAIT;
        let handles = std::mem::take(&mut *HANDLES.lock().unwrap_or_else(PoisonError::into_inner));
        for handle in handles.iter().filter_map(Weak::upgrade) {
            if !handle.hold(deadline) {
                tracing::warn!("a device stayed busy at exit; its runner may still be working");
            }
        }
    });
}
