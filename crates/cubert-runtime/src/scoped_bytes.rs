//! [`Bytes`] that borrow a caller's slice for the length of a call, without copying it.
//!
//! `create_from_slice` used to copy the slice into a fresh `Vec` before the upload: for a
//! large buffer that second copy (and the page faults of the fresh memory) cost more than
//! the upload itself. [`Bytes::scoped`] instead lends the slice to a closure as a `Bytes`
//! and, when the closure returns, waits until that `Bytes` has been dropped: wherever it
//! went (a runner thread's queue, a transfer in flight), nothing can read the slice after
//! `scoped` returns, the same guarantee `std::thread::scope` gives for borrowed data.
//!
//! The borrowed memory is read-only. A holder that asks for it mutably gets a private copy
//! first (copy on write), so the caller's slice is never written.
//!
//! How it waits: the controller owns one side of a flag and a condition variable; its
//! `Drop` sets the flag (an atomic; the lock and the signal only where the waiter already
//! waits). A guard in `scoped` waits for the flag even when the closure
//! panics, so unwinding can't end the borrow early. A `Bytes` that is leaked
//! (`std::mem::forget`) is never dropped, and `scoped` then waits forever: a hang, never a
//! read of freed memory.

use crate::bytes::{AllocationController, AllocationProperty, Bytes};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Set once the lent `Bytes` is gone. The flag is atomic so that the common case, a
/// `Bytes` dropped before `scoped` returns (an upload written on the caller's thread, or
/// done by the time the closure returns), costs neither side a lock: the setter locks and
/// signals only if the waiter has said it waits.
#[derive(Default)]
struct Released {
    done: AtomicBool,
    waiting: AtomicBool,
    lock: Mutex<()>,
    signal: Condvar,
}

impl Released {
    fn set(&self) {
        self.done.store(true, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            // The waiter holds the lock from saying it waits until it sleeps on the
            // condition variable, so this signal can't fall between its check and its sleep.
            let _lock = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.signal.notify_all();
        }
    }

    fn wait(&self) {
        if self.done.load(Ordering::SeqCst) {
            return;
        }
        let mut lock = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.store(true, Ordering::SeqCst);
        // Either the setter stored `done` before this load (seen here), or it loads
        // `waiting` after the store above (both sequentially consistent) and signals.
        while !self.done.load(Ordering::SeqCst) {
            lock = self
                .signal
                .wait(lock)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Memory of a slice the [`Bytes::scoped`] call keeps alive, or a private copy of it once
/// someone asked to write.
enum Region {
    Borrowed { ptr: *const u8, len: usize },
    Owned(Vec<u8>),
}

struct ScopedController {
    region: Region,
    released: Arc<Released>,
}

// SAFETY: the borrowed region is only ever read through `&self` (shared reads of a `&[u8]`
// from any thread are fine, `[u8]: Sync`), and `Bytes::scoped` keeps the slice borrowed
// until this controller is dropped; the owned region is a plain `Vec<u8>`.
unsafe impl Send for ScopedController {}
// SAFETY: as for `Send`: `&self` only gives shared reads of the region.
unsafe impl Sync for ScopedController {}

impl AllocationController for ScopedController {
    fn property(&self) -> AllocationProperty {
        AllocationProperty::Native
    }

    fn memory(&self) -> &[u8] {
        match &self.region {
            // SAFETY: `ptr`/`len` come from a `&[u8]` that `Bytes::scoped` keeps borrowed
            // until this controller is dropped (it waits for `released`), so the memory is
            // valid and unchanged for as long as `self` lives.
            Region::Borrowed { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            Region::Owned(data) => data,
        }
    }

    fn memory_mut(&mut self) -> &mut [u8] {
        if let Region::Borrowed { .. } = self.region {
            self.region = Region::Owned(self.memory().to_vec());
        }
        match &mut self.region {
            Region::Owned(data) => data,
            Region::Borrowed { .. } => &mut [],
        }
    }
}

impl Drop for ScopedController {
    fn drop(&mut self) {
        self.released.set();
    }
}

/// Waits for the lent `Bytes` when dropped: on return and while unwinding alike.
struct WaitOnDrop(Arc<Released>);

impl Drop for WaitOnDrop {
    fn drop(&mut self) {
        self.0.wait();
    }
}

impl Bytes {
    /// Runs `f` with a `Bytes` that views `slice` without copying it, and returns once that
    /// `Bytes` has been dropped, wherever `f` sent it (another thread's queue included).
    /// Writing through the `Bytes` writes a private copy, never `slice`.
    ///
    /// Used by `create_from_slice`: the upload reads the caller's memory directly.
    ///
    /// Blocks until the `Bytes` is dropped; if it is leaked with `std::mem::forget`, this
    /// never returns.
    pub fn scoped<T>(slice: &[u8], f: impl FnOnce(Bytes) -> T) -> T {
        let released = Arc::new(Released::default());
        let guard = WaitOnDrop(released.clone());
        let controller = ScopedController {
            region: Region::Borrowed {
                ptr: slice.as_ptr(),
                len: slice.len(),
            },
            released,
        };
        // The region is exactly `slice.len()` long, so this never falls back to the copy.
        let bytes = Bytes::from_controller(Box::new(controller), slice.len())
            .unwrap_or_else(|_| Bytes::from_slice(slice));
        let result = f(bytes);
        drop(guard);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn scoped_bytes_view_the_slice_without_copying() {
        let data = vec![7u8; 4096];
        let pointer = Bytes::scoped(&data, |bytes| {
            assert_eq!(&bytes[..], &data[..]);
            bytes.as_ptr()
        });
        assert_eq!(pointer, data.as_ptr());
    }

    #[test]
    fn scoped_waits_until_another_thread_drops_the_bytes() {
        let data = vec![1u8, 2, 3, 4];
        let (sender, receiver) = mpsc::channel::<Bytes>();
        let worker = std::thread::spawn(move || {
            let bytes = receiver.recv().unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let seen = bytes.to_vec();
            drop(bytes);
            seen
        });
        let started = std::time::Instant::now();
        Bytes::scoped(&data, |bytes| sender.send(bytes).unwrap());
        // `scoped` returned, so the worker has dropped the bytes: it slept first.
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(worker.join().unwrap(), data);
    }

    #[test]
    fn writing_scoped_bytes_leaves_the_slice_untouched() {
        let data = vec![5u8; 16];
        let copy = Bytes::scoped(&data, |mut bytes| {
            bytes[0] = 9;
            bytes.to_vec()
        });
        assert_eq!(copy[0], 9);
        assert_eq!(data, vec![5u8; 16]);
    }

    #[test]
    fn scoped_waits_for_the_bytes_even_when_the_closure_panics() {
        let data = vec![3u8; 8];
        let (sender, receiver) = mpsc::channel::<Bytes>();
        let worker = std::thread::spawn(move || {
            let bytes = receiver.recv().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            bytes.to_vec()
        });
        let started = std::time::Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Bytes::scoped(&data, |bytes| {
                sender.send(bytes).unwrap();
                panic!("the closure fails after lending the bytes");
            })
        }));
        assert!(outcome.is_err());
        // The worker, which sleeps before dropping the bytes, was done with them before
        // the unwinding left `scoped`.
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert_eq!(worker.join().unwrap(), data);
    }
}
