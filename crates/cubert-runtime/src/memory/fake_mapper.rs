//! A fake page mapper for the memory pools' tests: it keeps which chunk backs each page of
//! each range, as a driver does, fails a test on a call a driver would refuse (a chunk
//! mapped twice or over another, released while mapped, access to an unmapped page, a
//! protected page unmapped), counts the calls, and can refuse chunks past a page limit or
//! fail the next map or access grant.

use crate::error::IoError;
use crate::storage::{PageId, PageMapper, StorageId};
use std::collections::{HashMap as Map, HashSet};

/// The page size of the fake device.
const PAGE: u64 = 2 << 20;

/// Keeps which chunk backs each page of each range, like a driver, and counts the
/// driver calls.
#[derive(Default)]
pub(crate) struct FakeMapper {
    pub(crate) next: u64,
    /// Chunks created and not released: their pages.
    pub(crate) chunks: Map<u64, u64>,
    /// Chunks mapped: (range, first page) -> chunk.
    pub(crate) mapped: Map<(u64, u64), u64>,
    /// Pages granted access: (range, page).
    pub(crate) granted: HashSet<(u64, u64)>,
    /// Driver calls: chunks created, maps, unmaps and releases.
    pub(crate) creates: u64,
    pub(crate) maps: u64,
    pub(crate) unmaps: u64,
    pub(crate) releases: u64,
    /// Most pages of one chunk (none: any).
    pub(crate) max_pages: Option<u64>,
    /// Chunks past this many pages held are refused as out of memory.
    pub(crate) refuse_pages_after: Option<u64>,
    /// Fail the next map / access grant.
    pub(crate) fail_map: bool,
    pub(crate) fail_grant: bool,
    /// Pages (range, page) the device may still use: unmapping one fails the test.
    pub(crate) protected: HashSet<(u64, u64)>,
}

impl FakeMapper {
    /// A mapper that refuses chunks past `pages` pages held.
    pub(crate) fn with_page_limit(pages: u64) -> Self {
        Self {
            refuse_pages_after: Some(pages),
            ..Self::default()
        }
    }
    /// Refuses chunks past `pages` pages held from now on.
    pub(crate) fn set_page_limit(&mut self, pages: u64) {
        self.refuse_pages_after = Some(pages);
    }
    pub(crate) fn pages_held(&self) -> u64 {
        self.chunks.values().sum()
    }
    pub(crate) fn is_mapped(&self, range: u64, page: u64) -> bool {
        self.mapped.iter().any(|(&(r, first), chunk)| {
            r == range && first <= page && page < first + self.chunks[chunk]
        })
    }
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
        self.create_block(1)
    }
    fn release_page(&mut self, page: PageId) {
        assert!(
            !self.mapped.values().any(|chunk| *chunk == page.0),
            "a mapped chunk released"
        );
        assert!(
            self.chunks.remove(&page.0).is_some(),
            "a chunk released twice"
        );
        self.releases += 1;
    }
    fn map(&mut self, _: StorageId, _: u64, _: PageId) -> Result<(), IoError> {
        panic!("the pool maps chunks")
    }
    fn grant_access(&mut self, range: StorageId, start: u64, size: u64) -> Result<(), IoError> {
        if std::mem::take(&mut self.fail_grant) {
            return Err(IoError::invalid("injected access failure"));
        }
        assert!(start.is_multiple_of(PAGE) && size.is_multiple_of(PAGE));
        for page in start / PAGE..(start + size) / PAGE {
            assert!(self.is_mapped(range.0, page), "access to an unmapped page");
            self.granted.insert((range.0, page));
        }
        Ok(())
    }
    fn unmap(&mut self, _: StorageId, _: u64, _: u64) {
        panic!("the pool unmaps chunks")
    }
    fn max_block_pages(&self) -> u64 {
        self.max_pages.unwrap_or(u64::MAX)
    }
    fn create_block(&mut self, pages: u64) -> Result<PageId, IoError> {
        assert!(pages >= 1 && pages <= self.max_block_pages());
        if self
            .refuse_pages_after
            .is_some_and(|limit| self.pages_held() + pages > limit)
        {
            return Err(IoError::OutOfMemory {
                requested: pages * PAGE,
                reserved: 0,
                free: 0,
                reason: "fake device full".into(),
                backtrace: crate::backtrace::BackTrace::none(),
            });
        }
        self.next += 1;
        self.creates += 1;
        self.chunks.insert(self.next, pages);
        Ok(PageId(self.next))
    }
    fn map_block(
        &mut self,
        range: StorageId,
        offset: u64,
        block: PageId,
        pages: u64,
    ) -> Result<(), IoError> {
        if std::mem::take(&mut self.fail_map) {
            return Err(IoError::invalid("injected map failure"));
        }
        assert!(offset.is_multiple_of(PAGE));
        assert_eq!(
            self.chunks.get(&block.0),
            Some(&pages),
            "a chunk mapped whole"
        );
        assert!(
            !self.mapped.values().any(|chunk| *chunk == block.0),
            "a chunk mapped twice"
        );
        for page in offset / PAGE..offset / PAGE + pages {
            assert!(!self.is_mapped(range.0, page), "a page mapped twice");
        }
        self.mapped.insert((range.0, offset / PAGE), block.0);
        self.maps += 1;
        Ok(())
    }
    fn unmap_block(&mut self, range: StorageId, offset: u64, pages: u64) {
        let chunk = self
            .mapped
            .remove(&(range.0, offset / PAGE))
            .expect("unmapping a hole");
        assert_eq!(self.chunks[&chunk], pages, "a chunk unmapped whole");
        for page in offset / PAGE..offset / PAGE + pages {
            assert!(
                !self.protected.contains(&(range.0, page)),
                "page {page} of range {} unmapped while the device may use it",
                range.0
            );
            self.granted.remove(&(range.0, page));
        }
        self.unmaps += 1;
    }
}
