//! Raw device allocations.
//!
//! A [`ComputeStorage`] hands out whole allocations (host memory on the CPU, `cuMemAlloc` on
//! CUDA). The memory manager carves them into slices; the storage never sees handles. A
//! [`StorageHandle`] names a byte range inside one allocation.

use crate::error::IoError;
use crate::handle::Binding;
use crate::memory::ForeignMemory;
use std::fmt;

/// The id of one raw allocation of a storage.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct StorageId(pub u64);

/// A byte range inside one raw allocation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StorageHandle {
    /// The allocation.
    pub id: StorageId,
    /// Offset of the range from the start of the allocation.
    pub offset: u64,
    /// Length of the range.
    pub size: u64,
}

impl StorageHandle {
    /// A sub-range `offset..offset + size` of this range, if it fits.
    pub fn sub_range(&self, offset: u64, size: u64) -> Option<StorageHandle> {
        let end = offset.checked_add(size)?;
        (end <= self.size).then_some(StorageHandle {
            id: self.id,
            offset: self.offset + offset,
            size,
        })
    }
}

/// Allocates and frees raw device memory.
pub trait ComputeStorage: Send {
    /// What a resolved range gives access to (a host pointer, a device pointer...).
    type Resource: Send;

    /// Alignment of every allocation, in bytes.
    fn alignment(&self) -> u64;

    /// Allocates `size` bytes.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] when the device has no room; other variants for other
    /// failures.
    fn alloc(&mut self, size: u64) -> Result<StorageId, IoError>;

    /// Frees an allocation. Freeing an unknown id does nothing.
    fn dealloc(&mut self, id: StorageId);

    /// Resolves a range to a resource, or `None` if the allocation is unknown or the range
    /// doesn't fit in it.
    fn get(&mut self, handle: &StorageHandle) -> Option<Self::Resource>;

    /// Bytes the device has free, if the storage can tell.
    fn free_memory(&self) -> Option<u64> {
        None
    }

    /// Completes deferred deallocations, if the storage defers them.
    fn flush(&mut self) {}

    /// Takes `memory` (allocated by someone else) as an allocation of this storage, resolved
    /// by [`Self::get`] like its own until [`Self::disown`] gives it back. The default: this
    /// storage can't address foreign memory.
    ///
    /// # Errors
    /// [`IoError::UnsupportedIoOperation`] where the storage can't; a backend's check of the
    /// range ([`IoError::InvalidArgument`]). `memory` is dropped on error, which runs its
    /// release callback.
    fn adopt(&mut self, memory: ForeignMemory) -> Result<StorageId, IoError> {
        drop(memory);
        Err(IoError::UnsupportedIoOperation {
            backtrace: crate::backtrace::BackTrace::capture(),
        })
    }

    /// Forgets the foreign allocation `id` ([`Self::adopt`]) and returns it, its release
    /// callback not run yet; `None` for an id that isn't a foreign allocation.
    fn disown(&mut self, _id: StorageId) -> Option<ForeignMemory> {
        None
    }

    /// The storage's page mapper, if it can back address ranges with individually mapped
    /// physical pages (CUDA virtual memory management). The memory manager then serves
    /// large requests from a paged pool.
    fn pager(&mut self) -> Option<&mut dyn PageMapper> {
        None
    }
}

/// A physical page of a [`PageMapper`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PageId(pub u64);

/// Maps physical pages into reserved address ranges (virtual memory management).
///
/// An address range is a [`StorageId`] of its storage: once pages are mapped over it and
/// access is granted, `ComputeStorage::get` resolves ranges inside it like any allocation.
pub trait PageMapper {
    /// Size of one page in bytes (every range and mapping is a whole number of pages).
    fn page_size(&self) -> u64;

    /// Reserves an address range of `size` bytes with nothing mapped.
    ///
    /// # Errors
    /// The driver's refusal.
    fn reserve_range(&mut self, size: u64) -> Result<StorageId, IoError>;

    /// Frees an address range (its pages must be unmapped first).
    fn free_range(&mut self, range: StorageId);

    /// Allocates one physical page.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] when the device has no room.
    fn create_page(&mut self) -> Result<PageId, IoError>;

    /// Frees a physical page (it must not be mapped).
    fn release_page(&mut self, page: PageId);

    /// Maps `page` at `offset` bytes into `range`.
    ///
    /// # Errors
    /// The driver's refusal.
    fn map(&mut self, range: StorageId, offset: u64, page: PageId) -> Result<(), IoError>;

    /// Grants the device read-write access to `size` bytes of `range` from `offset` (after
    /// mapping them).
    ///
    /// # Errors
    /// The driver's refusal.
    fn grant_access(&mut self, range: StorageId, offset: u64, size: u64) -> Result<(), IoError>;

    /// Unmaps `size` bytes of `range` from `offset` (whole pages). No work may use them any
    /// more.
    fn unmap(&mut self, range: StorageId, offset: u64, size: u64);

    /// Most pages one physical block may hold ([`Self::create_block`]): 1 unless the driver
    /// allocates, maps and unmaps blocks of several pages as one.
    fn max_block_pages(&self) -> u64 {
        1
    }

    /// Allocates one physical block of `pages` pages (at most [`Self::max_block_pages`]),
    /// mapped and unmapped as one ([`Self::map_block`], [`Self::unmap_block`]).
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] when the device has no room; a refusal for more pages than
    /// the mapper allows.
    fn create_block(&mut self, pages: u64) -> Result<PageId, IoError> {
        if pages == 1 {
            self.create_page()
        } else {
            Err(IoError::invalid("this mapper allocates one page at a time"))
        }
    }

    /// Maps block `block` of `pages` pages at `offset` bytes into `range`.
    ///
    /// # Errors
    /// The driver's refusal.
    fn map_block(
        &mut self,
        range: StorageId,
        offset: u64,
        block: PageId,
        pages: u64,
    ) -> Result<(), IoError> {
        if pages == 1 {
            self.map(range, offset, block)
        } else {
            Err(IoError::invalid("this mapper maps one page at a time"))
        }
    }

    /// Unmaps the block of `pages` pages mapped at `offset` of `range`. No work may use it
    /// any more.
    fn unmap_block(&mut self, range: StorageId, offset: u64, pages: u64) {
        self.unmap(range, offset, pages * self.page_size());
    }
}

/// A resolved resource that keeps its memory alive while the caller holds it.
pub struct ManagedResource<R> {
    resource: R,
    _binding: Binding,
}

impl<R> ManagedResource<R> {
    /// Pairs a resource with the binding that keeps its memory alive.
    pub fn new(binding: Binding, resource: R) -> Self {
        Self {
            resource,
            _binding: binding,
        }
    }

    /// The resource.
    pub fn resource(&self) -> &R {
        &self.resource
    }
}

impl<R: fmt::Debug> fmt::Debug for ManagedResource<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedResource")
            .field("resource", &self.resource)
            .finish()
    }
}
