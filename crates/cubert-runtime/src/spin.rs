//! Waiting for a message: spin briefly, then sleep.
//!
//! Waking a sleeping thread costs from a few microseconds to ~100 µs on virtual machines,
//! which would dominate a launch + sync round trip. The runner and threads waiting for a
//! reply therefore poll for [`SPIN`] before blocking: a busy device answers while they
//! spin, an idle one costs that much CPU once and then sleeps.
//!
//! A leaf module (it uses only `std`), so that everything that waits can share it without
//! an import circle: the device handle's runner and replies, `future::block_on`, the local
//! collective groups, and backends' completion threads. `device_handle` re-exports it under
//! its old path.

use std::sync::mpsc::{Receiver, RecvError, TryRecvError};
use std::time::{Duration, Instant};

/// How long a waiting thread polls before it sleeps.
pub const SPIN: Duration = Duration::from_micros(30);

/// Whether spinning can help: not with a single core, where the spinner would only keep
/// the thread it waits for from running.
pub fn spinning_helps() -> bool {
    static MULTI_CORE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MULTI_CORE
        .get_or_init(|| std::thread::available_parallelism().is_ok_and(|cores| cores.get() > 1))
}

/// Receives a message, polling for [`SPIN`] before blocking.
///
/// # Errors
/// [`RecvError`] when every sender is gone.
pub fn recv_spinning<T>(receiver: &Receiver<T>) -> Result<T, RecvError> {
    if !spinning_helps() {
        return receiver.recv();
    }
    let start = Instant::now();
    loop {
        match receiver.try_recv() {
            Ok(value) => return Ok(value),
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) => {}
        }
        if start.elapsed() >= SPIN {
            return receiver.recv();
        }
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}
