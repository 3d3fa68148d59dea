//! Device memory as raw storage: `cuMemAlloc` / `cuMemFree` in the server's context.
//!
//! The memory manager above pools these allocations, so in steady state no driver
//! allocation happens. Out of memory is returned as `IoError::OutOfMemory` with the
//! requested size and the device's free memory.
//!
//! The storage is also a [`PageMapper`] over the driver's virtual memory management
//! (`cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`, `cuMemSetAccess`): with
//! `[memory] paged = true` the memory manager backs large allocations with individually
//! mapped 2 MiB pages, so fragmentation can't strand physical memory.
//!
//! Mapped memory is granted to its own device when it is mapped. A peer copy
//! (`cuMemcpyPeerAsync`) from memory the other GPU may not access still copies the right
//! bytes, but the driver stages them (38.5 GB/s against 397 GB/s GPU to GPU at 1 GiB on two
//! H200s), so the first peer copy from this device to another grants that GPU read-write
//! access to everything mapped so far ([`CudaStorage::grant_reader`], over the runs
//! `mapped_runs` keeps), and later mappings are granted to it too, as PyTorch's expandable
//! segments do for peers. Programs without peer copies pay nothing.

use crate::context::CudaContext;
use crate::driver;
use crate::mapped_runs::MappedRuns;
use cubert_runtime::IoError;
use cubert_runtime::memory::ForeignMemory;
use cubert_runtime::storage::{ComputeStorage, PageId, PageMapper, StorageHandle, StorageId};
use cudarc::driver::sys::{self, CUdeviceptr};
use std::collections::{HashMap, HashSet};
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
    ranges: HashMap<StorageId, (CUdeviceptr, u64)>,
    /// Device memory allocated outside cubert (`ComputeClient::import_memory`), never
    /// freed here.
    foreign: HashMap<StorageId, ForeignMemory>,
    pages: HashSet<u64>,
    /// What is mapped in `ranges`.
    mapped: MappedRuns,
    /// Other GPUs granted access to mapped memory (ordinals), for direct peer copies.
    readers: Vec<u32>,
    granularity: Option<u64>,
    next_id: u64,
}

impl CudaStorage {
    /// Storage in `context`.
    pub fn new(context: Arc<CudaContext>) -> Self {
        Self {
            context,
            allocations: HashMap::new(),
            ranges: HashMap::new(),
            foreign: HashMap::new(),
            pages: HashSet::new(),
            mapped: MappedRuns::default(),
            readers: Vec::new(),
            granularity: None,
            next_id: 0,
        }
    }

    /// Grants GPU `ordinal` read-write access to every page mapped here now and later, so
    /// that a peer copy reads this device's page-mapped memory GPU to GPU (unstaged). Once
    /// per GPU; nothing for this storage's own GPU.
    ///
    /// # Errors
    /// The driver's refusal (two GPUs that can't access each other's memory); the GPU is
    /// then not recorded as a reader and the next call tries again.
    pub fn grant_reader(&mut self, ordinal: u32) -> Result<(), IoError> {
        if ordinal == self.context.ordinal() || self.readers.contains(&ordinal) {
            return Ok(());
        }
        self.context
            .bind()
            .map_err(|failure| self.failed(failure, 0))?;
        let access = [read_write(ordinal)];
        let ranges: Vec<StorageId> = self.mapped.ranges().collect();
        for range in ranges {
            let Some(&(ptr, _)) = self.ranges.get(&range) else {
                continue;
            };
            for (offset, size) in self.mapped.runs(range) {
                driver::memory::set_access(ptr + offset, size as usize, &access)
                    .map_err(|failure| self.failed(failure, size))?;
            }
        }
        self.readers.push(ordinal);
        Ok(())
    }

    /// The GPUs granted access to mapped memory besides this storage's own.
    pub fn readers(&self) -> &[u32] {
        &self.readers
    }

    fn next_id(&mut self) -> StorageId {
        self.next_id += 1;
        StorageId(self.next_id)
    }

    fn properties(&self) -> sys::CUmemAllocationProp {
        // SAFETY: CUmemAllocationProp is a plain C struct; all-zero is a valid starting
        // value (no handle types, no flags) before the fields below are set.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = self.context.ordinal() as i32;
        prop
    }

