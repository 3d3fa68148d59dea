//! Device memory as raw storage: `cuMemAlloc` / `cuMemFree` in the server's context.
//!
//! The memory manager above pools these allocations, so in steady state no driver
//! allocation happens. Out of memory is returned as `IoError::OutOfMemory` with the
//! requested size and the device's free memory.

use crate::context::CudaContext;
use crate::driver::Context as _;
use cubert_runtime::IoError;
use cubert_runtime::storage::{ComputeStorage, StorageHandle, StorageId};
use cudarc::driver::sys::{self, CUdeviceptr};
use std::collections::HashMap;
use std::sync::Arc;

/// A range of device memory: what a kernel argument or a copy points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaResource {
    /// Device address of the first byte.
    pub ptr: CUdeviceptr,
    /// Length in bytes.
    pub size: u64,
}

/// Raw device allocations of one context.
pub struct CudaStorage {
    context: Arc<CudaContext>,
    allocations: HashMap<StorageId, (CUdeviceptr, u64)>,
    next_id: u64,
}

impl CudaStorage {
    /// Storage in `context`.
    pub fn new(context: Arc<CudaContext>) -> Self {
        Self {
            context,
            allocations: HashMap::new(),
            next_id: 0,
        }
    }
}

impl ComputeStorage for CudaStorage {
    type Resource = CudaResource;

    fn alignment(&self) -> u64 {
        crate::properties::DEVICE_ALIGNMENT
    }

    fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
        self.context
            .bind()
            .map_err(|failure| failure.into_io_error(size))?;
        let bytes = usize::try_from(size).map_err(|_| IoError::BufferTooBig {
            size,
            max: usize::MAX as u64,
            backtrace: cubert_runtime::backtrace::BackTrace::capture(),
        })?;
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: valid out pointer; the context is current.
        unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) }
            .during("cuMemAlloc")
            .map_err(|failure| failure.into_io_error(size))?;
        self.next_id += 1;
        let id = StorageId(self.next_id);
        self.allocations.insert(id, (ptr, size));
        Ok(id)
    }

    fn dealloc(&mut self, id: StorageId) {
        if let Some((ptr, _)) = self.allocations.remove(&id)
            && self.context.bind().is_ok()
        {
            // SAFETY: `ptr` came from cuMemAlloc in this context and is freed once; the
            // memory manager frees a segment only when no queued work uses it.
            unsafe { sys::cuMemFree_v2(ptr) };
        }
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<CudaResource> {
        let (ptr, size) = *self.allocations.get(&handle.id)?;
        let end = handle.offset.checked_add(handle.size)?;
        (end <= size).then_some(CudaResource {
            ptr: ptr + handle.offset,
            size: handle.size,
        })
    }

    fn free_memory(&self) -> Option<u64> {
        self.context.bind().ok()?;
        cudarc::driver::result::mem_get_info()
            .ok()
            .map(|(free, _)| free as u64)
    }
}

impl Drop for CudaStorage {
    fn drop(&mut self) {
        if self.context.bind().is_err() {
            return;
        }
        for (ptr, _) in self.allocations.values() {
            // SAFETY: each pointer came from cuMemAlloc in this context and is freed once.
            unsafe { sys::cuMemFree_v2(*ptr) };
        }
    }
}
