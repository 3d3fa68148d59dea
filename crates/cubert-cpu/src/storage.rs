//! Host memory as device storage.
//!
//! Each allocation is zeroed and 64-byte aligned: small blocks come from the global
//! allocator, blocks of [`MAP_THRESHOLD`] bytes or more are anonymous memory maps, which the
//! OS zeroes lazily page by page, so a large allocation costs nothing until it is touched.
//! Zeroed memory means a kernel reading memory nobody wrote reads zeros, never
//! uninitialized bytes.
//!
//! For tests, [`HostStorage::with_fault_plan`] makes chosen allocations fail (see
//! [`crate::fault`]).

use crate::fault::FaultPlan;
use cubert_runtime::IoError;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::memory::ForeignMemory;
use cubert_runtime::storage::{ComputeStorage, StorageHandle, StorageId};
use std::alloc::Layout;
use std::collections::HashMap;
use std::ptr::NonNull;

/// Alignment of every host allocation.
pub const HOST_ALIGNMENT: usize = 64;

/// Allocations of at least this many bytes are memory maps.
pub const MAP_THRESHOLD: usize = 1 << 20;

enum Allocation {
    Heap {
        ptr: NonNull<u8>,
        layout: Layout,
    },
    Map(memmap2::MmapMut),
    /// Host memory allocated outside cubert (`ComputeClient::import_memory`): never freed
    /// here; dropping it runs its release callback.
    Foreign(ForeignMemory),
}

impl Allocation {
    fn ptr(&mut self) -> *mut u8 {
        match self {
            Allocation::Heap { ptr, .. } => ptr.as_ptr(),
            Allocation::Map(map) => map.as_mut_ptr(),
            Allocation::Foreign(memory) => memory.address() as usize as *mut u8,
        }
    }

    fn len(&self) -> usize {
        match self {
            Allocation::Heap { layout, .. } => layout.size(),
            Allocation::Map(map) => map.len(),
            // `adopt` checked that the size fits in usize.
            Allocation::Foreign(memory) => memory.size() as usize,
        }
    }
}

/// Allocates host memory for a CPU device.
#[derive(Default)]
pub struct HostStorage {
    allocations: HashMap<StorageId, Allocation>,
    next_id: u64,
    faults: Option<FaultPlan>,
}

impl HostStorage {
    /// A storage whose allocations fail where `plan` says (fault injection for tests).
    pub fn with_fault_plan(plan: FaultPlan) -> Self {
        Self {
            allocations: HashMap::new(),
            next_id: 0,
            faults: Some(plan),
        }
    }
}

// SAFETY: the storage exclusively owns its allocations; the pointers are only dereferenced
// by whoever holds the storage (the server) or through resources it hands out for the time
// their bindings keep the memory alive.
unsafe impl Send for HostStorage {}

/// A range of host memory: where a CPU kernel or a copy reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct HostResource {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a resource is a plain address range; access to the bytes is ordered by the server
// (one task at a time) or, for kernels, by the launch contract.
unsafe impl Send for HostResource {}
// SAFETY: as above.
unsafe impl Sync for HostResource {}

impl HostResource {
    /// First byte of the range.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl ComputeStorage for HostStorage {
    type Resource = HostResource;

    fn alignment(&self) -> u64 {
        HOST_ALIGNMENT as u64
    }

    fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
        if let Some(error) = self.faults.as_ref().and_then(|plan| plan.on_alloc(size)) {
            return Err(error);
        }
        let out_of_memory = |reason: String| IoError::OutOfMemory {
            requested: size,
            reserved: 0,
            free: 0,
            reason,
            backtrace: BackTrace::capture(),
        };
        let size = usize::try_from(size)
            .map_err(|_| out_of_memory("the size exceeds the address space".into()))?;
        let allocation = if size >= MAP_THRESHOLD {
            let map = memmap2::MmapMut::map_anon(size)
                .map_err(|error| out_of_memory(format!("mmap failed: {error}")))?;
            Allocation::Map(map)
        } else {
            let layout = Layout::from_size_align(size.max(1), HOST_ALIGNMENT)
                .map_err(|error| out_of_memory(format!("invalid layout: {error}")))?;
            // SAFETY: the layout has a non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            let ptr = NonNull::new(ptr)
                .ok_or_else(|| out_of_memory("the system allocator returned no memory".into()))?;
            Allocation::Heap { ptr, layout }
        };
        self.next_id += 1;
        let id = StorageId(self.next_id);
        self.allocations.insert(id, allocation);
        Ok(id)
    }

    fn dealloc(&mut self, id: StorageId) {
        let Some(allocation) = self.allocations.remove(&id) else {
            return;
        };
        if matches!(allocation, Allocation::Foreign(_)) {
            // Not ours to free: dropping it gives it back through its callback.
            return;
        }
        if let Some(plan) = &self.faults {
            plan.on_dealloc(allocation.len() as u64);
        }
        if let Allocation::Heap { ptr, layout } = allocation {
            // SAFETY: the pointer came from `alloc_zeroed` with this layout and is freed once
            // (it was just removed from the map).
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        }
    }

    fn adopt(&mut self, memory: ForeignMemory) -> Result<StorageId, IoError> {
        let fits = usize::try_from(memory.address())
            .ok()
            .zip(usize::try_from(memory.size()).ok())
            .and_then(|(address, size)| address.checked_add(size));
        if fits.is_none() {
            return Err(IoError::invalid(format!(
                "foreign memory at {:#x} of {} bytes is outside the address space",
                memory.address(),
                memory.size()
            )));
        }
        self.next_id += 1;
        let id = StorageId(self.next_id);
        self.allocations.insert(id, Allocation::Foreign(memory));
        Ok(id)
    }

    fn disown(&mut self, id: StorageId) -> Option<ForeignMemory> {
        if !matches!(self.allocations.get(&id), Some(Allocation::Foreign(_))) {
            return None;
        }
        match self.allocations.remove(&id) {
            Some(Allocation::Foreign(memory)) => Some(memory),
            _ => None,
        }
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<HostResource> {
        let allocation = self.allocations.get_mut(&handle.id)?;
        let end = handle.offset.checked_add(handle.size)?;
        if end > allocation.len() as u64 {
            return None;
        }
        // SAFETY: offset + size is within the allocation (checked above).
        let ptr = unsafe { allocation.ptr().add(handle.offset as usize) };
        Some(HostResource {
            ptr: NonNull::new(ptr)?,
            len: handle.size as usize,
        })
    }
}

impl Drop for HostStorage {
    fn drop(&mut self) {
        let ids: Vec<StorageId> = self.allocations.keys().copied().collect();
        for id in ids {
            self.dealloc(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_allocations_are_zeroed_maps() {
        let mut storage = HostStorage::default();
        let id = storage.alloc(8 << 20).unwrap();
        let resource = storage
            .get(&StorageHandle {
                id,
                offset: 0,
                size: 8 << 20,
            })
            .unwrap();
        assert_eq!(resource.as_ptr() as usize % 4096, 0);
        // SAFETY: the resource covers 8 MiB of live bytes.
        let bytes = unsafe { std::slice::from_raw_parts(resource.as_ptr(), resource.len()) };
        assert!(bytes.iter().step_by(4093).all(|b| *b == 0));
        storage.dealloc(id);
    }

    #[test]
    fn fault_plan_fails_chosen_allocations_and_sees_deallocations() {
        let plan = FaultPlan::new();
        let mut storage = HostStorage::with_fault_plan(plan.clone());
        plan.fail_attempts([1]);
        let first = storage.alloc(100).unwrap();
        let error = storage.alloc(200).unwrap_err();
        assert!(matches!(error, IoError::OutOfMemory { .. }), "{error}");
        let third = storage.alloc(300).unwrap();
        assert_ne!(first, third);
        storage.dealloc(first);
        assert_eq!((plan.attempts(), plan.injected()), (3, 1));
        let events = plan.take_events();
        assert_eq!(events.len(), 4);
        assert_eq!(events[3], crate::fault::StorageEvent::Dealloc { size: 100 });
    }

    #[test]
    fn allocations_are_zeroed_aligned_and_bounded() {
        let mut storage = HostStorage::default();
        let id = storage.alloc(1000).unwrap();
        let whole = StorageHandle {
            id,
            offset: 0,
            size: 1000,
        };
        let resource = storage.get(&whole).unwrap();
        assert_eq!(resource.as_ptr() as usize % HOST_ALIGNMENT, 0);
        // SAFETY: the resource covers 1000 live bytes.
        let bytes = unsafe { std::slice::from_raw_parts(resource.as_ptr(), resource.len()) };
        assert!(bytes.iter().all(|b| *b == 0));
        assert!(
            storage
                .get(&StorageHandle {
                    id,
                    offset: 999,
                    size: 2
                })
                .is_none()
        );
        storage.dealloc(id);
        assert!(storage.get(&whole).is_none());
    }
}