    /// The device's page (allocation granularity) for mapped memory, or `None` if the
    /// driver can't say.
    fn granularity(&mut self) -> Option<u64> {
        if self.granularity.is_none() {
            let prop = self.properties();
            self.context.bind().ok()?;
            if let Ok(granularity) = driver::memory::allocation_granularity(&prop)
                && granularity > 0
            {
                self.granularity = Some(granularity as u64);
            }
        }
        self.granularity
    }

    fn failed(&self, failure: driver::DriverFailure, size: u64) -> IoError {
        failure.into_io_error(size)
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
        let ptr = driver::memory::alloc(bytes).map_err(|failure| failure.into_io_error(size))?;
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
            let _ = unsafe { driver::memory::free(ptr) };
        }
    }

    fn adopt(&mut self, memory: ForeignMemory) -> Result<StorageId, IoError> {
        let (ptr, size) = (memory.address(), memory.size());
        self.context
            .bind()
            .map_err(|failure| failure.into_io_error(size))?;
        let refuse = |why: String| {
            IoError::invalid(format!(
                "can't import {ptr:#x} ({size} bytes) on CUDA device {}: {why}",
                self.context.ordinal()
            ))
        };
        let info = driver::memory::pointer_info(ptr).map_err(|failure| {
            refuse(format!(
                "the driver doesn't know the address as device memory ({})",
                driver::describe(failure.error)
            ))
        })?;
        if !info.is_device {
            return Err(refuse("it is host memory, not device memory".into()));
        }
        if info.device != self.context.ordinal() as i32 {
            return Err(refuse(format!("it belongs to device {}", info.device)));
        }
        if let Some((start, length)) = info.range {
            let end = ptr.checked_add(size);
            if end.is_none_or(|end| end > start.saturating_add(length)) {
                return Err(refuse(format!(
                    "the allocation it lies in ends at {:#x}",
                    start.saturating_add(length)
                )));
            }
        }
        let id = self.next_id();
        self.foreign.insert(id, memory);
        Ok(id)
    }

    fn disown(&mut self, id: StorageId) -> Option<ForeignMemory> {
        self.foreign.remove(&id)
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<CudaResource> {
        let foreign = self
            .foreign
            .get(&handle.id)
            .map(|memory| (memory.address(), memory.size()));
        let (ptr, size) = self
            .allocations
            .get(&handle.id)
            .or_else(|| self.ranges.get(&handle.id))
            .copied()
            .or(foreign)?;
        let end = handle.offset.checked_add(handle.size)?;
        (end <= size).then_some(CudaResource {
            ptr: ptr + handle.offset,
            size: handle.size,
        })
    }

    fn free_memory(&self) -> Option<u64> {
        self.context.bind().ok()?;
        driver::memory::info().ok().map(|(free, _)| free as u64)
    }

    fn pager(&mut self) -> Option<&mut dyn PageMapper> {
        self.granularity()?;
        Some(self)
    }
}

impl PageMapper for CudaStorage {
    fn page_size(&self) -> u64 {
        self.granularity.unwrap_or(2 << 20)
    }

    fn reserve_range(&mut self, size: u64) -> Result<StorageId, IoError> {
        self.context
            .bind()
            .map_err(|failure| self.failed(failure, size))?;
        let ptr = driver::memory::address_reserve(size as usize)
            .map_err(|failure| self.failed(failure, size))?;
        let id = self.next_id();
        self.ranges.insert(id, (ptr, size));
        Ok(id)
    }

    fn free_range(&mut self, range: StorageId) {
        self.mapped.forget_range(range);
        if let Some((ptr, size)) = self.ranges.remove(&range)
            && self.context.bind().is_ok()
        {
            // SAFETY: the range was reserved by `reserve_range` and is freed once, unmapped.
            let _ = unsafe { driver::memory::address_free(ptr, size as usize) };
        }
    }

    fn create_page(&mut self) -> Result<PageId, IoError> {
        self.create_block(1)
    }

    fn release_page(&mut self, page: PageId) {
        if self.pages.remove(&page.0) && self.context.bind().is_ok() {
            // SAFETY: the page (or block) was created by `create_page` (`create_block`) and is
            // released once, unmapped.
            let _ = unsafe { driver::memory::release(page.0) };
        }
    }

    fn map(&mut self, range: StorageId, offset: u64, page: PageId) -> Result<(), IoError> {
        self.map_block(range, offset, page, 1)
    }

