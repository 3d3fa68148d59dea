//! A model-based property test of the paged pool (`[memory] paged`): proptest generates
//! reservations and frees on three streams, stream progress, gives back and a device that
//! refuses pages past 512 MiB, and a model checks after every step what the pool promises:
//!
//! - a block's pages are all mapped in a range of its own, which no other live block uses;
//! - a cached block freed on another stream whose work is not complete is reused (whole or
//!   resized) only after the reserving stream was made to wait for that work;
//! - no page is unmapped from under a live block or a cached block the device may still use
//!   (a mapper that tracks every page fails the test at the call);
//! - the pool's totals agree with the model, and a final give-back returns every page.

use super::paged_pool::PagedPool;
use super::pool_model::{FreedMemory, ModelOrdering, Op, STREAMS, check, check_live, run};
use crate::error::IoError;
use crate::storage::{PageId, PageMapper, StorageId};
use crate::stream::StreamId;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{HashMap, HashSet};

const PAGE: u64 = 2 << 20;
const MIB: u64 = 1 << 20;
/// Pages the fake device holds at most (512 MiB): some sequences run out.
const DEVICE_PAGES: u64 = 256;

/// Tracks which page is mapped where, and refuses to unmap protected pages.
#[derive(Default)]
struct TrackingMapper {
    next: u64,
    pages: HashSet<u64>,
    ranges: HashMap<u64, u64>,
    /// (range, page index) -> page.
    mapped: HashMap<(u64, u64), u64>,
    /// (range, page index) the device may still use.
    protected: HashSet<(u64, u64)>,
    /// A broken promise seen inside a mapper call (reported after it returns).
    broken: Option<String>,
}

impl TrackingMapper {
    fn broke(&mut self, message: String) {
        self.broken.get_or_insert(message);
    }
}

impl PageMapper for TrackingMapper {
    fn page_size(&self) -> u64 {
        PAGE
    }

    fn reserve_range(&mut self, size: u64) -> Result<StorageId, IoError> {
        self.next += 1;
        self.ranges.insert(self.next, size);
        Ok(StorageId(self.next))
    }

    fn free_range(&mut self, range: StorageId) {
        if self.mapped.keys().any(|&(r, _)| r == range.0) {
            self.broke(format!("range {} freed with pages mapped", range.0));
        }
        self.ranges.remove(&range.0);
    }

    fn create_page(&mut self) -> Result<PageId, IoError> {
        if self.pages.len() as u64 >= DEVICE_PAGES {
            return Err(IoError::OutOfMemory {
                requested: PAGE,
                reserved: self.pages.len() as u64 * PAGE,
                free: 0,
                reason: "fake device full".into(),
                backtrace: crate::backtrace::BackTrace::none(),
            });
        }
        self.next += 1;
        self.pages.insert(self.next);
        Ok(PageId(self.next))
    }

    fn release_page(&mut self, page: PageId) {
        if self.mapped.values().any(|&mapped| mapped == page.0) {
            self.broke(format!("page {} released while mapped", page.0));
        }
        if !self.pages.remove(&page.0) {
            self.broke(format!("page {} released twice", page.0));
        }
    }

    fn map(&mut self, range: StorageId, offset: u64, page: PageId) -> Result<(), IoError> {
        let size = self.ranges.get(&range.0).copied().unwrap_or(0);
        if offset + PAGE > size || !offset.is_multiple_of(PAGE) {
            self.broke(format!(
                "page mapped at {offset} of a range of {size} bytes"
            ));
        }
        if self.mapped.values().any(|&mapped| mapped == page.0) {
            self.broke(format!("page {} mapped twice", page.0));
        }
        if self
            .mapped
            .insert((range.0, offset / PAGE), page.0)
            .is_some()
        {
            self.broke(format!(
                "page {} of range {} mapped over",
                offset / PAGE,
                range.0
            ));
        }
        Ok(())
    }

    fn grant_access(&mut self, range: StorageId, offset: u64, size: u64) -> Result<(), IoError> {
        for index in offset / PAGE..(offset + size) / PAGE {
            if !self.mapped.contains_key(&(range.0, index)) {
                self.broke(format!(
                    "access granted to unmapped page {index} of {}",
                    range.0
                ));
            }
        }
        Ok(())
    }

    fn unmap(&mut self, range: StorageId, offset: u64, size: u64) {
        for index in offset / PAGE..(offset + size) / PAGE {
            if self.protected.contains(&(range.0, index)) {
                self.broke(format!(
                    "page {index} of range {} unmapped while the device may use it",
                    range.0
                ));
            }
            if self.mapped.remove(&(range.0, index)).is_none() {
                self.broke(format!("page {index} of range {} unmapped twice", range.0));
            }
        }
    }
}

