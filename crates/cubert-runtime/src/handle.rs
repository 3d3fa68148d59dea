//! Handles to device memory.
//!
//! A [`Handle`] is minted on the caller's thread, before the device has reserved anything:
//! it carries a stable [`MemoryId`] from a global counter, the size, and the stream that
//! created it. The server binds the id to a slice of device memory when it runs the queued
//! allocation (`ComputeServer::allocate`); queue order makes that lazy binding safe.
//!
//! Several handles can be views into one allocation (`create_tensors` packs tensors into one
//! buffer); each view has its own offset and size and shares the allocation's id.
//!
//! When the last clone of an allocation's handles, bindings and queued tasks is dropped, its
//! id is pushed onto the owning device's [`ReleaseQueue`]; the server drains that queue and
//! returns the slice to its pool. Because every queued task holds a [`Binding`] of the memory
//! it uses, the release is seen only after all of that work was handed to the device.
//! The one queued work that holds no binding is the allocation itself (only the id is
//! queued, for speed): where nothing queued after it holds the memory (`empty*`), its
//! handles may be released first, and the server then skips the allocation
//! (`DeviceMemory::allocate`, `MemoryManager::release_early`). Ids are never reused, so a
//! stale id can never point to another allocation.
//!
//! [`Handle::copy_descriptor`] describes a view as a strided region, for the tensor reads
//! and writes of the client.

use crate::device::DeviceId;
use crate::error::IoError;
use crate::stream::StreamId;
use crossbeam_queue::ArrayQueue;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The stable id of one allocation. Never reused within a process.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemoryId(u64);

impl MemoryId {
    /// The numeric value.
    pub fn value(&self) -> u64 {
        self.0
    }
}

impl fmt::Debug for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memory#{}", self.0)
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

static NEXT_MEMORY_ID: AtomicU64 = AtomicU64::new(1);

/// Ring slots of a [`ReleaseQueue`]; more releases between two drains go to its overflow.
const RELEASE_RING: usize = 4096;

/// Ids of allocations whose last reference was dropped, waiting for the server to free them.
///
/// Handles are dropped on any thread while the runner drains the queue before most
/// operations, at millions of allocations per second: a lock-free ring takes the ids (no
/// lock shared with the runner, nothing allocated per release), and a locked list only
/// those that find it full.
pub struct ReleaseQueue {
    ring: ArrayQueue<MemoryId>,
    overflow: Mutex<Vec<MemoryId>>,
    overflowed: AtomicBool,
}

impl Default for ReleaseQueue {
    fn default() -> Self {
        Self {
            ring: ArrayQueue::new(RELEASE_RING),
            overflow: Mutex::new(Vec::new()),
            overflowed: AtomicBool::new(false),
        }
    }
}

impl ReleaseQueue {
    /// A new, empty queue.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn push(&self, id: MemoryId) {
        if let Err(id) = self.ring.push(id) {
            self.overflow
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(id);
            self.overflowed.store(true, Ordering::Release);
        }
    }

    /// Takes every id released so far, appending them to `into` (which is cleared first).
    /// Ids pushed while it runs may be left for the next drain.
    pub fn drain_into(&self, into: &mut Vec<MemoryId>) {
        into.clear();
        // As many pops as the ring held: a pop that finds the ring empty costs a full
        // memory fence, more than the pop of an id (most drains take one id or none).
        for _ in 0..self.ring.len() {
            match self.ring.pop() {
                Some(id) => into.push(id),
                None => break,
            }
        }
        // Read before writing: a write on every drain would take the cache line from the
        // threads that push (it may share one with the ring's fields they read).
        if self.overflowed.load(Ordering::Acquire) && self.overflowed.swap(false, Ordering::AcqRel)
        {
            into.append(&mut self.overflow.lock().unwrap_or_else(PoisonError::into_inner));
        }
    }
}

struct MemoryRecord {
    id: MemoryId,
    device: DeviceId,
    size: u64,
    releases: Arc<ReleaseQueue>,
}

impl Drop for MemoryRecord {
    fn drop(&mut self) {
        self.releases.push(self.id);
    }
}

/// Mints handles for one device. Held by the device's layout policy.
#[derive(Clone)]
pub struct HandleFactory {
    device: DeviceId,
    releases: Arc<ReleaseQueue>,
}

