//! Storage that allocates nothing: ids and sizes only, so the memory manager's pools run
//! their real policy (segments, splits, growable ranges of mapped pages) and count what the
//! device would hold, without any device memory behind it.
//!
//! With a page size it is also a [`PageMapper`] of virtual pages, so a target whose large
//! requests go to a growable or paged pool (CUDA) is mirrored too. Allocations past the
//! target's total memory fail with [`IoError::OutOfMemory`], as they would on the device.

use crate::backtrace::BackTrace;
use crate::error::IoError;
use crate::storage::{ComputeStorage, PageId, PageMapper, StorageHandle, StorageId};
use std::collections::HashMap;

/// A range of no memory: what a dry-run launch or copy resolves its bindings to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtualRange {
    /// The allocation the range lies in.
    pub allocation: StorageId,
    /// Offset of the range in it.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

/// Allocations of no memory, up to `total` bytes. See the module docs.
#[derive(Debug)]
pub struct VirtualStorage {
    alignment: u64,
    total: u64,
    page_size: Option<u64>,
    /// Plain allocations and address ranges, by id: their sizes.
    allocations: HashMap<StorageId, u64>,
    ranges: HashMap<StorageId, u64>,
    /// Physical blocks of the page mapper: their sizes.
    blocks: HashMap<u64, u64>,
    /// Bytes of plain allocations and physical blocks (ranges hold no memory).
    held: u64,
    next_id: u64,
}

impl VirtualStorage {
    /// Storage of a device with `total` bytes whose allocations are aligned to `alignment`;
    /// a page mapper of `page_size`-byte pages if given.
    pub fn new(alignment: u64, total: u64, page_size: Option<u64>) -> Self {
        Self {
            alignment: alignment.max(1),
            total,
            page_size: page_size.filter(|size| *size > 0),
            allocations: HashMap::new(),
            ranges: HashMap::new(),
            blocks: HashMap::new(),
            held: 0,
            next_id: 0,
        }
    }

    /// Bytes the device would hold now (allocations and mapped physical blocks).
    pub fn held(&self) -> u64 {
        self.held
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn hold(&mut self, size: u64) -> Result<(), IoError> {
        match self.held.checked_add(size) {
            Some(held) if held <= self.total => {
                self.held = held;
                Ok(())
            }
            _ => Err(IoError::OutOfMemory {
                requested: size,
                reserved: self.held,
                free: self.total.saturating_sub(self.held),
                reason: format!(
                    "the dry run's device has {} bytes, {} of them held",
                    self.total, self.held
                ),
                backtrace: BackTrace::capture(),
            }),
        }
    }
}

impl ComputeStorage for VirtualStorage {
    type Resource = VirtualRange;

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
        self.hold(size)?;
        let id = StorageId(self.next_id());
        self.allocations.insert(id, size);
        Ok(id)
    }

    fn dealloc(&mut self, id: StorageId) {
        if let Some(size) = self.allocations.remove(&id) {
            self.held -= size;
        }
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<VirtualRange> {
        let size = *self
            .allocations
            .get(&handle.id)
            .or_else(|| self.ranges.get(&handle.id))?;
        let end = handle.offset.checked_add(handle.size)?;
        (end <= size).then_some(VirtualRange {
            allocation: handle.id,
            offset: handle.offset,
            size: handle.size,
        })
    }

    fn free_memory(&self) -> Option<u64> {
        Some(self.total.saturating_sub(self.held))
    }

    fn pager(&mut self) -> Option<&mut dyn PageMapper> {
        self.page_size?;
        Some(self)
    }
}

impl PageMapper for VirtualStorage {
    fn page_size(&self) -> u64 {
        self.page_size.unwrap_or(2 << 20)
    }

    fn reserve_range(&mut self, size: u64) -> Result<StorageId, IoError> {
        let id = StorageId(self.next_id());
        self.ranges.insert(id, size);
        Ok(id)
    }

    fn free_range(&mut self, range: StorageId) {
        self.ranges.remove(&range);
    }

    fn create_page(&mut self) -> Result<PageId, IoError> {
        self.create_block(1)
    }

    fn release_page(&mut self, page: PageId) {
        if let Some(size) = self.blocks.remove(&page.0) {
            self.held -= size;
        }
    }

    fn map(&mut self, range: StorageId, offset: u64, page: PageId) -> Result<(), IoError> {
        self.map_block(range, offset, page, 1)
    }

    fn grant_access(&mut self, range: StorageId, _offset: u64, _size: u64) -> Result<(), IoError> {
        self.ranges
            .contains_key(&range)
            .then_some(())
            .ok_or_else(|| IoError::not_found("unknown address range"))
    }

    fn unmap(&mut self, _range: StorageId, _offset: u64, _size: u64) {}

    fn max_block_pages(&self) -> u64 {
        u64::MAX
    }

    fn create_block(&mut self, pages: u64) -> Result<PageId, IoError> {
        let size = self.page_size().saturating_mul(pages);
        self.hold(size)?;
        let id = self.next_id();
        self.blocks.insert(id, size);
        Ok(PageId(id))
    }

    fn map_block(
        &mut self,
        range: StorageId,
        offset: u64,
        block: PageId,
        pages: u64,
    ) -> Result<(), IoError> {
        let size = self.page_size().saturating_mul(pages);
        let range_size = *self
            .ranges
            .get(&range)
            .ok_or_else(|| IoError::not_found("unknown address range"))?;
        if !self.blocks.contains_key(&block.0) || offset.saturating_add(size) > range_size {
            return Err(IoError::invalid("a block mapped past the end of its range"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_past_the_total_are_out_of_memory_and_frees_give_room_back() {
        let mut storage = VirtualStorage::new(256, 1000, None);
        let first = storage.alloc(600).unwrap();
        assert!(matches!(
            storage.alloc(600),
            Err(IoError::OutOfMemory { .. })
        ));
        assert_eq!(storage.held(), 600);
        storage.dealloc(first);
        storage.alloc(1000).unwrap();
        assert_eq!(storage.free_memory(), Some(0));
    }

    #[test]
    fn mapped_blocks_count_as_held_and_ranges_do_not() {
        let mut storage = VirtualStorage::new(256, 16 << 20, Some(2 << 20));
        let pager = storage.pager().unwrap();
        let range = pager.reserve_range(64 << 20).unwrap();
        let block = pager.create_block(2).unwrap();
        pager.map_block(range, 0, block, 2).unwrap();
        assert_eq!(storage.held(), 4 << 20);
        let resource = storage
            .get(&StorageHandle {
                id: range,
                offset: 1024,
                size: 64,
            })
            .unwrap();
        assert_eq!((resource.offset, resource.size), (1024, 64));
        storage.release_page(block);
        assert_eq!(storage.held(), 0);
    }
}
