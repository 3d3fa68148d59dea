//! A pool of large allocations carved from one growable, page-mapped address range per
//! stream (what PyTorch calls expandable segments).
//!
//! With a [`PageMapper`] (CUDA virtual memory management) each stream gets one large
//! address range, reserved once. Blocks are carved from it best-fit, split and coalesced
//! like a heap; only the pages under blocks are backed by physical pages. So:
//!
//! - a freed block stays mapped, and a later request that fits it (or part of it, or it
//!   merged with its free neighbours) takes it with no driver call: sizes that change a
//!   little from step to step reuse the same memory;
//! - a request that fits no free block goes at the end of the range, and only the pages it
//!   needs are mapped: the range grows, nothing is copied, no segment of the wrong size is
//!   stranded;
//! - physical memory follows live data: while the pool holds more than a budget (1 % over
//!   the largest live total seen so far, plus a few pages), a page the range needs is taken
//!   from under a free block (the highest-addressed one, whose device work is complete)
//!   instead of created. Pages are given back to the device only by [`GrowablePool::release`]
//!   (`memory_cleanup`, the out-of-memory retry).
//!
//! Among the free blocks that fit, the pool prefers the one whose pages are already mapped,
//! then the smallest; it looks at the 16 best-fitting ones. Where the mapper allocates
//! physical blocks of several pages (CUDA), the pool's page is such a block
//! (`[memory] growable_block`, 16 MiB by default): one `cuMemCreate` and one `cuMemMap` per
//! block, one `cuMemSetAccess` per growth.
//!
//! Blocks of a stream are reused on that stream at once (its work is ordered); the pages of
//! a free block are unmapped only once its stream points are complete.

use super::block_pool::merge_points;
use super::ordering::{StreamOrdering, StreamPoint};
use crate::error::IoError;
use crate::storage::{PageId, PageMapper, StorageId};
use crate::stream::StreamId;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Free blocks looked at per request (the best-fitting ones).
const CANDIDATES: usize = 16;
/// Pages the pool may hold beyond 1 % over the live peak before it moves pages instead of
/// creating them.
const SPARE_PAGES: u64 = 4;

/// One block of a heap.
struct Block {
    size: u64,
    state: BlockState,
}

enum BlockState {
    Used { requested: u64 },
    Free { points: Vec<StreamPoint> },
}

/// The address range of one stream and the blocks carved from it.
struct Heap {
    range: StorageId,
    range_size: u64,
    /// Blocks by offset, covering `0 .. end` without gaps.
    blocks: BTreeMap<u64, Block>,
    /// Free blocks by (size, offset).
    free: BTreeSet<(u64, u64)>,
    end: u64,
    /// Physical pages mapped, by page index in the range.
    mapped: BTreeMap<u64, PageId>,
}

/// Totals of the growable pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrowableStats {
    /// Physical pages held (mapped or spare).
    pub pages: u64,
    /// Those pages, in bytes.
    pub bytes_reserved: u64,
    /// Bytes requested by live blocks.
    pub bytes_in_use: u64,
    /// Rounding of live blocks.
    pub bytes_padding: u64,
    /// Live blocks.
    pub allocations: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Times the pool created physical pages (once per request that needed new ones).
    pub growths: u64,
    /// Pages moved from under a free block to where a request needed them.
    pub pages_moved: u64,
    /// Growths whose pages were all given back (counted when the pool holds no page any
    /// more), so `growths - growths_released` is the growths whose memory is still held.
    pub growths_released: u64,
}

/// The growable pool. See the module docs.
pub struct GrowablePool {
    range_size: u64,
    /// Bytes of the physical blocks to map where the mapper allocates blocks of several
    /// pages (`[memory] growable_block`).
    block_bytes: u64,
    /// The pool's page: `block_pages` of the mapper's pages, allocated and mapped as one.
    page_size: u64,
    block_pages: u64,
    heaps: HashMap<u64, Heap>,
    /// Live blocks by slot: (stream key, offset).
    slots: Vec<Option<(u64, u64)>>,
    free_slots: Vec<u32>,
    /// Physical pages held and not mapped.
    spare: Vec<PageId>,
    live_bytes: u64,
    budget: u64,
    stats: GrowableStats,
}