impl HandleFactory {
    /// A factory for handles of `device`, releasing into `releases`.
    pub fn new(device: DeviceId, releases: Arc<ReleaseQueue>) -> Self {
        Self { device, releases }
    }

    /// The device the handles belong to.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// The queue released ids go to.
    pub fn releases(&self) -> &Arc<ReleaseQueue> {
        &self.releases
    }

    /// A new handle over a fresh allocation id of `size` bytes, created on `stream`.
    pub fn mint(&self, stream: StreamId, size: u64) -> Handle {
        let id = MemoryId(NEXT_MEMORY_ID.fetch_add(1, Ordering::Relaxed));
        Handle {
            memory: Arc::new(MemoryRecord {
                id,
                device: self.device,
                size,
                releases: self.releases.clone(),
            }),
            offset: 0,
            size,
            stream,
        }
    }
}

impl fmt::Debug for HandleFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleFactory")
            .field("device", &self.device)
            .finish()
    }
}

/// A reference to device memory (or a view into it) owned by the caller.
///
/// Clones share the memory; the memory is reused after the last clone and every queued task
/// using it are gone. A handle knows its size and where it starts in its allocation; a
/// [view](Handle::view) is a sub-range of the same memory, without a copy.
///
/// ```
/// # use cubert_runtime::Bytes;
/// # let client = cubert_cpu::default_client()?;
/// let handle = client.create(Bytes::from_elems(vec![10u32, 20, 30, 40]))?;
/// assert_eq!((handle.offset(), handle.size()), (0, 16));
/// assert_eq!(handle.device(), client.device_id());
///
/// let tail = handle.view(8, 8)?; // elements 2 and 3
/// assert_eq!((tail.offset_start(), tail.offset_end()), (8, 16));
/// assert_eq!(tail.id(), handle.id()); // the same allocation
/// assert_eq!(client.read_one(tail)?.to_elems::<u32>(), vec![30, 40]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Handle {
    memory: Arc<MemoryRecord>,
    offset: u64,
    size: u64,
    stream: StreamId,
}

/// A reference to device memory attached to a queued task or a kernel launch. It keeps the
/// memory alive like a [`Handle`] does.
#[derive(Clone)]
pub struct Binding {
    memory: Arc<MemoryRecord>,
    offset: u64,
    size: u64,
    stream: StreamId,
}

macro_rules! memory_accessors {
    () => {
        /// The id of the allocation.
        pub fn id(&self) -> MemoryId {
            self.memory.id
        }

        /// The device the memory lives on.
        pub fn device(&self) -> DeviceId {
            self.memory.device
        }

        /// Offset of this view from the start of the allocation, in bytes.
        pub fn offset(&self) -> u64 {
            self.offset
        }

        /// Size of this view in bytes.
        pub fn size(&self) -> u64 {
            self.size
        }

        /// Size of the whole allocation in bytes.
        pub fn allocation_size(&self) -> u64 {
            self.memory.size
        }

        /// The stream that created the memory.
        pub fn stream(&self) -> StreamId {
            self.stream
        }
    };
}

impl Handle {
    memory_accessors!();

    /// Size of this view in bytes: the same as [`Handle::size`].
    pub fn size_in_used(&self) -> u64 {
        self.size
    }

    /// Start of this view in the allocation, in bytes.
    pub fn offset_start(&self) -> u64 {
        self.offset
    }

    /// End (exclusive) of this view in the allocation, in bytes.
    pub fn offset_end(&self) -> u64 {
        self.offset + self.size
    }

    /// A binding of this view for a task or a launch.
    pub fn binding(self) -> Binding {
        Binding {
            memory: self.memory,
            offset: self.offset,
            size: self.size,
            stream: self.stream,
        }
    }

    /// A binding of this view without consuming the handle.
    pub fn to_binding(&self) -> Binding {
        self.clone().binding()
    }

