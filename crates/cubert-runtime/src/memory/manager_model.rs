//! A model-based property test of the memory manager over every pool it routes to: small
//! and large requests on three streams (the small pool, and the growable pool or the large
//! block pool), frees with their last uses, stream progress and `memory_cleanup`, on a
//! storage of 1 GiB that refuses allocations past it. After every step a model checks:
//!
//! - a reservation either succeeds with a slice no live slice overlaps, or fails with
//!   [`IoError::OutOfMemory`], changes nothing, and fails again after a cleanup (the manager
//!   gave back what it could before it failed);
//! - memory freed on another stream is reused only after the reserving stream was made to
//!   wait for that work;
//! - the usage report agrees with the model, and the storage holds what the manager
//!   reports reserved;
//! - once everything is freed and complete, a cleanup gives every byte back.

use super::fake_mapper::FakeMapper;
use super::manager::{MemoryLimits, MemoryManager, MemoryOptions};
use super::pool_model::{FreedMemory, ModelOrdering, Op, STREAMS, check, check_live, run};
use crate::error::IoError;
use crate::handle::{HandleFactory, MemoryId, ReleaseQueue};
use crate::storage::{ComputeStorage, PageMapper, StorageHandle, StorageId};
use crate::stream::StreamId;
use crate::{backtrace::BackTrace, device::DeviceId};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashMap;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const PAGE: u64 = 2 * MIB;
/// Bytes the storage holds at most.
const CAPACITY: u64 = 1 << 30;

/// Segments, and chunks of the growable pool's fake mapper (which checks every map and
/// unmap), from one budget of [`CAPACITY`] bytes.
#[derive(Default)]
struct ModelStorage {
    next: u64,
    segments: HashMap<u64, u64>,
    mapper: FakeMapper,
}

impl ModelStorage {
    fn held(&self) -> u64 {
        self.segments.values().sum::<u64>() + self.mapper.pages_held() * PAGE
    }

    /// Lets the mapper create pages up to what the segments leave of the budget (set before
    /// each call into the manager: one reservation takes either segments or pages).
    fn share_budget(&mut self) {
        let segments: u64 = self.segments.values().sum();
        self.mapper.set_page_limit((CAPACITY - segments) / PAGE);
    }
}

impl ComputeStorage for ModelStorage {
    type Resource = ();

    fn alignment(&self) -> u64 {
        256
    }

    fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
        if self.held() + size > CAPACITY {
            return Err(IoError::OutOfMemory {
                requested: size,
                reserved: self.held(),
                free: CAPACITY - self.held(),
                reason: "the model storage is full".into(),
                backtrace: BackTrace::none(),
            });
        }
        // Segment ids stay clear of the mapper's range ids.
        self.next += 1;
        let id = (1 << 40) + self.next;
        self.segments.insert(id, size);
        Ok(StorageId(id))
    }

    fn dealloc(&mut self, id: StorageId) {
        self.segments.remove(&id.0);
    }

    fn get(&mut self, _handle: &StorageHandle) -> Option<()> {
        Some(())
    }

    fn pager(&mut self) -> Option<&mut dyn PageMapper> {
        Some(&mut self.mapper)
    }
}

/// Small requests (the small pool) and large ones (the growable pool or the large pool).
fn sizes() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => prop::sample::select(vec![4 * KIB, 512 * KIB, 6 * MIB, 64 * MIB]),
        2 => 1u64..=MIB,
        2 => MIB..=200 * MIB,
    ]
}

#[derive(Clone, Copy, Debug)]
struct Live {
    id: MemoryId,
    storage: StorageHandle,
}

