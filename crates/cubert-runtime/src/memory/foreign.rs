//! Memory cubert did not allocate: device memory of another library (PyTorch, cuBLAS's
//! workspace, your own `cuMemAlloc`) handed to a client as a [`crate::Handle`].
//!
//! A [`ForeignMemory`] is an address, a size and a release callback. Importing it
//! (`ComputeClient::import_memory`) gives cubert ownership of the range until the callback
//! runs; the callback runs **exactly once**:
//!
//! - after the last handle of the import is dropped *and* the device finished every piece of
//!   work queued on that memory (on CUDA: an event recorded on the stream of its last use,
//!   waited for by the completion thread; on the CPU, whose work is complete once run: at
//!   the next drain of releases);
//! - or, if the import fails, before `import_memory` returns (the value is dropped on the
//!   error path): ownership passed to cubert either way, so nothing leaks.
//!
//! The callback runs on a thread of the device's server (its runner or completion thread):
//! it must not call into a client of that device (it would wait for itself). It may free the
//! memory, signal a channel, drop a tensor of another library.
//!
//! The memory manager never pools imported ranges: they count in neither reserved nor
//! in-use bytes, are never split, and are never given to another allocation.

use std::fmt;

/// The callback of a [`ForeignMemory`], run once when cubert gives the memory back.
type Release = Box<dyn FnOnce() + Send>;

/// A range of device memory owned elsewhere, with the callback that gives it back. See the
/// module docs.
pub struct ForeignMemory {
    address: u64,
    size: u64,
    release: Option<Release>,
}

impl ForeignMemory {
    /// The `size` bytes at device address `address`; `release` runs once cubert is done with
    /// them (see the module docs for when and where).
    ///
    /// Nothing is checked here: `ComputeClient::import_memory` checks what the backend can
    /// (a zero address or size, alignment, on CUDA that the range is device memory of the
    /// client's device).
    pub fn new(address: u64, size: u64, release: impl FnOnce() + Send + 'static) -> Self {
        Self {
            address,
            size,
            release: Some(Box::new(release)),
        }
    }

    /// The device address of the first byte.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for ForeignMemory {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl fmt::Debug for ForeignMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForeignMemory")
            .field("address", &format_args!("{:#x}", self.address))
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn release_runs_once_when_the_memory_is_dropped() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let memory = ForeignMemory::new(0x1000, 64, move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!((memory.address(), memory.size()), (0x1000, 64));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        drop(memory);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
