//! A pool of large allocations backed by individually mapped physical pages.
//!
//! With a [`PageMapper`] (CUDA virtual memory management) an allocation does not need one
//! contiguous physical block: it gets an address range of its own, rounded up to whole
//! pages, with one physical page mapped per page of the range. Physical memory is then
//! interchangeable between allocations, so fragmentation can't strand it:
//!
//! - a freed block stays mapped and cached (under its page count and stream), and a later
//!   request of the same page count takes it back with no driver call;
//! - a request that no cached block serves maps pages from the free-page list; if that runs
//!   short it takes pages back from cached blocks (oldest first, only blocks whose stream
//!   points are complete, since unmapping is immediate) before it creates any new page.
//!
//! Physical memory held (pages created × page size) therefore tracks live data closely:
//! the waste is the rounding of each live allocation to whole pages.

use super::ordering::{StreamOrdering, StreamPoint};
use crate::error::IoError;
use crate::storage::{PageId, PageMapper, StorageId};
use crate::stream::StreamId;
use std::collections::{HashMap, VecDeque};

/// Stream key of cached blocks without a point.
const ANY_STREAM: u64 = u64::MAX;

enum BlockState {
    Used { requested: u64 },
    Cached { points: Vec<StreamPoint> },
}

struct PagedBlock {
    range: StorageId,
    pages: Vec<PageId>,
    state: BlockState,
}

/// Totals of the paged pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagedStats {
    /// Physical pages created and not released.
    pub pages: u64,
    /// Those pages, in bytes.
    pub bytes_reserved: u64,
    /// Bytes requested by live blocks.
    pub bytes_in_use: u64,
    /// Page rounding of live blocks.
    pub bytes_padding: u64,
    /// Live blocks.
    pub allocations: u64,
    /// Cached (mapped, free) blocks.
    pub cached_blocks: u64,
    /// Bytes of cached blocks and free pages.
    pub bytes_free: u64,
}

/// The paged pool. See the module docs.
#[derive(Default)]
pub struct PagedPool {
    blocks: Vec<Option<PagedBlock>>,
    free_slots: Vec<u32>,
    cache: HashMap<(u64, u64), Vec<u32>>,
    cache_order: VecDeque<u32>,
    free_pages: Vec<PageId>,
    empty_ranges: HashMap<u64, Vec<StorageId>>,
    pages_created: u64,
    page_size: u64,
    stats: PagedStats,
}

