//! A best-fit pool of blocks carved from raw allocations (segments).
//!
//! Each segment is an ordered map of blocks (offset -> block) that tile it exactly. A request
//! takes the smallest free block that fits (best fit); if the remainder is at least
//! `min_split` bytes the block is split and the remainder stays free. A freed block merges
//! with free neighbours (coalescing), so a segment whose blocks are all free becomes one
//! block again and can be returned to the device.
//!
//! Free blocks are indexed by `(size, segment, offset)` in two ordered sets: `neutral` blocks
//! any stream can take at once, and `pending` blocks that carry [`StreamPoint`]s still to be
//! passed (see `ordering`). A request prefers a pending block its own stream can take, then
//! the best neutral block, then a pending block it can wait for on the device.
//!
//! Exact-only pools (the persistent pool) reuse only blocks of exactly the requested size and
//! never split or merge.
//!
//! Fast path: a freed block with at most one stream point is *parked* — kept aside under its
//! size and stream, neither indexed nor merged — and a later request of the same rounded size
//! on that stream (or on any stream, for a block with no point) takes it back in O(1). Parked
//! blocks are merged and indexed only when a request can't be served otherwise, before any
//! new segment is allocated and before segments are given back, so they never cause a
//! device allocation or keep a segment alive that coalescing would have freed.

use super::id_map::IdHasher;
use super::ordering::{StreamOrdering, StreamPoint, StreamPoints};
use crate::storage::StorageId;
use crate::stream::StreamId;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::BuildHasherDefault;

/// How many pending blocks a request inspects before giving up on them.
const PENDING_SCAN_LIMIT: usize = 64;

/// How a pool sizes the segments it asks the device for.
#[derive(Clone, Copy, Debug)]
pub enum SegmentRule {
    /// Every segment has this size (requests must not exceed it).
    Fixed(u64),
    /// Requests up to `mid_request` get segments of `mid_segment` bytes; larger requests get a
    /// segment of their size rounded up to `round`.
    Tiered {
        /// Largest request served from a shared mid-size segment.
        mid_request: u64,
        /// Size of the shared mid-size segments.
        mid_segment: u64,
        /// Rounding of dedicated segments.
        round: u64,
    },
    /// Every segment is exactly the request.
    Exact,
}

impl SegmentRule {
    /// Segment size for a request of `size` bytes (already rounded to the pool alignment).
    pub fn segment_size(&self, size: u64) -> u64 {
        match *self {
            SegmentRule::Fixed(segment) => segment.max(size),
            SegmentRule::Tiered {
                mid_request,
                mid_segment,
                round,
            } => {
                if size <= mid_request {
                    mid_segment.max(size)
                } else {
                    round_up(size, round).unwrap_or(size)
                }
            }
            SegmentRule::Exact => size,
        }
    }
}

/// Rounds `value` up to a multiple of `to` (`to` of 0 or 1 leaves it unchanged).
pub fn round_up(value: u64, to: u64) -> Option<u64> {
    if to <= 1 {
        return Some(value);
    }
    value.checked_add(to - 1).map(|v| v / to * to)
}

/// The policy of one pool.
#[derive(Clone, Copy, Debug)]
pub struct PoolPolicy {
    /// Name in reports.
    pub name: &'static str,
    /// Segment sizing.
    pub segments: SegmentRule,
    /// Smallest remainder worth splitting off a block.
    pub min_split: u64,
    /// Reuse only blocks of exactly the requested size; never split or merge.
    pub exact_only: bool,
    /// Leave a cached free block alone when serving the request from it would strand more
    /// than this fraction of the request (and more than `min_split`) as a split-off
    /// remainder; `None` always splits. Only useful when the manager gives entirely free
    /// segments back before growing, so a refused block is released, not kept.
    pub max_split_waste: Option<f64>,
}

#[derive(Debug)]
enum BlockState {
    Used { requested: u64 },
    Free { points: StreamPoints },
    Parked,
}

#[derive(Debug)]
struct Block {
    size: u64,
    state: BlockState,
}

#[derive(Debug)]
struct Segment {
    storage: StorageId,
    size: u64,
    blocks: BTreeMap<u64, Block>,
    used_blocks: u32,
    touched: u64,
}

type FreeKey = (u64, u32, u64);

/// Stream key of parked blocks without a point.
const ANY_STREAM: u64 = u64::MAX;