/// Reservation sizes: repeated ones (cached blocks taken back whole) and nearby ones
/// (cached blocks resized in place).
fn sizes() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => prop::sample::select(vec![2 * MIB, 6 * MIB, 30 * MIB]),
        3 => (1u64..=64).prop_map(|mib| mib * MIB - 512 * (mib % 3)),
    ]
}

#[derive(Clone, Copy, Debug)]
struct Live {
    slot: u32,
    range: u64,
    bytes: u64,
    requested: u64,
}

fn run_case(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut pool = PagedPool::new();
    let mut mapper = TrackingMapper::default();
    let mut ordering = ModelOrdering::new();
    let mut live: Vec<Live> = Vec::new();
    let mut freed = FreedMemory::default();
    for (step, op) in ops.iter().enumerate() {
        let busy = freed
            .regions
            .iter()
            .filter(|region| !ordering.done(region.point))
            .map(|region| (region.storage, region.start, region.end));
        mapper.protected = live
            .iter()
            .map(|block| (block.range, 0, block.bytes))
            .chain(busy)
            .flat_map(|(range, start, end)| {
                (start / PAGE..end.div_ceil(PAGE)).map(move |page| (range, page))
            })
            .collect();
        ordering.waits.clear();
        match *op {
            Op::Reserve { stream, size } => {
                let stream = StreamId::new(stream);
                match pool.reserve(size, size, stream, &mut mapper, &mut ordering) {
                    Ok((slot, bytes)) => {
                        let (range, mapped) = pool.storage_of(slot).ok_or_else(|| {
                            TestCaseError::fail(format!("step {step}: slot {slot} has no range"))
                        })?;
                        check(
                            mapped == bytes && bytes >= size && bytes % PAGE == 0,
                            || {
                                format!(
                                    "step {step}: slot {slot} of {mapped} / {bytes} bytes for {size}"
                                )
                            },
                        )?;
                        check(live.iter().all(|block| block.range != range.0), || {
                            format!("step {step}: range {} is already live", range.0)
                        })?;
                        for index in 0..bytes / PAGE {
                            check(mapper.mapped.contains_key(&(range.0, index)), || {
                                format!("step {step}: page {index} of slot {slot} is not mapped")
                            })?;
                        }
                        // A cached block keeps its range: taken back whole or resized (pages
                        // it gave back were unmapped, which the mapper checks).
                        freed
                            .take(range.0, 0, bytes, stream, &ordering)
                            .map_err(|error| {
                                TestCaseError::fail(format!("step {step}: {error}"))
                            })?;
                        live.push(Live {
                            slot,
                            range: range.0,
                            bytes,
                            requested: size,
                        });
                    }
                    Err(IoError::OutOfMemory { .. }) => {
                        check(
                            mapper.pages.len() as u64 + size.div_ceil(PAGE) > DEVICE_PAGES,
                            || {
                                format!(
                                    "step {step}: out of memory with {} pages",
                                    mapper.pages.len()
                                )
                            },
                        )?;
                    }
                    Err(error) => return Err(TestCaseError::fail(format!("step {step}: {error}"))),
                }
            }
            Op::Free(ref free) => {
                let Some(block) = free.pick(&mut live) else {
                    continue;
                };
                let points = ordering.last_uses(free);
                check(pool.free(block.slot, points.clone()), || {
                    format!("step {step}: slot {} was not live", block.slot)
                })?;
                freed.add(block.range, 0, block.bytes, &points);
            }
            Op::Complete { stream } => ordering.complete(stream),
            Op::CanWait(can_wait) => ordering.can_wait = can_wait,
            Op::Release => {
                pool.release(&mut mapper, &mut ordering);
            }
        }
        if let Some(broken) = mapper.broken.take() {
            return Err(TestCaseError::fail(format!("step {step}: {broken}")));
        }
        let stats = pool.stats();
        let requested: u64 = live.iter().map(|block| block.requested).sum();
        check_live(
            step,
            (stats.allocations, stats.bytes_in_use),
            (live.len(), requested),
        )?;
        check(stats.pages == mapper.pages.len() as u64, || {
            format!(
                "step {step}: the pool holds {} pages, the device {}",
                stats.pages,
                mapper.pages.len()
            )
        })?;
    }
    for block in live {
        pool.free(block.slot, crate::memory::StreamPoints::new());
    }
    for stream in 0..STREAMS {
        ordering.complete(stream);
    }
    mapper.protected.clear();
    pool.release(&mut mapper, &mut ordering);
    check(mapper.pages.is_empty() && mapper.broken.is_none(), || {
        format!(
            "{} pages held after everything was freed and given back ({:?})",
            mapper.pages.len(),
            mapper.broken
        )
    })
}

#[test]
fn paged_blocks_are_mapped_alone_and_never_reuse_or_unmap_busy_memory() {
    run("paged pool", 300, sizes(), run_case);
}