    fn grant_access(&mut self, range: StorageId, start: u64, size: u64) -> Result<(), IoError> {
        let (ptr, _) = *self
            .ranges
            .get(&range)
            .ok_or_else(|| IoError::not_found("unknown address range"))?;
        let access: Vec<sys::CUmemAccessDesc> = std::iter::once(self.context.ordinal())
            .chain(self.readers.iter().copied())
            .map(read_write)
            .collect();
        // One call for the whole run, across the physical allocations mapped in it (as
        // PyTorch's expandable segments do): every page of it is mapped.
        driver::memory::set_access(ptr + start, size as usize, &access)
            .map_err(|failure| self.failed(failure, size))
    }

    fn max_block_pages(&self) -> u64 {
        u64::MAX
    }

    fn create_block(&mut self, pages: u64) -> Result<PageId, IoError> {
        let size = self.page_size().saturating_mul(pages);
        self.context
            .bind()
            .map_err(|failure| self.failed(failure, size))?;
        let prop = self.properties();
        // `size` is a whole number of granules.
        let handle = driver::memory::create(size as usize, &prop)
            .map_err(|failure| self.failed(failure, size))?;
        self.pages.insert(handle);
        Ok(PageId(handle))
    }

    fn map_block(
        &mut self,
        range: StorageId,
        offset: u64,
        block: PageId,
        pages: u64,
    ) -> Result<(), IoError> {
        let size = self.page_size().saturating_mul(pages);
        let (ptr, range_size) = *self
            .ranges
            .get(&range)
            .ok_or_else(|| IoError::not_found("unknown address range"))?;
        if offset.saturating_add(size) > range_size {
            return Err(IoError::invalid("a block mapped past the end of its range"));
        }
        // The block and the range belong to this context; the block-sized slot at `offset`
        // is inside the range and unmapped.
        driver::memory::map(ptr + offset, size as usize, block.0)
            .map_err(|failure| self.failed(failure, size))?;
        self.mapped.mapped(range, offset, size);
        Ok(())
    }

    fn unmap_block(&mut self, range: StorageId, start: u64, pages: u64) {
        let size = self.page_size().saturating_mul(pages);
        self.mapped.unmapped(range, start, size);
        if let Some((ptr, _)) = self.ranges.get(&range).copied()
            && self.context.bind().is_ok()
        {
            // SAFETY: the block was mapped whole at `start` by `map_block` and no work uses
            // it (the pools unmap only blocks whose stream points are complete).
            let _ = unsafe { driver::memory::unmap(ptr + start, size as usize) };
        }
    }

    fn unmap(&mut self, range: StorageId, start: u64, size: u64) {
        self.mapped.unmapped(range, start, size);
        if let Some((ptr, _)) = self.ranges.get(&range).copied()
            && self.context.bind().is_ok()
        {
            let page = self.page_size();
            for offset in (start..start + size).step_by(page as usize) {
                // SAFETY: the page at `offset` is mapped and no work uses it (the paged pool
                // unmaps only blocks whose stream points are complete).
                let _ = unsafe { driver::memory::unmap(ptr + offset, page as usize) };
            }
        }
    }
}

/// Read-write access for GPU `ordinal`.
fn read_write(ordinal: u32) -> sys::CUmemAccessDesc {
    // SAFETY: CUmemAccessDesc is a plain C struct; all-zero is valid before the fields below
    // are set.
    let mut access: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    access.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal as i32;
    access.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access
}

impl Drop for CudaStorage {
    fn drop(&mut self) {
        if self.context.bind().is_err() {
            return;
        }
        for (ptr, _) in self.allocations.values() {
            // SAFETY: each pointer came from cuMemAlloc in this context and is freed once.
            let _ = unsafe { driver::memory::free(*ptr) };
        }
        for (range, (ptr, size)) in &self.ranges {
            for (offset, bytes) in self.mapped.blocks(*range) {
                // SAFETY: a block this storage mapped whole at `offset` of its range and
                // never unmapped; the context is idle (the server synchronized it before
                // dropping its fields).
                let _ = unsafe { driver::memory::unmap(*ptr + offset, bytes as usize) };
            }
            // SAFETY: the range was reserved by this storage and is freed once, unmapped.
            let _ = unsafe { driver::memory::address_free(*ptr, *size as usize) };
        }
        for page in self.pages.drain() {
            // SAFETY: pages created by this storage, unmapped above, released once.
            let _ = unsafe { driver::memory::release(page) };
        }
    }
}