/// A parked block: segment, offset, and its stream points (at most one).
type ParkedBlock = (u32, u64, StreamPoints);

/// Where a taken block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Segment index in the pool.
    pub segment: u32,
    /// Offset of the block in the segment.
    pub offset: u64,
    /// Size of the block (at least the rounded request).
    pub block_size: u64,
}

/// A segment the pool gave back, to be freed on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleasedSegment {
    /// The raw allocation.
    pub storage: StorageId,
    /// Its size.
    pub size: u64,
}

/// Totals of a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Segments held.
    pub segments: u64,
    /// Bytes of segments held.
    pub bytes_reserved: u64,
    /// Bytes requested by used blocks.
    pub bytes_in_use: u64,
    /// Rounding bytes of used blocks.
    pub bytes_padding: u64,
    /// Used blocks.
    pub allocations: u64,
}

/// A best-fit pool over segments. See the module docs.
#[derive(Debug)]
pub struct BlockPool {
    policy: PoolPolicy,
    segments: Vec<Option<Segment>>,
    free_slots: Vec<u32>,
    neutral: BTreeSet<FreeKey>,
    pending: BTreeSet<FreeKey>,
    parked: std::collections::HashMap<(u64, u64), Vec<ParkedBlock>, BuildHasherDefault<IdHasher>>,
    parked_blocks: u64,
    stats: PoolStats,
}

impl BlockPool {
    /// An empty pool.
    pub fn new(policy: PoolPolicy) -> Self {
        Self {
            policy,
            segments: Vec::new(),
            free_slots: Vec::new(),
            neutral: BTreeSet::new(),
            pending: BTreeSet::new(),
            parked: std::collections::HashMap::default(),
            parked_blocks: 0,
            stats: PoolStats::default(),
        }
    }

    /// The pool's policy.
    pub fn policy(&self) -> &PoolPolicy {
        &self.policy
    }

    /// Totals.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Number of cached free blocks: what the manager asks on every reservation, so it
    /// reads three counters and no list.
    pub fn free_block_count(&self) -> u64 {
        (self.neutral.len() + self.pending.len()) as u64 + self.parked_blocks
    }

    /// Number of cached free blocks and the largest one.
    pub fn free_blocks(&self) -> (u64, u64) {
        let count = self.free_block_count();
        let largest_parked = self
            .parked
            .iter()
            .filter(|(_, blocks)| !blocks.is_empty())
            .map(|((size, _), _)| *size)
            .max();
        let largest = self
            .neutral
            .last()
            .map(|k| k.0)
            .max(self.pending.last().map(|k| k.0))
            .max(largest_parked)
            .unwrap_or(0);
        (count, largest)
    }

    /// Takes a parked block of exactly `size` bytes that `stream` may use at once.
    fn take_parked(
        &mut self,
        size: u64,
        stream: StreamId,
        requested: u64,
        tick: u64,
    ) -> Option<Taken> {
        let (segment_index, offset) = [stream.value, ANY_STREAM].into_iter().find_map(|key| {
            let blocks = self.parked.get_mut(&(size, key))?;
            let (segment, offset, _) = blocks.pop()?;
            Some((segment, offset))
        })?;
        self.parked_blocks -= 1;
        let segment = self.segments.get_mut(segment_index as usize)?.as_mut()?;
        let block = segment.blocks.get_mut(&offset)?;
        block.state = BlockState::Used { requested };
        let block_size = block.size;
        segment.used_blocks += 1;
        segment.touched = tick;
        self.stats.allocations += 1;
        self.stats.bytes_in_use += requested;
        self.stats.bytes_padding += block_size - requested;
        Some(Taken {
            segment: segment_index,
            offset,
            block_size,
        })
    }

