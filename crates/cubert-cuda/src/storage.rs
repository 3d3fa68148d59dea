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
    /// GPUs the driver refused access to mapped memory; not asked again.
    refused_readers: Vec<u32>,
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
            refused_readers: Vec::new(),
            granularity: None,
            next_id: 0,
        }
    }

    /// Grants GPU `ordinal` read-write access to every page mapped here now and later, so
    /// that a peer copy reads this device's page-mapped memory GPU to GPU (unstaged). Once
    /// per GPU; nothing for this storage's own GPU.
    ///
    /// # Errors
    /// The driver's refusal (two GPUs that can't access each other's memory). The GPU is
    /// then remembered as refused, and later calls for it return `Ok` without asking the
    /// driver again: its peer copies stay staged by the driver, correct and slower.
    pub fn grant_reader(&mut self, ordinal: u32) -> Result<(), IoError> {
        if ordinal == self.context.ordinal()
            || self.readers.contains(&ordinal)
            || self.refused_readers.contains(&ordinal)
        {
            return Ok(());
        }
        match self.grant_mapped_runs(ordinal) {
            Ok(()) => {
                self.readers.push(ordinal);
                Ok(())
            }
            Err(refusal) => {
                self.refused_readers.push(ordinal);
                Err(refusal)
            }
        }
    }

    /// Grants GPU `ordinal` read-write access to every run mapped now.
    fn grant_mapped_runs(&mut self, ordinal: u32) -> Result<(), IoError> {
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
        Ok(())
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
        let own = read_write(self.context.ordinal());
        // One call for the whole run, across the physical allocations mapped in it (as
        // PyTorch's expandable segments do): every page of it is mapped.
        if !self.readers.is_empty() {
            let access: Vec<sys::CUmemAccessDesc> = std::iter::once(own)
                .chain(self.readers.iter().copied().map(read_write))
                .collect();
            match driver::memory::set_access(ptr + start, size as usize, &access) {
                Ok(()) => return Ok(()),
                // A reader the driver refuses must not fail this device's own allocation:
                // grant its own GPU alone, and stop granting the readers (their peer
                // copies are staged by the driver from now on).
                Err(refusal) => {
                    tracing::warn!(
                        "GPU {} stops granting its mapped memory to GPUs {:?}: {}",
                        self.context.ordinal(),
                        self.readers,
                        refusal.into_io_error(size)
                    );
                    let readers = std::mem::take(&mut self.readers);
                    self.refused_readers.extend(readers);
                }
            }
        }
        driver::memory::set_access(ptr + start, size as usize, &[own])
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Storage of GPU 0 with one block of `pages` mapped and granted at the start of a
    /// range, or `None` (with a note) without a CUDA device.
    fn storage_with_a_mapped_block(pages: u64) -> Option<(CudaStorage, StorageId)> {
        if crate::device_count() == 0 {
            eprintln!("skipped: needs a CUDA device");
            return None;
        }
        let context = CudaContext::new(0).unwrap();
        let mut storage = CudaStorage::new(context);
        storage.granularity().unwrap();
        let range = storage.reserve_range(64 * MIB).unwrap();
        let block = storage.create_block(pages).unwrap();
        storage.map_block(range, 0, block, pages).unwrap();
        let size = pages * storage.page_size();
        storage.grant_access(range, 0, size).unwrap();
        Some((storage, range))
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn a_refused_reader_is_remembered_and_not_asked_again() {
        let Some((mut storage, _range)) = storage_with_a_mapped_block(2) else {
            return;
        };
        // No GPU 999: the driver refuses it (something is mapped, so it is asked).
        assert!(storage.grant_reader(999).is_err());
        assert_eq!(storage.refused_readers, vec![999]);
        assert!(storage.readers.is_empty());
        assert!(storage.grant_reader(999).is_ok(), "not asked again");
        assert!(storage.grant_reader(0).is_ok(), "its own GPU needs nothing");
        assert!(storage.readers.is_empty());
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn a_reader_the_driver_refuses_never_fails_a_mapping_of_its_own_gpu() {
        let Some((mut storage, range)) = storage_with_a_mapped_block(1) else {
            return;
        };
        // Recorded while nothing was refused (as after a grant over no mapped run): the
        // next mapping falls back to its own GPU and drops the reader.
        storage.readers.push(999);
        let page = storage.page_size();
        let block = storage.create_block(1).unwrap();
        storage.map_block(range, page, block, 1).unwrap();
        storage.grant_access(range, page, page).unwrap();
        assert!(storage.readers.is_empty());
        assert_eq!(storage.refused_readers, vec![999]);
        let block = storage.create_block(1).unwrap();
        storage.map_block(range, 2 * page, block, 1).unwrap();
        storage.grant_access(range, 2 * page, page).unwrap();
        assert_eq!(storage.mapped.runs(range), vec![(0, 3 * page)]);
    }
}
