//! Importing memory cubert did not allocate ([`ComputeClient::import_memory`]): another
//! library's device buffer becomes a cubert [`Handle`] that kernels, copies, reads and
//! collectives use like any other, without a copy.
//!
//! The handle is minted here, on the caller's thread; the import runs on the device in
//! stream order (after the work queued before it), where the backend checks the range and
//! the memory manager binds the id to it unpooled (`MemoryManager::adopt`). When the last
//! handle is dropped, the memory goes back through its release callback once the device is
//! done with it ([`ForeignMemory`] says when, and on which thread). The way out is
//! `cubert_cuda::interop::with_device_buffers`, which lends a handle's address to other
//! libraries for the duration of a closure.

use super::ComputeClient;
use crate::error::{IoError, ServerError};
use crate::handle::Handle;
use crate::layout::MemoryLayoutPolicy;
use crate::memory::ForeignMemory;
use crate::runtime::Runtime;
use crate::server::ComputeServer;

impl<R: Runtime> ComputeClient<R> {
    /// Makes `memory` (allocated outside cubert) a handle of this client's device, used on
    /// the client's stream. Its release callback runs exactly once: after the last handle
    /// is dropped and the device finished the work queued on it, or, if the import fails,
    /// before this returns (see [`ForeignMemory`]).
    ///
    /// Supported where [`crate::properties::Features::memory_import`] says so: CUDA device
    /// memory (`cuMemAlloc`, another library's allocator, a `cuMemCreate` mapping) of this
    /// client's device, checked with the driver's pointer attributes; host memory on the
    /// CPU backend, whose devices are host memory.
    ///
    /// ```
    /// # use cubert_runtime::memory::ForeignMemory;
    /// # use std::alloc::{Layout, alloc_zeroed, dealloc};
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # let client = cubert_cpu::default_client()?;
    /// // Memory of "another library": 64 f32, 64-byte aligned (the CPU device's alignment).
    /// let layout = Layout::from_size_align(256, 64)?;
    /// let address = unsafe { alloc_zeroed(layout) } as usize;
    /// let released = Arc::new(AtomicBool::new(false));
    /// let flag = released.clone();
    /// let memory = ForeignMemory::new(address as u64, 256, move || {
    ///     unsafe { dealloc(address as *mut u8, layout) };
    ///     flag.store(true, Ordering::SeqCst);
    /// });
    /// // SAFETY: the 256 bytes are ours, valid until the callback frees them, and nothing
    /// // else touches them meanwhile.
    /// let handle = unsafe { client.import_memory(memory) }?;
    /// client.write(&handle, cubert_runtime::Bytes::from_elems(vec![1.5f32; 64]))?;
    /// assert_eq!(client.read_one(handle.clone())?.to_elems::<f32>()[63], 1.5);
    /// drop(handle);
    /// client.sync()?; // the release is seen at the device's next step
    /// assert!(released.load(Ordering::SeqCst));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Safety
    /// `memory.address()` must be the start of `memory.size()` bytes of memory this
    /// client's device can read and write (device memory of this device on CUDA, host memory
    /// on the CPU), valid until the release callback runs, and nothing outside cubert may
    /// use them meanwhile unless ordered with cubert's work (through
    /// `cubert_cuda::interop::with_device_buffers`). cubert checks what the driver can tell
    /// (CUDA: that the range is device memory of this device); it can't check the rest.
    ///
    /// # Errors
    /// [`ServerError::Io`] with [`IoError::InvalidArgument`] for a zero address or size, an
    /// address not aligned to the device's alignment, or (CUDA) a range that is not device
    /// memory of this device; [`ServerError::Unsupported`] where the backend can't import
    /// memory (wgpu). The release callback has run when an error is returned.
    pub unsafe fn import_memory(&self, memory: ForeignMemory) -> Result<Handle, ServerError> {
        if memory.address() == 0 || memory.size() == 0 {
            return Err(IoError::invalid(format!(
                "can't import foreign memory at {:#x} of {} bytes: the address and the size \
                 must not be 0",
                memory.address(),
                memory.size()
            ))
            .into());
        }
        if !self.features().memory_import {
            return Err(ServerError::unsupported(
                "importing foreign memory",
                R::name(),
            ));
        }
        let stream = self.stream_id();
        let handle = self
            .utilities
            .layout_policy
            .handles()
            .mint(stream, memory.size());
        let id = handle.id();
        self.call(move |server| server.import_memory(id, memory, stream))??;
        Ok(handle)
    }
}
