//! A pool of large allocations carved from one growable, page-mapped address range per
//! stream (what PyTorch calls expandable segments), backed by physical chunks of any size.
//!
//! With a [`PageMapper`] (CUDA virtual memory management) each stream gets one large
//! address range, reserved once. Blocks are carved from it best-fit, split and coalesced
//! like a heap; only the pages under blocks are backed by physical memory, in *chunks*: one
//! physical allocation (`cuMemCreate`) of a whole number of the mapper's pages, mapped at
//! one place in the range. So:
//!
//! - a freed block stays mapped, and a later request that fits it (or part of it, or it
//!   merged with its free neighbours) takes it with no driver call: sizes that change a
//!   little from step to step reuse the same memory;
//! - a request that fits no free block goes at the end of the range, and the pages it
//!   lacks are backed by **one** new chunk (at least `[memory] growable_block` at the
//!   growing end): the range grows, nothing is copied, no segment of the wrong size is
//!   stranded, and a growth costs the same few driver calls whatever its size;
//! - physical memory follows live data: while the pool holds more than a budget (1 % over
//!   the largest live total seen so far, plus a few minimum chunks), the pages a request
//!   lacks are first taken from chunks lying wholly under free blocks whose device work is
//!   complete: such a chunk no larger than what is missing is moved (unmapped and mapped
//!   again where it is needed), a larger one is given back to the device. Pages are given
//!   back otherwise only by [`GrowablePool::release`] (`memory_cleanup`, the idle timer,
//!   the out-of-memory retry);
//! - what the pool had to create past its budget (no free chunk could serve) raises the
//!   budget to that much, until `release` sets it back to what is live: the pool has held
//!   it once, and shrinking back under the lower figure would cost moves and gives back
//!   and creates again, step after step, without lowering its peak. On the generated MLP
//!   loop this halved the device allocations (180 to 82) at the same peak.
//!
//! Why chunks of any size: on an H200 (`scripts/anchors/vmm_costs.cu`) `cuMemCreate` costs
//! about 10 µs, `cuMemMap` 1 µs, `cuMemUnmap` 17 µs and `cuMemSetAccess` about 25 µs *per
//! physical allocation* it covers, whatever their sizes. Fixed pages of 16 MiB made a
//! growth of 1 GiB cost 64 of each and a page move 43 µs per 16 MiB; a chunk costs them
//! once. A chunk partly under a live block can't be moved or given back, so the pool
//! prefers placements over mapped pages and moves whole chunks.
//!
//! Among the free blocks that fit, the pool prefers the one whose pages are already mapped,
//! then the smallest; it looks at the 16 best-fitting ones. Blocks of a stream are reused
//! on that stream at once where its own work used them last (its work is ordered); where
//! another stream did, the stream first waits for that work on the device
//! ([`StreamOrdering::wait_for`], as in the block pools), or, if it can't, takes fresh
//! memory at the end. A chunk is unmapped only once the stream points of the free blocks
//! over it are complete.
//!
//! **The block freed last** is not merged into its heap's free blocks at once: it waits as
//! the pool's *recent* block, and a reservation of the same size on the same stream takes it
//! back as it is where placement would have picked it anyway (no free neighbour, no free
//! block of that size at a lower offset; its pages are backed, since a chunk under it was
//! never free to move). An allocate-and-free loop then neither merges, splits nor looks for
//! a fit: on the
//! inline dry run of this repository's 2-core VM (2 M pairs of `client.empty` + drop on
//! `dry_run::client`, release build; `docs/benchmarks.md`, 2026-11-29 late night), a
//! 64 MiB alloc + free pair took 286 ns before and 153 ns after. Any other
//! reservation, the next free and [`GrowablePool::release`] first merge the recent block
//! as an ordinary free, so every placement and chunk decision sees the same free blocks as
//! if it had been merged at once.

use super::block_pool::merge_points;
use super::id_map::FastMap;
use super::ordering::{StreamOrdering, StreamPoint, StreamPoints};
use super::usage::timed;
use crate::error::IoError;
use crate::storage::{PageId, PageMapper, StorageId};
use crate::stream::StreamId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Free blocks looked at per request (the best-fitting ones).
const CANDIDATES: usize = 16;
/// Minimum chunks (`[memory] growable_block`) the pool may hold beyond 1 % over the live
/// peak before it takes pages from free chunks instead of creating them.
const SPARE_CHUNKS: u64 = 4;

/// One block of a heap.
struct Block {
    size: u64,
    state: BlockState,
}

enum BlockState {
    Used { requested: u64 },
    Free { points: StreamPoints },
}

/// A physical allocation mapped into a heap's range.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    /// The mapper's pages it holds.
    pages: u64,
    id: PageId,
}

/// A chunk that may be moved or given back: `pages` pages from page `start` of heap `key`.
#[derive(Clone, Copy, Debug)]
struct FreeChunk {
    key: u64,
    start: u64,
    pages: u64,
}

/// The block freed last, not merged yet (see the module docs): block `offset` of heap `key`,
/// whose state stays `Used` so that nothing merges into it or moves its chunks.
struct RecentFree {
    key: u64,
    offset: u64,
    size: u64,
    points: StreamPoints,
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
    /// Chunks mapped in the range, by first page index; they never overlap.
    chunks: BTreeMap<u64, Chunk>,
}

