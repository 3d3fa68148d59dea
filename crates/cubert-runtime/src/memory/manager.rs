//! The memory manager of one device: binds handle ids to slices of pooled device memory.
//!
//! Requests are rounded up to `rounding` bytes and routed:
//!
//! - in `Persistent` mode, to the persistent pool: an exact-size block, never split;
//! - otherwise first to a free persistent block of exactly that size (with the default
//!   `[memory] persistent = "size_match"`; see [`PersistentMemory`] for the others), then to
//!   the small pool
//!   (requests up to `small_max_request`, carved from `small_segment`-byte segments) or the
//!   large pool (mid-size requests share `large_mid_segment`-byte segments, bigger ones get a
//!   dedicated segment rounded to `large_round`).
//!
//! A request that no cached block serves allocates a segment from the storage. If the device
//! has no room (or the configured capacity is reached), every cached segment that is
//! entirely free is given back and the allocation is tried once more, with an exact-size
//! segment if the normal one doesn't fit; then it fails with `IoError::OutOfMemory`. A request
//! larger than the largest possible allocation fails at once with `IoError::BufferTooBig`.
//!
//! Segments that stay entirely free for `idle_release` are given back to the device.
//!
//! With `paged` and a storage that can map pages (CUDA virtual memory), large requests go to
//! a [`PagedPool`] instead: each gets its own address range backed by individually mapped
//! physical pages, so freed memory is never stranded by fragmentation. With `growable`
//! they go to a [`GrowablePool`]: one growable address range per stream, carved like a heap,
//! backed by physical chunks only where blocks lie (`docs/allocator.md`); its free chunks go
//! back on `cleanup` (and so on the out-of-memory retry), and on the idle timer once the
//! pool has neither reserved nor freed a block for `idle_release`.

use super::block_pool::{BlockPool, PoolPolicy, ReleasedSegment, SegmentRule, Taken, round_up};
use super::coarse_clock;
use super::foreign::ForeignMemory;
use super::growable_pool::GrowablePool;
use super::id_map::IdMap;
use super::mode::{ModeTable, PersistentMemory};
use super::ordering::{StreamOrdering, StreamPoints};
use super::paged_pool::PagedPool;
use super::usage::{MemoryReport, MemoryUsage, PoolReport, format_bytes, timed};
use crate::backtrace::BackTrace;
use crate::config::settings;
use crate::config::values::{self, GIB};
use crate::error::IoError;
use crate::handle::MemoryId;
use crate::storage::{ComputeStorage, StorageHandle, StorageId};
use crate::stream::StreamId;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

settings! {
    keys:
    /// Tunables of the pools. Defaults follow what works for GPU workloads.
    ///
    /// Also the `[memory]` section of the configuration (`config::MemoryConfig`): serde
    /// reads each key into its field, with the range the field accepts.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct MemoryOptions {
        /// Every request is rounded up to a multiple of this.
        #[serde(deserialize_with = "values::size::<_, 1, GIB>")]
        pub rounding: u64,
        /// Largest request served by the small pool.
        #[serde(deserialize_with = "values::size::<_, 1, GIB>")]
        pub small_max_request: u64,
        /// Segment size of the small pool.
        #[serde(deserialize_with = "values::size::<_, 1, { 16 * GIB }>")]
        pub small_segment: u64,
        /// Largest request that shares a mid-size segment of the large pool.
        #[serde(deserialize_with = "values::size::<_, 1, { 64 * GIB }>")]
        pub large_mid_request: u64,
        /// Size of the shared mid-size segments.
        #[serde(deserialize_with = "values::size::<_, 1, { 64 * GIB }>")]
        pub large_mid_segment: u64,
        /// Rounding of dedicated large segments.
        #[serde(deserialize_with = "values::size::<_, 1, GIB>")]
        pub large_round: u64,
        /// Smallest remainder split off a large block.
        #[serde(deserialize_with = "values::size::<_, 1, { 64 * GIB }>")]
        pub large_min_split: u64,
        /// Entirely free segments untouched for this long are given back; `None` keeps them.
        /// Configured as `idle_release_ms`, whole milliseconds (0: `None`).
        #[serde(
            rename = "idle_release_ms",
            deserialize_with = "values::optional_millis",
            serialize_with = "values::write_optional_millis"
        )]
        pub idle_release: Option<Duration>,
        /// Before growing the large pool, give back its entirely free segments when together
        /// they could hold the request (memory grows only when live data does), and don't split
        /// dedicated large blocks in a way that strands big remainders. Saves memory (peak
        /// reserved / peak live on the anchors' trace: 1.28 -> 1.135) at the cost of a device
        /// allocation when a freed segment was the wrong shape.
        #[serde(deserialize_with = "values::flag")]
        pub compact_before_growth: bool,
        /// Serve large requests from a pool of individually mapped pages where the storage can
        /// map pages (CUDA virtual memory). Allocating a new large block costs one driver call
        /// per page; reuse of a freed block of the same page count costs none.
        #[serde(deserialize_with = "values::flag")]
        pub paged: bool,
        /// Serve large requests from one growable, page-mapped address range per stream
        /// (`growable_pool`: PyTorch's expandable segments) where the storage can map pages
        /// (CUDA; the CPU keeps the block pools). On by default; `paged`, when on, takes
        /// precedence. With several GPUs, a GPU that peer-copies from this one is granted
        /// access to its mapped pages at its first copy.
        #[serde(deserialize_with = "values::flag")]
        pub growable: bool,
        /// Smallest physical chunk the growable pool creates where its range grows, rounded
        /// to the device's granularity: requests placed at the end of the range share it.
        /// Larger chunks mean fewer driver calls, smaller ones less memory past the live peak.
        #[serde(deserialize_with = "values::size::<_, 1, GIB>")]
        pub growable_block: u64,
        /// Largest physical chunk of the growable pool; 0 (the default): no limit, a growth
        /// is one chunk. A limit (say `"16 MiB"`) makes chunks more often wholly free, so
        /// physical memory follows live data more closely (peak reserved / peak live on an
        /// H200: anchors' trace 1.148 -> 1.043, mlp 1.054 -> 1.018), at driver calls per chunk
        /// for every growth and every move (3-7 × slower replays where chunks move;
        /// `docs/allocator.md`).
        #[serde(deserialize_with = "values::any_size")]
        pub growable_max_chunk: u64,
        /// What the allocation modes mean: `size_match` (the default), `enabled`, `disabled`
        /// or `enforced` ([`PersistentMemory`]).
        #[serde(deserialize_with = "values::choice")]
        pub persistent: PersistentMemory,
    }
}

impl Default for MemoryOptions {
    fn default() -> Self {
        const MIB: u64 = 1 << 20;
        Self {
            rounding: 512,
            small_max_request: MIB,
            small_segment: 2 * MIB,
            large_mid_request: 10 * MIB,
            large_mid_segment: 20 * MIB,
            large_round: 2 * MIB,
            large_min_split: MIB,
            idle_release: Some(Duration::from_secs(10)),
            compact_before_growth: true,
            paged: false,
            growable: true,
            growable_block: 16 * MIB,
            growable_max_chunk: 0,
            persistent: PersistentMemory::SizeMatch,
        }
    }
}

