//! Which parts of each reserved address range have physical memory mapped.
//!
//! The page-mapped pools map whole physical blocks (one or more pages each) into their
//! address ranges and unmap them whole (the growable pool) or page by page (the paged pool).
//! The storage records each mapping here, as `offset → bytes` per range, for two uses:
//!
//! - **granting a device access after the fact.** Mapped memory is granted to its own
//!   device when it is mapped; a peer GPU that starts reading this device's memory later
//!   (the first peer copy from it) is granted every run mapped so far, and every later
//!   mapping with the rest ([`MappedRuns::runs`] merges neighbouring blocks into the longest
//!   runs one `cuMemSetAccess` call may cover);
//! - **dropping the storage**, which unmaps what is mapped instead of trying every page of
//!   ranges that span twice the device's memory.

use cubert_runtime::storage::StorageId;
use std::collections::{BTreeMap, HashMap};

/// Mapped blocks of every range, `offset → bytes`.
#[derive(Debug, Default)]
pub(crate) struct MappedRuns {
    blocks: HashMap<StorageId, BTreeMap<u64, u64>>,
}

impl MappedRuns {
    /// Records a block of `size` bytes mapped at `offset` of `range`.
    pub(crate) fn mapped(&mut self, range: StorageId, offset: u64, size: u64) {
        self.blocks.entry(range).or_default().insert(offset, size);
    }

    /// Forgets every block mapped from `offset` to `offset + size` of `range` (blocks that
    /// start there: the pools unmap whole blocks).
    pub(crate) fn unmapped(&mut self, range: StorageId, offset: u64, size: u64) {
        let Some(blocks) = self.blocks.get_mut(&range) else {
            return;
        };
        let end = offset.saturating_add(size);
        let starts: Vec<u64> = blocks.range(offset..end).map(|(&start, _)| start).collect();
        for start in starts {
            blocks.remove(&start);
        }
        if blocks.is_empty() {
            self.blocks.remove(&range);
        }
    }

    /// Forgets `range` (freed).
    pub(crate) fn forget_range(&mut self, range: StorageId) {
        self.blocks.remove(&range);
    }