impl Heap {
    /// The chunks overlapping pages `first ..= last`, as (first page, chunk).
    fn chunks_over(&self, first: u64, last: u64) -> impl Iterator<Item = (u64, Chunk)> + '_ {
        let from = self
            .chunks
            .range(..=first)
            .next_back()
            .filter(|(start, chunk)| *start + chunk.pages > first)
            .map_or(first, |(start, _)| *start);
        self.chunks
            .range(from..=last)
            .map(|(start, chunk)| (*start, *chunk))
    }

    /// The runs of pages in `first ..= last` no chunk backs, as (first page, pages).
    fn missing_runs(&self, first: u64, last: u64) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        let mut next = first;
        for (start, chunk) in self.chunks_over(first, last) {
            if start > next {
                runs.push((next, start - next));
            }
            next = next.max(start + chunk.pages);
        }
        if next <= last {
            runs.push((next, last + 1 - next));
        }
        runs
    }

    /// How many pages of `first ..= last` no chunk backs.
    fn missing_pages(&self, first: u64, last: u64) -> u64 {
        let covered: u64 = self
            .chunks_over(first, last)
            .map(|(start, chunk)| (start + chunk.pages - 1).min(last) + 1 - start.max(first))
            .sum();
        last + 1 - first - covered
    }

    /// The page past the last chunk (0 when there is none).
    fn frontier(&self) -> u64 {
        self.chunks
            .last_key_value()
            .map_or(0, |(start, chunk)| start + chunk.pages)
    }

    /// The chunks lying wholly under free blocks whose work is complete (or past the last
    /// block), appended to `out` in address order.
    fn free_chunks(
        &mut self,
        key: u64,
        page_size: u64,
        ordering: &mut dyn StreamOrdering,
        out: &mut Vec<FreeChunk>,
    ) {
        // Pages from `end_page` on lie under no block.
        let end_page = self.end.div_ceil(page_size);
        for (&offset, block) in self.blocks.iter_mut() {
            let BlockState::Free { points } = &mut block.state else {
                continue;
            };
            let block_end = offset + block.size;
            let first = offset.div_ceil(page_size);
            // The last block also owns the pages past the end.
            let end = if block_end == self.end {
                u64::MAX
            } else {
                block_end / page_size
            };
            if first >= end.min(end_page) {
                continue;
            }
            points.retain(|point| !ordering.is_complete(*point));
            if !points.is_empty() {
                continue;
            }
            for (&start, chunk) in self.chunks.range(first..end.min(end_page)) {
                if start.saturating_add(chunk.pages) <= end {
                    out.push(FreeChunk {
                        key,
                        start,
                        pages: chunk.pages,
                    });
                }
            }
        }
        out.extend(
            self.chunks
                .range(end_page..)
                .map(|(&start, chunk)| FreeChunk {
                    key,
                    start,
                    pages: chunk.pages,
                }),
        );
    }
}

/// Totals of the growable pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrowableStats {
    /// Wall time spent in the mapper's calls (the driver's, on CUDA).
    pub driver_time: Duration,
    /// Chunks held: physical allocations of the device, each mapped at one place.
    pub chunks: u64,
    /// Bytes of those chunks.
    pub bytes_reserved: u64,
    /// Bytes requested by live blocks.
    pub bytes_in_use: u64,
    /// Rounding of live blocks.
    pub bytes_padding: u64,
    /// Live blocks.
    pub allocations: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Chunks created (one device allocation each).
    pub chunks_created: u64,
    /// Chunks given back to the device (one device free each).
    pub chunks_released: u64,
    /// Chunks moved from under a free block to where a request needed them.
    pub chunks_moved: u64,
}

/// The growable pool. See the module docs.
pub struct GrowablePool {
    range_size: u64,
    /// Bytes of the smallest chunk created at the growing end of a range
    /// (`[memory] growable_block`).
    min_chunk_bytes: u64,
    /// Bytes of the largest chunk (`[memory] growable_max_chunk`; 0: the mapper's limit).
    max_chunk_bytes: u64,
    /// The mapper's page, and the pool's page counts in it.
    page_size: u64,
    min_chunk_pages: u64,
    max_chunk_pages: u64,
    /// Heaps by stream key (looked up several times per reservation: Fx, not SipHash).
    heaps: FastMap<u64, Heap>,
    /// Live blocks by slot: (stream key, offset).
    slots: Vec<Option<(u64, u64)>>,
    free_slots: Vec<u32>,
    live_bytes: u64,
    budget: u64,
    /// The block freed last, if it is not merged yet.
    recent: Option<RecentFree>,
    stats: GrowableStats,
}

