//! What the pools' model-based property tests share (`block_pool_model`,
//! `growable_pool_model`): the generated steps, stream progress as a device reports it, and
//! the model of freed memory whose reuse must wait for another stream's work.

use super::ordering::{StreamOrdering, StreamPoint, StreamPoints};
use crate::stream::StreamId;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::collections::HashMap;

/// Streams a case uses.
pub const STREAMS: u64 = 3;

/// One generated step.
#[derive(Clone, Debug)]
pub enum Op {
    /// Reserve `size` bytes on `stream`.
    Reserve { stream: u64, size: u64 },
    /// Free a live block.
    Free(FreeStep),
    /// The device passes every point of `stream` queued so far.
    Complete { stream: u64 },
    /// Whether the ordering can make a stream wait from now on.
    CanWait(bool),
    /// Give back what is free and complete (segments, chunks).
    Release,
}

/// Which live block a step frees, and where it was last used: on `user` at a new point
/// (and on `also` too, where some), or, with `done`, at points already complete.
#[derive(Clone, Debug)]
pub struct FreeStep {
    pub block: Index,
    pub user: u64,
    pub also: Option<u64>,
    pub done: bool,
}

impl FreeStep {
    /// Takes the block this step frees out of `live` (none when nothing is live).
    pub fn pick<T>(&self, live: &mut Vec<T>) -> Option<T> {
        (!live.is_empty()).then(|| live.swap_remove(self.block.index(live.len())))
    }
}

/// Steps with reservations of `sizes`.
pub fn op(sizes: impl Strategy<Value = u64> + 'static) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..STREAMS, sizes).prop_map(|(stream, size)| Op::Reserve { stream, size }),
        6 => (any::<Index>(), 0..STREAMS, prop::option::weighted(0.2, 0..STREAMS), any::<bool>())
            .prop_map(|(block, user, also, done)| Op::Free(FreeStep { block, user, also, done })),
        2 => (0..STREAMS).prop_map(|stream| Op::Complete { stream }),
        1 => any::<bool>().prop_map(Op::CanWait),
        1 => Just(Op::Release),
    ]
}

/// Runs `cases` generated sequences of up to 80 steps through `case`, from a fixed seed
/// (a CI failure reproduces; proptest shrinks it), and panics with the shrunk failure.
pub fn run(
    what: &str,
    cases: u32,
    sizes: impl Strategy<Value = u64> + 'static,
    case: impl Fn(&[Op]) -> Result<(), TestCaseError>,
) {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5c; 32]),
    );
    if let Err(failure) = runner.run(&prop::collection::vec(op(sizes), 1..80), |ops| case(&ops)) {
        panic!("{what}: {failure}");
    }
}

/// A failed check with `message` unless `condition` holds.
pub fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if condition {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
}

/// Checks a pool's count of live blocks and their requested bytes against the model's.
pub fn check_live(
    step: usize,
    (allocations, bytes_in_use): (u64, u64),
    (live, requested): (usize, u64),
) -> Result<(), TestCaseError> {
    check(
        allocations == live as u64 && bytes_in_use == requested,
        || {
            format!(
                "step {step}: the pool has {allocations} live blocks of {bytes_in_use} bytes, the \
             model {live} of {requested}"
            )
        },
    )
}

/// Stream progress as a device reports it: each stream passes its points in order.
#[derive(Default)]
pub struct ModelOrdering {
    queued: HashMap<u64, u64>,
    completed: HashMap<u64, u64>,
    /// Whether `wait_for` succeeds.
    pub can_wait: bool,
    /// Waits asked for since the last clear: (waiter, point).
    pub waits: Vec<(StreamId, StreamPoint)>,
}

impl ModelOrdering {
    /// An ordering that can make streams wait.
    pub fn new() -> Self {
        Self {
            can_wait: true,
            ..Self::default()
        }
    }

    /// A new point queued on `stream`.
    pub fn next_point(&mut self, stream: u64) -> StreamPoint {
        let seq = self.queued.entry(stream).or_default();
        *seq += 1;
        StreamPoint {
            stream: StreamId::new(stream),
            seq: *seq,
        }
    }

    /// The last uses of the block `step` frees: new points, passed already where it says.
    pub fn last_uses(&mut self, step: &FreeStep) -> StreamPoints {
        let streams = std::iter::once(step.user).chain(step.also.filter(|&also| also != step.user));
        let points: StreamPoints = streams.map(|stream| self.next_point(stream)).collect();
        if step.done {
            for point in &points {
                self.complete(point.stream.value);
            }
        }
        points
    }

    /// The device passes every point queued on `stream`.
    pub fn complete(&mut self, stream: u64) {
        let queued = self.queued.get(&stream).copied().unwrap_or(0);
        self.completed.insert(stream, queued);
    }

    /// Whether the device passed `point`.
    pub fn done(&self, point: StreamPoint) -> bool {
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

/// Freed bytes `start .. end` of allocation (segment or range) `storage`, last used at
/// `point`.
#[derive(Clone, Copy, Debug)]
pub struct Freed {
    pub storage: u64,
    pub start: u64,
    pub end: u64,
    pub point: StreamPoint,
}

/// Freed memory not reused yet.
#[derive(Default)]
pub struct FreedMemory {
    pub regions: Vec<Freed>,
}

impl FreedMemory {
    /// Bytes `start .. end` of `storage` freed, last used at `points`.
    pub fn add(&mut self, storage: u64, start: u64, end: u64, points: &[StreamPoint]) {
        self.regions.extend(points.iter().map(|&point| Freed {
            storage,
            start,
            end,
            point,
        }));
    }

    /// Checks that `stream`'s new block `start .. end` of `storage` reuses freed memory of
    /// another stream only after that stream's work (a wait asked and granted during this
    /// step), then forgets the freed bytes it took.
    pub fn take(
        &mut self,
        storage: u64,
        start: u64,
        end: u64,
        stream: StreamId,
        ordering: &ModelOrdering,
    ) -> Result<(), TestCaseError> {
        let mut kept = Vec::new();
        for freed in std::mem::take(&mut self.regions) {
            if freed.storage != storage || freed.end <= start || end <= freed.start {
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
                    "bytes {start}..{end} of {storage} on {stream:?} reuse {freed:?} before its \
                     work on another stream (waits asked: {:?}, can wait: {})",
                    ordering.waits, ordering.can_wait
                )
            })?;
            if freed.start < start {
                kept.push(Freed {
                    end: start,
                    ..freed
                });
            }
            if end < freed.end {
                kept.push(Freed {
                    start: end,
                    ..freed
                });
            }
        }
        self.regions = kept;
        Ok(())
    }

    /// Whether freed memory of `storage` may still be used by the device.
    pub fn busy_in(&self, storage: u64, ordering: &ModelOrdering) -> bool {
        self.regions
            .iter()
            .any(|freed| freed.storage == storage && !ordering.done(freed.point))
    }
}
