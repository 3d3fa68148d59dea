//! A model-based property test of the growable pool: proptest generates sequences of
//! reservations and frees on three streams, stream progress, gives back and a device that
//! refuses chunks past 1.5 GiB, and a plain model of the blocks checks after every step what
//! the pool promises its users:
//!
//! - a reservation returns memory no live block of its range overlaps, every page of it
//!   mapped;
//! - memory freed on another stream whose work is not complete is reused only after the
//!   reserving stream was made to wait for that work (or, where the ordering can't wait,
//!   not at all);
//! - no chunk is unmapped (moved or given back) while a live block, or freed memory the
//!   device may still use, lies on it (the fake mapper fails the test at the call);
//! - the pool's totals agree with the model.
//!
//! The seed is fixed, so a CI failure reproduces; proptest shrinks it to a short sequence.

use super::fake_mapper::FakeMapper;
use super::growable_pool::GrowablePool;
use super::pool_model::{FreedMemory, ModelOrdering, Op, STREAMS, check, check_live, run};
use crate::error::IoError;
use crate::stream::StreamId;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashSet;

const PAGE: u64 = 2 << 20;
const MIB: u64 = 1 << 20;
/// Pages the fake device holds at most (1.5 GiB): some sequences run out.
const DEVICE_PAGES: u64 = 768;

/// Reservation sizes: repeated ones (the block freed last is taken back at its size) and
/// varied ones (splits, merges, growth), all multiples of the manager's 512-byte rounding.
fn sizes() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => prop::sample::select(vec![2 * MIB, 6 * MIB, 64 * MIB, 256 * MIB]),
        2 => (1u64..=600).prop_map(|half_mib| half_mib * MIB / 2 + 512 * (half_mib % 7)),
    ]
}

/// A live block: its range, bytes and stream.
#[derive(Clone, Copy, Debug)]
struct Live {
    slot: u32,
    range: u64,
    start: u64,
    end: u64,
    stream: u64,
}

#[derive(Default)]
struct Model {
    live: Vec<Live>,
    freed: FreedMemory,
}

fn pages(start: u64, end: u64) -> std::ops::Range<u64> {
    start / PAGE..end.div_ceil(PAGE)
}

impl Model {
    /// Pages the device may still use: under live blocks and under freed memory whose
    /// point is pending.
    fn protected(&self, ordering: &ModelOrdering) -> HashSet<(u64, u64)> {
        let live = self
            .live
            .iter()
            .flat_map(|block| pages(block.start, block.end).map(|page| (block.range, page)));
        let busy = self
            .freed
            .regions
            .iter()
            .filter(|freed| !ordering.done(freed.point))
            .flat_map(|freed| pages(freed.start, freed.end).map(|page| (freed.storage, page)));
        live.chain(busy).collect()
    }

    /// Checks a reservation of `start .. end` of `range` for `stream`, then takes the freed
    /// memory it reused out of the model.
    fn reserved(
        &mut self,
        block: Live,
        ordering: &ModelOrdering,
        mapper: &FakeMapper,
    ) -> Result<(), TestCaseError> {
        for other in &self.live {
            check(
                other.range != block.range || other.end <= block.start || block.end <= other.start,
                || format!("{block:?} overlaps live {other:?}"),
            )?;
        }
        for page in pages(block.start, block.end) {
            check(mapper.is_mapped(block.range, page), || {
                format!("page {page} of {block:?} is not mapped")
            })?;
        }
        let stream = StreamId::new(block.stream);
        self.freed
            .take(block.range, block.start, block.end, stream, ordering)?;
        self.live.push(block);
        Ok(())
    }
}

fn run_case(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut pool = GrowablePool::new(1 << 40, 16 * MIB, 0);
    let mut mapper = FakeMapper::with_page_limit(DEVICE_PAGES);
    let mut ordering = ModelOrdering::new();
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        mapper.protected = model.protected(&ordering);
        ordering.waits.clear();
        match *op {
            Op::Reserve { stream, size } => {
                let reserved = pool.reserve(
                    size,
                    size - 100,
                    StreamId::new(stream),
                    &mut mapper,
                    &mut ordering,
                );
                match reserved {
                    Ok((slot, offset)) => {
                        let (range, at) = pool.storage_of(slot).ok_or_else(|| {
                            TestCaseError::fail(format!("step {step}: slot {slot} has no storage"))
                        })?;
                        check(at == offset, || format!("step {step}: offsets differ"))?;
                        let block = Live {
                            slot,
                            range: range.0,
                            start: offset,
                            end: offset + size,
                            stream,
                        };
                        model.reserved(block, &ordering, &mapper).map_err(|error| {
                            TestCaseError::fail(format!("step {step}: {error}"))
                        })?;
                    }
                    Err(IoError::OutOfMemory { .. }) => {
                        // Refused only where even the pages free chunks gave back leave too
                        // few (a growth at the end is at least a minimum chunk of 8 pages).
                        let needed = size.div_ceil(PAGE).max(8);
                        check(mapper.pages_held() + needed > DEVICE_PAGES, || {
                            format!(
                                "step {step}: out of memory with {} pages held",
                                mapper.pages_held()
                            )
                        })?;
                    }
                    Err(error) => {
                        return Err(TestCaseError::fail(format!("step {step}: {error}")));
                    }
                }
            }
            Op::Free(ref free) => {
                let Some(live) = free.pick(&mut model.live) else {
                    continue;
                };
                let points = ordering.last_uses(free);
                check(pool.free(live.slot, points.clone()), || {
                    format!("step {step}: slot {} was not live", live.slot)
                })?;
                check(!pool.free(live.slot, points.clone()), || {
                    format!("step {step}: slot {} freed twice", live.slot)
                })?;
                model.freed.add(live.range, live.start, live.end, &points);
            }
            Op::Complete { stream } => ordering.complete(stream),
            Op::CanWait(can_wait) => ordering.can_wait = can_wait,
            Op::Release => {
                pool.release(&mut mapper, &mut ordering);
            }
        }
        let stats = pool.stats();
        let requested: u64 = model
            .live
            .iter()
            .map(|block| block.end - block.start - 100)
            .sum();
        check_live(
            step,
            (stats.allocations, stats.bytes_in_use),
            (model.live.len(), requested),
        )?;
        check(stats.bytes_reserved == mapper.pages_held() * PAGE, || {
            format!(
                "step {step}: the pool holds {} bytes, the device {} pages",
                stats.bytes_reserved,
                mapper.pages_held()
            )
        })?;
    }
    // Everything freed and complete: a give-back returns every chunk.
    for live in std::mem::take(&mut model.live) {
        pool.free(live.slot, crate::memory::StreamPoints::new());
    }
    for stream in 0..STREAMS {
        ordering.complete(stream);
    }
    mapper.protected.clear();
    pool.release(&mut mapper, &mut ordering);
    check(mapper.pages_held() == 0, || {
        format!(
            "{} pages held after everything was freed and given back",
            mapper.pages_held()
        )
    })
}

#[test]
fn reservations_never_overlap_live_or_busy_memory_and_chunks_stay_under_used_memory() {
    run("growable pool", 400, sizes(), run_case);
}