    /// The mapped blocks of `range`, `(offset, bytes)` by offset.
    pub(crate) fn blocks(&self, range: StorageId) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.blocks
            .get(&range)
            .into_iter()
            .flat_map(|blocks| blocks.iter().map(|(&offset, &size)| (offset, size)))
    }

    /// The mapped runs of `range`, `(offset, bytes)` by offset: neighbouring blocks merged.
    pub(crate) fn runs(&self, range: StorageId) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (offset, size) in self.blocks(range) {
            match runs.last_mut() {
                Some((start, length)) if *start + *length == offset => *length += size,
                _ => runs.push((offset, size)),
            }
        }
        runs
    }

    /// The ranges with something mapped.
    pub(crate) fn ranges(&self) -> impl Iterator<Item = StorageId> + '_ {
        self.blocks.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn neighbouring_blocks_merge_into_one_run_and_gaps_split_runs() {
        let mut mapped = MappedRuns::default();
        let range = StorageId(1);
        mapped.mapped(range, 0, 2 * MIB);
        mapped.mapped(range, 2 * MIB, 16 * MIB);
        mapped.mapped(range, 20 * MIB, 2 * MIB);
        mapped.mapped(StorageId(2), 2 * MIB, 2 * MIB);
        assert_eq!(mapped.runs(range), vec![(0, 18 * MIB), (20 * MIB, 2 * MIB)]);
        assert_eq!(mapped.runs(StorageId(2)), vec![(2 * MIB, 2 * MIB)]);
        assert_eq!(mapped.runs(StorageId(3)), vec![]);
    }

    #[test]
    fn unmapping_pages_forgets_only_the_blocks_that_start_among_them() {
        let mut mapped = MappedRuns::default();
        let range = StorageId(1);
        for page in 0..8 {
            mapped.mapped(range, page * 2 * MIB, 2 * MIB);
        }
        // Pages 2..5 unmapped page by page, as the paged pool does.
        mapped.unmapped(range, 4 * MIB, 6 * MIB);
        assert_eq!(mapped.runs(range), vec![(0, 4 * MIB), (10 * MIB, 6 * MIB)]);
        mapped.unmapped(range, 0, 16 * MIB);
        assert_eq!(mapped.ranges().count(), 0, "an emptied range is forgotten");
    }

    /// What a pool may do to a range of 64 pages.
    #[derive(Clone, Debug)]
    enum Step {
        /// Map a block of `pages` pages at page `start`, where they are all unmapped.
        Map { start: u64, pages: u64 },
        /// Unmap the `index`-th mapped block (modulo their number), whole.
        UnmapBlock { index: usize },
        /// Unmap `pages` pages from page `start`, page by page (the paged pool's way):
        /// only where every block starting there is one page and none straddles the ends.
        UnmapPages { start: u64, pages: u64 },
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..64, 1u64..8).prop_map(|(start, pages)| Step::Map { start, pages }),
            (0usize..64).prop_map(|index| Step::UnmapBlock { index }),
            (0u64..64, 1u64..8).prop_map(|(start, pages)| Step::UnmapPages { start, pages }),
        ]
    }

    proptest::proptest! {
        /// The runs are the maximal stretches of mapped pages, and the blocks those mapped,
        /// after any sequence of mappings and unmappings a pool may make.
        #[test]
        fn runs_are_the_maximal_stretches_of_mapped_pages(
            steps in proptest::collection::vec(step(), 1..80)
        ) {
            const PAGE: u64 = 2 * MIB;
            let range = StorageId(7);
            let mut mapped = MappedRuns::default();
            // The model: each mapped block, start page → pages.
            let mut blocks: BTreeMap<u64, u64> = BTreeMap::new();
            let covered = |blocks: &BTreeMap<u64, u64>, page: u64| {
                blocks.iter().any(|(&start, &pages)| (start..start + pages).contains(&page))
            };
            for step in steps {
                match step {
                    Step::Map { start, pages } => {
                        if (start..start + pages).all(|page| !covered(&blocks, page)) {
                            blocks.insert(start, pages);
                            mapped.mapped(range, start * PAGE, pages * PAGE);
                        }
                    }
                    Step::UnmapBlock { index } => {
                        if let Some((&start, &pages)) = blocks.iter().nth(index % blocks.len().max(1)) {
                            blocks.remove(&start);
                            mapped.unmapped(range, start * PAGE, pages * PAGE);
                        }
                    }
                    Step::UnmapPages { start, pages } => {
                        let end = start + pages;
                        let whole_pages = blocks.iter().all(|(&first, &length)| {
                            let inside = (start..end).contains(&first);
                            let straddles = first < start && first + length > start
                                || first < end && first + length > end;
                            (!inside || length == 1) && !straddles
                        });
                        if whole_pages {
                            blocks.retain(|&first, _| !(start..end).contains(&first));
                            mapped.unmapped(range, start * PAGE, pages * PAGE);
                        }
                    }
                }
            }
            let expected_blocks: Vec<(u64, u64)> = blocks
                .iter()
                .map(|(&start, &pages)| (start * PAGE, pages * PAGE))
                .collect();
            proptest::prop_assert_eq!(mapped.blocks(range).collect::<Vec<_>>(), expected_blocks);
            let mut expected_runs: Vec<(u64, u64)> = Vec::new();
            for page in 0..80 {
                if covered(&blocks, page) {
                    match expected_runs.last_mut() {
                        Some((start, length)) if *start + *length == page * PAGE => *length += PAGE,
                        _ => expected_runs.push((page * PAGE, PAGE)),
                    }
                }
            }
            proptest::prop_assert_eq!(mapped.runs(range), expected_runs);
            proptest::prop_assert_eq!(mapped.ranges().count(), usize::from(!blocks.is_empty()));
        }
    }

    #[test]
    fn a_forgotten_range_has_no_blocks() {
        let mut mapped = MappedRuns::default();
        mapped.mapped(StorageId(4), 0, 64 * MIB);
        mapped.forget_range(StorageId(4));
        assert_eq!(mapped.blocks(StorageId(4)).count(), 0);
    }
}
