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

use super::growable_pool::GrowablePool;
use super::growable_pool::tests::FakeMapper;
use super::ordering::{StreamOrdering, StreamPoint};
use crate::error::IoError;
use crate::stream::StreamId;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::collections::{HashMap, HashSet};

const PAGE: u64 = 2 << 20;
const MIB: u64 = 1 << 20;
const STREAMS: u64 = 3;
/// Pages the fake device holds at most (1.5 GiB): some sequences run out.
const DEVICE_PAGES: u64 = 768;

#[derive(Clone, Debug)]
enum Op {
    /// Reserve `size` bytes on `stream`.
    Reserve { stream: u64, size: u64 },
    /// Free a live block; its last use was on `user` at a new point, or, with `done`, at a
    /// point already complete.
    Free { block: Index, user: u64, done: bool },
    /// The device passes every point of `stream` queued so far.
    Complete { stream: u64 },
    /// Whether the ordering can make a stream wait from now on.
    CanWait(bool),
    /// `memory_cleanup`: chunks under complete free blocks go back.
    Release,
}

fn op() -> impl Strategy<Value = Op> {
    // Sizes repeat (the block freed last is taken back at its size) and vary (splits,
    // merges, growth); all are multiples of the manager's 512-byte rounding.
    let size = prop_oneof![
        3 => prop::sample::select(vec![2 * MIB, 6 * MIB, 64 * MIB, 256 * MIB]),
        2 => (1u64..=600).prop_map(|half_mib| half_mib * MIB / 2 + 512 * (half_mib % 7)),
    ];
    prop_oneof![
        8 => (0..STREAMS, size).prop_map(|(stream, size)| Op::Reserve { stream, size }),
        6 => (any::<Index>(), 0..STREAMS, any::<bool>())
            .prop_map(|(block, user, done)| Op::Free { block, user, done }),
        2 => (0..STREAMS).prop_map(|stream| Op::Complete { stream }),
        1 => any::<bool>().prop_map(Op::CanWait),
        1 => Just(Op::Release),
    ]
}

/// Stream progress as the device would report it: each stream passes its points in order.
#[derive(Default)]
struct ModelOrdering {
    /// Points queued per stream (the next point's `seq` is one more).
    queued: HashMap<u64, u64>,
    /// Points completed per stream.
    completed: HashMap<u64, u64>,
    can_wait: bool,
    /// Waits asked for during the current step: (waiter, point).
    waits: Vec<(StreamId, StreamPoint)>,
}

impl ModelOrdering {
    fn next_point(&mut self, stream: u64) -> StreamPoint {
        let seq = self.queued.entry(stream).or_default();
        *seq += 1;
        StreamPoint {
            stream: StreamId::new(stream),
            seq: *seq,
        }
    }

    fn complete(&mut self, stream: u64) {
        let queued = self.queued.get(&stream).copied().unwrap_or(0);
        self.completed.insert(stream, queued);
    }

    fn done(&self, point: StreamPoint) -> bool {
        point.seq
            <= self
                .completed
                .get(&point.stream.value)
                .copied()
                .unwrap_or(0)
    }
}

impl StreamOrdering for ModelOrdering {
    fn is_complete(&mut self, point: StreamPoint) -> bool {
        self.done(point)
    }

    fn wait_for(&mut self, waiter: StreamId, point: StreamPoint) -> bool {
        self.waits.push((waiter, point));
        self.can_wait
    }
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

/// Freed bytes of a range whose last use is at `point`.
#[derive(Clone, Copy, Debug)]
struct Freed {
    range: u64,
    start: u64,
    end: u64,
    point: StreamPoint,
}

#[derive(Default)]
struct Model {
    live: Vec<Live>,
    /// Freed memory whose point may still be pending (dropped once reused).
    freed: Vec<Freed>,
}

fn pages(start: u64, end: u64) -> std::ops::Range<u64> {
    start / PAGE..end.div_ceil(PAGE)
}

fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if condition {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
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
            .iter()
            .filter(|freed| !ordering.done(freed.point))
            .flat_map(|freed| pages(freed.start, freed.end).map(|page| (freed.range, page)));
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
        let mut kept = Vec::new();
        for freed in std::mem::take(&mut self.freed) {
            let overlaps =
                freed.range == block.range && freed.start < block.end && block.start < freed.end;
            if !overlaps {
                kept.push(freed);
                continue;
            }
            let pending = freed.point.stream != stream && !ordering.done(freed.point);
            let waited = ordering.waits.iter().any(|&(waiter, point)| {
                waiter == stream
                    && point.stream == freed.point.stream
                    && point.seq >= freed.point.seq
            });
            check(!pending || (waited && ordering.can_wait), || {
                format!(
                    "{block:?} reuses {freed:?} before its work on another stream \
                     (waits asked: {:?}, can wait: {})",
                    ordering.waits, ordering.can_wait
                )
            })?;
            // What the block did not take stays freed with its point.
            if freed.start < block.start {
                kept.push(Freed {
                    end: block.start,
                    ..freed
                });
            }
            if block.end < freed.end {
                kept.push(Freed {
                    start: block.end,
                    ..freed
                });
            }
        }
        self.freed = kept;
        self.live.push(block);
        Ok(())
    }
}

fn run_case(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut pool = GrowablePool::new(1 << 40, 16 * MIB, 0);
    let mut mapper = FakeMapper::with_page_limit(DEVICE_PAGES);
    let mut ordering = ModelOrdering {
        can_wait: true,
        ..ModelOrdering::default()
    };
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
            Op::Free { block, user, done } => {
                if model.live.is_empty() {
                    continue;
                }
                let live = model.live.swap_remove(block.index(model.live.len()));
                // The block's last use: on `user`, ordered after its own stream's use.
                let point = ordering.next_point(user);
                if done {
                    ordering.complete(user);
                }
                check(pool.free(live.slot, vec![point]), || {
                    format!("step {step}: slot {} was not live", live.slot)
                })?;
                check(!pool.free(live.slot, vec![point]), || {
                    format!("step {step}: slot {} freed twice", live.slot)
                })?;
                model.freed.push(Freed {
                    range: live.range,
                    start: live.start,
                    end: live.end,
                    point,
                });
            }
            Op::Complete { stream } => ordering.complete(stream),
            Op::CanWait(can_wait) => ordering.can_wait = can_wait,
            Op::Release => {
                pool.release(&mut mapper, &mut ordering);
            }
        }
        let stats = pool.stats();
        check(stats.allocations == model.live.len() as u64, || {
            format!(
                "step {step}: {} live blocks, the model has {}",
                stats.allocations,
                model.live.len()
            )
        })?;
        let requested: u64 = model
            .live
            .iter()
            .map(|block| block.end - block.start - 100)
            .sum();
        check(stats.bytes_in_use == requested, || {
            format!(
                "step {step}: {} bytes in use, the model has {requested}",
                stats.bytes_in_use
            )
        })?;
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
        pool.free(live.slot, Vec::new());
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
    let config = Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x6b; 32]),
    );
    let result = runner.run(&prop::collection::vec(op(), 1..80), |ops| run_case(&ops));
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
