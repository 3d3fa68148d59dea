//! A pool of large allocations backed by individually mapped physical pages.
//!
//! With a [`PageMapper`] (CUDA virtual memory management) an allocation does not need one
//! contiguous physical block: it gets an address range of its own, rounded up to whole
//! pages, with one physical page mapped per page of the range. Physical memory is then
//! interchangeable between allocations, so fragmentation can't strand it:
//!
//! - a freed block stays mapped and cached (under its page count and stream), and a later
//!   request of the same page count takes it back with no driver call;
//! - otherwise a cached block of a nearby size is resized in place, since every block's
//!   address range has room to grow (its page count rounded up to a power of two): a larger
//!   one gives its tail pages back to the free-page list (if the device is done with it),
//!   a smaller one maps free pages at its end. Each page costs a driver call or two, so
//!   changing a block by a few pages is much cheaper than mapping a new block whole;
//! - a request that no cached block serves maps pages from the free-page list into a new
//!   (or empty) range; if that runs short it takes pages back from cached blocks (oldest
//!   first, only blocks whose stream points are complete, since unmapping is immediate)
//!   before it creates any new page.
//!
//! Physical memory held (pages created × page size) therefore tracks live data closely:
//! the waste is the rounding of each live allocation to whole pages.

use super::ordering::{StreamOrdering, StreamPoint, StreamPoints};
use crate::error::IoError;
use crate::storage::{PageId, PageMapper, StorageId};
use crate::stream::StreamId;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Stream key of cached blocks without a point.
const ANY_STREAM: u64 = u64::MAX;

enum BlockState {
    Used { requested: u64 },
    Cached { points: StreamPoints },
}

struct PagedBlock {
    range: StorageId,
    /// Pages the range has room for.
    capacity: u64,
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
    /// Cached blocks by (stream key, page count).
    cache: BTreeMap<(u64, u64), Vec<u32>>,
    cache_order: VecDeque<u32>,
    free_pages: Vec<PageId>,
    /// Ranges with nothing mapped, by capacity in pages.
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

    /// Room of a new range for a block of `pages` pages: blocks grow in place up to it.
    fn capacity_for(pages: u64) -> u64 {
        pages.max(1).checked_next_power_of_two().unwrap_or(pages)
    }

    /// Whether `stream` may use a block cached with `points` now.
    fn usable(points: &[StreamPoint], stream: StreamId, ordering: &mut dyn StreamOrdering) -> bool {
        points.iter().all(|p| {
            p.stream == stream || ordering.is_complete(*p) || ordering.wait_for(stream, *p)
        })
    }

    fn cached_points(&self, slot: u32) -> Option<&[StreamPoint]> {
        match &self.blocks.get(slot as usize)?.as_ref()?.state {
            BlockState::Cached { points } => Some(points),
            BlockState::Used { .. } => None,
        }
    }

    /// Takes `slot` out of the cache (it stays in `cache_order`, where reclaim skips
    /// blocks that aren't cached).
    fn uncache(&mut self, slot: u32, key: (u64, u64)) {
        if let Some(candidates) = self.cache.get_mut(&key) {
            candidates.retain(|s| *s != slot);
            if candidates.is_empty() {
                self.cache.remove(&key);
            }
        }
    }

