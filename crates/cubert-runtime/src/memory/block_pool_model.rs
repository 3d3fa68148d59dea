//! A model-based property test of the block pools (small, large and persistent policies, as
//! the memory manager shapes them): proptest generates reservations and frees on three
//! streams, stream progress and segment give-backs, and a plain model of the blocks checks
//! after every step what the pools promise:
//!
//! - a block overlaps no live block of its segment, lies inside it, and is at least the
//!   rounded request (exactly it, for the persistent pool);
//! - memory freed on another stream whose work is not complete is reused only after the
//!   reserving stream was made to wait for that work, and not at all where it can't wait;
//! - a segment is given back only when no live block and no busy freed memory lies in it;
//! - the pool's totals agree with the model.
//!
//! The fast path (blocks *parked* under their size and stream) and coalescing are on every
//! path. The seed is fixed, so a CI failure reproduces.

use super::block_pool::{BlockPool, PoolPolicy, SegmentRule, Taken};
use super::pool_model::{FreedMemory, ModelOrdering, Op, STREAMS, check, check_live, run};
use crate::storage::StorageId;
use crate::stream::StreamId;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashMap;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// The manager's rounding of every request.
const ROUNDING: u64 = 512;

#[derive(Clone, Copy, Debug)]
struct Live {
    taken: Taken,
    storage: u64,
    requested: u64,
}

#[derive(Default)]
struct Model {
    live: Vec<Live>,
    freed: FreedMemory,
    /// Segments held: storage -> size.
    segments: HashMap<u64, u64>,
    next_storage: u64,
}

impl Model {
    /// Checks block `block` reserved for `stream` with `size` rounded bytes, then takes the
    /// freed memory it reused out of the model.
    fn reserved(
        &mut self,
        block: Live,
        size: u64,
        stream: StreamId,
        exact: bool,
        ordering: &ModelOrdering,
    ) -> Result<(), TestCaseError> {
        let (start, end) = (
            block.taken.offset,
            block.taken.offset + block.taken.block_size,
        );
        let segment = self.segments.get(&block.storage).copied().unwrap_or(0);
        check(end <= segment, || {
            format!("{block:?} ends past its segment of {segment} bytes")
        })?;
        check(block.taken.block_size >= size, || {
            format!("{block:?} is smaller than {size}")
        })?;
        check(!exact || block.taken.block_size == size, || {
            format!("{block:?} is not exactly {size} bytes")
        })?;
        for other in &self.live {
            let overlaps = other.storage == block.storage
                && other.taken.offset < end
                && start < other.taken.offset + other.taken.block_size;
            check(!overlaps, || format!("{block:?} overlaps live {other:?}"))?;
        }
        self.freed
            .take(block.storage, start, end, stream, ordering)?;
        self.live.push(block);
        Ok(())
    }
}