    /// Merges and indexes every parked block.
    fn flush_parked(&mut self) {
        if self.parked_blocks == 0 {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        self.parked_blocks = 0;
        for (segment, offset, points) in parked.into_values().flatten() {
            self.index_free(segment, offset, points);
        }
    }

    fn fits(&self, block_size: u64, size: u64) -> bool {
        if self.policy.exact_only {
            return block_size == size;
        }
        if block_size < size {
            return false;
        }
        // Mid-size requests share segments made to be split: any fitting block will do.
        let shared = match self.policy.segments {
            SegmentRule::Tiered {
                mid_request,
                mid_segment,
                ..
            } => size <= mid_request && block_size <= mid_segment,
            SegmentRule::Fixed(_) | SegmentRule::Exact => false,
        };
        match self.policy.max_split_waste {
            Some(fraction) if !shared => {
                let allowed = self.policy.min_split.max((fraction * size as f64) as u64);
                block_size - size <= allowed
            }
            _ => true,
        }
    }

    /// Takes a cached block of at least `size` bytes for `stream`, waiting for pending points
    /// through `ordering` if that's the only way. `requested` is the caller's unrounded size.
    pub fn reserve_cached(
        &mut self,
        size: u64,
        requested: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
        tick: u64,
    ) -> Option<Taken> {
        if !self.policy.exact_only
            && let Some(taken) = self.take_parked(size, stream, requested, tick)
        {
            return Some(taken);
        }
        if let Some(taken) = self.reserve_indexed(size, requested, stream, ordering, tick) {
            return Some(taken);
        }
        if self.parked_blocks == 0 {
            return None;
        }
        self.flush_parked();
        self.reserve_indexed(size, requested, stream, ordering, tick)
    }

    fn reserve_indexed(
        &mut self,
        size: u64,
        requested: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
        tick: u64,
    ) -> Option<Taken> {
        let best_neutral = self
            .neutral
            .range((size, 0, 0)..)
            .next()
            .copied()
            .filter(|key| self.fits(key.0, size));

        // A pending block this stream can take now, no larger than the best neutral block.
        let mut usable_pending = None;
        let candidates: Vec<FreeKey> = self
            .pending
            .range((size, 0, 0)..)
            .take(PENDING_SCAN_LIMIT)
            .take_while(|key| self.fits(key.0, size))
            .take_while(|key| best_neutral.is_none_or(|n| key.0 < n.0))
            .copied()
            .collect();
        for key in candidates {
            if self.points_passed_for(key, stream, ordering) {
                usable_pending = Some(key);
                break;
            }
        }
        if let Some(key) = usable_pending.or(best_neutral) {
            return Some(self.take(key, size, requested, tick));
        }

        // Last resort before asking the device for memory: wait on the device for a block.
        let candidates: Vec<FreeKey> = self
            .pending
            .range((size, 0, 0)..)
            .take(PENDING_SCAN_LIMIT)
            .take_while(|key| self.fits(key.0, size))
            .copied()
            .collect();
        for key in candidates {
            let points = self.points_of(key);
            let waited = points
                .iter()
                .filter(|p| p.stream != stream)
                .all(|p| ordering.is_complete(*p) || ordering.wait_for(stream, *p));
            if waited {
                return Some(self.take(key, size, requested, tick));
            }
        }
        None
    }

    fn points_of(&self, key: FreeKey) -> StreamPoints {
        self.block(key)
            .map(|block| match &block.state {
                BlockState::Free { points } => points.clone(),
                BlockState::Used { .. } | BlockState::Parked => StreamPoints::new(),
            })
            .unwrap_or_default()
    }

    fn block(&self, key: FreeKey) -> Option<&Block> {
        self.segments
            .get(key.1 as usize)
            .and_then(Option::as_ref)
            .and_then(|segment| segment.blocks.get(&key.2))
    }

    /// Whether `stream` can use the block at `key` now. Completed points are dropped.
    fn points_passed_for(
        &mut self,
        key: FreeKey,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
    ) -> bool {
        let Some(Some(segment)) = self.segments.get_mut(key.1 as usize) else {
            return false;
        };
        let Some(Block {
            state: BlockState::Free { points },
            ..
        }) = segment.blocks.get_mut(&key.2)
        else {
            return false;
        };
        points.retain(|p| !ordering.is_complete(*p));
        let passed = points.iter().all(|p| p.stream == stream);
        if points.is_empty() {
            self.pending.remove(&key);
            self.neutral.insert(key);
        }
        passed
    }

    /// Takes the free block at `key` for a request of `size` (rounded) bytes.
    fn take(&mut self, key: FreeKey, size: u64, requested: u64, tick: u64) -> Taken {
        self.neutral.remove(&key);
        self.pending.remove(&key);
        let (segment_index, offset) = (key.1, key.2);
        let exact_only = self.policy.exact_only;
        let min_split = self.policy.min_split;
        let mut remainder_key = None;
        let mut block_size = key.0;
        if let Some(Some(segment)) = self.segments.get_mut(segment_index as usize) {
            let mut remainder_points = None;
            if let Some(block) = segment.blocks.get_mut(&offset) {
                let remainder = block.size - size;
                let points =
                    match std::mem::replace(&mut block.state, BlockState::Used { requested }) {
                        BlockState::Free { points } => points,
                        BlockState::Used { .. } | BlockState::Parked => StreamPoints::new(),
                    };
                if !exact_only && remainder >= min_split.max(1) {
                    block.size = size;
                    remainder_points = Some((remainder, points));
                }
                block_size = block.size;
            }
            if let Some((remainder, points)) = remainder_points {
                let remainder_offset = offset + size;
                remainder_key = Some((
                    (remainder, segment_index, remainder_offset),
                    points.is_empty(),
                ));
                segment.blocks.insert(
                    remainder_offset,
                    Block {
                        size: remainder,
                        state: BlockState::Free { points },
                    },
                );
            }
            segment.used_blocks += 1;
            segment.touched = tick;
        }
        if let Some((key, neutral)) = remainder_key {
            if neutral {
                self.neutral.insert(key);
            } else {
                self.pending.insert(key);
            }
        }
        self.stats.allocations += 1;
        self.stats.bytes_in_use += requested;
        self.stats.bytes_padding += block_size - requested;
        Taken {
            segment: segment_index,
            offset,
            block_size,
        }
    }

    /// Adds a fresh segment and takes a block of `size` bytes from its start.
    pub fn reserve_in_new_segment(
        &mut self,
        storage: StorageId,
        segment_size: u64,
        size: u64,
        requested: u64,
        tick: u64,
    ) -> Taken {
        let mut blocks = BTreeMap::new();
        blocks.insert(
            0,
            Block {
                size: segment_size,
                state: BlockState::Free {
                    points: StreamPoints::new(),
                },
            },
        );
        let segment = Segment {
            storage,
            size: segment_size,
            blocks,
            used_blocks: 0,
            touched: tick,
        };
        let index = match self.free_slots.pop() {
            Some(slot) => {
                self.segments[slot as usize] = Some(segment);
                slot
            }
            None => {
                self.segments.push(Some(segment));
                (self.segments.len() - 1) as u32
            }
        };
        self.stats.segments += 1;
        self.stats.bytes_reserved += segment_size;
        self.take((segment_size, index, 0), size, requested, tick)
    }

    /// The raw allocation and block size of a taken block.
    pub fn storage_of(&self, segment: u32, offset: u64) -> Option<(StorageId, u64)> {
        let segment = self.segments.get(segment as usize)?.as_ref()?;
        let block = segment.blocks.get(&offset)?;
        Some((segment.storage, block.size))
    }

    /// Frees a taken block. `points` say which stream work may still use it. Returns `false`
    /// if there is no used block there.
    pub fn free(
        &mut self,
        segment_index: u32,
        offset: u64,
        points: StreamPoints,
        tick: u64,
    ) -> bool {
        let exact_only = self.policy.exact_only;
        let Some(Some(segment)) = self.segments.get_mut(segment_index as usize) else {
            return false;
        };
        let Some(block) = segment.blocks.get_mut(&offset) else {
            return false;
        };
        let BlockState::Used { requested } = block.state else {
            return false;
        };
        let size = block.size;
        self.stats.allocations -= 1;
        self.stats.bytes_in_use -= requested;
        self.stats.bytes_padding -= size - requested;
        segment.used_blocks -= 1;
        segment.touched = tick;
        if !exact_only && points.len() <= 1 {
            block.state = BlockState::Parked;
            let key = points.first().map_or(ANY_STREAM, |p| p.stream.value);
            self.parked
                .entry((size, key))
                .or_default()
                .push((segment_index, offset, points));
            self.parked_blocks += 1;
            return true;
        }
        self.index_free(segment_index, offset, points);
        true
    }

    /// Marks the block at `offset` free: merges it with free neighbours (unless the pool is
    /// exact-only) and indexes the result.
    fn index_free(&mut self, segment_index: u32, offset: u64, points: StreamPoints) {
        let exact_only = self.policy.exact_only;
        let Some(Some(segment)) = self.segments.get_mut(segment_index as usize) else {
            return;
        };
        let Some(mut size) = segment.blocks.get(&offset).map(|block| block.size) else {
            return;
        };
        let mut start = offset;
        let mut points = points;
        if !exact_only {
            // Merge with the next block.
            if let Some((&next_offset, next)) = segment.blocks.range(offset + 1..).next()
                && next_offset == offset + size
                && let BlockState::Free {
                    points: next_points,
                } = &next.state
            {
                let key = (next.size, segment_index, next_offset);
                merge_points(&mut points, next_points);
                size += next.size;
                segment.blocks.remove(&next_offset);
                self.neutral.remove(&key);
                self.pending.remove(&key);
            }
            // Merge with the previous block.
            if let Some((&prev_offset, prev)) = segment.blocks.range(..offset).next_back()
                && prev_offset + prev.size == offset
                && let BlockState::Free {
                    points: prev_points,
                } = &prev.state
            {
                let key = (prev.size, segment_index, prev_offset);
                merge_points(&mut points, prev_points);
                size += prev.size;
                segment.blocks.remove(&offset);
                self.neutral.remove(&key);
                self.pending.remove(&key);
                start = prev_offset;
            }
        }
        let neutral = points.is_empty();
        segment.blocks.insert(
            start,
            Block {
                size,
                state: BlockState::Free { points },
            },
        );
        let key = (size, segment_index, start);
        if neutral {
            self.neutral.insert(key);
        } else {
            self.pending.insert(key);
        }
    }

    /// Bytes of segments with no used block: what [`Self::release_segments`] could give
    /// back at most (blocks still awaited by a stream stay).
    pub fn idle_segment_bytes(&self) -> u64 {
        self.segments
            .iter()
            .flatten()
            .filter(|segment| segment.used_blocks == 0)
            .map(|segment| segment.size)
            .sum()
    }

    /// Gives back idle segments (as [`Self::release_segments`] picks them), least recently
    /// touched first, until at least `bytes` are given back or none is left.
    pub fn release_least_recent(
        &mut self,
        ordering: &mut dyn StreamOrdering,
        bytes: u64,
    ) -> Vec<ReleasedSegment> {
        let mut idle: Vec<(u64, u64)> = self
            .segments
            .iter()
            .flatten()
            .filter(|segment| segment.used_blocks == 0)
            .map(|segment| (segment.touched, segment.size))
            .collect();
        idle.sort_unstable();
        // The touch time below which segments go: the oldest ones that add up to `bytes`.
        let mut total = 0u64;
        let mut cutoff = 0u64;
        for (touched, size) in idle {
            if total >= bytes {
                break;
            }
            total += size;
            cutoff = touched;
        }
        self.release_segments(ordering, |touched| touched > cutoff)
    }

    /// Gives back every segment with no used block whose points are complete and for which
    /// `keep(touched)` is false.
    pub fn release_segments(
        &mut self,
        ordering: &mut dyn StreamOrdering,
        keep: impl Fn(u64) -> bool,
    ) -> Vec<ReleasedSegment> {
        self.flush_parked();
        let mut released = Vec::new();
        for index in 0..self.segments.len() {
            let Some(segment) = &mut self.segments[index] else {
                continue;
            };
            if segment.used_blocks != 0 || keep(segment.touched) {
                continue;
            }
            let Some(block) = segment.blocks.get_mut(&0) else {
                continue;
            };
            let BlockState::Free { points } = &mut block.state else {
                continue;
            };
            points.retain(|p| !ordering.is_complete(*p));
            if !points.is_empty() || block.size != segment.size {
                continue;
            }
            let key = (segment.size, index as u32, 0);
            self.neutral.remove(&key);
            self.pending.remove(&key);
            released.push(ReleasedSegment {
                storage: segment.storage,
                size: segment.size,
            });
            self.stats.segments -= 1;
            self.stats.bytes_reserved -= segment.size;
            self.segments[index] = None;
            self.free_slots.push(index as u32);
        }
        released
    }
}

/// Adds `from` to `into`, keeping one point per stream (the later one).
pub(crate) fn merge_points(into: &mut StreamPoints, from: &[StreamPoint]) {
    for point in from {
        match into.iter_mut().find(|p| p.stream == point.stream) {
            Some(existing) => existing.seq = existing.seq.max(point.seq),
            None => into.push(*point),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ordering::HostOrdering;

    const MIB: u64 = 1 << 20;

    fn pool() -> BlockPool {
        BlockPool::new(PoolPolicy {
            name: "test",
            segments: SegmentRule::Fixed(2 * MIB),
            min_split: 512,
            exact_only: false,
            max_split_waste: None,
        })
    }

    #[test]
    fn freed_neighbours_coalesce_back_into_one_block() {
        let mut pool = pool();
        let stream = StreamId::new(0);
        let a = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 1024, 1000, 0);
        let b = pool
            .reserve_cached(1024, 1024, stream, &mut HostOrdering, 0)
            .unwrap();
        let c = pool
            .reserve_cached(1024, 1024, stream, &mut HostOrdering, 0)
            .unwrap();
        assert_eq!((a.offset, b.offset, c.offset), (0, 1024, 2048));
        assert_eq!(pool.stats().bytes_padding, 24);
        pool.free(b.segment, b.offset, StreamPoints::new(), 0);
        pool.free(a.segment, a.offset, StreamPoints::new(), 0);
        pool.free(c.segment, c.offset, StreamPoints::new(), 0);
        // Three parked blocks and the tail; giving segments back merges them first.
        assert_eq!(pool.free_blocks().0, 4);
        assert_eq!(pool.free_block_count(), 4);
        let released = pool.release_segments(&mut HostOrdering, |_| false);
        assert_eq!(
            released,
            vec![ReleasedSegment {
                storage: StorageId(1),
                size: 2 * MIB
            }]
        );
        assert_eq!(pool.stats(), PoolStats::default());
    }

    #[test]
    fn freed_block_is_parked_and_reused_by_the_same_size() {
        let mut pool = pool();
        let stream = StreamId::new(0);
        let a = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 4096, 4096, 0);
        pool.free(a.segment, a.offset, StreamPoints::new(), 0);
        let again = pool.reserve_cached(4096, 4000, stream, &mut HostOrdering, 0);
        assert_eq!(again, Some(a));
        assert_eq!(pool.stats().bytes_padding, 96);
    }

    #[test]
    fn parked_blocks_merge_before_a_larger_request_fails() {
        let mut pool = pool();
        let stream = StreamId::new(0);
        // Fill the whole segment with two halves, free both: only merged do they fit 2 MiB.
        let a = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, MIB, MIB, 0);
        let b = pool
            .reserve_cached(MIB, MIB, stream, &mut HostOrdering, 0)
            .unwrap();
        pool.free(a.segment, a.offset, StreamPoints::new(), 0);
        pool.free(b.segment, b.offset, StreamPoints::new(), 0);
        let whole = pool.reserve_cached(2 * MIB, 2 * MIB, stream, &mut HostOrdering, 0);
        assert_eq!(whole.map(|t| (t.offset, t.block_size)), Some((0, 2 * MIB)));
    }