    /// A view of `size` bytes starting `offset` bytes into this view. The view shares the
    /// memory (no copy) and keeps it alive like the handle does.
    ///
    /// ```
    /// # use cubert_runtime::Bytes;
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![1u8, 2, 3, 4, 5, 6]))?;
    /// let middle = handle.view(1, 4)?; // bytes 1..5
    /// let inner = middle.view(1, 2)?; // relative to `middle`: bytes 2..4
    /// assert_eq!((inner.offset(), inner.size()), (2, 2));
    /// assert_eq!(client.read_one(inner)?.to_vec(), vec![3, 4]);
    /// assert!(handle.view(4, 4).is_err()); // past the end
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if the range is not inside this view.
    pub fn view(&self, offset: u64, size: u64) -> Result<Handle, IoError> {
        let end = offset.checked_add(size);
        if end.is_none_or(|end| end > self.size) {
            return Err(IoError::invalid(format!(
                "view {offset}..{offset}+{size} is outside a handle of {} bytes",
                self.size
            )));
        }
        Ok(Handle {
            memory: self.memory.clone(),
            offset: self.offset + offset,
            size,
            stream: self.stream,
        })
    }

    /// Whether this is the only reference to the memory, so a kernel may write it in place
    /// without another holder seeing the change.
    pub fn can_mut(&self) -> bool {
        Arc::strong_count(&self.memory) == 1
    }
}

impl Binding {
    memory_accessors!();

    /// A handle over the same view.
    pub fn into_handle(self) -> Handle {
        Handle {
            memory: self.memory,
            offset: self.offset,
            size: self.size,
            stream: self.stream,
        }
    }
}

impl From<&Handle> for Binding {
    fn from(value: &Handle) -> Self {
        value.to_binding()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Handle({:?} on {:?}, bytes {}..{}, {:?})",
            self.memory.id,
            self.memory.device,
            self.offset,
            self.offset + self.size,
            self.stream
        )
    }
}

impl fmt::Debug for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Binding({:?} on {:?}, bytes {}..{}, {:?})",
            self.memory.id,
            self.memory.device,
            self.offset,
            self.offset + self.size,
            self.stream
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factory() -> HandleFactory {
        HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new())
    }

    #[test]
    fn ids_are_unique_and_never_reused() {
        let factory = factory();
        let a = factory.mint(StreamId::new(0), 8).id();
        let b = factory.mint(StreamId::new(0), 8).id();
        assert_ne!(a, b);
    }

    #[test]
    fn last_reference_dropped_releases_the_id_once() {
        let factory = factory();
        let handle = factory.mint(StreamId::new(0), 16);
        let id = handle.id();
        let binding = handle.clone().binding();
        let view = handle.view(4, 4).unwrap();
        drop(handle);
        drop(view);
        let mut released = Vec::new();
        factory.releases().drain_into(&mut released);
        assert!(released.is_empty(), "a binding still holds the memory");
        drop(binding);
        factory.releases().drain_into(&mut released);
        assert_eq!(released, vec![id]);
    }

    #[test]
    fn every_release_is_drained_once_past_the_ring_and_across_threads() {
        let factory = factory();
        let count = 3 * RELEASE_RING + 17;
        let handles: Vec<Handle> = (0..count)
            .map(|_| factory.mint(StreamId::new(0), 8))
            .collect();
        let mut expected: Vec<MemoryId> = handles.iter().map(Handle::id).collect();
        // Two threads drop half each while this one drains.
        let (first, second) = handles.split_at(count / 2);
        let (first, second) = (first.to_vec(), second.to_vec());
        drop(handles);
        let mut released = Vec::new();
        let mut all = Vec::new();
        std::thread::scope(|scope| {
            scope.spawn(move || drop(first));
            scope.spawn(move || drop(second));
            while all.len() < count {
                factory.releases().drain_into(&mut released);
                all.append(&mut released);
            }
        });
        factory.releases().drain_into(&mut released);
        assert!(released.is_empty(), "nothing left over");
        all.sort();
        expected.sort();
        assert_eq!(all, expected);
    }

    #[test]
    fn views_outside_the_handle_are_rejected() {
        let handle = factory().mint(StreamId::new(0), 16);
        assert!(handle.view(8, 9).is_err());
        assert!(handle.view(u64::MAX, 2).is_err());
        let view = handle.view(8, 8).unwrap();
        assert_eq!((view.offset_start(), view.offset_end()), (8, 16));
    }
}