fn run_case(options: MemoryOptions, ops: &[Op]) -> Result<(), TestCaseError> {
    let limits = MemoryLimits {
        max_allocation: CAPACITY,
        capacity: Some(CAPACITY),
    };
    let mut memory = MemoryManager::new(ModelStorage::default(), options, limits);
    let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
    let mut ordering = ModelOrdering::new();
    let mut live: Vec<Live> = Vec::new();
    let mut freed = FreedMemory::default();
    for (step, op) in ops.iter().enumerate() {
        ordering.waits.clear();
        memory.storage().share_budget();
        match *op {
            Op::Reserve { stream, size } => {
                let stream = StreamId::new(stream);
                let id = factory.mint(stream, size).id();
                let before = memory.usage();
                match memory.reserve(id, size, stream, &mut ordering) {
                    Ok(()) => {
                        let slice = memory.slice(id).ok_or_else(|| {
                            TestCaseError::fail(format!("step {step}: {id} has no slice"))
                        })?;
                        let storage = slice.storage;
                        check(storage.size == size && slice.stream == stream, || {
                            format!("step {step}: {slice:?} for {size} bytes on {stream:?}")
                        })?;
                        for other in &live {
                            let overlaps = other.storage.id == storage.id
                                && other.storage.offset < storage.offset + storage.size
                                && storage.offset < other.storage.offset + other.storage.size;
                            check(!overlaps, || {
                                format!("step {step}: {storage:?} overlaps live {other:?}")
                            })?;
                        }
                        let end = storage.offset + storage.size;
                        freed
                            .take(storage.id.0, storage.offset, end, stream, &ordering)
                            .map_err(|error| {
                                TestCaseError::fail(format!("step {step}: {error}"))
                            })?;
                        live.push(Live { id, storage });
                    }
                    Err(IoError::OutOfMemory { .. }) => {
                        let after = memory.usage();
                        check(
                            (after.number_allocs, after.bytes_in_use)
                                == (before.number_allocs, before.bytes_in_use)
                                && !memory.contains(id),
                            || {
                                format!(
                                    "step {step}: a failed reservation changed {before:?} to {after:?}"
                                )
                            },
                        )?;
                        // The manager gave back what it could before failing: a cleanup
                        // finds nothing that lets the same request through.
                        memory.cleanup(&mut ordering);
                        memory.storage().share_budget();
                        let again = memory.reserve(id, size, stream, &mut ordering);
                        check(matches!(again, Err(IoError::OutOfMemory { .. })), || {
                            format!(
                                "step {step}: {size} bytes refused, then {again:?} after a cleanup"
                            )
                        })?;
                    }
                    Err(error) => return Err(TestCaseError::fail(format!("step {step}: {error}"))),
                }
            }
            Op::Free(ref free) => {
                let Some(block) = free.pick(&mut live) else {
                    continue;
                };
                let points = ordering.last_uses(free);
                check(memory.release(block.id, points.clone()), || {
                    format!("step {step}: {} was not live", block.id)
                })?;
                let end = block.storage.offset + block.storage.size;
                freed.add(block.storage.id.0, block.storage.offset, end, &points);
            }
            Op::Complete { stream } => ordering.complete(stream),
            Op::CanWait(can_wait) => ordering.can_wait = can_wait,
            Op::Release => {
                memory.cleanup(&mut ordering);
            }
        }
        let usage = memory.usage();
        let requested: u64 = live.iter().map(|block| block.storage.size).sum();
        check_live(
            step,
            (usage.number_allocs, usage.bytes_in_use),
            (live.len(), requested),
        )?;
        let held = memory.storage_ref().held();
        check(usage.bytes_reserved == held, || {
            format!(
                "step {step}: the manager reports {} bytes reserved, the storage holds {held}",
                usage.bytes_reserved
            )
        })?;
    }
    for block in live {
        memory.release(block.id, crate::memory::StreamPoints::new());
    }
    for stream in 0..STREAMS {
        ordering.complete(stream);
    }
    memory.cleanup(&mut ordering);
    let held = memory.storage_ref().held();
    check(held == 0, || {
        format!("{held} bytes held after everything was freed and cleaned up")
    })
}

#[test]
fn the_manager_never_overlaps_slices_and_gives_every_byte_back() {
    run("memory manager (growable)", 200, sizes(), |ops| {
        run_case(MemoryOptions::default(), ops)
    });
    let block_pools = MemoryOptions {
        growable: false,
        ..MemoryOptions::default()
    };
    run("memory manager (block pools)", 200, sizes(), |ops| {
        run_case(block_pools.clone(), ops)
    });
}