impl MemoryOptions {
    /// The options a memory manager is built with: these, with each size raised to the
    /// least the pools work with (roundings and the split minimum at least 1, each segment
    /// at least the largest request it serves). Read as `config.memory.options()`.
    pub fn options(&self) -> MemoryOptions {
        MemoryOptions {
            rounding: self.rounding.max(1),
            small_max_request: self.small_max_request,
            small_segment: self.small_segment.max(self.small_max_request),
            large_mid_request: self.large_mid_request,
            large_mid_segment: self.large_mid_segment.max(self.large_mid_request),
            large_round: self.large_round.max(1),
            large_min_split: self.large_min_split.max(1),
            idle_release: self.idle_release,
            compact_before_growth: self.compact_before_growth,
            paged: self.paged,
            growable: self.growable,
            growable_block: self.growable_block.max(1),
            growable_max_chunk: self.growable_max_chunk,
            persistent: self.persistent,
        }
    }
}

/// Largest remainder (as a fraction of the request) the large pool strands when it splits
/// a cached block, with `compact_before_growth`.
const MAX_SPLIT_WASTE: f64 = 0.5;

/// Hard limits of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Largest single allocation.
    pub max_allocation: u64,
    /// Most bytes the manager may hold from the device, if limited.
    pub capacity: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PoolKind {
    Small,
    Large,
    Persistent,
    Paged,
    Growable,
}

#[derive(Clone, Copy, Debug)]
struct Slice {
    pool: PoolKind,
    taken: Taken,
    requested: u64,
    stream: StreamId,
}

/// Foreign memory bound to an id ([`MemoryManager::adopt`]): a whole storage allocation,
/// never pooled.
#[derive(Clone, Copy, Debug)]
struct ForeignSlice {
    storage: StorageId,
    size: u64,
    stream: StreamId,
}

/// What the manager knows about a live slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceInfo {
    /// The requested bytes inside the device allocation.
    pub storage: StorageHandle,
    /// The stream the memory was reserved on.
    pub stream: StreamId,
}

/// How often (in reservations) the idle-release clock is read.
const CLOCK_EVERY: u64 = 256;

/// Pools device memory for one device. See the module docs.
pub struct MemoryManager<S: ComputeStorage> {
    storage: S,
    options: MemoryOptions,
    limits: MemoryLimits,
    /// The user's cap on the bytes held from the device ([`MemoryManager::set_cap`]),
    /// below the device's own capacity where it has one.
    cap: Option<u64>,
    small: BlockPool,
    large: BlockPool,
    persistent: BlockPool,
    paged: Option<PagedPool>,
    growable: Option<GrowablePool>,
    /// When the growable pool last reserved or freed a block ([`coarse_clock::now_ms`]).
    growable_used_ms: u64,
    slices: IdMap<Slice>,
    /// Imported memory by id ([`Self::adopt`]).
    foreign: IdMap<ForeignSlice>,
    /// Imported memory whose id was released, with the stream points of its last use: the
    /// backend gives it back once they are complete ([`Self::take_released_foreign`]).
    released_foreign: Vec<(ForeignMemory, StreamPoints)>,
    /// Allocations whose handles were all dropped before their reservation ran (see
    /// [`Self::release_early`]).
    released_early: IdMap<()>,
    modes: ModeTable,
    started: Instant,
    tick_ms: u64,
    last_idle_sweep_ms: u64,
    reservations: u64,
    peak_reserved: u64,
    peak_in_use: u64,
    storage_allocations: u64,
    storage_deallocations: u64,
    /// Chunks the growable pool unmapped and mapped again elsewhere.
    storage_remaps: u64,
    /// Time spent in the storage's alloc and dealloc calls.
    storage_time: Duration,
}

/// The pools a manager's options lay out.
struct Pools {
    small: BlockPool,
    large: BlockPool,
    persistent: BlockPool,
    paged: Option<PagedPool>,
    growable: Option<GrowablePool>,
}

impl Pools {
    /// Empty pools shaped by `options`.
    fn new(options: &MemoryOptions, limits: MemoryLimits) -> Self {
        let small = BlockPool::new(PoolPolicy {
            name: "small",
            segments: SegmentRule::Fixed(options.small_segment),
            min_split: options.rounding,
            exact_only: false,
            max_split_waste: None,
        });
        let large = BlockPool::new(PoolPolicy {
            name: "large",
            segments: SegmentRule::Tiered {
                mid_request: options.large_mid_request,
                mid_segment: options.large_mid_segment,
                round: options.large_round,
            },
            min_split: options.large_min_split,
            exact_only: false,
            max_split_waste: options.compact_before_growth.then_some(MAX_SPLIT_WASTE),
        });
        let persistent = BlockPool::new(PoolPolicy {
            name: "persistent",
            segments: SegmentRule::Exact,
            min_split: u64::MAX,
            exact_only: true,
            max_split_waste: None,
        });
        let paged = options.paged.then(PagedPool::new);
        // Each stream's address range: twice the largest allocation (the device's memory),
        // so that blocks stranded at the start never keep the range from growing.
        let growable = options.growable.then(|| {
            GrowablePool::new(
                limits.max_allocation.saturating_mul(2),
                options.growable_block,
                options.growable_max_chunk,
            )
        });
        Self {
            small,
            large,
            persistent,
            paged,
            growable,
        }
    }
}

impl<S: ComputeStorage> MemoryManager<S> {
    /// A manager over `storage`.
    pub fn new(storage: S, options: MemoryOptions, limits: MemoryLimits) -> Self {
        let Pools {
            small,
            large,
            persistent,
            paged,
            growable,
        } = Pools::new(&options, limits);
        Self {
            storage,
            options,
            limits,
            cap: None,
            small,
            large,
            persistent,
            paged,
            growable,
            growable_used_ms: coarse_clock::now_ms(),
            slices: IdMap::default(),
            foreign: IdMap::default(),
            released_foreign: Vec::new(),
            released_early: IdMap::default(),
            modes: ModeTable::default(),
            started: Instant::now(),
            tick_ms: 0,
            last_idle_sweep_ms: 0,
            reservations: 0,
            peak_reserved: 0,
            peak_in_use: 0,
            storage_allocations: 0,
            storage_deallocations: 0,
            storage_remaps: 0,
            storage_time: Duration::ZERO,
        }
    }

    /// The options the pools follow now.
    pub fn options(&self) -> &MemoryOptions {
        &self.options
    }