    #[test]
    fn parked_block_of_another_stream_is_not_taken_on_the_fast_path() {
        let mut pool = pool();
        let (a_stream, b_stream) = (StreamId::new(1), StreamId::new(2));
        let taken = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 2 * MIB, 2 * MIB, 0);
        let point = StreamPoint {
            stream: a_stream,
            seq: 3,
        };
        pool.free(taken.segment, taken.offset, smallvec::smallvec![point], 0);
        let mut ordering = ManualOrdering {
            complete: false,
            waits: Vec::new(),
        };
        // Stream B gets it only through the indexed path, waiting on the device for A.
        let again = pool.reserve_cached(2 * MIB, 2 * MIB, b_stream, &mut ordering, 0);
        assert_eq!(again, Some(taken));
        assert_eq!(ordering.waits, vec![(b_stream, point)]);
    }

    #[test]
    fn split_waste_limit_leaves_big_blocks_for_big_requests() {
        let mut pool = BlockPool::new(PoolPolicy {
            name: "large",
            segments: SegmentRule::Fixed(64 * MIB),
            min_split: MIB,
            exact_only: false,
            max_split_waste: Some(0.5),
        });
        let stream = StreamId::new(0);
        let big = pool.reserve_in_new_segment(StorageId(1), 64 * MIB, 64 * MIB, 64 * MIB, 0);
        pool.free(big.segment, big.offset, StreamPoints::new(), 0);
        // 4 MiB out of a free 64 MiB block would strand 60 MiB: refused.
        assert!(
            pool.reserve_cached(4 * MIB, 4 * MIB, stream, &mut HostOrdering, 0)
                .is_none()
        );
        // 48 MiB leaves 16 MiB, within half of the request: taken.
        assert!(
            pool.reserve_cached(48 * MIB, 48 * MIB, stream, &mut HostOrdering, 0)
                .is_some()
        );
    }

    #[test]
    fn best_fit_picks_the_smallest_block_that_fits() {
        let mut pool = pool();
        let stream = StreamId::new(0);
        let a = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 4096, 4096, 0);
        let _guard = pool
            .reserve_cached(512, 512, stream, &mut HostOrdering, 0)
            .unwrap();
        let b = pool
            .reserve_cached(1024, 1024, stream, &mut HostOrdering, 0)
            .unwrap();
        let _guard2 = pool
            .reserve_cached(512, 512, stream, &mut HostOrdering, 0)
            .unwrap();
        pool.free(a.segment, a.offset, StreamPoints::new(), 0);
        pool.free(b.segment, b.offset, StreamPoints::new(), 0);
        // Free blocks now: 4096 at 0, 1024 at b, and the tail. A 1000-byte request takes b.
        let c = pool
            .reserve_cached(1024, 1000, stream, &mut HostOrdering, 0)
            .unwrap();
        assert_eq!(c.offset, b.offset);
    }

    struct ManualOrdering {
        complete: bool,
        waits: Vec<(StreamId, StreamPoint)>,
    }

    impl StreamOrdering for ManualOrdering {
        fn is_complete(&mut self, _point: StreamPoint) -> bool {
            self.complete
        }
        fn wait_for(&mut self, waiter: StreamId, point: StreamPoint) -> bool {
            self.waits.push((waiter, point));
            true
        }
    }

    #[test]
    fn pending_block_is_reused_at_once_on_its_own_stream() {
        let mut pool = pool();
        let a_stream = StreamId::new(1);
        let taken = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 2 * MIB, 2 * MIB, 0);
        let point = StreamPoint {
            stream: a_stream,
            seq: 5,
        };
        pool.free(taken.segment, taken.offset, smallvec::smallvec![point], 0);
        let mut ordering = ManualOrdering {
            complete: false,
            waits: Vec::new(),
        };
        let again = pool.reserve_cached(2 * MIB, 2 * MIB, a_stream, &mut ordering, 0);
        assert_eq!(again, Some(taken));
        assert!(ordering.waits.is_empty());
    }

    #[test]
    fn pending_block_on_another_stream_waits_on_the_device() {
        let mut pool = pool();
        let a_stream = StreamId::new(1);
        let b_stream = StreamId::new(2);
        let taken = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 2 * MIB, 2 * MIB, 0);
        let point = StreamPoint {
            stream: a_stream,
            seq: 5,
        };
        pool.free(taken.segment, taken.offset, smallvec::smallvec![point], 0);
        let mut ordering = ManualOrdering {
            complete: false,
            waits: Vec::new(),
        };
        let again = pool.reserve_cached(2 * MIB, 2 * MIB, b_stream, &mut ordering, 0);
        assert_eq!(again, Some(taken));
        assert_eq!(ordering.waits, vec![(b_stream, point)]);
    }

    #[test]
    fn segment_with_pending_points_is_not_released() {
        let mut pool = pool();
        let taken = pool.reserve_in_new_segment(StorageId(1), 2 * MIB, 1024, 1024, 0);
        let point = StreamPoint {
            stream: StreamId::new(1),
            seq: 1,
        };
        pool.free(taken.segment, taken.offset, smallvec::smallvec![point], 0);
        let mut pending = ManualOrdering {
            complete: false,
            waits: Vec::new(),
        };
        assert!(pool.release_segments(&mut pending, |_| false).is_empty());
        let mut done = ManualOrdering {
            complete: true,
            waits: Vec::new(),
        };
        assert_eq!(pool.release_segments(&mut done, |_| false).len(), 1);
    }

    #[test]
    fn exact_only_pool_reuses_only_equal_sizes() {
        let mut pool = BlockPool::new(PoolPolicy {
            name: "persistent",
            segments: SegmentRule::Exact,
            min_split: u64::MAX,
            exact_only: true,
            max_split_waste: None,
        });
        let stream = StreamId::new(0);
        let taken = pool.reserve_in_new_segment(StorageId(1), 4096, 4096, 4000, 0);
        pool.free(taken.segment, taken.offset, StreamPoints::new(), 0);
        assert!(
            pool.reserve_cached(2048, 2048, stream, &mut HostOrdering, 0)
                .is_none()
        );
        assert!(
            pool.reserve_cached(4096, 4096, stream, &mut HostOrdering, 0)
                .is_some()
        );
    }
}