impl GrowablePool {
    /// An empty pool whose streams each reserve `range_size` bytes of address space, and
    /// which maps physical blocks of about `block_bytes` where the mapper allows (fewer
    /// driver calls than one per 2 MiB page; PyTorch's expandable segments map 20 MiB at a
    /// time).
    pub fn new(range_size: u64, block_bytes: u64) -> Self {
        Self {
            range_size,
            block_bytes,
            page_size: 1,
            block_pages: 1,
            heaps: HashMap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            spare: Vec::new(),
            live_bytes: 0,
            budget: 0,
            stats: GrowableStats::default(),
        }
    }

    /// Totals.
    pub fn stats(&self) -> GrowableStats {
        self.stats
    }

    /// The range and offset of live block `slot`.
    pub fn storage_of(&self, slot: u32) -> Option<(StorageId, u64)> {
        let (key, offset) = (*self.slots.get(slot as usize)?)?;
        Some((self.heaps.get(&key)?.range, offset))
    }

    /// Reserves a block of `size` bytes (a multiple of the manager's rounding; `requested`
    /// asked by the caller) for `stream`. Returns its slot and offset in its range.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] when the stream's range is full or no page can be created
    /// or moved; the mapper's other errors. A failed reservation leaves the pool as it was
    /// (pages it mapped stay mapped, under a free block).
    pub fn reserve(
        &mut self,
        size: u64,
        requested: u64,
        stream: StreamId,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(u32, u64), IoError> {
        if self.stats.pages == 0 && self.heaps.is_empty() {
            let device_page = mapper.page_size().max(1);
            self.block_pages =
                (self.block_bytes / device_page).clamp(1, mapper.max_block_pages().max(1));
            self.page_size = device_page * self.block_pages;
        }
        let key = stream.value;
        if !self.heaps.contains_key(&key) {
            let range_size = self.range_size.div_ceil(self.page_size) * self.page_size;
            let range = mapper.reserve_range(range_size)?;
            self.heaps.insert(
                key,
                Heap {
                    range,
                    range_size,
                    blocks: BTreeMap::new(),
                    free: BTreeSet::new(),
                    end: 0,
                    mapped: BTreeMap::new(),
                },
            );
        }
        let offset = self.place(key, size)?;
        self.live_bytes += size;
        let wanted = self.live_bytes + self.live_bytes / 100 + SPARE_PAGES * self.page_size;
        self.budget = self.budget.max(wanted);
        if let Err(error) = self.map_block(key, offset, size, mapper, ordering) {
            self.live_bytes -= size;
            self.free_block(key, offset, Vec::new());
            return Err(error);
        }
        if let Some(block) = self
            .heaps
            .get_mut(&key)
            .and_then(|heap| heap.blocks.get_mut(&offset))
        {
            block.state = BlockState::Used { requested };
        }
        self.stats.allocations += 1;
        self.stats.bytes_in_use += requested;
        self.stats.bytes_padding += size - requested;
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some((key, offset));
                slot
            }
            None => {
                self.slots.push(Some((key, offset)));
                (self.slots.len() - 1) as u32
            }
        };
        Ok((slot, offset))
    }

    /// Carves a block of `size` bytes from heap `key` (best fitting free block, else at
    /// the end) and returns its offset; the block is marked used (requested 0).
    fn place(&mut self, key: u64, size: u64) -> Result<u64, IoError> {
        let page_size = self.page_size;
        let Some(heap) = self.heaps.get_mut(&key) else {
            return Err(IoError::invalid("no address range for the stream"));
        };
        let missing_pages = |offset: u64| {
            let (first, last) = (offset / page_size, (offset + size - 1) / page_size);
            (first..=last)
                .filter(|page| !heap.mapped.contains_key(page))
                .count()
        };
        let fit = heap
            .free
            .range((size, 0)..)
            .take(CANDIDATES)
            .min_by_key(|&&(free_size, offset)| (missing_pages(offset), free_size))
            .copied();
        let offset = match fit {
            Some((free_size, offset)) => {
                heap.free.remove(&(free_size, offset));
                if free_size > size {
                    let points = match heap.blocks.get_mut(&offset) {
                        Some(Block {
                            state: BlockState::Free { points },
                            ..
                        }) => std::mem::take(points),
                        _ => Vec::new(),
                    };
                    let rest = (offset + size, free_size - size);
                    heap.blocks.insert(
                        rest.0,
                        Block {
                            size: rest.1,
                            state: BlockState::Free { points },
                        },
                    );
                    heap.free.insert((rest.1, rest.0));
                } else {
                    self.stats.free_blocks -= 1;
                }
                offset
            }
            None => {
                // At the end, taking a free last block in.
                let mut offset = heap.end;
                if let Some((&last, block)) = heap.blocks.iter().next_back()
                    && matches!(block.state, BlockState::Free { .. })
                {
                    heap.free.remove(&(block.size, last));
                    heap.blocks.remove(&last);
                    self.stats.free_blocks -= 1;
                    offset = last;
                }
                if offset + size > heap.range_size {
                    if offset != heap.end {
                        // Put the last free block back as it was.
                        let tail = heap.end - offset;
                        heap.blocks.insert(
                            offset,
                            Block {
                                size: tail,
                                state: BlockState::Free { points: Vec::new() },
                            },
                        );
                        heap.free.insert((tail, offset));
                        self.stats.free_blocks += 1;
                    }
                    return Err(IoError::OutOfMemory {
                        requested: size,
                        reserved: self.stats.bytes_reserved,
                        free: 0,
                        reason: format!(
                            "the stream's address range of {} bytes is full",
                            heap.range_size
                        ),
                        backtrace: crate::backtrace::BackTrace::capture(),
                    });
                }
                heap.end = heap.end.max(offset + size);
                offset
            }
        };
        heap.blocks.insert(
            offset,
            Block {
                size,
                state: BlockState::Used { requested: 0 },
            },
        );
        Ok(offset)
    }

    /// Maps every page under `offset .. offset + size` of heap `key`.
    fn map_block(
        &mut self,
        key: u64,
        offset: u64,
        size: u64,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        let page_size = self.page_size;
        let (first, last) = (offset / page_size, (offset + size - 1) / page_size);
        let missing: Vec<u64> = match self.heaps.get(&key) {
            Some(heap) => (first..=last)
                .filter(|page| !heap.mapped.contains_key(page))
                .collect(),
            None => return Err(IoError::invalid("no address range for the stream")),
        };
        if missing.is_empty() {
            return Ok(());
        }
        let mut grew = false;
        for &page_index in &missing {
            let page = match self.spare.pop() {
                Some(page) => page,
                None => self.next_page(key, page_index, mapper, ordering, &mut grew)?,
            };
            let Some(heap) = self.heaps.get_mut(&key) else {
                return Err(IoError::invalid("no address range for the stream"));
            };
            if let Err(error) =
                mapper.map_block(heap.range, page_index * page_size, page, self.block_pages)
            {
                self.spare.push(page);
                return Err(error);
            }
            heap.mapped.insert(page_index, page);
        }
        if grew {
            self.stats.growths += 1;
        }
        let Some(heap) = self.heaps.get(&key) else {
            return Err(IoError::invalid("no address range for the stream"));
        };
        // Access for the new pages, run by run.
        let mut run_start = missing[0];
        let mut previous = missing[0];
        for &page in missing.iter().skip(1).chain(std::iter::once(&u64::MAX)) {
            if page != previous + 1 {
                let pages = previous + 1 - run_start;
                mapper.grant_access(heap.range, run_start * page_size, pages * page_size)?;
                run_start = page;
            }
            previous = page;
        }
        Ok(())
    }

    /// A physical page for page `needed` of heap `key`: moved from under a free block when
    /// the pool holds its budget, else created (moved after all if creating fails).
    fn next_page(
        &mut self,
        key: u64,
        needed: u64,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
        grew: &mut bool,
    ) -> Result<PageId, IoError> {
        let over_budget = (self.stats.pages + 1) * self.page_size > self.budget;
        if over_budget && let Some(page) = self.take_free_page(key, needed, mapper, ordering) {
            return Ok(page);
        }
        match mapper.create_block(self.block_pages) {
            Ok(page) => {
                *grew = true;
                self.stats.pages += 1;
                self.stats.bytes_reserved += self.page_size;
                Ok(page)
            }
            Err(error) => self
                .take_free_page(key, needed, mapper, ordering)
                .ok_or(error),
        }
    }

    /// Unmaps the highest-addressed page lying wholly under a free block whose work is
    /// complete (in heap `key`, else any heap), other than page `keep` of heap `key`.
    fn take_free_page(
        &mut self,
        key: u64,
        keep: u64,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Option<PageId> {
        let page_size = self.page_size;
        let mut keys: Vec<u64> = self.heaps.keys().copied().filter(|k| *k != key).collect();
        keys.insert(0, key);
        for heap_key in keys {
            let Some(heap) = self.heaps.get_mut(&heap_key) else {
                continue;
            };
            let mut victim = None;
            let heap_end = heap.end;
            for (&offset, block) in heap.blocks.iter_mut().rev() {
                let BlockState::Free { points } = &mut block.state else {
                    continue;
                };
                // Pages wholly under the block (the last block also owns its last page:
                // nothing lies past the end).
                let block_end = offset + block.size;
                let end = if block_end == heap_end {
                    block_end.div_ceil(page_size)
                } else {
                    block_end / page_size
                };
                let first = offset.div_ceil(page_size);
                if first >= end {
                    continue;
                }
                points.retain(|point| !ordering.is_complete(*point));
                if !points.is_empty() {
                    continue;
                }
                victim = heap
                    .mapped
                    .range(first..end)
                    .rev()
                    .map(|(&index, _)| index)
                    .find(|&index| heap_key != key || index != keep);
                if victim.is_some() {
                    break;
                }
            }
            if let Some(index) = victim
                && let Some(page) = heap.mapped.remove(&index)
            {
                mapper.unmap_block(heap.range, index * page_size, self.block_pages);
                self.stats.pages_moved += 1;
                return Some(page);
            }
        }
        None
    }

    /// Frees live block `slot`: it stays mapped for reuse; `points` say which stream work
    /// may still use it. Returns `false` if the slot holds no live block.
    pub fn free(&mut self, slot: u32, points: Vec<StreamPoint>) -> bool {
        let Some(Some((key, offset))) = self.slots.get(slot as usize).copied() else {
            return false;
        };
        let Some(block) = self
            .heaps
            .get(&key)
            .and_then(|heap| heap.blocks.get(&offset))
        else {
            return false;
        };
        let BlockState::Used { requested } = block.state else {
            return false;
        };
        let size = block.size;
        self.slots[slot as usize] = None;
        self.free_slots.push(slot);
        self.live_bytes -= size;
        self.stats.allocations -= 1;
        self.stats.bytes_in_use -= requested;
        self.stats.bytes_padding -= size - requested;
        self.free_block(key, offset, points);
        true
    }

    /// Marks the block at `offset` of heap `key` free, merged with free neighbours.
    fn free_block(&mut self, key: u64, offset: u64, mut points: Vec<StreamPoint>) {
        let Some(heap) = self.heaps.get_mut(&key) else {
            return;
        };
        let Some(block) = heap.blocks.remove(&offset) else {
            return;
        };
        let (mut start, mut size) = (offset, block.size);
        let previous = heap
            .blocks
            .range(..offset)
            .next_back()
            .map(|(&at, block)| (at, block.size));
        if let Some((at, previous_size)) = previous
            && at + previous_size == offset
            && let Some(Block {
                state: BlockState::Free { points: theirs },
                ..
            }) = heap.blocks.get(&at)
        {
            merge_points(&mut points, theirs);
            heap.free.remove(&(previous_size, at));
            heap.blocks.remove(&at);
            self.stats.free_blocks -= 1;
            start = at;
            size += previous_size;
        }
        let next = offset + block.size;
        if let Some(Block {
            size: next_size,
            state: BlockState::Free { points: theirs },
        }) = heap.blocks.get(&next)
        {
            merge_points(&mut points, theirs);
            let next_size = *next_size;
            heap.free.remove(&(next_size, next));
            heap.blocks.remove(&next);
            self.stats.free_blocks -= 1;
            size += next_size;
        }
        heap.blocks.insert(
            start,
            Block {
                size,
                state: BlockState::Free { points },
            },
        );
        heap.free.insert((size, start));
        self.stats.free_blocks += 1;
    }

    /// Gives the pages under free blocks whose work is complete, and spare pages, back to
    /// the device; the bytes given back. Ranges stay reserved.
    pub fn release(
        &mut self,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> u64 {
        let page_size = self.page_size;
        let keys: Vec<u64> = self.heaps.keys().copied().collect();
        for key in keys {
            while let Some(page) = self.take_free_page(key, u64::MAX, mapper, ordering) {
                self.stats.pages_moved -= 1;
                self.spare.push(page);
            }
        }
        let count = self.spare.len() as u64;
        for page in self.spare.drain(..) {
            mapper.release_page(page);
        }
        self.stats.pages -= count;
        self.stats.bytes_reserved -= count * page_size;
        if self.stats.pages == 0 {
            self.stats.growths_released = self.stats.growths;
        }
        // Physical memory may grow back to what is live before moving pages again.
        self.budget = self.live_bytes + self.live_bytes / 100 + SPARE_PAGES * page_size;
        count * page_size
    }

    /// The largest free block of any stream's range, in bytes.
    pub fn largest_free_block(&self) -> u64 {
        self.heaps
            .values()
            .filter_map(|heap| heap.free.last().map(|&(size, _)| size))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ordering::HostOrdering;
    use std::collections::HashSet;

    const PAGE: u64 = 2 << 20;
    const MIB: u64 = 1 << 20;

    /// Keeps which physical page backs each page of each range, like a driver.
    #[derive(Default)]
    struct FakeMapper {
        next: u64,
        pages: HashSet<u64>,
        mapped: HashMap<(u64, u64), u64>,
        creates: u64,
        maps: u64,
        refuse_pages_after: Option<u64>,
    }

    impl PageMapper for FakeMapper {
        fn page_size(&self) -> u64 {
            PAGE
        }
        fn reserve_range(&mut self, _size: u64) -> Result<StorageId, IoError> {
            self.next += 1;
            Ok(StorageId(self.next))
        }
        fn free_range(&mut self, _range: StorageId) {}
        fn create_page(&mut self) -> Result<PageId, IoError> {
            if self
                .refuse_pages_after
                .is_some_and(|limit| self.pages.len() as u64 >= limit)
            {
                return Err(IoError::OutOfMemory {
                    requested: PAGE,
                    reserved: 0,
                    free: 0,
                    reason: "fake device full".into(),
                    backtrace: crate::backtrace::BackTrace::none(),
                });
            }
            self.next += 1;
            self.creates += 1;
            self.pages.insert(self.next);
            Ok(PageId(self.next))
        }
        fn release_page(&mut self, page: PageId) {
            assert!(self.pages.remove(&page.0), "a page released twice");
            assert!(
                !self.mapped.values().any(|p| *p == page.0),
                "a mapped page released"
            );
        }
        fn map(&mut self, range: StorageId, offset: u64, page: PageId) -> Result<(), IoError> {
            assert!(offset.is_multiple_of(PAGE));
            assert!(self.pages.contains(&page.0), "an unknown page mapped");
            assert!(
                !self.mapped.values().any(|p| *p == page.0),
                "a page mapped twice"
            );
            let old = self.mapped.insert((range.0, offset), page.0);
            assert!(old.is_none(), "a slot mapped twice");
            self.maps += 1;
            Ok(())
        }
        fn grant_access(&mut self, range: StorageId, start: u64, size: u64) -> Result<(), IoError> {
            for offset in (start..start + size).step_by(PAGE as usize) {
                assert!(
                    self.mapped.contains_key(&(range.0, offset)),
                    "access to an unmapped page"
                );
            }
            Ok(())
        }
        fn unmap(&mut self, range: StorageId, start: u64, size: u64) {
            for offset in (start..start + size).step_by(PAGE as usize) {
                assert!(
                    self.mapped.remove(&(range.0, offset)).is_some(),
                    "unmapping a hole"
                );
            }
        }
    }

    /// A fake whose physical blocks hold 4 pages.
    #[derive(Default)]
    struct BlockMapper(FakeMapper);

    impl PageMapper for BlockMapper {
        fn page_size(&self) -> u64 {
            PAGE / 4
        }
        fn reserve_range(&mut self, size: u64) -> Result<StorageId, IoError> {
            self.0.reserve_range(size)
        }
        fn free_range(&mut self, range: StorageId) {
            self.0.free_range(range)
        }
        fn create_page(&mut self) -> Result<PageId, IoError> {
            panic!("the pool creates blocks")
        }
        fn release_page(&mut self, page: PageId) {
            self.0.release_page(page)
        }
        fn map(&mut self, _: StorageId, _: u64, _: PageId) -> Result<(), IoError> {
            panic!("the pool maps blocks")
        }
        fn grant_access(&mut self, range: StorageId, start: u64, size: u64) -> Result<(), IoError> {
            self.0.grant_access(range, start, size)
        }
        fn unmap(&mut self, _: StorageId, _: u64, _: u64) {
            panic!("the pool unmaps blocks")
        }
        fn max_block_pages(&self) -> u64 {
            4
        }
        fn create_block(&mut self, pages: u64) -> Result<PageId, IoError> {
            assert_eq!(pages, 4);
            self.0.create_page()
        }
        fn map_block(
            &mut self,
            range: StorageId,
            offset: u64,
            block: PageId,
            pages: u64,
        ) -> Result<(), IoError> {
            assert_eq!(pages, 4);
            self.0.map(range, offset, block)
        }
        fn unmap_block(&mut self, range: StorageId, offset: u64, pages: u64) {
            assert_eq!(pages, 4);
            self.0.unmap(range, offset, PAGE);
        }
    }

    #[test]
    fn blocks_of_several_pages_are_created_mapped_and_moved_whole() {
        let (mut pool, mut mapper) = (GrowablePool::new(1 << 40, 16 << 20), BlockMapper::default());
        let stream = StreamId::new(0);
        let mut reserve = |pool: &mut GrowablePool, size| {
            pool.reserve(size, size, stream, &mut mapper, &mut HostOrdering)
                .unwrap()
                .0
        };
        let a = reserve(&mut pool, 100 * MIB);
        let _b = reserve(&mut pool, 100 * MIB);
        pool.free(a, Vec::new());
        reserve(&mut pool, 150 * MIB);
        assert!(pool.stats().pages_moved > 0);
        assert_eq!(pool.stats().bytes_reserved, pool.stats().pages * PAGE);
        pool.release(&mut mapper, &mut HostOrdering);
    }

    fn reserve(pool: &mut GrowablePool, mapper: &mut FakeMapper, size: u64) -> u32 {
        pool.reserve(size, size, StreamId::new(0), mapper, &mut HostOrdering)
            .unwrap()
            .0
    }

    #[test]
    fn a_freed_block_serves_a_smaller_request_without_driver_calls() {
        let (mut pool, mut mapper) = (GrowablePool::new(1 << 40, 16 << 20), FakeMapper::default());
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        assert!(pool.free(a, Vec::new()));
        assert_eq!(pool.largest_free_block(), 64 * MIB);
        let maps = mapper.maps;
        reserve(&mut pool, &mut mapper, 60 * MIB);
        reserve(&mut pool, &mut mapper, 3 * MIB + 512);
        assert_eq!(mapper.maps, maps, "both fit the freed block's mapped pages");
        assert_eq!(pool.stats().bytes_reserved, 64 * MIB);
    }

    #[test]
    fn a_larger_request_maps_only_the_pages_past_the_end() {
        let (mut pool, mut mapper) = (GrowablePool::new(1 << 40, 16 << 20), FakeMapper::default());
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        pool.free(a, Vec::new());
        reserve(&mut pool, &mut mapper, 70 * MIB);
        assert_eq!(mapper.maps, 35, "32 pages, then 3 more at the end");
        assert_eq!(pool.stats().growths, 2);
    }

    #[test]
    fn pages_move_from_free_blocks_once_the_pool_holds_the_live_peak() {
        let (mut pool, mut mapper) = (GrowablePool::new(1 << 40, 16 << 20), FakeMapper::default());
        // Two 100 MiB blocks; the first freed; a 150 MiB request doesn't fit its hole.
        let a = reserve(&mut pool, &mut mapper, 100 * MIB);
        let _b = reserve(&mut pool, &mut mapper, 100 * MIB);
        pool.free(a, Vec::new());
        let pages = mapper.pages.len();
        reserve(&mut pool, &mut mapper, 150 * MIB);
        // Live 250 MiB: the budget (1 % + 4 pages) allows 262 MiB, 131 pages; 175 would be
        // needed without moving pages.
        assert!(
            mapper.pages.len() <= 131,
            "{} pages held",
            mapper.pages.len()
        );
        assert!(pool.stats().pages_moved > 0);
        assert!(mapper.pages.len() > pages);
    }

    #[test]
    fn release_gives_back_pages_under_free_blocks_and_reuse_maps_them_again() {
        let (mut pool, mut mapper) = (GrowablePool::new(1 << 40, 16 << 20), FakeMapper::default());
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        let b = reserve(&mut pool, &mut mapper, 3 * MIB);
        pool.free(a, Vec::new());
        let given = pool.release(&mut mapper, &mut HostOrdering);
        // The page shared with `b` stays.
        assert_eq!(given, 32 * PAGE);
        assert_eq!(pool.stats().pages, 2);
        reserve(&mut pool, &mut mapper, 64 * MIB);
        pool.free(b, Vec::new());
        assert_eq!(pool.stats().allocations, 1);
    }

    #[test]
    fn a_full_device_fails_the_request_and_leaves_the_pool_usable() {
        let mut mapper = FakeMapper {
            refuse_pages_after: Some(10),
            ..FakeMapper::default()
        };
        let mut pool = GrowablePool::new(1 << 40, 16 << 20);
        let a = reserve(&mut pool, &mut mapper, 16 * MIB);
        let error = pool
            .reserve(
                32 * MIB,
                32 * MIB,
                StreamId::new(0),
                &mut mapper,
                &mut HostOrdering,
            )
            .unwrap_err();
        assert!(matches!(error, IoError::OutOfMemory { .. }), "{error:?}");
        assert_eq!(pool.stats().allocations, 1);
        pool.free(a, Vec::new());
        // The 8 mapped pages and the 2 the failed request mapped serve 20 MiB.
        reserve(&mut pool, &mut mapper, 20 * MIB);
        assert_eq!(mapper.pages.len(), 10);
    }

    /// Random requests and frees on two streams: live blocks never overlap, every page under
    /// a live block is mapped to a page of its own, the totals add up, and a release with
    /// nothing live gives every page back.
    #[test]
    fn random_sequences_keep_blocks_apart_and_totals_consistent() {
        let mut rng = fastrand::Rng::with_seed(7);
        let (mut pool, mut mapper) = (GrowablePool::new(1 << 36, 16 << 20), FakeMapper::default());
        let mut live: Vec<(u32, u64, u64)> = Vec::new();
        for step in 0..3000 {
            if live.is_empty() || rng.u32(0..100) < 55 {
                let size = rng.u64(1..=40) * MIB / 2 + 512 * rng.u64(0..4);
                let stream = StreamId::new(rng.u64(0..2));
                let (slot, _) = pool
                    .reserve(size, size, stream, &mut mapper, &mut HostOrdering)
                    .unwrap();
                live.push((slot, size, stream.value));
            } else {
                let (slot, ..) = live.swap_remove(rng.usize(0..live.len()));
                assert!(pool.free(slot, Vec::new()));
            }
            if step % 500 == 499 {
                pool.release(&mut mapper, &mut HostOrdering);
            }
            let stats = pool.stats();
            assert_eq!(stats.allocations, live.len() as u64);
            assert_eq!(
                stats.bytes_in_use,
                live.iter().map(|(_, s, _)| s).sum::<u64>()
            );
            assert_eq!(stats.pages, mapper.pages.len() as u64);
            let mut spans: Vec<(u64, u64, u64, u64)> = live
                .iter()
                .map(|&(slot, size, key)| {
                    let (range, offset) = pool.storage_of(slot).unwrap();
                    (range.0, offset, size, key)
                })
                .collect();
            spans.sort_unstable();
            for pair in spans.windows(2) {
                if pair[0].0 == pair[1].0 {
                    assert!(
                        pair[0].1 + pair[0].2 <= pair[1].1,
                        "blocks overlap: {pair:?}"
                    );
                }
            }
            for &(range, offset, size, _) in &spans {
                for page in offset / PAGE..=(offset + size - 1) / PAGE {
                    assert!(
                        mapper.mapped.contains_key(&(range, page * PAGE)),
                        "unmapped page"
                    );
                }
            }
        }
        for (slot, ..) in live.drain(..) {
            pool.free(slot, Vec::new());
        }
        pool.release(&mut mapper, &mut HostOrdering);
        assert_eq!(mapper.pages.len(), 0);
        assert_eq!(pool.stats().growths_released, pool.stats().growths);
        assert!(mapper.mapped.is_empty());
    }
}
