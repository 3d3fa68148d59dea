//! Pinned (page-locked) host memory, pooled.
//!
//! Pinned buffers are what the copy engines DMA from and to directly. They are expensive to
//! allocate (the OS pins every page), so freed buffers return to a pool and are handed out
//! again for requests of a similar size (a cached buffer serves requests from half its size
//! up to its size). The pool keeps at most `max_cached` bytes; beyond that freed buffers go
//! back to the OS.
//!
//! A pinned buffer is a `Bytes` with `AllocationProperty::Pinned`; dropping it returns the
//! memory to the pool. The pool is thread-safe and works without the server's queue, so
//! `reserve_staging` never waits for queued kernels.

use crate::context::CudaContext;
use crate::driver;
use cubert_runtime::IoError;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::bytes::{AllocationController, AllocationProperty, Bytes};
use cubert_runtime::server::StagingProvider;
use cudarc::driver::sys;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Default most bytes of freed pinned memory kept for reuse.
pub const DEFAULT_MAX_CACHED: usize = 4 << 30;

struct Block {
    ptr: *mut u8,
    size: usize,
}

// SAFETY: a pinned block is plain host memory owned by one holder at a time.
unsafe impl Send for Block {}

#[derive(Default)]
struct PoolState {
    free: BTreeMap<(usize, usize), Block>,
    cached: usize,
    allocated: usize,
}

/// A pool of pinned host buffers. See the module docs.
pub struct PinnedPool {
    context: Arc<CudaContext>,
    state: Mutex<PoolState>,
    max_cached: usize,
}

/// Size class of a request: powers of two up to 64 MiB, then multiples of 64 MiB.
fn size_class(len: usize) -> usize {
    const LARGE: usize = 64 << 20;
    let len = len.max(4096);
    if len <= LARGE {
        len.next_power_of_two()
    } else {
        len.div_ceil(LARGE) * LARGE
    }
}

impl PinnedPool {
    /// A pool allocating in `context`, caching up to `max_cached` bytes.
    pub fn new(context: Arc<CudaContext>, max_cached: usize) -> Arc<Self> {
        Arc::new(Self {
            context,
            state: Mutex::new(PoolState::default()),
            max_cached,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pinned buffer of `len` bytes.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] when pinned memory can't be allocated.
    pub fn take(self: &Arc<Self>, len: usize) -> Result<Bytes, IoError> {
        let class = size_class(len);
        let cached = {
            let mut state = self.state();
            let key = state
                .free
                .range((class, 0)..(class.saturating_mul(2), 0))
                .next()
                .map(|(key, _)| *key);
            key.and_then(|key| state.free.remove(&key))
                .inspect(|block| {
                    state.cached -= block.size;
                })
        };
        let block = match cached {
            Some(block) => block,
            None => self.allocate(class)?,
        };
        let controller = PinnedBuffer {
            block: Some(block),
            pool: self.clone(),
        };
        Bytes::from_controller(Box::new(controller), len)
            .map_err(|_| IoError::invalid("a pinned block is smaller than its request"))
    }

    fn allocate(&self, size: usize) -> Result<Block, IoError> {
        let out_of_memory = |reason: String| IoError::OutOfMemory {
            requested: size as u64,
            reserved: 0,
            free: 0,
            reason,
            backtrace: BackTrace::capture(),
        };
        let _scope = self
            .context
            .scoped()
            .map_err(|failure| out_of_memory(driver::describe(failure.error)))?;
        // The context is current for this scope.
        let ptr =
            driver::memory::host_alloc(size, sys::CU_MEMHOSTALLOC_PORTABLE).map_err(|failure| {
                out_of_memory(format!(
                    "pinned host memory: {}",
                    driver::describe(failure.error)
                ))
            })?;
        self.state().allocated += size;
        Ok(Block {
            ptr: ptr.cast(),
            size,
        })
    }

    fn give_back(&self, block: Block) {
        let mut state = self.state();
        if state.cached + block.size <= self.max_cached {
            state.cached += block.size;
            state.free.insert((block.size, block.ptr as usize), block);
            return;
        }
        state.allocated -= block.size;
        drop(state);
        self.release(block);
    }

    fn release(&self, block: Block) {
        if let Ok(_scope) = self.context.scoped() {
            // SAFETY: the block came from cuMemHostAlloc and is freed once.
            let _ = unsafe { driver::memory::host_free(block.ptr.cast()) };
        }
    }

    /// Frees every cached buffer.
    pub fn trim(&self) {
        let blocks: Vec<Block> = {
            let mut state = self.state();
            state.cached = 0;
            let blocks: Vec<Block> = std::mem::take(&mut state.free).into_values().collect();
            state.allocated -= blocks.iter().map(|b| b.size).sum::<usize>();
            blocks
        };
        for block in blocks {
            self.release(block);
        }
    }
}

impl Drop for PinnedPool {
    fn drop(&mut self) {
        self.trim();
    }
}

/// The staging provider of a server: pinned buffers from its pool.
pub struct PinnedStaging(pub Arc<PinnedPool>);

impl StagingProvider for PinnedStaging {
    fn reserve(&self, sizes: &[usize]) -> Result<Vec<Bytes>, IoError> {
        sizes.iter().map(|&size| self.0.take(size)).collect()
    }
}

struct PinnedBuffer {
    block: Option<Block>,
    pool: Arc<PinnedPool>,
}

impl AllocationController for PinnedBuffer {
    fn property(&self) -> AllocationProperty {
        AllocationProperty::Pinned
    }

    fn memory(&self) -> &[u8] {
        match &self.block {
            // SAFETY: the block is a live pinned allocation of `size` bytes owned by this
            // buffer.
            Some(block) => unsafe { std::slice::from_raw_parts(block.ptr, block.size) },
            None => &[],
        }
    }

    fn memory_mut(&mut self) -> &mut [u8] {
        match &self.block {
            // SAFETY: as above, and `&mut self` gives exclusive access.
            Some(block) => unsafe { std::slice::from_raw_parts_mut(block.ptr, block.size) },
            None => &mut [],
        }
    }
}

// SAFETY: the buffer exclusively owns its block; shared access is read-only.
unsafe impl Sync for PinnedBuffer {}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.give_back(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_and_stay_bounded() {
        assert_eq!(size_class(1), 4096);
        assert_eq!(size_class(5000), 8192);
        assert_eq!(size_class(64 << 20), 64 << 20);
        assert_eq!(size_class((64 << 20) + 1), 128 << 20);
        assert_eq!(size_class(1 << 30), 1 << 30);
    }
}
