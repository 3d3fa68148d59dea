//! Out-of-bounds status counters of checked launches.
//!
//! Every checked launch gets a 32-bit counter (a slot of a [`StatusBlock`]); the prelude's
//! accessors add 1 to it for every out-of-bounds access. Blocks live in mapped pinned host
//! memory: a kernel's (rare) increment goes straight to host memory, so checking a block
//! costs no device work at all — once the device has passed the launches, the host reads
//! the counters, turns non-zero ones into `ServerError::OutOfBounds` for the kernels that
//! owned them, zeroes them and puts the block back in the pool.
//!
//! Each stream fills its own current block. A sync or read on the stream detaches the block
//! and hands it, with the event that follows the launches, to whoever waits for that event;
//! a full block is detached the same way. Launches after that take a fresh block, so a block
//! is never reused while a kernel may still write it.

use crate::context::CudaContext;
use crate::driver::{self, DriverFailure};
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::memory::FastMap;
use cubert_runtime::{ServerError, StreamId};
use cudarc::driver::sys::{self, CUdeviceptr};
use std::sync::{Arc, Mutex, PoisonError};

/// Slots per block.
pub const SLOTS: usize = 1024;

/// A block of counters in mapped pinned memory, with the kernel of each used slot.
pub struct StatusBlock {
    host: *mut u32,
    device: CUdeviceptr,
    kernels: Vec<Arc<str>>,
    pool: Arc<BlockPool>,
}

// SAFETY: the block exclusively owns its mapped allocation; the host reads it only after the
// device has finished the launches that write it.
unsafe impl Send for StatusBlock {}

impl StatusBlock {
    /// Whether every slot is used.
    pub fn is_full(&self) -> bool {
        self.kernels.len() >= SLOTS
    }

    /// Whether no slot is used.
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// The device address of a fresh slot for a launch of `kernel`.
    fn slot(&mut self, kernel: &Arc<str>) -> u64 {
        let index = self.kernels.len().min(SLOTS - 1);
        if self.kernels.len() < SLOTS {
            self.kernels.push(kernel.clone());
        }
        self.device + (index as u64) * 4
    }

    /// The out-of-bounds errors of the block's launches, in launch order, leaving the
    /// slots used (a graph's block is checked after every replay). Call only once the device
    /// has finished the launches. The counters are zeroed.
    pub fn read_errors(&mut self) -> Vec<ServerError> {
        let mut errors = Vec::new();
        for (index, kernel) in self.kernels.iter().enumerate() {
            // SAFETY: `index < SLOTS`: the slot lies inside the mapped allocation, which the
            // device no longer writes (its launches are complete).
            let count = unsafe {
                let slot = self.host.add(index);
                let count = slot.read_volatile();
                slot.write_volatile(0);
                count
            };
            if count > 0 {
                errors.push(ServerError::OutOfBounds {
                    kernel: kernel.to_string(),
                    accesses: u64::from(count),
                    first: "the device counts out-of-bounds accesses; launch in validate mode \
                            to print each one"
                        .to_string(),
                    backtrace: BackTrace::capture(),
                });
            }
        }
        errors
    }

    /// Like [`Self::read_errors`], then frees the slots: the block goes back to its pool
    /// when dropped.
    pub fn take_errors(&mut self) -> Vec<ServerError> {
        let errors = self.read_errors();
        self.kernels.clear();
        errors
    }
}

impl Drop for StatusBlock {
    fn drop(&mut self) {
        // A block with unchecked slots may still be written by running kernels: its memory
        // stays out of the pool (freed with the pool).
        if self.kernels.is_empty() {
            self.pool
                .free
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((self.host as usize, self.device));
        }
    }
}

/// The allocations behind status blocks, shared with whoever checks them.
pub struct BlockPool {
    context: Arc<CudaContext>,
    free: Mutex<Vec<(usize, CUdeviceptr)>>,
    all: Mutex<Vec<usize>>,
}

// SAFETY: the pool hands out raw addresses of allocations it owns; access is behind mutexes.
unsafe impl Send for BlockPool {}
// SAFETY: as above.
unsafe impl Sync for BlockPool {}

impl BlockPool {
    fn new(context: Arc<CudaContext>) -> Arc<Self> {
        Arc::new(Self {
            context,
            free: Mutex::new(Vec::new()),
            all: Mutex::new(Vec::new()),
        })
    }

    fn take(self: &Arc<Self>) -> Result<StatusBlock, DriverFailure> {
        let reused = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let (host, device) = match reused {
            Some(entry) => entry,
            None => {
                let _scope = self.context.scoped()?;
                // The context is current for this scope.
                let host = driver::memory::host_alloc(
                    SLOTS * 4,
                    sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
                )?;
                // SAFETY: `host` holds SLOTS * 4 bytes; zero them before any kernel sees them.
                unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, SLOTS * 4) };
                // `host` is a mapped pinned allocation of this context.
                let device = driver::memory::host_device_pointer(host)?;
                self.all
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(host as usize);
                (host as usize, device)
            }
        };
        Ok(StatusBlock {
            host: host as *mut u32,
            device,
            kernels: Vec::new(),
            pool: self.clone(),
        })
    }
}

impl Drop for BlockPool {
    fn drop(&mut self) {
        let Ok(_scope) = self.context.scoped() else {
            return;
        };
        for host in self
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            // SAFETY: each allocation came from cuMemHostAlloc and is freed once, after every
            // block using it is gone (blocks hold the pool).
            let _ = unsafe { driver::memory::host_free(host as *mut std::ffi::c_void) };
        }
    }
}

/// The current status block of each stream.
pub struct StatusBlocks {
    pool: Arc<BlockPool>,
    current: FastMap<StreamId, StatusBlock>,
}

impl StatusBlocks {
    /// No blocks yet; one is taken per stream on its first checked launch.
    pub fn new(context: Arc<CudaContext>) -> Self {
        Self {
            pool: BlockPool::new(context),
            current: FastMap::default(),
        }
    }

    /// Whether `stream`'s current block has no free slot (detach it first).
    pub fn is_full(&self, stream: StreamId) -> bool {
        self.current.get(&stream).is_some_and(StatusBlock::is_full)
    }

    /// A counter for a checked launch of `kernel` on `stream`: its device address.
    ///
    /// # Errors
    /// The driver's error when a block can't be allocated.
    pub fn slot(&mut self, stream: StreamId, kernel: &Arc<str>) -> Result<u64, DriverFailure> {
        if !self.current.contains_key(&stream) {
            let block = self.pool.take()?;
            self.current.insert(stream, block);
        }
        match self.current.get_mut(&stream) {
            Some(block) => Ok(block.slot(kernel)),
            None => Err(DriverFailure::invalid_value("status block")),
        }
    }

    /// Detaches `stream`'s block, if any launch used it, for checking once the device has
    /// passed the point the caller records next.
    pub fn detach(&mut self, stream: StreamId) -> Option<StatusBlock> {
        match self.current.remove(&stream) {
            Some(block) if !block.is_empty() => Some(block),
            Some(block) => {
                self.current.insert(stream, block);
                None
            }
            None => None,
        }
    }

    /// Detaches the block of a captured graph (empty or not): the graph keeps it and checks
    /// it after every replay.
    pub fn detach_for_graph(&mut self, stream: StreamId) -> Option<StatusBlock> {
        self.current.remove(&stream)
    }
}