    /// A cached block `stream` may use now, of `pages` pages if there is one, else the one
    /// cheapest to resize to `pages`: the nearest larger block the device is done with
    /// (its extra pages are unmapped, one call each), or the nearest smaller one whose range
    /// has room (the missing pages are mapped, two calls each), if either costs less than
    /// mapping a block of `pages` anew. Taken out of the cache.
    fn take_cached(
        &mut self,
        pages: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
    ) -> Option<u32> {
        /// Blocks looked at on each side before giving up (the device may still use some).
        const LOOK: usize = 4;
        let mut best: Option<(u64, u32, (u64, u64))> = None;
        for key in [stream.value, ANY_STREAM] {
            let exact = self.cache.get(&(key, pages)).cloned().unwrap_or_default();
            for slot in exact.into_iter().rev() {
                let ready = self
                    .cached_points(slot)
                    .map(<[StreamPoint]>::to_vec)
                    .is_some_and(|points| Self::usable(&points, stream, ordering));
                if ready {
                    self.uncache(slot, (key, pages));
                    return Some(slot);
                }
            }
            let larger: Vec<((u64, u64), u32)> = self
                .cache
                .range((key, pages + 1)..=(key, u64::MAX))
                .flat_map(|(k, slots)| slots.iter().map(move |s| (*k, *s)))
                .take(LOOK)
                .collect();
            for (k, slot) in larger {
                let cost = k.1 - pages;
                let complete = self
                    .cached_points(slot)
                    .map(<[StreamPoint]>::to_vec)
                    .is_some_and(|points| points.iter().all(|p| ordering.is_complete(*p)));
                if complete && cost < 2 * pages && best.is_none_or(|(c, ..)| cost < c) {
                    best = Some((cost, slot, k));
                    break;
                }
            }
            let smaller: Vec<((u64, u64), u32)> = self
                .cache
                .range((key, 0)..(key, pages))
                .rev()
                .flat_map(|(k, slots)| slots.iter().map(move |s| (*k, *s)))
                .take(LOOK)
                .collect();
            for (k, slot) in smaller {
                let roomy = self
                    .blocks
                    .get(slot as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|block| block.capacity >= pages);
                if !roomy {
                    continue;
                }
                let cost = 2 * (pages - k.1);
                let ready = self
                    .cached_points(slot)
                    .map(<[StreamPoint]>::to_vec)
                    .is_some_and(|points| Self::usable(&points, stream, ordering));
                if ready && cost < 2 * pages && best.is_none_or(|(c, ..)| cost < c) {
                    best = Some((cost, slot, k));
                    break;
                }
            }
        }
        let (_, slot, key) = best?;
        self.uncache(slot, key);
        Some(slot)
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
            let key = (Self::stream_key(points), block.pages.len() as u64);
            self.uncache(slot, key);
            self.unmap_block(slot, mapper);
        }
        // Blocks still in use by the device stay cached, in order.
        while let Some(slot) = skipped.pop_back() {
            self.cache_order.push_front(slot);
        }
        self.free_pages.len() >= needed
    }

    fn stream_key(points: &[StreamPoint]) -> u64 {
        match points {
            [point] => point.stream.value,
            _ => ANY_STREAM,
        }
    }

    /// Unmaps a cached block: its pages go to the free list, its range to the empty ranges.
    fn unmap_block(&mut self, slot: u32, mapper: &mut dyn PageMapper) {
        let Some(block) = self.blocks.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        let size = block.pages.len() as u64 * self.page_size;
        mapper.unmap(block.range, 0, size);
        self.stats.cached_blocks -= 1;
        self.empty_ranges
            .entry(block.capacity)
            .or_default()
            .push(block.range);
        self.free_pages.extend(block.pages);
        self.free_slots.push(slot);
    }

    /// At least `needed` free pages: free ones, then reclaimed ones, then new ones.
    fn free_pages_for(
        &mut self,
        needed: usize,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
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
        Ok(())
    }

    /// Maps `pages` free pages into `range` from page `from` on and grants access to them.
    /// On failure nothing stays mapped and the pages are free again.
    fn map_pages(
        &mut self,
        range: StorageId,
        from: u64,
        pages: Vec<PageId>,
        mapper: &mut dyn PageMapper,
    ) -> Result<Vec<PageId>, IoError> {
        let page_size = self.page_size;
        let start = from * page_size;
        for (index, page) in pages.iter().enumerate() {
            if let Err(error) = mapper.map(range, start + index as u64 * page_size, *page) {
                mapper.unmap(range, start, index as u64 * page_size);
                self.free_pages.extend(pages);
                return Err(error);
            }
        }
        let size = pages.len() as u64 * page_size;
        if let Err(error) = mapper.grant_access(range, start, size) {
            mapper.unmap(range, start, size);
            self.free_pages.extend(pages);
            return Err(error);
        }
        Ok(pages)
    }

    /// Resizes cached block `slot` (out of the cache) to `pages` pages in place.
    fn resize(
        &mut self,
        slot: u32,
        pages: u64,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        let page_size = self.page_size;
        let Some(Some(block)) = self.blocks.get_mut(slot as usize) else {
            return Err(IoError::not_found("a cached paged block vanished"));
        };
        let (range, have) = (block.range, block.pages.len() as u64);
        if have > pages {
            // The device is done with the block (checked when it was chosen).
            let extra = block.pages.split_off(pages as usize);
            mapper.unmap(range, pages * page_size, (have - pages) * page_size);
            self.free_pages.extend(extra);
            return Ok(());
        }
        let missing = (pages - have) as usize;
        if missing == 0 {
            return Ok(());
        }
        self.free_pages_for(missing, mapper, ordering)?;
        let taken = self.free_pages.split_off(self.free_pages.len() - missing);
        let mapped = self.map_pages(range, have, taken, mapper)?;
        if let Some(Some(block)) = self.blocks.get_mut(slot as usize) {
            block.pages.extend(mapped);
        }
        Ok(())
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
        if let Some(slot) = self.take_cached(pages, stream, ordering) {
            let old = self
                .blocks
                .get(slot as usize)
                .and_then(Option::as_ref)
                .map_or(0, |block| block.pages.len() as u64 * self.page_size);
            // Out of reclaim's reach while it changes: it only unmaps cached blocks.
            let points = match self.blocks.get_mut(slot as usize).and_then(Option::as_mut) {
                Some(block) => std::mem::replace(&mut block.state, BlockState::Used { requested }),
                None => BlockState::Used { requested },
            };
            self.stats.cached_blocks -= 1;
            self.stats.bytes_free -= old;
            match self.resize(slot, pages, mapper, ordering) {
                Ok(()) => {
                    // The block's old pages were free bytes, its new ones are in use; pages it
                    // gave back are free, pages it took were.
                    self.stats.bytes_free = (self.stats.bytes_free + old).saturating_sub(rounded);
                    self.account_used(requested, rounded);
                    return Ok((slot, rounded));
                }
                Err(error) => {
                    // Back in the cache as it was (resizing undoes its own changes).
                    if let BlockState::Cached { points } = points {
                        self.cache_again(slot, points);
                    }
                    return Err(error);
                }
            }
        }
        self.free_pages_for(pages as usize, mapper, ordering)?;
        let capacity = Self::capacity_for(pages);
        let range = match self.empty_ranges.get_mut(&capacity).and_then(Vec::pop) {
            Some(range) => range,
            None => mapper.reserve_range(capacity * self.page_size)?,
        };
        let taken: Vec<PageId> = self
            .free_pages
            .split_off(self.free_pages.len() - pages as usize);
        let taken = match self.map_pages(range, 0, taken, mapper) {
            Ok(taken) => taken,
            Err(error) => {
                self.empty_ranges.entry(capacity).or_default().push(range);
                return Err(error);
            }
        };
        let block = PagedBlock {
            range,
            capacity,
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

    /// Puts a used (or resizing) block back in the cache with `points`.
    fn cache_again(&mut self, slot: u32, points: StreamPoints) {
        let Some(Some(block)) = self.blocks.get_mut(slot as usize) else {
            return;
        };
        let pages = block.pages.len() as u64;
        let key = (Self::stream_key(&points), pages);
        block.state = BlockState::Cached { points };
        self.stats.cached_blocks += 1;
        self.stats.bytes_free += pages * self.page_size;
        self.cache.entry(key).or_default().push(slot);
        self.cache_order.push_back(slot);
    }

    fn account_used(&mut self, requested: u64, rounded: u64) {
        self.stats.allocations += 1;
        self.stats.bytes_in_use += requested;
        self.stats.bytes_padding += rounded - requested;
    }

    /// Frees block `slot`: it stays mapped and cached for reuse. Returns `false` if the slot
    /// holds no used block.
    pub fn free(&mut self, slot: u32, points: StreamPoints) -> bool {
        let page_size = self.page_size;
        let Some(Some(block)) = self.blocks.get_mut(slot as usize) else {
            return false;
        };
        let BlockState::Used { requested } = block.state else {
            return false;
        };
        let rounded = block.pages.len() as u64 * page_size;
        self.stats.allocations -= 1;
        self.stats.bytes_in_use -= requested;
        self.stats.bytes_padding -= rounded - requested;
        self.cache_again(slot, points);
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
        /// Map, unmap (per page) and access calls, as the driver would see them.
        calls: u64,
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
            self.calls += 1;
            *self.mapped.entry(range.0).or_default() += 1;
            Ok(())
        }
        fn grant_access(
            &mut self,
            _range: StorageId,
            _offset: u64,
            _size: u64,
        ) -> Result<(), IoError> {
            self.calls += 1;
            Ok(())
        }
        fn unmap(&mut self, range: StorageId, _offset: u64, size: u64) {
            self.calls += size / PAGE;
            let mapped = self.mapped.entry(range.0).or_default();
            *mapped -= size / PAGE;
            if *mapped == 0 {
                self.mapped.remove(&range.0);
            }
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
        pool.free(slot, StreamPoints::new());
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
        pool.free(a, StreamPoints::new());
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
        pool.free(a, StreamPoints::new());
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
        pool.free(a, StreamPoints::new());
        pool.free(b, StreamPoints::new());
        pool.release(&mut mapper, &mut HostOrdering);
        assert_eq!((mapper.live_pages, mapper.live_ranges), (0, 0));
        assert_eq!(pool.stats(), PagedStats::default());
    }

    /// The pool's totals agree with its blocks, its free list and the mapper.
    fn check_consistent(pool: &PagedPool, mapper: &FakeMapper) {
        let (mut used, mut cached, mut cached_pages, mut mapped) = (0, 0, 0, 0);
        for block in pool.blocks.iter().flatten() {
            let pages = block.pages.len() as u64;
            mapped += pages;
            assert!(pages <= block.capacity, "a block outgrew its range");
            match block.state {
                BlockState::Used { .. } => used += 1,
                BlockState::Cached { .. } => {
                    cached += 1;
                    cached_pages += pages;
                }
            }
        }
        let stats = pool.stats();
        assert_eq!(stats.allocations, used);
        assert_eq!(stats.cached_blocks, cached);
        assert_eq!(stats.pages, mapper.live_pages);
        assert_eq!(stats.bytes_reserved, mapper.live_pages * PAGE);
        assert_eq!(
            stats.bytes_free,
            (cached_pages + pool.free_pages.len() as u64) * PAGE
        );
        assert_eq!(mapped + pool.free_pages.len() as u64, mapper.live_pages);
        assert_eq!(mapper.mapped.values().sum::<u64>(), mapped);
        let listed: usize = pool.cache.values().map(Vec::len).sum();
        assert_eq!(listed as u64, cached, "every cached block is listed once");
    }

    #[test]
    fn nearby_larger_block_is_trimmed_in_place() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let stream = StreamId::new(0);
        let (slot, _) = pool
            .reserve(20 * MIB, 20 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        pool.free(slot, StreamPoints::new());
        let calls = mapper.calls;
        let (again, rounded) = pool
            .reserve(14 * MIB, 13 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        assert_eq!((again, rounded), (slot, 14 * MIB));
        assert_eq!(
            mapper.calls - calls,
            3,
            "three pages unmapped, nothing mapped"
        );
        assert_eq!(pool.free_pages.len(), 3);
        check_consistent(&pool, &mapper);
    }

    #[test]
    fn nearby_smaller_block_grows_in_place() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let stream = StreamId::new(0);
        let (slot, _) = pool
            .reserve(12 * MIB, 12 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        pool.free(slot, StreamPoints::new());
        let calls = mapper.calls;
        let (again, rounded) = pool
            .reserve(16 * MIB, 16 * MIB, stream, &mut mapper, &mut HostOrdering)
            .unwrap();
        assert_eq!((again, rounded), (slot, 16 * MIB));
        assert_eq!(
            mapper.calls - calls,
            3,
            "two pages mapped, one access grant"
        );
        assert_eq!(mapper.live_pages, 8);
        check_consistent(&pool, &mapper);
    }

    #[test]
    fn larger_block_the_device_may_still_use_is_not_trimmed() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let stream = StreamId::new(1);
        let (slot, _) = pool
            .reserve(20 * MIB, 20 * MIB, stream, &mut mapper, &mut Pending)
            .unwrap();
        pool.free(slot, smallvec::smallvec![StreamPoint { stream, seq: 1 }]);
        let (other, _) = pool
            .reserve(14 * MIB, 14 * MIB, stream, &mut mapper, &mut Pending)
            .unwrap();
        assert_ne!(other, slot);
        assert_eq!(mapper.mapped[&pool.storage_of(slot).unwrap().0.0], 10);
        check_consistent(&pool, &mapper);
    }

    #[test]
    fn random_reserves_and_frees_keep_the_totals_consistent() {
        let (mut pool, mut mapper) = (PagedPool::new(), FakeMapper::default());
        let mut live: Vec<u32> = Vec::new();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2000 {
            let roll = next();
            if roll % 3 == 0 && !live.is_empty() {
                let slot = live.swap_remove((next() % live.len() as u64) as usize);
                let stream = StreamId::new(next() % 2);
                assert!(pool.free(slot, smallvec::smallvec![StreamPoint { stream, seq: 1 }]));
            } else {
                let size = 1 + next() % (96 * MIB);
                let stream = StreamId::new(next() % 2);
                let (slot, rounded) = pool
                    .reserve(size, size, stream, &mut mapper, &mut HostOrdering)
                    .unwrap();
                assert!(rounded >= size && rounded - size < PAGE);
                live.push(slot);
            }
            check_consistent(&pool, &mapper);
        }
        for slot in live {
            pool.free(slot, StreamPoints::new());
        }
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
            smallvec::smallvec![StreamPoint {
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