    /// Installs new pool options at run time (`ComputeClient::install_memory_pools`).
    ///
    /// The keys that only steer later requests (`persistent`, `idle_release_ms`) change at
    /// any time. The shapes of the pools (rounding, segment sizes, splits,
    /// `compact_before_growth`, `growable_block`, `growable_max_chunk`) change only while no
    /// allocation is live: the cached memory is given back and the pools are laid out again.
    /// `paged` and `growable` never change here: they decide which memory peer copies can
    /// read, and are set in `[memory]` before the device starts.
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] naming what stands in the way (a change of `paged` or
    /// `growable`; live allocations, or freed memory the device still uses, for a change
    /// of shape); the options in force are left unchanged.
    pub fn install_options(
        &mut self,
        options: MemoryOptions,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        let options = options.options();
        if (options.paged, options.growable) != (self.options.paged, self.options.growable) {
            return Err(IoError::invalid(format!(
                "memory pools: `paged` and `growable` are chosen when the device starts (now \
                 paged = {}, growable = {}); set them in [memory] of cubert.toml or with \
                 CUBERT_MEMORY_PAGED / CUBERT_MEMORY_GROWABLE",
                self.options.paged, self.options.growable
            )));
        }
        let steering = MemoryOptions {
            persistent: self.options.persistent,
            idle_release: self.options.idle_release,
            ..options.clone()
        };
        if steering == self.options {
            self.options = options;
            return Ok(());
        }
        let live = self.slices.len() + self.released_early.len();
        if live > 0 {
            return Err(IoError::invalid(format!(
                "memory pools: {live} allocation(s) are live; install pools of another shape \
                 before allocating, or once every handle is dropped"
            )));
        }
        self.cleanup(ordering);
        let held = self.usage().bytes_reserved;
        if held > 0 {
            return Err(IoError::invalid(format!(
                "memory pools: {held} bytes freed on a stream are still in use by the device; \
                 sync, then install the pools again"
            )));
        }
        let Pools {
            small,
            large,
            persistent,
            paged,
            growable,
        } = Pools::new(&options, self.limits);
        (self.small, self.large, self.persistent) = (small, large, persistent);
        (self.paged, self.growable) = (paged, growable);
        self.options = options;
        Ok(())
    }

    /// The storage.
    pub fn storage(&mut self) -> &mut S {
        &mut self.storage
    }

    /// The storage, read-only.
    pub fn storage_ref(&self) -> &S {
        &self.storage
    }

    /// The limits.
    pub fn limits(&self) -> MemoryLimits {
        self.limits
    }

    /// The most bytes the manager may hold from the device: the smaller of the device's
    /// capacity (where limited) and the user's cap.
    pub fn capacity(&self) -> Option<u64> {
        match (self.limits.capacity, self.cap) {
            (Some(device), Some(cap)) => Some(device.min(cap)),
            (device, cap) => device.or(cap),
        }
    }

    /// The user's cap on the bytes held from the device, if one is set.
    pub fn cap(&self) -> Option<u64> {
        self.cap
    }

    /// Caps the bytes the manager may hold from the device at `cap` (`None` lifts the cap):
    /// past it an allocation gives back cached memory and then fails with
    /// [`IoError::OutOfMemory`], as on a full device (like PyTorch's per-process memory
    /// fraction). Cached memory above the cap is given back first.
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] when the memory that live allocations hold is already
    /// above `cap`; the cap is then left as it was and nothing is freed but cached memory.
    pub fn set_cap(
        &mut self,
        cap: Option<u64>,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        if let Some(cap) = cap {
            if self.reserved() > cap {
                self.cleanup(ordering);
                self.storage.flush();
            }
            let reserved = self.reserved();
            if reserved > cap {
                return Err(IoError::invalid(format!(
                    "a memory cap of {} is below the {} this device holds for live \
                     allocations ({} in use); free handles first",
                    format_bytes(cap),
                    format_bytes(reserved),
                    format_bytes(self.usage().bytes_in_use)
                )));
            }
        }
        self.cap = cap;
        Ok(())
    }

    /// The allocation modes of the streams.
    pub fn modes(&mut self) -> &mut ModeTable {
        &mut self.modes
    }

    /// Closes the innermost allocation window of `stream` (restoring the mode it replaced);
    /// closing one that was never opened is logged and changes nothing.
    pub fn end_allocation_window(&mut self, stream: StreamId) {
        if !self.modes.pop(stream) {
            tracing::warn!("an allocation window was closed on {stream:?} but none was open");
        }
    }

    /// Whether `id` is bound to a slice (pooled or imported).
    pub fn contains(&self, id: MemoryId) -> bool {
        self.slices.contains_key(&id) || self.foreign.contains_key(&id)
    }

    /// Number of live slices of the pools (imported memory not counted).
    pub fn live_slices(&self) -> usize {
        self.slices.len()
    }

    /// Binds `id` to foreign memory (`ComputeClient::import_memory`) for use on `stream`:
    /// the storage adopts it ([`ComputeStorage::adopt`]) and the manager resolves the id to
    /// it until the id is released, never pooling it. Imported bytes count in no usage
    /// figure: cubert did not reserve them.
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] for a zero address or size, an address not aligned to
    /// the storage's alignment, or an id already bound; the storage's refusal
    /// ([`IoError::UnsupportedIoOperation`] where it can't address foreign memory). On
    /// error `memory` is dropped, which runs its release callback.
    pub fn adopt(
        &mut self,
        id: MemoryId,
        memory: ForeignMemory,
        stream: StreamId,
    ) -> Result<(), IoError> {
        let (address, size) = (memory.address(), memory.size());
        if address == 0 || size == 0 {
            return Err(IoError::invalid(format!(
                "can't import foreign memory at {address:#x} of {size} bytes: the address and \
                 the size must not be 0"
            )));
        }
        let alignment = self.storage.alignment();
        if !address.is_multiple_of(alignment) {
            return Err(IoError::invalid(format!(
                "can't import foreign memory at {address:#x}: the address must be a multiple \
                 of {alignment} bytes (the device's alignment, which kernels' vector loads rely \
                 on)"
            )));
        }
        if self.contains(id) {
            return Err(IoError::invalid(format!("{id} is already bound to memory")));
        }
        let storage = self.storage.adopt(memory)?;
        self.foreign.insert(
            id,
            ForeignSlice {
                storage,
                size,
                stream,
            },
        );
        Ok(())
    }

    /// Imported memory released since the last call, each with the stream points its last
    /// use may still be running at: drop each once they are complete (dropping runs its
    /// release callback).
    pub fn take_released_foreign(&mut self) -> Vec<(ForeignMemory, StreamPoints)> {
        std::mem::take(&mut self.released_foreign)
    }

    fn alignment(&self) -> u64 {
        self.options.rounding.max(self.storage.alignment()).max(1)
    }

    fn pool(&mut self, kind: PoolKind) -> &mut BlockPool {
        match kind {
            PoolKind::Small => &mut self.small,
            PoolKind::Large | PoolKind::Paged | PoolKind::Growable => &mut self.large,
            PoolKind::Persistent => &mut self.persistent,
        }
    }

    fn pool_ref(&self, kind: PoolKind) -> &BlockPool {
        match kind {
            PoolKind::Small => &self.small,
            PoolKind::Large | PoolKind::Paged | PoolKind::Growable => &self.large,
            PoolKind::Persistent => &self.persistent,
        }
    }

    /// Whether large requests go to the paged pool.
    fn pages_large(&mut self) -> bool {
        self.paged.is_some() && self.storage.pager().is_some()
    }

    /// Whether large requests go to the growable pool.
    fn grows_large(&mut self) -> bool {
        self.growable.is_some() && self.storage.pager().is_some()
    }

    /// Reserves a block of the growable pool; on out of memory (the capacity, or the
    /// device), gives back every cached segment and free page and tries once more.
    fn reserve_growable(
        &mut self,
        rounded: u64,
        requested: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<Taken, IoError> {
        let mut last_error = None;
        for attempt in 0..2 {
            if attempt == 1 {
                self.cleanup(ordering);
            }
            if let Some(error) = self.over_capacity(rounded, requested) {
                last_error = Some(error);
                continue;
            }
            let (Some(growable), Some(pager)) = (self.growable.as_mut(), self.storage.pager())
            else {
                return Err(IoError::invalid("the storage has no page mapper"));
            };
            self.growable_used_ms = coarse_clock::now_ms();
            let before = growable.stats();
            let outcome = growable.reserve(rounded, requested, stream, pager, ordering);
            let after = growable.stats();
            self.storage_allocations += after.chunks_created - before.chunks_created;
            self.storage_deallocations += after.chunks_released - before.chunks_released;
            self.storage_remaps += after.chunks_moved - before.chunks_moved;
            match outcome {
                Ok((slot, offset)) => {
                    self.peak_reserved = self.peak_reserved.max(self.reserved());
                    return Ok(Taken {
                        segment: slot,
                        offset,
                        block_size: rounded,
                    });
                }
                Err(error @ IoError::OutOfMemory { .. }) => last_error = Some(error),
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| IoError::OutOfMemory {
            requested,
            reserved: self.reserved(),
            free: 0,
            reason: "no physical page could be created".into(),
            backtrace: BackTrace::capture(),
        }))
    }

    /// Reserves a paged block; on out of memory, gives back every cached block and page and
    /// tries once more.
    fn reserve_paged(
        &mut self,
        rounded: u64,
        requested: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<Taken, IoError> {
        for attempt in 0..2 {
            if attempt == 1 {
                self.cleanup(ordering);
            }
            let capacity = self.capacity();
            let (Some(paged), Some(pager)) = (self.paged.as_mut(), self.storage.pager()) else {
                return Err(IoError::invalid("the storage has no page mapper"));
            };
            if let Some(capacity) = capacity {
                let others = self.small.stats().bytes_reserved
                    + self.large.stats().bytes_reserved
                    + self.persistent.stats().bytes_reserved;
                let paged_free = paged.stats().bytes_free;
                let paged_reserved = paged.stats().bytes_reserved;
                if others + paged_reserved + rounded.saturating_sub(paged_free) > capacity {
                    if attempt == 0 {
                        continue;
                    }
                    return Err(IoError::OutOfMemory {
                        requested,
                        reserved: others + paged_reserved,
                        free: capacity.saturating_sub(others + paged_reserved),
                        reason: format!(
                            "the memory limit of {} is reached",
                            format_bytes(capacity)
                        ),
                        backtrace: BackTrace::capture(),
                    });
                }
            }
            match paged.reserve(rounded, requested, stream, pager, ordering) {
                Ok((slot, block_size)) => {
                    self.peak_reserved = self.peak_reserved.max(self.reserved());
                    return Ok(Taken {
                        segment: slot,
                        offset: 0,
                        block_size,
                    });
                }
                Err(IoError::OutOfMemory { .. }) if attempt == 0 => {}
                Err(error) => return Err(error),
            }
        }
        Err(IoError::OutOfMemory {
            requested,
            reserved: self.reserved(),
            free: self.storage.free_memory().unwrap_or(0),
            reason: "no physical page could be created".into(),
            backtrace: BackTrace::capture(),
        })
    }

    fn update_clock(&mut self) {
        self.tick_ms = self.started.elapsed().as_millis() as u64;
    }

    /// Binds `id` to a slice of at least `size` bytes for use on `stream`.
    ///
    /// # Errors
    /// - [`IoError::InvalidArgument`] if `size` is 0 or `id` is already bound;
    /// - [`IoError::BufferTooBig`] if no allocation can ever hold `size` bytes;
    /// - [`IoError::OutOfMemory`] if the device has no room after giving back cached memory.
    pub fn reserve(
        &mut self,
        id: MemoryId,
        size: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(), IoError> {
        if size == 0 {
            return Err(IoError::invalid(
                "can't reserve 0 bytes: every allocation must hold at least one byte",
            ));
        }
        if self.slices.contains_key(&id) {
            return Err(IoError::invalid(format!("{id} is already bound to memory")));
        }

        let rounded = round_up(size, self.alignment())
            .filter(|rounded| *rounded <= self.limits.max_allocation)
            .ok_or_else(|| IoError::BufferTooBig {
                size,
                max: self.limits.max_allocation,
                backtrace: BackTrace::capture(),
            })?;
        self.reservations += 1;
        if self.reservations.is_multiple_of(CLOCK_EVERY) {
            self.update_clock();
            self.release_idle(ordering);
        }
        let tick = self.tick_ms;
        let (persistent, size_match) = self
            .options
            .persistent
            .placement(self.modes.current(stream));
        let (pool, taken) = if persistent {
            let kind = PoolKind::Persistent;
            let taken = self.reserve_in(kind, rounded, size, stream, ordering, tick)?;
            (kind, taken)
        } else {
            let cached_persistent = if size_match && self.persistent.free_block_count() > 0 {
                self.persistent
                    .reserve_cached(rounded, size, stream, ordering, tick)
            } else {
                None
            };
            match cached_persistent {
                Some(taken) => (PoolKind::Persistent, taken),
                None if rounded > self.options.small_max_request && self.pages_large() => {
                    let taken = self.reserve_paged(rounded, size, stream, ordering)?;
                    (PoolKind::Paged, taken)
                }
                None if rounded > self.options.small_max_request && self.grows_large() => {
                    let taken = self.reserve_growable(rounded, size, stream, ordering)?;
                    (PoolKind::Growable, taken)
                }
                None => {
                    let kind = if rounded <= self.options.small_max_request {
                        PoolKind::Small
                    } else {
                        PoolKind::Large
                    };
                    let taken = self.reserve_in(kind, rounded, size, stream, ordering, tick)?;
                    (kind, taken)
                }
            }
        };
        self.slices.insert(
            id,
            Slice {
                pool,
                taken,
                requested: size,
                stream,
            },
        );
        let usage = self.usage();
        self.peak_in_use = self.peak_in_use.max(usage.bytes_in_use);
        Ok(())
    }

    fn reserve_in(
        &mut self,
        kind: PoolKind,
        rounded: u64,
        requested: u64,
        stream: StreamId,
        ordering: &mut dyn StreamOrdering,
        tick: u64,
    ) -> Result<Taken, IoError> {
        if let Some(taken) = self
            .pool(kind)
            .reserve_cached(rounded, requested, stream, ordering, tick)
        {
            return Ok(taken);
        }
        // Growing the large pool while idle large segments could hold the request (once
        // merged) strands memory: give them back first. The small and persistent pools are
        // left alone; their segments are small and reused at a high rate.
        if self.options.compact_before_growth
            && kind == PoolKind::Large
            && self.large.idle_segment_bytes() >= rounded
        {
            let released = self.large.release_least_recent(ordering, rounded);
            self.dealloc_segments(released);
        }
        let segment_size = self.pool_ref(kind).policy().segments.segment_size(rounded);
        let segment_size = segment_size.min(self.limits.max_allocation).max(rounded);
        let (storage, segment_size) =
            self.allocate_segment(segment_size, rounded, requested, ordering)?;
        Ok(self
            .pool(kind)
            .reserve_in_new_segment(storage, segment_size, rounded, requested, tick))
    }

    /// The out-of-memory error of `bytes` more (for a request of `requested` bytes) past
    /// the configured capacity, if that is where they would take the manager.
    fn over_capacity(&self, bytes: u64, requested: u64) -> Option<IoError> {
        let capacity = self.capacity()?;
        let reserved = self.reserved();
        (reserved.saturating_add(bytes) > capacity).then(|| IoError::OutOfMemory {
            requested,
            reserved,
            free: capacity.saturating_sub(reserved),
            reason: format!("the memory limit of {} is reached", format_bytes(capacity)),
            backtrace: BackTrace::capture(),
        })
    }

    fn try_allocate(&mut self, size: u64) -> Result<StorageId, IoError> {
        if let Some(error) = self.over_capacity(size, size) {
            return Err(error);
        }
        let storage = &mut self.storage;
        let id = timed(&mut self.storage_time, || storage.alloc(size))?;
        self.storage_allocations += 1;
        tracing::debug!(target: "cubert::memory", size, reserved = self.reserved() + size, "device allocation");
        self.peak_reserved = self.peak_reserved.max(self.reserved() + size);
        Ok(id)
    }

    fn allocate_segment(
        &mut self,
        segment_size: u64,
        rounded: u64,
        requested: u64,
        ordering: &mut dyn StreamOrdering,
    ) -> Result<(StorageId, u64), IoError> {
        match self.try_allocate(segment_size) {
            Ok(id) => return Ok((id, segment_size)),
            Err(IoError::OutOfMemory { .. }) => {}
            Err(other) => return Err(other),
        }
        // Give back everything cached and try once more, exact-size if need be.
        self.cleanup(ordering);
        self.storage.flush();
        let mut attempt = self.try_allocate(segment_size).map(|id| (id, segment_size));
        if rounded < segment_size && matches!(attempt, Err(IoError::OutOfMemory { .. })) {
            attempt = self.try_allocate(rounded).map(|id| (id, rounded));
        }
        let last_error = match attempt {
            Ok(allocated) => return Ok(allocated),
            Err(IoError::OutOfMemory { reason, .. }) => reason,
            Err(other) => return Err(other),
        };
        let reserved = self.reserved();
        let free = self
            .storage
            .free_memory()
            .or_else(|| self.capacity().map(|c| c.saturating_sub(reserved)))
            .unwrap_or(0);
        Err(IoError::OutOfMemory {
            requested,
            reserved,
            free,
            reason: last_error,
            backtrace: BackTrace::capture(),
        })
    }

    /// Frees the slice bound to `id`. `points` say which stream work may still use it (empty
    /// when all queued work is complete). Returns `false` if `id` was not bound.
    pub fn release(&mut self, id: MemoryId, points: StreamPoints) -> bool {
        self.release_with(id, |_| points)
    }

    /// Frees the slice bound to `id`, with the stream points `points` gives for it: it is
    /// passed the stream the memory was reserved (or adopted) on and whether it is
    /// page-mapped ([`Self::reserved_on`]'s answer), or `None` where `id` is bound to no
    /// memory here (then nothing is freed). The backend learns both from the lookup that
    /// frees the slice, one per release. Returns `false` if `id` was not bound.
    pub fn release_with(
        &mut self,
        id: MemoryId,
        points: impl FnOnce(Option<(StreamId, bool)>) -> StreamPoints,
    ) -> bool {
        if let Some(slice) = self.slices.remove(&id) {
            let paged = matches!(slice.pool, PoolKind::Paged | PoolKind::Growable);
            let points = points(Some((slice.stream, paged)));
            return self.free_slice(slice, points);
        }
        if let Some(foreign) = self.foreign.remove(&id) {
            let points = points(Some((foreign.stream, false)));
            if let Some(memory) = self.storage.disown(foreign.storage) {
                self.released_foreign.push((memory, points));
            }
            return true;
        }
        points(None);
        false
    }

    /// Gives `slice`'s block back to its pool, reusable after `points`.
    fn free_slice(&mut self, slice: Slice, points: StreamPoints) -> bool {
        if slice.pool == PoolKind::Paged {
            return self
                .paged
                .as_mut()
                .is_some_and(|paged| paged.free(slice.taken.segment, points));
        }
        if slice.pool == PoolKind::Growable {
            self.growable_used_ms = coarse_clock::now_ms();
            return self
                .growable
                .as_mut()
                .is_some_and(|growable| growable.free(slice.taken.segment, points));
        }
        let tick = self.tick_ms;
        self.pool(slice.pool)
            .free(slice.taken.segment, slice.taken.offset, points, tick)
    }

    /// Notes that allocation `id`, not bound to memory yet, was released: its reservation
    /// (queued, not run yet) must then reserve nothing ([`Self::take_early_release`]).
    /// Allocations queued with `DeviceHandle::allocate` don't keep their handle alive until
    /// the reservation runs, so a caller that drops the handle at once can release the id
    /// first. Ids never bound because their reservation failed must not be passed here
    /// (their reservation already ran).
    pub fn release_early(&mut self, id: MemoryId) {
        self.released_early.insert(id, ());
    }

    /// Whether `id` was released before its reservation ran (and forgets it): the server
    /// then skips the reservation, since nothing can use the memory any more.
    pub fn take_early_release(&mut self, id: MemoryId) -> bool {
        !self.released_early.is_empty() && self.released_early.remove(&id).is_some()
    }

    /// Releases noted by [`Self::release_early`] whose reservation hasn't run yet.
    pub fn early_releases(&self) -> usize {
        self.released_early.len()
    }

    /// The stream the memory of `id` was reserved (or adopted) on, and whether it is
    /// page-mapped (the paged or the growable pool), in one lookup: what a backend needs of
    /// a released id whose last use it did not record. Page-mapped memory is taken back for
    /// other blocks only once the device is known to be done with it, so a backend should
    /// make the completion of its last use observable (record an event) when freeing it.
    /// `None` where `id` is bound to no memory here.
    pub fn reserved_on(&self, id: MemoryId) -> Option<(StreamId, bool)> {
        match self.slices.get(&id) {
            Some(slice) => Some((
                slice.stream,
                matches!(slice.pool, PoolKind::Paged | PoolKind::Growable),
            )),
            None => self.foreign.get(&id).map(|foreign| (foreign.stream, false)),
        }
    }

    /// The slice bound to `id`.
    pub fn slice(&self, id: MemoryId) -> Option<SliceInfo> {
        let Some(slice) = self.slices.get(&id) else {
            let foreign = self.foreign.get(&id)?;
            return Some(SliceInfo {
                storage: StorageHandle {
                    id: foreign.storage,
                    offset: 0,
                    size: foreign.size,
                },
                stream: foreign.stream,
            });
        };
        let (storage, _) = if slice.pool == PoolKind::Paged {
            self.paged.as_ref()?.storage_of(slice.taken.segment)?
        } else if slice.pool == PoolKind::Growable {
            self.growable.as_ref()?.storage_of(slice.taken.segment)?
        } else {
            self.pool_ref(slice.pool)
                .storage_of(slice.taken.segment, slice.taken.offset)?
        };
        Some(SliceInfo {
            storage: StorageHandle {
                id: storage,
                offset: slice.taken.offset,
                size: slice.requested,
            },
            stream: slice.stream,
        })
    }

    /// The device range of `size` bytes at `offset` inside the slice bound to `id`.
    ///
    /// # Errors
    /// [`IoError::NotFound`] if `id` is not bound or the range is outside its slice.
    pub fn resolve(&self, id: MemoryId, offset: u64, size: u64) -> Result<StorageHandle, IoError> {
        let slice = self.slice(id).ok_or_else(|| {
            IoError::not_found(format!("{id} is not bound to memory on this device"))
        })?;
        slice.storage.sub_range(offset, size).ok_or_else(|| {
            IoError::not_found(format!(
                "bytes {offset}..{} are outside the {} bytes of {id}",
                offset.saturating_add(size),
                slice.storage.size
            ))
        })
    }

    /// Gives back every entirely free segment whose stream points are complete. Returns the
    /// number of bytes given back.
    pub fn cleanup(&mut self, ordering: &mut dyn StreamOrdering) -> u64 {
        let mut bytes = self.release_where(ordering, |_| false);
        // The growable pool's free pages go back here (and so on an out-of-memory retry),
        // and on the idle timer once the pool itself is idle (`release_idle`).
        bytes += self.release_growable(ordering);
        bytes
    }

    /// Gives back entirely free segments untouched for the configured idle time.
    pub fn release_idle(&mut self, ordering: &mut dyn StreamOrdering) -> u64 {
        let Some(idle) = self.options.idle_release else {
            return 0;
        };
        self.update_clock();
        let idle_ms = idle.as_millis() as u64;
        if self.tick_ms.saturating_sub(self.last_idle_sweep_ms) < idle_ms / 4 {
            return 0;
        }
        self.last_idle_sweep_ms = self.tick_ms;
        let now = self.tick_ms;
        let mut bytes =
            self.release_where(ordering, |touched| now.saturating_sub(touched) < idle_ms);
        // The growable pool gives its free pages back once it has neither reserved nor
        // freed a block for the idle time: a loop that allocates every step keeps them.
        if coarse_clock::now_ms().saturating_sub(self.growable_used_ms) >= idle_ms {
            bytes += self.release_growable(ordering);
        }
        bytes
    }

    /// Gives the growable pool's free pages back; the bytes given back.
    fn release_growable(&mut self, ordering: &mut dyn StreamOrdering) -> u64 {
        let (Some(growable), Some(pager)) = (self.growable.as_mut(), self.storage.pager()) else {
            return 0;
        };
        // Each chunk is one device allocation, given back whole.
        let before = growable.stats().chunks_released;
        let bytes = growable.release(pager, ordering);
        self.storage_deallocations += growable.stats().chunks_released - before;
        bytes
    }

    fn release_where(
        &mut self,
        ordering: &mut dyn StreamOrdering,
        keep: impl Fn(u64) -> bool + Copy,
    ) -> u64 {
        let mut released: Vec<ReleasedSegment> = Vec::new();
        released.extend(self.small.release_segments(ordering, keep));
        released.extend(self.large.release_segments(ordering, keep));
        released.extend(self.persistent.release_segments(ordering, keep));
        let mut bytes = self.dealloc_segments(released);
        if let (Some(paged), Some(pager)) = (self.paged.as_mut(), self.storage.pager()) {
            bytes += paged.release(pager, ordering);
        }
        bytes
    }

    /// Returns released segments to the storage; the bytes given back.
    fn dealloc_segments(&mut self, released: Vec<ReleasedSegment>) -> u64 {
        let mut bytes = 0;
        for segment in released {
            let storage = &mut self.storage;
            timed(&mut self.storage_time, || storage.dealloc(segment.storage));
            tracing::debug!(target: "cubert::memory", size = segment.size, "device memory given back");
            self.storage_deallocations += 1;
            bytes += segment.size;
        }
        bytes
    }

    fn reserved(&self) -> u64 {
        self.small.stats().bytes_reserved
            + self.large.stats().bytes_reserved
            + self.persistent.stats().bytes_reserved
            + self.paged.as_ref().map_or(0, |p| p.stats().bytes_reserved)
            + self
                .growable
                .as_ref()
                .map_or(0, |g| g.stats().bytes_reserved)
    }

    fn growable_usage(&self) -> MemoryUsage {
        self.growable
            .as_ref()
            .map_or(MemoryUsage::default(), |growable| {
                let stats = growable.stats();
                MemoryUsage {
                    number_allocs: stats.allocations,
                    bytes_in_use: stats.bytes_in_use,
                    bytes_padding: stats.bytes_padding,
                    bytes_reserved: stats.bytes_reserved,
                }
            })
    }

    fn paged_usage(&self) -> MemoryUsage {
        self.paged.as_ref().map_or(MemoryUsage::default(), |paged| {
            let stats = paged.stats();
            MemoryUsage {
                number_allocs: stats.allocations,
                bytes_in_use: stats.bytes_in_use,
                bytes_padding: stats.bytes_padding,
                bytes_reserved: stats.bytes_reserved,
            }
        })
    }

    /// Current usage.
    pub fn usage(&self) -> MemoryUsage {
        [&self.small, &self.large, &self.persistent]
            .iter()
            .map(|pool| {
                let stats = pool.stats();
                MemoryUsage {
                    number_allocs: stats.allocations,
                    bytes_in_use: stats.bytes_in_use,
                    bytes_padding: stats.bytes_padding,
                    bytes_reserved: stats.bytes_reserved,
                }
            })
            .fold(
                self.paged_usage().combine(&self.growable_usage()),
                |acc, usage| acc.combine(&usage),
            )
    }

    /// Usage per pool, with peaks and device allocation counts.
    pub fn report(&self) -> MemoryReport {
        let mut pools: Vec<PoolReport> = [&self.small, &self.large, &self.persistent]
            .iter()
            .map(|pool| {
                let stats = pool.stats();
                let (free_blocks, largest_free_block) = pool.free_blocks();
                PoolReport {
                    name: pool.policy().name.to_string(),
                    segments: stats.segments,
                    bytes_reserved: stats.bytes_reserved,
                    bytes_in_use: stats.bytes_in_use,
                    bytes_padding: stats.bytes_padding,
                    allocations: stats.allocations,
                    free_blocks,
                    largest_free_block,
                }
            })
            .collect();
        if let Some(paged) = &self.paged {
            let stats = paged.stats();
            pools.push(PoolReport {
                name: "paged".to_string(),
                segments: stats.pages,
                bytes_reserved: stats.bytes_reserved,
                bytes_in_use: stats.bytes_in_use,
                bytes_padding: stats.bytes_padding,
                allocations: stats.allocations,
                free_blocks: stats.cached_blocks,
                largest_free_block: stats.bytes_free,
            });
        }
        if let Some(growable) = &self.growable {
            let stats = growable.stats();
            pools.push(PoolReport {
                name: "growable".to_string(),
                segments: stats.chunks,
                bytes_reserved: stats.bytes_reserved,
                bytes_in_use: stats.bytes_in_use,
                bytes_padding: stats.bytes_padding,
                allocations: stats.allocations,
                free_blocks: stats.free_blocks,
                largest_free_block: growable.largest_free_block(),
            });
        }
        MemoryReport {
            usage: self.usage(),
            pools,
            peak_bytes_reserved: self.peak_reserved,
            peak_bytes_in_use: self.peak_in_use,
            storage_allocations: self.storage_allocations,
            storage_deallocations: self.storage_deallocations,
            storage_remaps: self.storage_remaps,
            storage_time: self.storage_time
                + self
                    .growable
                    .as_ref()
                    .map_or(Duration::ZERO, |growable| growable.stats().driver_time),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceId;
    use crate::handle::{HandleFactory, ReleaseQueue};
    use crate::memory::MemoryAllocationMode;
    use crate::memory::ordering::HostOrdering;
    use crate::storage::StorageId;
    use std::collections::HashMap;

    const MIB: u64 = 1 << 20;

    /// Counts allocations; refuses those that would exceed `limit` bytes in total.
    #[derive(Default)]
    struct CountingStorage {
        live: HashMap<u64, u64>,
        next: u64,
        limit: Option<u64>,
    }

    impl ComputeStorage for CountingStorage {
        type Resource = ();
        fn alignment(&self) -> u64 {
            256
        }
        fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
            let live: u64 = self.live.values().sum();
            if self.limit.is_some_and(|limit| live + size > limit) {
                return Err(IoError::OutOfMemory {
                    requested: size,
                    reserved: live,
                    free: 0,
                    reason: "test storage is full".into(),
                    backtrace: BackTrace::none(),
                });
            }
            self.next += 1;
            self.live.insert(self.next, size);
            Ok(StorageId(self.next))
        }
        fn dealloc(&mut self, id: StorageId) {
            self.live.remove(&id.0);
        }
        fn get(&mut self, _handle: &StorageHandle) -> Option<()> {
            Some(())
        }
    }

    fn manager(limit: Option<u64>) -> MemoryManager<CountingStorage> {
        MemoryManager::new(
            CountingStorage {
                limit,
                ..Default::default()
            },
            MemoryOptions::default(),
            MemoryLimits {
                max_allocation: 64 * MIB,
                capacity: None,
            },
        )
    }

    /// A storage whose large requests can be served by mapped pages (counted, not real).
    #[derive(Default)]
    struct PagingStorage {
        counting: CountingStorage,
        pages: u64,
        ranges: u64,
    }

    impl ComputeStorage for PagingStorage {
        type Resource = ();
        fn alignment(&self) -> u64 {
            256
        }
        fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
            self.counting.alloc(size)
        }
        fn dealloc(&mut self, id: StorageId) {
            self.counting.dealloc(id)
        }
        fn get(&mut self, _handle: &StorageHandle) -> Option<()> {
            Some(())
        }
        fn pager(&mut self) -> Option<&mut dyn crate::storage::PageMapper> {
            Some(self)
        }
    }

    impl crate::storage::PageMapper for PagingStorage {
        fn page_size(&self) -> u64 {
            2 * MIB
        }
        fn reserve_range(&mut self, _size: u64) -> Result<StorageId, IoError> {
            self.ranges += 1;
            Ok(StorageId(1_000_000 + self.ranges))
        }
        fn free_range(&mut self, _range: StorageId) {}
        fn create_page(&mut self) -> Result<crate::storage::PageId, IoError> {
            self.pages += 1;
            Ok(crate::storage::PageId(self.pages))
        }
        fn release_page(&mut self, _page: crate::storage::PageId) {
            self.pages -= 1;
        }
        fn map(&mut self, _: StorageId, _: u64, _: crate::storage::PageId) -> Result<(), IoError> {
            Ok(())
        }
        fn grant_access(&mut self, _: StorageId, _: u64, _: u64) -> Result<(), IoError> {
            Ok(())
        }
        fn unmap(&mut self, _: StorageId, _: u64, _: u64) {}
    }

    #[test]
    fn a_release_asks_for_its_points_once_with_where_the_memory_was_reserved() {
        let limits = MemoryLimits {
            max_allocation: 1 << 30,
            capacity: None,
        };
        let options = MemoryOptions::default();
        let mut memory = MemoryManager::new(PagingStorage::default(), options, limits);
        let stream = StreamId::new(3);
        let [paged, small, unbound] = ids(3).try_into().unwrap();
        memory
            .reserve(paged, 10 * MIB, stream, &mut HostOrdering)
            .unwrap();
        memory
            .reserve(small, 4096, stream, &mut HostOrdering)
            .unwrap();
        let mut told = Vec::new();
        for id in [paged, small, unbound, paged] {
            let freed = memory.release_with(id, |reserved| {
                told.push(reserved);
                StreamPoints::new()
            });
            assert_eq!(freed, told.last().is_some_and(Option::is_some), "{id}");
        }
        assert_eq!(
            told,
            vec![Some((stream, true)), Some((stream, false)), None, None],
            "page-mapped, a block pool's, never bound, already released"
        );
        assert_eq!(memory.live_slices(), 0);
    }

    #[test]
    fn large_requests_grow_one_range_and_idle_pages_go_back_with_the_allocations_balanced() {
        let options = MemoryOptions {
            idle_release: Some(std::time::Duration::from_millis(20)),
            ..MemoryOptions::default()
        };
        let limits = MemoryLimits {
            max_allocation: 1 << 30,
            capacity: None,
        };
        let mut memory = MemoryManager::new(PagingStorage::default(), options, limits);
        let stream = StreamId::new(0);
        let [a, b] = ids(2).try_into().unwrap();
        memory
            .reserve(a, 10 * MIB, stream, &mut HostOrdering)
            .unwrap();
        memory
            .reserve(b, 6 * MIB, stream, &mut HostOrdering)
            .unwrap();
        let (sa, sb) = (memory.slice(a).unwrap(), memory.slice(b).unwrap());
        assert_eq!(sa.storage.id, sb.storage.id, "one range per stream");
        assert_eq!(sb.storage.offset, 10 * MIB);
        assert_eq!(memory.reserved_on(a), Some((stream, true)), "page-mapped");
        assert_eq!(memory.storage.pages, 8, "16 MiB of 2 MiB pages");
        memory.release(a, StreamPoints::new());
        assert_eq!(memory.reserved_on(a), None, "released");
        memory.release(b, StreamPoints::new());
        // Idle for longer than `idle_release`: the sweep gives every free page back.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(memory.release_idle(&mut HostOrdering), 16 * MIB);
        assert_eq!(memory.storage.pages, 0);
        let report = memory.report();
        assert_eq!(report.usage.bytes_reserved, 0);
        assert_eq!(report.storage_allocations, report.storage_deallocations);
    }

    fn ids(n: usize) -> Vec<MemoryId> {
        let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
        (0..n)
            .map(|_| factory.mint(StreamId::new(0), 1).id())
            .collect()
    }

    #[test]
    fn dropped_slice_is_reused_on_same_stream() {
        let mut memory = manager(None);
        let stream = StreamId::new(7);
        let [a, b] = ids(2).try_into().unwrap();
        memory.reserve(a, 4096, stream, &mut HostOrdering).unwrap();
        assert_eq!(
            memory.reserved_on(a),
            Some((stream, false)),
            "a block pool's"
        );
        let first = memory.slice(a).unwrap().storage;
        memory.release(a, StreamPoints::new());
        memory.reserve(b, 4096, stream, &mut HostOrdering).unwrap();
        assert_eq!(memory.slice(b).unwrap().storage, first);
        assert_eq!(memory.report().storage_allocations, 1);
    }

    #[test]
    fn release_noted_before_the_reservation_is_taken_once() {
        let mut memory = manager(None);
        let [early, other] = ids(2).try_into().unwrap();
        assert!(
            !memory.release(early, StreamPoints::new()),
            "unknown ids free nothing"
        );
        memory.release_early(early);
        assert_eq!(memory.early_releases(), 1);
        assert!(!memory.take_early_release(other));
        assert!(memory.take_early_release(early));
        assert!(!memory.take_early_release(early), "forgotten once taken");
        assert_eq!(memory.early_releases(), 0);
        assert_eq!(memory.report().storage_allocations, 0);
    }

    #[test]
    fn shifting_working_set_does_not_churn_device_allocations() {
        // Mostly small requests, one in 64 of 1-4 MiB, each freed at once: the pools
        // settle and the device sees a handful of allocations, not one per big request.
        let mut memory = manager(None);
        let stream = StreamId::new(0);
        let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
        for cycle in 0..20_000u64 {
            let size = if cycle % 64 == 0 {
                MIB + (cycle / 64 % 4) * MIB
            } else {
                1 + cycle * 7919 % (64 << 10)
            };
            let id = factory.mint(stream, 1).id();
            memory.reserve(id, size, stream, &mut HostOrdering).unwrap();
            memory.release(id, StreamPoints::new());
        }
        let allocations = memory.report().storage_allocations;
        assert!(allocations <= 8, "{allocations} device allocations");
    }

    #[test]
    fn usage_returns_to_baseline_after_release_and_cleanup() {
        let mut memory = manager(None);
        let stream = StreamId::new(0);
        let all = ids(50);
        for (i, id) in all.iter().enumerate() {
            memory
                .reserve(
                    *id,
                    1 + (i as u64 * 7919) % (3 * MIB),
                    stream,
                    &mut HostOrdering,
                )
                .unwrap();
        }
        assert_eq!(memory.usage().number_allocs, 50);
        for id in all {
            assert!(memory.release(id, StreamPoints::new()));
        }
        memory.cleanup(&mut HostOrdering);
        assert_eq!(memory.usage(), MemoryUsage::default());
        assert!(memory.storage_ref().live.is_empty());
    }

    #[test]
    fn oversized_request_is_buffer_too_big_not_out_of_memory() {
        let mut memory = manager(None);
        let [id] = ids(1).try_into().unwrap();
        let error = memory
            .reserve(id, 65 * MIB, StreamId::new(0), &mut HostOrdering)
            .unwrap_err();
        assert!(matches!(error, IoError::BufferTooBig { .. }), "{error}");
        let error = memory
            .reserve(id, u64::MAX, StreamId::new(0), &mut HostOrdering)
            .unwrap_err();
        assert!(matches!(error, IoError::BufferTooBig { .. }), "{error}");
    }

    #[test]
    fn full_device_frees_cache_and_retries_before_out_of_memory() {
        let mut memory = manager(Some(24 * MIB));
        let stream = StreamId::new(0);
        let [a, b, c] = ids(3).try_into().unwrap();
        // 16 MiB dedicated segment, then freed: cached.
        memory
            .reserve(a, 16 * MIB, stream, &mut HostOrdering)
            .unwrap();
        memory.release(a, StreamPoints::new());
        // 12 MiB needs a new segment (the cached 16 MiB block is reused instead: best fit).
        memory
            .reserve(b, 12 * MIB, stream, &mut HostOrdering)
            .unwrap();
        memory.release(b, StreamPoints::new());
        // 20 MiB doesn't fit next to the cached 16 MiB: the cache is released and it retries.
        memory
            .reserve(c, 20 * MIB, stream, &mut HostOrdering)
            .unwrap();
        assert_eq!(memory.report().storage_deallocations, 1);
        // Now the device is full: a further request fails with OutOfMemory, and the manager
        // still works afterwards.
        let [d] = ids(1).try_into().unwrap();
        let error = memory
            .reserve(d, 8 * MIB, stream, &mut HostOrdering)
            .unwrap_err();
        assert!(matches!(error, IoError::OutOfMemory { .. }), "{error}");
        memory.release(c, StreamPoints::new());
        memory
            .reserve(d, 8 * MIB, stream, &mut HostOrdering)
            .unwrap();
    }

    #[test]
    fn persistent_mode_gets_exact_blocks_outside_dynamic_pools() {
        let mut memory = manager(None);
        let stream = StreamId::new(0);
        let [a, b] = ids(2).try_into().unwrap();
        memory
            .modes()
            .push(stream, MemoryAllocationMode::Persistent);
        memory.reserve(a, 3000, stream, &mut HostOrdering).unwrap();
        memory.modes().pop(stream);
        let report = memory.report();
        assert_eq!(report.pools[2].allocations, 1);
        assert_eq!(report.pools[2].bytes_reserved, 3072);
        assert_eq!(report.pools[0].segments, 0);
        // A freed persistent block serves a later exact-size request in auto mode.
        memory.release(a, StreamPoints::new());
        memory.reserve(b, 3000, stream, &mut HostOrdering).unwrap();
        assert_eq!(memory.report().pools[2].allocations, 1);
        assert_eq!(memory.report().storage_allocations, 1);
    }

    /// Reserves 3000 bytes persistently, frees them, then 3000 bytes in auto mode: which
    /// pool the second lands in, and how many device allocations both took.
    fn persistent_then_auto(mode: PersistentMemory) -> (usize, u64) {
        let mut memory = manager(None);
        memory
            .install_options(
                MemoryOptions {
                    persistent: mode,
                    ..memory.options().clone()
                },
                &mut HostOrdering,
            )
            .unwrap();
        let stream = StreamId::new(0);
        let [a, b] = ids(2).try_into().unwrap();
        memory
            .modes()
            .push(stream, MemoryAllocationMode::Persistent);
        memory.reserve(a, 3000, stream, &mut HostOrdering).unwrap();
        memory.modes().pop(stream);
        memory.release(a, StreamPoints::new());
        memory.reserve(b, 3000, stream, &mut HostOrdering).unwrap();
        let report = memory.report();
        let pool = report
            .pools
            .iter()
            .position(|pool| pool.bytes_in_use > 0)
            .unwrap();
        (pool, report.storage_allocations)
    }

    #[test]
    fn persistent_memory_modes_place_requests_as_documented() {
        // size_match: the auto request reuses the freed persistent block.
        assert_eq!(persistent_then_auto(PersistentMemory::SizeMatch), (2, 1));
        // enabled: it goes to the small pool (a second device allocation).
        assert_eq!(persistent_then_auto(PersistentMemory::Enabled), (0, 2));
        // disabled: even the persistent request went to the small pool, which serves both.
        assert_eq!(persistent_then_auto(PersistentMemory::Disabled), (0, 1));
        // enforced: both are persistent, the same exact block.
        assert_eq!(persistent_then_auto(PersistentMemory::Enforced), (2, 1));
    }

    #[test]
    fn installed_options_steer_at_once_and_reshape_only_empty_pools() {
        let mut memory = manager(None);
        let stream = StreamId::new(0);
        let [a, b] = ids(2).try_into().unwrap();
        memory.reserve(a, 100, stream, &mut HostOrdering).unwrap();
        // Steering keys change with a live allocation.
        let enforced = MemoryOptions {
            persistent: PersistentMemory::Enforced,
            idle_release: None,
            ..memory.options().clone()
        };
        memory
            .install_options(enforced.clone(), &mut HostOrdering)
            .unwrap();
        assert_eq!(memory.options().persistent, PersistentMemory::Enforced);
        // A new shape doesn't, and nothing changes.
        let reshaped = MemoryOptions {
            small_segment: 8 * MIB,
            ..enforced.clone()
        };
        let error = memory
            .install_options(reshaped.clone(), &mut HostOrdering)
            .unwrap_err();
        assert!(
            error.to_string().contains("1 allocation(s) are live"),
            "{error}"
        );
        assert_eq!(memory.options().small_segment, 2 * MIB);
        // paged and growable never change at run time.
        let paged = MemoryOptions {
            paged: !enforced.paged,
            ..enforced.clone()
        };
        let error = memory
            .install_options(paged, &mut HostOrdering)
            .unwrap_err();
        assert!(
            error.to_string().contains("`paged` and `growable`"),
            "{error}"
        );
        // Once the allocation is gone the pools are laid out again, cache given back.
        memory.release(a, StreamPoints::new());
        memory.install_options(reshaped, &mut HostOrdering).unwrap();
        assert_eq!(memory.usage().bytes_reserved, 0);
        let reshaped_auto = MemoryOptions {
            persistent: PersistentMemory::SizeMatch,
            ..memory.options().clone()
        };
        memory
            .install_options(reshaped_auto, &mut HostOrdering)
            .unwrap();
        memory.reserve(b, 100, stream, &mut HostOrdering).unwrap();
        assert_eq!(memory.report().pools[0].bytes_reserved, 8 * MIB);
    }

    #[test]
    fn resolve_rejects_ranges_outside_the_slice() {
        let mut memory = manager(None);
        let [a] = ids(1).try_into().unwrap();
        memory
            .reserve(a, 100, StreamId::new(0), &mut HostOrdering)
            .unwrap();
        assert!(memory.resolve(a, 0, 100).is_ok());
        assert!(matches!(
            memory.resolve(a, 50, 51),
            Err(IoError::NotFound { .. })
        ));
        memory.release(a, StreamPoints::new());
        assert!(matches!(
            memory.resolve(a, 0, 1),
            Err(IoError::NotFound { .. })
        ));
    }

    #[test]
    fn zero_size_request_is_an_error() {
        let mut memory = manager(None);
        let [a] = ids(1).try_into().unwrap();
        let error = memory
            .reserve(a, 0, StreamId::new(0), &mut HostOrdering)
            .unwrap_err();
        assert!(matches!(error, IoError::InvalidArgument { .. }));
    }
}
