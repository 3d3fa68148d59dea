//! The memory bookkeeping of one device, written once for every backend.
//!
//! A [`DeviceMemory`] is what a server holds to turn handle ids into device memory: the
//! [`MemoryManager`] that pools the memory, the [`ReleaseQueue`] that dropped handles push
//! their ids onto, and the reasons of the allocations that failed. A backend only supplies
//! what is its own: the storage, how far its streams got ([`StreamOrdering`]), the stream
//! points at which a released slice may still be in use, and what to wait for when the
//! device is full.
//!
//! It promises:
//!
//! - **Every handle of the device releases into the queue this memory drains.** The
//!   [`HandleFactory`] that mints the device's handles comes from [`DeviceMemory::handles`],
//!   never from a queue of its own.
//! - **A release is seen after every task that used the memory.** Queued tasks hold a
//!   [`Binding`] of what they use, so an id reaches the queue only once all of that work was
//!   handed to the device; [`DeviceMemory::drain_releases`] then returns its slice to the
//!   pool at the stream points the backend names (none on a backend whose work is complete
//!   once submitted).
//! - **An allocation whose handles are gone reserves nothing.** An allocation is queued as
//!   its id only (`ComputeServer::allocate`, see [`crate::handle`]), so the id may be
//!   released before the allocation runs. The drain then finds an id that is neither bound
//!   nor failed and notes it as released early; [`DeviceMemory::allocate`] skips that
//!   allocation ([`Allocation::ReleasedEarly`]).
//! - **A failed allocation is explained where it is used.** [`DeviceMemory::allocate`]
//!   keeps the reason of each failure by id and returns the error for the server to queue on
//!   the stream; resolving that id later fails with "the memory of {id} was never
//!   allocated: {reason}" instead of a bare "not bound". The reason is forgotten when the id
//!   is released (a failed id is never noted as released early: its allocation already
//!   ran).
//!
//! How a server uses it, in the order of a buffer's life:
//!
//! 1. `new` with the device's storage, options and limits; `handles` for the layout policy.
//! 2. `drain_releases` then `allocate(id, size, stream, ordering, when_full)` when the
//!    queued allocation runs (`ComputeServer::allocate`); an `Err` is queued on the stream
//!    by the server.
//! 3. `resolve(binding)` for every read, write and launch: the storage resource of the
//!    binding's bytes.
//! 4. `drain_releases(points)` before most operations, with the backend's stream points of
//!    each released id.
//!
//! What can go wrong: resolving a binding of another device, an id never bound, or bytes
//! outside its slice is [`IoError::NotFound`]; an allocation fails with the manager's errors
//! ([`IoError::OutOfMemory`], [`IoError::BufferTooBig`], [`IoError::InvalidArgument`]).
//! Nothing here panics, and the memory keeps working after any of them.

use super::foreign::ForeignMemory;
use super::id_map::IdMap;
use super::manager::{MemoryLimits, MemoryManager, MemoryOptions};
use super::ordering::{StreamOrdering, StreamPoints};
use crate::device::DeviceId;
use crate::error::IoError;
use crate::handle::{Binding, HandleFactory, MemoryId, ReleaseQueue};
use crate::storage::ComputeStorage;
use crate::stream::StreamId;
use std::sync::Arc;

/// What [`DeviceMemory::allocate`] did with an allocation that did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// The id is bound to a slice of device memory.
    Bound,
    /// Every handle of the id was dropped before the allocation ran: nothing was reserved.
    ReleasedEarly,
}

/// The memory of one device: pools, release queue and failed allocations. See the module
/// docs.
pub struct DeviceMemory<S: ComputeStorage> {
    device: DeviceId,
    manager: MemoryManager<S>,
    releases: Arc<ReleaseQueue>,
    /// Scratch space of `drain_releases`, kept to allocate nothing per drain.
    released: Vec<MemoryId>,
    /// Why the allocation of each failed id failed, until the id is released.
    failed: IdMap<String>,
}