fn run_case(policy: PoolPolicy, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut pool = BlockPool::new(policy);
    let mut ordering = ModelOrdering::new();
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let tick = step as u64;
        ordering.waits.clear();
        match *op {
            Op::Reserve {
                stream,
                size: requested,
            } => {
                let size = requested.div_ceil(ROUNDING) * ROUNDING;
                let stream = StreamId::new(stream);
                let taken = match pool.reserve_cached(size, requested, stream, &mut ordering, tick)
                {
                    Some(taken) => taken,
                    None => {
                        model.next_storage += 1;
                        let segment = policy.segments.segment_size(size);
                        model.segments.insert(model.next_storage, segment);
                        let storage = StorageId(model.next_storage);
                        pool.reserve_in_new_segment(storage, segment, size, requested, tick)
                    }
                };
                let (storage, block_size) = pool
                    .storage_of(taken.segment, taken.offset)
                    .ok_or_else(|| {
                        TestCaseError::fail(format!("step {step}: {taken:?} has no storage"))
                    })?;
                check(block_size == taken.block_size, || {
                    format!("step {step}: block sizes differ")
                })?;
                let block = Live {
                    taken,
                    storage: storage.0,
                    requested,
                };
                model
                    .reserved(block, size, stream, policy.exact_only, &ordering)
                    .map_err(|error| TestCaseError::fail(format!("step {step}: {error}")))?;
            }
            Op::Free(ref free) => {
                let Some(live) = free.pick(&mut model.live) else {
                    continue;
                };
                let points = ordering.last_uses(free);
                check(
                    pool.free(live.taken.segment, live.taken.offset, points.clone(), tick),
                    || format!("step {step}: {live:?} was not live"),
                )?;
                model.freed.add(
                    live.storage,
                    live.taken.offset,
                    live.taken.offset + live.taken.block_size,
                    &points,
                );
            }
            Op::Complete { stream } => ordering.complete(stream),
            Op::CanWait(can_wait) => ordering.can_wait = can_wait,
            Op::Release => {
                for released in pool.release_segments(&mut ordering, |_| false) {
                    let storage = released.storage.0;
                    check(
                        model.segments.remove(&storage) == Some(released.size),
                        || format!("step {step}: {released:?} is not a segment held"),
                    )?;
                    check(
                        model.live.iter().all(|live| live.storage != storage),
                        || format!("step {step}: {released:?} given back under a live block"),
                    )?;
                    check(!model.freed.busy_in(storage, &ordering), || {
                        format!("step {step}: {released:?} given back while in use")
                    })?;
                    model.freed.regions.retain(|freed| freed.storage != storage);
                }
            }
        }
        let stats = pool.stats();
        let requested: u64 = model.live.iter().map(|live| live.requested).sum();
        check_live(
            step,
            (stats.allocations, stats.bytes_in_use),
            (model.live.len(), requested),
        )?;
        let held: u64 = model.segments.values().sum();
        check(
            stats.bytes_reserved == held && stats.segments == model.segments.len() as u64,
            || {
                format!(
                    "step {step}: the pool holds {} bytes in {} segments, the model {held} in {}",
                    stats.bytes_reserved,
                    stats.segments,
                    model.segments.len()
                )
            },
        )?;
    }
    // Everything freed and complete: every segment goes back.
    for live in std::mem::take(&mut model.live) {
        pool.free(
            live.taken.segment,
            live.taken.offset,
            crate::memory::StreamPoints::new(),
            0,
        );
    }
    for stream in 0..STREAMS {
        ordering.complete(stream);
    }
    pool.release_segments(&mut ordering, |_| false);
    check(pool.stats().segments == 0, || {
        format!(
            "{} segments held after everything was freed and given back",
            pool.stats().segments
        )
    })
}

fn run_policy(policy: PoolPolicy, sizes: impl Strategy<Value = u64> + 'static) {
    run(policy.name, 300, sizes, |ops| run_case(policy, ops));
}

#[test]
fn small_pool_blocks_never_overlap_live_or_busy_memory() {
    let policy = PoolPolicy {
        name: "small",
        segments: SegmentRule::Fixed(2 * MIB),
        min_split: ROUNDING,
        exact_only: false,
        max_split_waste: None,
    };
    let sizes = prop_oneof![
        prop::sample::select(vec![512, 4 * KIB, 64 * KIB]),
        1u64..=MIB,
    ];
    run_policy(policy, sizes);
}

#[test]
fn large_pool_blocks_never_overlap_live_or_busy_memory() {
    for max_split_waste in [None, Some(0.25)] {
        let policy = PoolPolicy {
            name: "large",
            segments: SegmentRule::Tiered {
                mid_request: 10 * MIB,
                mid_segment: 20 * MIB,
                round: 2 * MIB,
            },
            min_split: MIB,
            exact_only: false,
            max_split_waste,
        };
        let sizes = prop_oneof![
            prop::sample::select(vec![MIB + 512, 6 * MIB, 12 * MIB]),
            MIB..=40 * MIB,
        ];
        run_policy(policy, sizes);
    }
}

#[test]
fn persistent_pool_blocks_are_exact_and_never_overlap_live_or_busy_memory() {
    let policy = PoolPolicy {
        name: "persistent",
        segments: SegmentRule::Exact,
        min_split: u64::MAX,
        exact_only: true,
        max_split_waste: None,
    };
    let sizes = prop::sample::select(vec![512, 4 * KIB, 3 * MIB, 3 * MIB + 512]);
    run_policy(policy, sizes);
}