impl GrowablePool {
    /// An empty pool whose streams each reserve `range_size` bytes of address space, and
    /// which creates chunks of at least `min_chunk_bytes` at the growing end of a range
    /// (fewer driver calls for ranges grown by small requests; PyTorch's expandable
    /// segments map 20 MiB at a time) and of at most `max_chunk_bytes` (0: as large as the
    /// mapper allows). Small chunks keep physical memory closer to the live data, since
    /// they are more often wholly free to move; each costs its own driver calls.
    pub fn new(range_size: u64, min_chunk_bytes: u64, max_chunk_bytes: u64) -> Self {
        Self {
            range_size,
            min_chunk_bytes,
            max_chunk_bytes,
            page_size: 1,
            min_chunk_pages: 1,
            max_chunk_pages: 1,
            heaps: FastMap::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            live_bytes: 0,
            budget: 0,
            recent: None,
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
    /// [`IoError::OutOfMemory`] when the stream's range is full or no chunk can be created
    /// or moved; the mapper's other errors. A failed reservation leaves the pool as it was
    /// (chunks it mapped stay mapped, under a free block).
    pub fn reserve(
        &mut self,
        size: u64,
        requested: u64,
        stream: StreamId,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(u32, u64), IoError> {
        if self.heaps.is_empty() {
            self.page_size = mapper.page_size().max(1);
            self.max_chunk_pages = mapper.max_block_pages().max(1);
            if self.max_chunk_bytes > 0 {
                self.max_chunk_pages = self
                    .max_chunk_pages
                    .min((self.max_chunk_bytes / self.page_size).max(1));
            }
            self.min_chunk_pages =
                (self.min_chunk_bytes / self.page_size).clamp(1, self.max_chunk_pages);
        }
        let key = stream.value;
        if !self.heaps.contains_key(&key) {
            let range_size = self.range_size.div_ceil(self.page_size) * self.page_size;
            let range = timed(&mut self.stats.driver_time, || {
                mapper.reserve_range(range_size)
            })?;
            self.heaps.insert(
                key,
                Heap {
                    range,
                    range_size,
                    blocks: BTreeMap::new(),
                    free: BTreeSet::new(),
                    end: 0,
                    chunks: BTreeMap::new(),
                },
            );
        }
        let recent = match self.recent.take() {
            Some(recent)
                if recent.key == key
                    && recent.size == size
                    && self.best_fit(&recent)
                    && after_other_streams(stream, &recent.points, ordering) =>
            {
                Some(recent)
            }
            other => {
                // Merged below, before placement.
                self.recent = other;
                None
            }
        };
        let offset = match recent {
            Some(recent) => {
                // Backed already: the block was never free to give its chunks away.
                self.stats.free_blocks -= 1;
                self.live_bytes += size;
                recent.offset
            }
            None => {
                self.merge_recent();
                let (mut offset, mut last_uses) = self.place(key, size, true)?;
                if !after_other_streams(stream, &last_uses, ordering) {
                    // The stream can't be made to wait for the block's last users: the
                    // block stays free, and the request takes fresh memory at the end.
                    self.free_block(key, offset, last_uses);
                    (offset, last_uses) = self.place(key, size, false)?;
                }
                self.live_bytes += size;
                let wanted = self.live_bytes
                    + self.live_bytes / 100
                    + SPARE_CHUNKS * self.min_chunk_pages * self.page_size;
                self.budget = self.budget.max(wanted);
                if let Err(error) = self.back_block(key, offset, size, mapper, ordering) {
                    self.live_bytes -= size;
                    self.free_block(key, offset, last_uses);
                    return Err(error);
                }
                offset
            }
        };
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

    /// Carves a block of `size` bytes from heap `key` (with `reuse`, the best fitting free
    /// block, else at the end; without, at the end past every block) and returns its offset
    /// and the stream points of the free memory it took (its last users, which the stream
    /// must come after); the block is marked used (requested 0).
    fn place(&mut self, key: u64, size: u64, reuse: bool) -> Result<(u64, StreamPoints), IoError> {
        let page_size = self.page_size;
        let Some(heap) = self.heaps.get_mut(&key) else {
            return Err(IoError::invalid("no address range for the stream"));
        };
        let fit = if reuse {
            heap.free
                .range((size, 0)..)
                .take(CANDIDATES)
                .min_by_key(|&&(free_size, offset)| {
                    let missing =
                        heap.missing_pages(offset / page_size, (offset + size - 1) / page_size);
                    (missing, free_size)
                })
                .copied()
        } else {
            None
        };
        let (offset, last_uses) = match fit {
            Some((free_size, offset)) => {
                heap.free.remove(&(free_size, offset));
                let points = match heap.blocks.get_mut(&offset) {
                    Some(Block {
                        state: BlockState::Free { points },
                        ..
                    }) => std::mem::take(points),
                    _ => StreamPoints::new(),
                };
                if free_size > size {
                    let rest = (offset + size, free_size - size);
                    heap.blocks.insert(
                        rest.0,
                        Block {
                            size: rest.1,
                            state: BlockState::Free {
                                points: points.clone(),
                            },
                        },
                    );
                    heap.free.insert((rest.1, rest.0));
                } else {
                    self.stats.free_blocks -= 1;
                }
                (offset, points)
            }
            None => {
                // At the end, taking a free last block in where reuse is allowed.
                let mut offset = heap.end;
                let mut points = StreamPoints::new();
                if reuse
                    && let Some((&last, block)) = heap.blocks.iter().next_back()
                    && matches!(block.state, BlockState::Free { .. })
                {
                    heap.free.remove(&(block.size, last));
                    if let Some(Block {
                        state: BlockState::Free { points: theirs },
                        ..
                    }) = heap.blocks.remove(&last)
                    {
                        points = theirs;
                    }
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
                                state: BlockState::Free { points },
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
                (offset, points)
            }
        };
        heap.blocks.insert(
            offset,
            Block {
                size,
                state: BlockState::Used { requested: 0 },
            },
        );
        Ok((offset, last_uses))
    }

    /// Backs every page under `offset .. offset + size` of heap `key` with a chunk.
    fn back_block(
        &mut self,
        key: u64,
        offset: u64,
        size: u64,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        let page_size = self.page_size;
        let (first, last) = (offset / page_size, (offset + size - 1) / page_size);
        let Some(heap) = self.heaps.get(&key) else {
            return Err(IoError::invalid("no address range for the stream"));
        };
        let runs = heap.missing_runs(first, last);
        let (frontier, range_pages) = (heap.frontier(), heap.range_size / page_size);
        for (start, mut pages) in runs {
            // At the growing end, at least a minimum chunk (the pages past the block serve
            // the next requests placed at the end).
            if start + pages >= frontier {
                pages = pages.max(self.min_chunk_pages).min(range_pages - start);
            }
            self.back_run(key, start, pages, mapper, ordering)?;
        }
        Ok(())
    }

    /// Backs the `pages` unbacked pages from page `start` of heap `key`: with free chunks
    /// moved there while the pool holds its budget (larger free chunks given back), then
    /// with new chunks.
    fn back_run(
        &mut self,
        key: u64,
        mut start: u64,
        mut pages: u64,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        let mut free: Option<Vec<FreeChunk>> = None;
        while pages > 0 {
            let over_budget = self.stats.bytes_reserved + pages * self.page_size > self.budget;
            if over_budget {
                let candidates = free.get_or_insert_with(|| self.free_chunks(key, ordering));
                if let Some(index) = pick_free_chunk(candidates, pages) {
                    let chunk = candidates.swap_remove(index);
                    if chunk.pages <= pages {
                        self.move_chunk(chunk, key, start, mapper)?;
                        start += chunk.pages;
                        pages -= chunk.pages;
                    } else {
                        self.release_chunk(chunk, mapper);
                    }
                    continue;
                }
            }
            let count = pages.min(self.max_chunk_pages);
            match self.create_chunk(key, start, count, mapper) {
                Ok(()) => {
                    start += count;
                    pages -= count;
                }
                Err(error @ IoError::OutOfMemory { .. }) => {
                    // Give back every free chunk, then try once more.
                    let candidates = self.free_chunks(key, ordering);
                    if candidates.is_empty() {
                        return Err(error);
                    }
                    for chunk in candidates {
                        self.release_chunk(chunk, mapper);
                    }
                    free = Some(Vec::new());
                    self.create_chunk(key, start, count, mapper)?;
                    start += count;
                    pages -= count;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The chunks of every heap (heap `key`'s first) that may be moved or given back.
    fn free_chunks(&mut self, key: u64, ordering: &mut dyn StreamOrdering) -> Vec<FreeChunk> {
        let page_size = self.page_size;
        let mut out = Vec::new();
        if let Some(heap) = self.heaps.get_mut(&key) {
            heap.free_chunks(key, page_size, ordering, &mut out);
        }
        for (&other, heap) in self.heaps.iter_mut() {
            if other != key {
                heap.free_chunks(other, page_size, ordering, &mut out);
            }
        }
        out
    }

    /// Creates a chunk of `pages` pages and maps it at page `start` of heap `key`.
    fn create_chunk(
        &mut self,
        key: u64,
        start: u64,
        pages: u64,
        mapper: &mut dyn PageMapper,
    ) -> Result<(), IoError> {
        let id = timed(&mut self.stats.driver_time, || mapper.create_block(pages))?;
        self.stats.chunks += 1;
        self.stats.chunks_created += 1;
        self.stats.bytes_reserved += pages * self.page_size;
        // What the pool had to create past its budget it may keep holding: that much was
        // needed once already, and moving chunks to stay under the lower figure would
        // only cost driver calls, step after step, without lowering the peak.
        self.budget = self.budget.max(self.stats.bytes_reserved);
        let chunk = Chunk { pages, id };
        if let Err(error) = self.map_chunk(key, start, chunk, mapper) {
            self.forget_chunk(chunk, mapper);
            return Err(error);
        }
        Ok(())
    }

    /// Maps `chunk` at page `start` of heap `key` and grants the device access to it.
    fn map_chunk(
        &mut self,
        key: u64,
        start: u64,
        chunk: Chunk,
        mapper: &mut dyn PageMapper,
    ) -> Result<(), IoError> {
        let page_size = self.page_size;
        let Some(heap) = self.heaps.get_mut(&key) else {
            return Err(IoError::invalid("no address range for the stream"));
        };
        let offset = start * page_size;
        let range = heap.range;
        timed(&mut self.stats.driver_time, || {
            mapper
                .map_block(range, offset, chunk.id, chunk.pages)
                .and_then(|()| {
                    mapper
                        .grant_access(range, offset, chunk.pages * page_size)
                        .inspect_err(|_| mapper.unmap_block(range, offset, chunk.pages))
                })
        })?;
        heap.chunks.insert(start, chunk);
        Ok(())
    }

    /// Unmaps the free chunk `free` and maps it at page `start` of heap `key`.
    fn move_chunk(
        &mut self,
        free: FreeChunk,
        key: u64,
        start: u64,
        mapper: &mut dyn PageMapper,
    ) -> Result<(), IoError> {
        let Some(chunk) = self.unmap_chunk(free, mapper) else {
            return Err(IoError::invalid("a free chunk vanished"));
        };
        self.stats.chunks_moved += 1;
        if let Err(error) = self.map_chunk(key, start, chunk, mapper) {
            self.forget_chunk(chunk, mapper);
            return Err(error);
        }
        Ok(())
    }

    /// Unmaps the free chunk `free` and gives it back to the device.
    fn release_chunk(&mut self, free: FreeChunk, mapper: &mut dyn PageMapper) {
        if let Some(chunk) = self.unmap_chunk(free, mapper) {
            self.forget_chunk(chunk, mapper);
        }
    }

    /// Unmaps the free chunk `free`; the chunk, still held.
    fn unmap_chunk(&mut self, free: FreeChunk, mapper: &mut dyn PageMapper) -> Option<Chunk> {
        let heap = self.heaps.get_mut(&free.key)?;
        let chunk = heap.chunks.remove(&free.start)?;
        let offset = free.start * self.page_size;
        timed(&mut self.stats.driver_time, || {
            mapper.unmap_block(heap.range, offset, chunk.pages)
        });
        Some(chunk)
    }

    /// Gives the unmapped `chunk` back to the device.
    fn forget_chunk(&mut self, chunk: Chunk, mapper: &mut dyn PageMapper) {
        timed(&mut self.stats.driver_time, || {
            mapper.release_page(chunk.id)
        });
        self.stats.chunks -= 1;
        self.stats.chunks_released += 1;
        self.stats.bytes_reserved -= chunk.pages * self.page_size;
    }

    /// Frees live block `slot`: it stays mapped for reuse; `points` say which stream work
    /// may still use it. Returns `false` if the slot holds no live block.
    pub fn free(&mut self, slot: u32, points: StreamPoints) -> bool {
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
        self.merge_recent();
        self.stats.free_blocks += 1;
        self.recent = Some(RecentFree {
            key,
            offset,
            size,
            points,
        });
        true
    }

    /// Whether `recent`, merged, is the block [`Self::place`] would pick for a request of its
    /// own size: no free neighbour would grow it, and no free block of that size lies at a
    /// lower offset (placement takes the first of equally good fits; the recent block has
    /// every page backed, so none fits better).
    fn best_fit(&self, recent: &RecentFree) -> bool {
        let Some(heap) = self.heaps.get(&recent.key) else {
            return false;
        };
        let free = |block: &Block| matches!(block.state, BlockState::Free { .. });
        let previous_free = heap
            .blocks
            .range(..recent.offset)
            .next_back()
            .is_some_and(|(&at, block)| at + block.size == recent.offset && free(block));
        let next_free = heap
            .blocks
            .get(&(recent.offset + recent.size))
            .is_some_and(free);
        let lower_fit = heap
            .free
            .range((recent.size, 0)..(recent.size, recent.offset))
            .next()
            .is_some();
        !previous_free && !next_free && !lower_fit
    }

    /// Merges the recent block (see the module docs) into its heap's free blocks.
    fn merge_recent(&mut self) {
        if let Some(recent) = self.recent.take() {
            self.stats.free_blocks -= 1;
            self.free_block(recent.key, recent.offset, recent.points);
        }
    }

    /// Marks the block at `offset` of heap `key` free, merged with free neighbours.
    fn free_block(&mut self, key: u64, offset: u64, mut points: StreamPoints) {
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

    /// Gives the chunks lying wholly under free blocks whose work is complete back to the
    /// device; the bytes given back. Ranges stay reserved; a chunk partly under a live
    /// block stays.
    pub fn release(
        &mut self,
        mapper: &mut dyn PageMapper,
        ordering: &mut dyn StreamOrdering,
    ) -> u64 {
        let before = self.stats.bytes_reserved;
        self.merge_recent();
        let keys: Vec<u64> = self.heaps.keys().copied().collect();
        for key in keys {
            let mut free = Vec::new();
            if let Some(heap) = self.heaps.get_mut(&key) {
                heap.free_chunks(key, self.page_size, ordering, &mut free);
            }
            for chunk in free {
                self.release_chunk(chunk, mapper);
            }
        }
        // Physical memory may grow back to what is live before chunks move again.
        self.budget = self.live_bytes
            + self.live_bytes / 100
            + SPARE_CHUNKS * self.min_chunk_pages * self.page_size;
        before - self.stats.bytes_reserved
    }

    /// The largest free block of any stream's range, in bytes (the block freed last counts
    /// at its own size, before it is merged with its free neighbours).
    pub fn largest_free_block(&self) -> u64 {
        self.heaps
            .values()
            .filter_map(|heap| heap.free.last().map(|&(size, _)| size))
            .chain(self.recent.as_ref().map(|recent| recent.size))
            .max()
            .unwrap_or(0)
    }
}

/// Orders `stream` after the work of other streams at `points` (the last uses of free
/// memory it is about to reuse): nothing to do for its own points (its work is ordered) or
/// those already complete; otherwise the stream waits for them on the device. `false` if
/// the backend can't make it wait.
fn after_other_streams(
    stream: StreamId,
    points: &[StreamPoint],
    ordering: &mut dyn StreamOrdering,
) -> bool {
    points
        .iter()
        .filter(|point| point.stream != stream)
        .all(|point| ordering.is_complete(*point) || ordering.wait_for(stream, *point))
}

/// Which free chunk backs a run of `pages` missing pages: the largest that fits in it
/// (moved there), else the smallest larger one (given back, which lowers what the pool
/// holds); among equals the highest-addressed.
fn pick_free_chunk(candidates: &[FreeChunk], pages: u64) -> Option<usize> {
    let fitting = candidates
        .iter()
        .enumerate()
        .filter(|(_, chunk)| chunk.pages <= pages)
        .max_by_key(|(_, chunk)| (chunk.pages, chunk.start))
        .map(|(index, _)| index);
    fitting.or_else(|| {
        candidates
            .iter()
            .enumerate()
            .min_by_key(|(_, chunk)| (chunk.pages, std::cmp::Reverse(chunk.start)))
            .map(|(index, _)| index)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake_mapper::FakeMapper;
    use crate::memory::ordering::HostOrdering;

    const PAGE: u64 = 2 << 20;
    const MIB: u64 = 1 << 20;

    /// Ordering whose points are never complete: the device is still busy.
    struct BusyOrdering;

    impl StreamOrdering for BusyOrdering {
        fn is_complete(&mut self, _point: StreamPoint) -> bool {
            false
        }
        fn wait_for(&mut self, _waiter: StreamId, _point: StreamPoint) -> bool {
            false
        }
    }

    /// Ordering whose points are pending; records the waits it is asked for and grants them
    /// while `can_wait`.
    struct PendingOrdering {
        can_wait: bool,
        waits: Vec<(StreamId, StreamPoint)>,
    }

    impl StreamOrdering for PendingOrdering {
        fn is_complete(&mut self, _point: StreamPoint) -> bool {
            false
        }
        fn wait_for(&mut self, waiter: StreamId, point: StreamPoint) -> bool {
            self.waits.push((waiter, point));
            self.can_wait
        }
    }

    fn reserve(pool: &mut GrowablePool, mapper: &mut FakeMapper, size: u64) -> u32 {
        pool.reserve(size, size, StreamId::new(0), mapper, &mut HostOrdering)
            .unwrap()
            .0
    }

    fn pool() -> (GrowablePool, FakeMapper) {
        (
            GrowablePool::new(1 << 40, 16 * MIB, 0),
            FakeMapper::default(),
        )
    }

    #[test]
    fn a_growth_is_one_chunk_whatever_its_size() {
        let (mut pool, mut mapper) = pool();
        reserve(&mut pool, &mut mapper, 1 << 30);
        assert_eq!((mapper.creates, mapper.maps), (1, 1));
        assert_eq!(pool.stats().bytes_reserved, 1 << 30);
        assert_eq!(pool.stats().chunks, 1);
    }

    #[test]
    fn a_chunk_limit_splits_a_growth_into_chunks_of_at_most_that_size() {
        let (mut pool, mut mapper) = (
            GrowablePool::new(1 << 40, 16 * MIB, 16 * MIB),
            FakeMapper::default(),
        );
        reserve(&mut pool, &mut mapper, 100 * MIB);
        assert_eq!(mapper.creates, 7, "six chunks of 16 MiB and one of 4");
        assert!(mapper.chunks.values().all(|pages| *pages <= 8));
        assert_eq!(pool.stats().bytes_reserved, 100 * MIB);
    }

    #[test]
    fn a_freed_block_serves_a_smaller_request_without_driver_calls() {
        let (mut pool, mut mapper) = pool();
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        assert!(pool.free(a, StreamPoints::new()));
        assert_eq!(pool.largest_free_block(), 64 * MIB);
        let maps = mapper.maps;
        reserve(&mut pool, &mut mapper, 60 * MIB);
        reserve(&mut pool, &mut mapper, 3 * MIB + 512);
        assert_eq!(mapper.maps, maps, "both fit the freed block's mapped pages");
        assert_eq!(pool.stats().bytes_reserved, 64 * MIB);
    }

    fn offset(pool: &GrowablePool, slot: u32) -> u64 {
        pool.storage_of(slot).unwrap().1
    }

    #[test]
    fn the_block_freed_last_is_taken_back_at_its_size_without_driver_calls() {
        let (mut pool, mut mapper) = pool();
        let _keep = reserve(&mut pool, &mut mapper, 8 * MIB);
        let mut a = reserve(&mut pool, &mut mapper, 64 * MIB);
        let at = offset(&pool, a);
        let calls = (mapper.creates, mapper.maps);
        for _ in 0..3 {
            assert!(pool.free(a, StreamPoints::new()));
            assert!(!pool.free(a, StreamPoints::new()), "freed once");
            assert_eq!(pool.stats().free_blocks, 1, "counted free while it waits");
            assert_eq!(pool.largest_free_block(), 64 * MIB);
            a = reserve(&mut pool, &mut mapper, 64 * MIB);
            assert_eq!(offset(&pool, a), at);
            let stats = pool.stats();
            assert_eq!((stats.allocations, stats.free_blocks), (2, 0));
            assert_eq!(stats.bytes_in_use, 72 * MIB);
            assert_eq!((mapper.creates, mapper.maps), calls);
        }
    }

    const OWN: StreamId = StreamId::new(0);
    const OTHER: StreamId = StreamId::new(1);

    fn reserve_with(
        pool: &mut GrowablePool,
        mapper: &mut FakeMapper,
        size: u64,
        ordering: &mut PendingOrdering,
    ) -> u32 {
        pool.reserve(size, size, OWN, mapper, ordering).unwrap().0
    }

    /// An ordering whose points are pending (granting waits if `can_wait`), and a point of
    /// the other stream's work.
    fn pending_on_other_stream(can_wait: bool) -> (PendingOrdering, StreamPoint) {
        let ordering = PendingOrdering {
            can_wait,
            waits: Vec::new(),
        };
        let point = StreamPoint {
            stream: OTHER,
            seq: 5,
        };
        (ordering, point)
    }

    #[test]
    fn a_block_last_used_by_another_stream_is_reused_only_after_that_streams_work() {
        let (mut pool, mut mapper) = pool();
        let (mut ordering, point) = pending_on_other_stream(true);
        // Taken back whole (the block freed last).
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        let at = offset(&pool, a);
        pool.free(a, smallvec::smallvec![point]);
        let again = reserve_with(&mut pool, &mut mapper, 64 * MIB, &mut ordering);
        assert_eq!(offset(&pool, again), at);
        assert_eq!(ordering.waits, vec![(OWN, point)]);
        // Split by best fit: each part waits, the rest keeping the points.
        pool.free(again, smallvec::smallvec![point]);
        ordering.waits.clear();
        let first = reserve_with(&mut pool, &mut mapper, 16 * MIB, &mut ordering);
        let second = reserve_with(&mut pool, &mut mapper, 16 * MIB, &mut ordering);
        assert_eq!(
            (offset(&pool, first), offset(&pool, second)),
            (at, at + 16 * MIB)
        );
        assert_eq!(ordering.waits, vec![(OWN, point), (OWN, point)]);
        // The stream's own points need no wait: its work is ordered.
        pool.free(
            first,
            smallvec::smallvec![StreamPoint {
                stream: OWN,
                seq: 9,
            }],
        );
        ordering.waits.clear();
        reserve_with(&mut pool, &mut mapper, 16 * MIB, &mut ordering);
        assert!(ordering.waits.is_empty());
    }

    #[test]
    fn a_stream_that_cannot_wait_takes_fresh_memory_instead_of_a_block_in_use_elsewhere() {
        let (mut pool, mut mapper) = pool();
        let (mut ordering, point) = pending_on_other_stream(false);
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        let _end = reserve(&mut pool, &mut mapper, 8 * MIB);
        pool.free(a, smallvec::smallvec![point]);
        for size in [64 * MIB, 16 * MIB] {
            let fresh = reserve_with(&mut pool, &mut mapper, size, &mut ordering);
            assert!(offset(&pool, fresh) >= 72 * MIB, "{size}: past every block");
        }
        assert_eq!(pool.largest_free_block(), 64 * MIB, "a's block stays free");
        assert_eq!(pool.stats().allocations, 3);
    }

    #[test]
    fn the_block_freed_last_merges_with_its_free_neighbours_before_another_request() {
        let (mut pool, mut mapper) = pool();
        let [a, b, _c] = [0; 3].map(|_| reserve(&mut pool, &mut mapper, 8 * MIB));
        pool.free(a, StreamPoints::new());
        pool.free(b, StreamPoints::new());
        let calls = (mapper.creates, mapper.maps);
        let both = reserve(&mut pool, &mut mapper, 16 * MIB);
        assert_eq!(offset(&pool, both), 0, "a and b merged");
        assert_eq!((mapper.creates, mapper.maps), calls, "no growth");
        assert_eq!(pool.stats().free_blocks, 0);
    }

    #[test]
    fn the_block_freed_last_is_taken_back_only_where_placement_would_pick_it() {
        let (mut pool, mut mapper) = pool();
        let [x, _y, z, _w] = [0; 4].map(|_| reserve(&mut pool, &mut mapper, 8 * MIB));
        pool.free(x, StreamPoints::new());
        pool.free(z, StreamPoints::new());
        // Both fit exactly with every page backed; placement takes the lower one.
        let next = reserve(&mut pool, &mut mapper, 8 * MIB);
        assert_eq!(offset(&pool, next), 0);
        let after = reserve(&mut pool, &mut mapper, 8 * MIB);
        assert_eq!(offset(&pool, after), 16 * MIB, "z, merged when x was taken");
    }

    #[test]
    fn a_larger_request_backs_only_the_pages_past_the_end_with_at_least_a_minimum_chunk() {
        let (mut pool, mut mapper) = pool();
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        pool.free(a, StreamPoints::new());
        reserve(&mut pool, &mut mapper, 70 * MIB);
        assert_eq!(mapper.creates, 2);
        // 3 pages were missing; the growing end gets 16 MiB.
        assert_eq!(pool.stats().bytes_reserved, 80 * MIB);
        // The next request at the end uses the rest of that chunk.
        reserve(&mut pool, &mut mapper, 10 * MIB);
        assert_eq!(mapper.creates, 2);
    }

    #[test]
    fn free_chunks_move_once_the_pool_holds_the_live_peak() {
        let (mut pool, mut mapper) = pool();
        // Two 100 MiB blocks; the first freed; a 150 MiB request doesn't fit its hole.
        let a = reserve(&mut pool, &mut mapper, 100 * MIB);
        let _b = reserve(&mut pool, &mut mapper, 100 * MIB);
        pool.free(a, StreamPoints::new());
        reserve(&mut pool, &mut mapper, 150 * MIB);
        // Live 250 MiB: the budget (1 % + 4 minimum chunks) allows 316.5 MiB; 350 would be
        // held without moving the free chunk.
        assert_eq!(pool.stats().chunks_moved, 1);
        assert_eq!(mapper.pages_held() * PAGE, 250 * MIB);
        assert_eq!(pool.stats().bytes_reserved, 250 * MIB);
        assert_eq!(mapper.releases, 0);
    }

    #[test]
    fn a_larger_free_chunk_is_given_back_instead_of_growing_past_the_budget() {
        let (mut pool, mut mapper) = pool();
        let one = StreamId::new(1);
        let a = pool
            .reserve(400 * MIB, 400 * MIB, one, &mut mapper, &mut HostOrdering)
            .unwrap()
            .0;
        reserve(&mut pool, &mut mapper, 16 * MIB);
        pool.free(a, StreamPoints::new());
        // The peak seen was 416 MiB: budget 484 MiB. 100 MiB more on stream 0 would hold
        // 516: the 400 MiB chunk, free on stream 1, goes back first.
        reserve(&mut pool, &mut mapper, 100 * MIB);
        assert_eq!((mapper.releases, pool.stats().chunks_moved), (1, 0));
        assert_eq!(pool.stats().bytes_reserved, 116 * MIB);
    }

    #[test]
    fn a_chunk_under_a_live_block_or_busy_free_block_stays_where_it_is() {
        let (mut pool, mut mapper) = pool();
        let a = reserve(&mut pool, &mut mapper, 100 * MIB);
        let _b = reserve(&mut pool, &mut mapper, 100 * MIB);
        let point = StreamPoint {
            stream: StreamId::new(0),
            seq: 1,
        };
        pool.free(a, smallvec::smallvec![point]);
        pool.reserve(
            150 * MIB,
            150 * MIB,
            StreamId::new(0),
            &mut mapper,
            &mut BusyOrdering,
        )
        .unwrap();
        assert_eq!(
            pool.stats().chunks_moved,
            0,
            "the device may still use a's memory"
        );
        assert_eq!(pool.release(&mut mapper, &mut BusyOrdering), 0);
        assert_eq!(pool.stats().bytes_reserved, 350 * MIB);
    }

    #[test]
    fn release_gives_back_chunks_wholly_under_free_blocks_and_reuse_backs_them_again() {
        let (mut pool, mut mapper) = pool();
        let a = reserve(&mut pool, &mut mapper, 64 * MIB);
        let b = reserve(&mut pool, &mut mapper, 3 * MIB);
        pool.free(a, StreamPoints::new());
        let given = pool.release(&mut mapper, &mut HostOrdering);
        // b's chunk (16 MiB at the end) stays.
        assert_eq!(given, 64 * MIB);
        assert_eq!(pool.stats().chunks, 1);
        reserve(&mut pool, &mut mapper, 64 * MIB);
        pool.free(b, StreamPoints::new());
        assert_eq!(pool.stats().allocations, 1);
    }

    #[test]
    fn a_full_device_fails_the_request_and_leaves_the_pool_usable() {
        let mut mapper = FakeMapper {
            refuse_pages_after: Some(10),
            ..FakeMapper::default()
        };
        let mut pool = GrowablePool::new(1 << 40, 2 * MIB, 0);
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
        pool.free(a, StreamPoints::new());
        // The first request's pages serve 16 MiB again; 20 MiB fits after a retry that
        // gives them back.
        reserve(&mut pool, &mut mapper, 20 * MIB);
        assert!(mapper.pages_held() <= 10);
    }

    #[test]
    fn a_failed_map_or_grant_gives_the_chunk_back_and_leaves_the_pool_usable() {
        for (fail_map, fail_grant) in [(true, false), (false, true)] {
            let (mut pool, mut mapper) = pool();
            let a = reserve(&mut pool, &mut mapper, 32 * MIB);
            (mapper.fail_map, mapper.fail_grant) = (fail_map, fail_grant);
            let error = pool
                .reserve(
                    64 * MIB,
                    64 * MIB,
                    StreamId::new(0),
                    &mut mapper,
                    &mut HostOrdering,
                )
                .unwrap_err();
            assert!(
                matches!(error, IoError::InvalidArgument { .. }),
                "{error:?}"
            );
            assert_eq!(mapper.chunks.len(), 1, "the failed chunk is released");
            assert_eq!(pool.stats().chunks, 1);
            assert_eq!(pool.stats().allocations, 1);
            assert_eq!(pool.stats().bytes_reserved, 32 * MIB);
            let b = reserve(&mut pool, &mut mapper, 64 * MIB);
            assert!(mapper.granted.len() as u64 == 48);
            pool.free(a, StreamPoints::new());
            pool.free(b, StreamPoints::new());
            pool.release(&mut mapper, &mut HostOrdering);
            assert!(mapper.chunks.is_empty() && mapper.mapped.is_empty());
        }
    }

    /// Random requests and frees on two streams: live blocks never overlap, every page under
    /// a live block is mapped with access, chunks never overlap, the totals add up, and a
    /// release with nothing live gives every chunk back.
    fn random_sequence(max_chunk: u64, seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut pool = GrowablePool::new(1 << 36, 16 * MIB, max_chunk);
        let mut mapper = FakeMapper::default();
        let mut live: Vec<(u32, u64, u64)> = Vec::new();
        for step in 0..2000 {
            if live.is_empty() || rng.u32(0..100) < 55 {
                let size = rng.u64(1..=80) * MIB / 2 + 512 * rng.u64(0..4);
                let stream = StreamId::new(rng.u64(0..2));
                let (slot, _) = pool
                    .reserve(size, size, stream, &mut mapper, &mut HostOrdering)
                    .unwrap();
                live.push((slot, size, stream.value));
            } else {
                let (slot, ..) = live.swap_remove(rng.usize(0..live.len()));
                assert!(pool.free(slot, StreamPoints::new()));
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
            assert_eq!(stats.bytes_reserved, mapper.pages_held() * PAGE);
            assert_eq!(stats.chunks, mapper.chunks.len() as u64);
            let mut spans: Vec<(u64, u64, u64)> = live
                .iter()
                .map(|&(slot, size, _)| {
                    let (range, offset) = pool.storage_of(slot).unwrap();
                    (range.0, offset, size)
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
            for &(range, offset, size) in &spans {
                for page in offset / PAGE..=(offset + size - 1) / PAGE {
                    assert!(
                        mapper.granted.contains(&(range, page)),
                        "a live block's page unmapped or without access"
                    );
                }
            }
        }
        for (slot, ..) in live.drain(..) {
            pool.free(slot, StreamPoints::new());
        }
        pool.release(&mut mapper, &mut HostOrdering);
        assert_eq!(mapper.chunks.len(), 0);
        assert_eq!(pool.stats().chunks_released, pool.stats().chunks_created);
        assert!(mapper.mapped.is_empty());
    }

    #[test]
    fn random_sequences_keep_blocks_apart_and_totals_consistent() {
        for seed in [7, 8] {
            random_sequence(0, seed);
        }
    }

    #[test]
    fn random_sequences_keep_blocks_apart_with_a_chunk_limit() {
        random_sequence(16 * MIB, 9);
    }

    #[test]
    fn a_mapper_of_single_pages_gets_chunks_of_one_page() {
        let mut mapper = FakeMapper {
            max_pages: Some(1),
            ..FakeMapper::default()
        };
        let mut pool = GrowablePool::new(1 << 40, 16 * MIB, 0);
        reserve(&mut pool, &mut mapper, 10 * MIB);
        assert_eq!(
            mapper.creates, 5,
            "a chunk per page, no more pages than needed"
        );
    }
}