impl<S: ComputeStorage> DeviceMemory<S> {
    /// The memory of `device` over `storage`, with an empty release queue.
    pub fn new(device: DeviceId, storage: S, options: MemoryOptions, limits: MemoryLimits) -> Self {
        Self {
            device,
            manager: MemoryManager::new(storage, options, limits),
            releases: ReleaseQueue::new(),
            released: Vec::new(),
            failed: IdMap::default(),
        }
    }

    /// A factory minting the device's handles, which release into this memory's queue.
    pub fn handles(&self) -> HandleFactory {
        HandleFactory::new(self.device, self.releases.clone())
    }

    /// The memory manager (usage, reports, cleanup, allocation modes).
    pub fn manager(&mut self) -> &mut MemoryManager<S> {
        &mut self.manager
    }

    /// The memory manager, read-only.
    pub fn manager_ref(&self) -> &MemoryManager<S> {
        &self.manager
    }

    /// Binds allocation `id` to `size` bytes for use on `stream`. An allocation whose id was
    /// released early reserves nothing; drain the releases first ([`Self::drain_releases`])
    /// so that one released a moment ago is seen (one not drained yet is reserved and freed
    /// by the next drain: wasted work, never a fault).
    ///
    /// When the device is full, `when_full` may wait for the device so that memory freed on
    /// other streams is complete; if it returns `true`, cached free memory is given back and
    /// the allocation is tried once more.
    ///
    /// # Errors
    /// The manager's error ([`IoError::OutOfMemory`], [`IoError::BufferTooBig`],
    /// [`IoError::InvalidArgument`]), recorded against `id` (see [`Self::record_failure`]);
    /// the caller queues it on `stream`.
    pub fn allocate<O: StreamOrdering>(
        &mut self,
        id: MemoryId,
        size: u64,
        stream: StreamId,
        ordering: &mut O,
        when_full: impl FnOnce(&mut O) -> bool,
    ) -> Result<Allocation, IoError> {
        let _span = crate::tracing_gate::listened(log::Level::Trace)
            .then(|| tracing::trace_span!(target: "cubert::memory", "allocate", size).entered());
        if self.manager.take_early_release(id) {
            return Ok(Allocation::ReleasedEarly);
        }
        let reserved = match self.manager.reserve(id, size, stream, ordering) {
            Err(IoError::OutOfMemory { .. }) if when_full(ordering) => {
                self.manager.cleanup(ordering);
                self.manager.reserve(id, size, stream, ordering)
            }
            other => other,
        };
        match reserved {
            Ok(()) => Ok(Allocation::Bound),
            Err(error) => {
                self.record_failure(id, error.to_string());
                Err(error)
            }
        }
    }

    /// Notes that the allocation of `id` failed for `reason` before it reached
    /// [`Self::allocate`] (the device couldn't be entered, say): resolving `id` then says
    /// why, and its release is not taken for an early one.
    pub fn record_failure(&mut self, id: MemoryId, reason: String) {
        self.failed.insert(id, reason);
    }

    /// Frees the memory of every handle dropped since the last drain. `points` gives the
    /// stream points up to which the device may still use a released id; it is asked once
    /// per id, with the stream the memory was reserved on and whether it is page-mapped
    /// (`None` where the id is bound to nothing: its allocation failed or hasn't run); return
    /// none where queued work is complete once submitted. An id neither bound nor failed is
    /// noted as released early.
    pub fn drain_releases(
        &mut self,
        mut points: impl FnMut(MemoryId, Option<(StreamId, bool)>) -> StreamPoints,
    ) {
        self.releases.drain_into(&mut self.released);
        for id in self.released.drain(..) {
            let released = self
                .manager
                .release_with(id, |reserved| points(id, reserved));
            if !released && self.failed.remove(&id).is_none() {
                // Released before its queued allocation ran (see `allocate`).
                self.manager.release_early(id);
            }
        }
    }