impl PagedPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Totals.
    pub fn stats(&self) -> PagedStats {
        self.stats
    }

    /// The range and the page-rounded size of block `slot`.
    pub fn storage_of(&self, slot: u32) -> Option<(StorageId, u64)> {
        let block = self.blocks.get(slot as usize)?.as_ref()?;
        Some((block.range, block.pages.len() as u64 * self.page_size))
    }

    fn pages_for(&self, size: u64) -> u64 {
        size.div_ceil(self.page_size.max(1))
    }

    /// Takes a cached block of `pages` pages `stream` may use now.
    fn take_cached(
        &mut self,
        pages: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
    ) -> Option<u32> {
        for key in [stream.value, ANY_STREAM] {
            let Some(candidates) = self.cache.get_mut(&(pages, key)) else {
                continue;
            };
            let Some(slot) = candidates.pop() else {
                continue;
            };
            let block = self.blocks.get_mut(slot as usize)?.as_mut()?;
            if let BlockState::Cached { points } = &block.state {
                let ready = points.iter().all(|p| {
                    p.stream == stream || ordering.is_complete(*p) || ordering.wait_for(stream, *p)
                });
                if !ready {
                    self.cache.entry((pages, key)).or_default().push(slot);
                    continue;
                }
            }
            return Some(slot);
        }
        None
    }

    /// Unmaps cached blocks (oldest first, complete points only) until `needed` free pages
    /// exist. Returns whether they do.
    fn reclaim(
        &mut self,
        needed: usize,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> bool {
        let mut skipped = VecDeque::new();
        while self.free_pages.len() < needed {
            let Some(slot) = self.cache_order.pop_front() else {
                break;
            };
            let Some(Some(block)) = self.blocks.get(slot as usize) else {
                continue;
            };
            let BlockState::Cached { points } = &block.state else {
                continue;
            };
            if !points.iter().all(|p| ordering.is_complete(*p)) {
                skipped.push_back(slot);
                continue;
            }
            let key_stream = points.first().map_or(ANY_STREAM, |p| p.stream.value);
            let pages = block.pages.len() as u64;
            if let Some(candidates) = self.cache.get_mut(&(pages, key_stream)) {
                candidates.retain(|s| *s != slot);
            }
            self.unmap_block(slot, mapper);
        }
        // Blocks still in use by the device stay cached, in order.
        while let Some(slot) = skipped.pop_back() {
            self.cache_order.push_front(slot);
        }
        self.free_pages.len() >= needed
    }

    /// Unmaps a cached block: its pages go to the free list, its range to the empty ranges.
    fn unmap_block(&mut self, slot: u32, mapper: &mut dyn PageMapper) {
        let Some(block) = self.blocks.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        let size = block.pages.len() as u64 * self.page_size;
        mapper.unmap(block.range, size);
        self.stats.cached_blocks -= 1;
        self.empty_ranges
            .entry(block.pages.len() as u64)
            .or_default()
            .push(block.range);
        self.free_pages.extend(block.pages);
        self.free_slots.push(slot);
    }

    /// Reserves a block of at least `size` bytes (`requested` asked by the caller) for
    /// `stream`. Returns its slot and its page-rounded size.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] when no page can be created even after taking back every
    /// cached block; the mapper's other errors.
    pub fn reserve(
        &mut self,
        size: u64,
        requested: u64,
        stream: StreamId,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(u32, u64), IoError> {
        self.page_size = mapper.page_size().max(1);
        let pages = self.pages_for(size);
        let rounded = pages * self.page_size;
        if let Some(slot) = self.take_cached(pages, stream, ordering)
            && let Some(Some(block)) = self.blocks.get_mut(slot as usize)
        {
            block.state = BlockState::Used { requested };
            self.stats.cached_blocks -= 1;
            self.stats.bytes_free -= rounded;
            self.account_used(requested, rounded);
            return Ok((slot, rounded));
        }
        // Physical pages: free ones, then reclaimed ones, then new ones.
        let needed = pages as usize;
        if self.free_pages.len() < needed {
            self.reclaim(needed, mapper, ordering);
        }
        while self.free_pages.len() < needed {
            let page = mapper.create_page()?;
            self.pages_created += 1;
            self.stats.pages += 1;
            self.stats.bytes_reserved += self.page_size;
            self.stats.bytes_free += self.page_size;
            self.free_pages.push(page);
        }
        let range = match self.empty_ranges.get_mut(&pages).and_then(Vec::pop) {
            Some(range) => range,
            None => mapper.reserve_range(rounded)?,
        };
        let taken: Vec<PageId> = self.free_pages.split_off(self.free_pages.len() - needed);
        for (index, page) in taken.iter().enumerate() {
            if let Err(error) = mapper.map(range, index as u64 * self.page_size, *page) {
                mapper.unmap(range, index as u64 * self.page_size);
                self.free_pages.extend(taken);
                self.empty_ranges.entry(pages).or_default().push(range);
                return Err(error);
            }
        }
        if let Err(error) = mapper.grant_access(range, rounded) {
            mapper.unmap(range, rounded);
            self.free_pages.extend(taken);
            self.empty_ranges.entry(pages).or_default().push(range);
            return Err(error);
        }
        let block = PagedBlock {
            range,
            pages: taken,
            state: BlockState::Used { requested },
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.blocks[slot as usize] = Some(block);
                slot
            }
            None => {
                self.blocks.push(Some(block));
                (self.blocks.len() - 1) as u32
            }
        };
        self.stats.bytes_free -= rounded;
        self.account_used(requested, rounded);
        Ok((slot, rounded))
    }

    fn account_used(&mut self, requested: u64, rounded: u64) {
        self.stats.allocations += 1;
        self.stats.bytes_in_use += requested;
        self.stats.bytes_padding += rounded - requested;
    }

    /// Frees block `slot`: it stays mapped and cached for reuse. Returns `false` if the slot
    /// holds no used block.
    pub fn free(&mut self, slot: u32, points: Vec<StreamPoint>) -> bool {
        let page_size = self.page_size;
        let Some(Some(block)) = self.blocks.get_mut(slot as usize) else {
            return false;
        };
        let BlockState::Used { requested } = block.state else {
            return false;
        };
        let pages = block.pages.len() as u64;
        let rounded = pages * page_size;
        let key = if points.len() == 1 {
            points[0].stream.value
        } else {
            ANY_STREAM
        };
        block.state = BlockState::Cached { points };
        self.stats.allocations -= 1;
        self.stats.bytes_in_use -= requested;
        self.stats.bytes_padding -= rounded - requested;
        self.stats.cached_blocks += 1;
        self.stats.bytes_free += rounded;
        self.cache.entry((pages, key)).or_default().push(slot);
        self.cache_order.push_back(slot);
        true
    }

    /// Gives every cached block's pages and every free page back to the device, and frees
    /// the empty ranges. Blocks whose stream points are not complete stay.
    pub fn release(
        &mut self,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> u64 {
        self.reclaim(usize::MAX, mapper, ordering);
        let mut bytes = 0;
        for page in self.free_pages.drain(..) {
            mapper.release_page(page);
            self.pages_created -= 1;
            self.stats.pages -= 1;
            bytes += self.page_size;
        }
        self.stats.bytes_reserved -= bytes;
        self.stats.bytes_free -= bytes;
        for range in self.empty_ranges.drain().flat_map(|(_, ranges)| ranges) {
            mapper.free_range(range);
        }
        self.cache.retain(|_, slots| !slots.is_empty());
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ordering::HostOrdering;

    const PAGE: u64 = 2 << 20;

    /// Counts pages and ranges like a driver would.
    #[derive(Default)]
    struct FakeMapper {
        next: u64,
        live_pages: u64,
        live_ranges: u64,
        mapped: HashMap<u64, u64>,
        refuse_pages_after: Option<u64>,
    }

    impl PageMapper for FakeMapper {
        fn page_size(&self) -> u64 {
            PAGE
        }
        fn reserve_range(&mut self, _size: u64) -> Result<StorageId, IoError> {
            self.next += 1;
            self.live_ranges += 1;
            Ok(StorageId(self.next))
        }
        fn free_range(&mut self, _range: StorageId) {
            self.live_ranges -= 1;
        }
        fn create_page(&mut self) -> Result<PageId, IoError> {
            if self
                .refuse_pages_after
                .is_some_and(|limit| self.live_pages >= limit)
            {
                return Err(IoError::OutOfMemory {
                    requested: PAGE,
                    reserved: self.live_pages * PAGE,
                    free: 0,
                    reason: "fake device full".into(),
                    backtrace: crate::backtrace::BackTrace::none(),
                });
            }
            self.next += 1;
            self.live_pages += 1;
            Ok(PageId(self.next))
        }
        fn release_page(&mut self, _page: PageId) {
            self.live_pages -= 1;
        }
        fn map(&mut self, range: StorageId, _offset: u64, _page: PageId) -> Result<(), IoError> {
            *self.mapped.entry(range.0).or_default() += 1;
            Ok(())
        }
        fn grant_access(&mut self, _range: StorageId, _size: u64) -> Result<(), IoError> {
            Ok(())
        }
        fn unmap(&mut self, range: StorageId, _size: u64) {
            self.mapped.remove(&range.0);
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn same_size_reuse_maps_nothing_new() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let stream = StreamId::new(0);
        let (slot, rounded) = pool
            .reserve(5 * MIB, 5 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        assert_eq!(rounded, 6 * MIB);
        pool.free(slot, Vec::new());
        let pages_before = mapper.live_pages;
        let (again, _) = pool
            .reserve(6 * MIB, 6 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        assert_eq!(again, slot);
        assert_eq!(mapper.live_pages, pages_before);
    }

    #[test]
    fn pages_of_cached_blocks_serve_other_sizes_before_new_pages() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let stream = StreamId::new(0);
        let (a, _) = pool
            .reserve(64 * MIB, 64 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        pool.free(a, Vec::new());
        // 100 MiB: takes the 32 pages of the cached block and creates only 18 more.
        pool.reserve(100 * MIB, 100 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        assert_eq!(mapper.live_pages, 50);
        assert_eq!(pool.stats().bytes_reserved, 100 * MIB);
    }

    #[test]
    fn out_of_pages_is_out_of_memory_and_the_pool_stays_consistent() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        mapper.refuse_pages_after = Some(10);
        let stream = StreamId::new(0);
        let (a, _) = pool
            .reserve(16 * MIB, 16 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        let error = pool
            .reserve(8 * MIB, 8 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap_err();
        assert!(matches!(error, IoError::OutOfMemory { .. }));
        pool.free(a, Vec::new());
        pool.reserve(8 * MIB, 8 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        assert_eq!(mapper.live_pages, 10);
    }

    #[test]
    fn release_gives_every_unused_page_and_range_back() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let stream = StreamId::new(0);
        let (a, _) = pool
            .reserve(10 * MIB, 10 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        let (b, _) = pool
            .reserve(30 * MIB, 30 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        pool.free(a, Vec::new());
        pool.free(b, Vec::new());
        pool.release(&mut mapper, &mut HostOrdering);
        assert_eq!((mapper.live_pages, mapper.live_ranges), (0, 0));
        assert_eq!(pool.stats(), PagedStats::default());
    }

    struct Pending;
    impl StreamOrdering for Pending {
        fn is_complete(&mut self, _point: StreamPoint) -> bool {
            false
        }
        fn wait_for(&mut self, _waiter: StreamId, _point: StreamPoint) -> bool {
            false
        }
    }

    #[test]
    fn blocks_the_device_may_still_use_are_never_unmapped() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let (a_stream, b_stream) = (StreamId::new(1), StreamId::new(2));
        let (a, _) = pool
            .reserve(8 * MIB, 8 * MIB, a_stream, &mut mapper, &mut Pending)
            .unwrap();
        pool.free(
            a,
            vec![StreamPoint {
                stream: a_stream,
                seq: 1,
            }],
        );
        // Another stream and another size: the pending block keeps its pages.
        pool.reserve(4 * MIB, 4 * MIB, b_stream, &mut mapper, &mut Pending)
            .unwrap();
        assert_eq!(mapper.live_pages, 6);
        assert_eq!(mapper.mapped.len(), 2);
    }
}