    /// Binds `id` to foreign memory for use on `stream` ([`MemoryManager::adopt`]). Once
    /// the id is released, the memory waits in [`MemoryManager::take_released_foreign`] for
    /// the backend to give it back after its last use.
    ///
    /// # Errors
    /// The manager's refusal, recorded against `id` (see [`Self::record_failure`]) so that
    /// its handle fails with the reason and its release is not mistaken for an early one.
    /// `memory` is dropped on error, which runs its release callback.
    pub fn import(
        &mut self,
        id: MemoryId,
        memory: ForeignMemory,
        stream: StreamId,
    ) -> Result<(), IoError> {
        self.manager.adopt(id, memory, stream).inspect_err(|error| {
            self.failed.insert(id, error.to_string());
        })
    }

    /// The storage resource of `binding`'s bytes.
    ///
    /// # Errors
    /// [`IoError::NotFound`] if the binding belongs to another device, its memory is not
    /// bound here (with the reason where its allocation failed), or its bytes are outside
    /// the slice.
    pub fn resolve(&mut self, binding: &Binding) -> Result<S::Resource, IoError> {
        if binding.device() != self.device {
            return Err(IoError::not_found(format!(
                "the binding belongs to {:?}, not to {:?}",
                binding.device(),
                self.device
            )));
        }
        let id = binding.id();
        let handle = self
            .manager
            .resolve(id, binding.offset(), binding.size())
            .map_err(|error| match self.failed.get(&id) {
                Some(reason) => {
                    IoError::not_found(format!("the memory of {id} was never allocated: {reason}"))
                }
                None => error,
            })?;
        self.manager
            .storage()
            .get(&handle)
            .ok_or_else(|| IoError::not_found(format!("storage of {id} is gone")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backtrace::BackTrace;
    use crate::handle::Handle;
    use crate::memory::ordering::HostOrdering;
    use crate::storage::{StorageHandle, StorageId};

    const MIB: u64 = 1 << 20;

    /// Hands out ids; refuses every allocation while `full`. Counts the attempts.
    #[derive(Default)]
    struct TestStorage {
        next: u64,
        full: bool,
        attempts: u64,
    }

    impl ComputeStorage for TestStorage {
        type Resource = StorageHandle;
        fn alignment(&self) -> u64 {
            256
        }
        fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
            self.attempts += 1;
            if self.full {
                return Err(IoError::OutOfMemory {
                    requested: size,
                    reserved: 0,
                    free: 0,
                    reason: "test storage is full".into(),
                    backtrace: BackTrace::none(),
                });
            }
            self.next += 1;
            Ok(StorageId(self.next))
        }
        fn dealloc(&mut self, _id: StorageId) {}
        fn get(&mut self, handle: &StorageHandle) -> Option<StorageHandle> {
            Some(*handle)
        }
    }

    fn device_memory(device: DeviceId) -> DeviceMemory<TestStorage> {
        DeviceMemory::new(
            device,
            TestStorage::default(),
            MemoryOptions::default(),
            MemoryLimits {
                max_allocation: 64 * MIB,
                capacity: None,
            },
        )
    }

    /// Memory whose storage refuses every allocation, and a handle of 1 KiB on it.
    fn full_device_memory() -> (DeviceMemory<TestStorage>, Handle) {
        let mut memory = device_memory(DeviceId::new(0, 0));
        memory.manager().storage().full = true;
        let handle = memory.handles().mint(STREAM, 1024);
        (memory, handle)
    }

    fn never_full(_: &mut HostOrdering) -> bool {
        false
    }

    const STREAM: StreamId = StreamId::new(0);

    #[test]
    fn allocated_memory_resolves_and_is_freed_by_its_last_handle() {
        let device = DeviceId::new(0, 0);
        let mut memory = device_memory(device);
        let handle = memory.handles().mint(STREAM, 1024);
        let allocated = memory.allocate(handle.id(), 1024, STREAM, &mut HostOrdering, never_full);
        assert_eq!(allocated.unwrap(), Allocation::Bound);
        let resource = memory.resolve(&handle.view(16, 32).unwrap().binding());
        assert_eq!(resource.unwrap().size, 32);
        drop(handle);
        memory.drain_releases(|_, _| StreamPoints::new());
        assert_eq!(memory.manager_ref().live_slices(), 0);
        assert_eq!(memory.manager_ref().early_releases(), 0);
    }

    #[test]
    fn a_reservation_released_before_it_ran_reserves_nothing() {
        let mut memory = device_memory(DeviceId::new(0, 0));
        let handle = memory.handles().mint(STREAM, 1024);
        let id = handle.id();
        drop(handle);
        memory.drain_releases(|_, _| StreamPoints::new());
        assert_eq!(memory.manager_ref().early_releases(), 1);
        let allocated = memory.allocate(id, 1024, STREAM, &mut HostOrdering, never_full);
        assert_eq!(allocated.unwrap(), Allocation::ReleasedEarly);
        assert_eq!(memory.manager_ref().live_slices(), 0);
        assert_eq!(memory.manager_ref().report().storage_allocations, 0);
        assert_eq!(
            memory.manager_ref().early_releases(),
            0,
            "forgotten once taken"
        );
    }

    #[test]
    fn a_failed_reservation_is_explained_and_never_taken_for_an_early_release() {
        let (mut memory, handle) = full_device_memory();
        let error = memory
            .allocate(handle.id(), 1024, STREAM, &mut HostOrdering, never_full)
            .unwrap_err();
        assert!(matches!(error, IoError::OutOfMemory { .. }));
        let resolved = memory
            .resolve(&handle.to_binding())
            .unwrap_err()
            .to_string();
        assert!(
            resolved.contains("was never allocated") && resolved.contains("test storage is full"),
            "{resolved}"
        );
        drop(handle);
        memory.drain_releases(|_, _| StreamPoints::new());
        assert_eq!(memory.manager_ref().early_releases(), 0);
        assert!(
            memory.failed.is_empty(),
            "the reason is forgotten on release"
        );
    }

    #[test]
    fn a_full_device_is_retried_once_when_the_backend_waited() {
        let (mut memory, handle) = full_device_memory();
        let refused = memory.allocate(handle.id(), 1024, STREAM, &mut HostOrdering, never_full);
        assert!(matches!(refused, Err(IoError::OutOfMemory { .. })));
        let once = memory.manager().storage().attempts;

        let (mut memory, handle) = full_device_memory();
        let mut waits = 0;
        let refused = memory.allocate(handle.id(), 1024, STREAM, &mut HostOrdering, |_| {
            waits += 1;
            true
        });
        assert!(matches!(refused, Err(IoError::OutOfMemory { .. })));
        assert_eq!(waits, 1);
        assert_eq!(
            memory.manager().storage().attempts,
            2 * once,
            "tried exactly twice"
        );
    }

    #[test]
    fn the_points_of_each_release_are_asked_once() {
        let mut memory = device_memory(DeviceId::new(0, 0));
        let handle = memory.handles().mint(STREAM, 1024);
        let id = handle.id();
        memory
            .allocate(id, 1024, STREAM, &mut HostOrdering, never_full)
            .unwrap();
        drop(handle);
        let mut asked = Vec::new();
        memory.drain_releases(|released, reserved| {
            asked.push((released, reserved));
            StreamPoints::new()
        });
        assert_eq!(asked, vec![(id, Some((STREAM, false)))]);
    }

    #[test]
    fn bindings_of_another_device_are_not_found() {
        let mut memory = device_memory(DeviceId::new(0, 0));
        let other = device_memory(DeviceId::new(0, 1));
        let handle = other.handles().mint(STREAM, 1024);
        let error = memory.resolve(&handle.binding()).unwrap_err();
        assert!(matches!(error, IoError::NotFound { .. }), "{error}");
    }
}
