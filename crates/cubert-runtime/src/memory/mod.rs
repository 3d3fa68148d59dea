//! Pooled, stream-aware device memory.
//!
//! [`MemoryManager`] binds handle ids to slices of device memory it pools in three
//! [`block_pool::BlockPool`]s (small, large, persistent). See `manager` for the routing and
//! out-of-memory policy, `block_pool` for best fit with splitting and coalescing, `ordering`
//! for when a freed slice may be reused by another stream, and `mode` for persistent
//! allocation windows. [`DeviceMemory`] is what a server holds: the manager with the release
//! queue, the early releases and the failed reservations around it (`device_memory`).
//! [`IdMap`] (`id_map`) is the fast map by memory id they all use; `coarse_clock` the cheap
//! clock of the idle timer. `trace` reads and
//! writes allocation traces; `training_trace` generates those of training loops. `foreign`
//! is memory cubert did not allocate, imported with a release callback ([`ForeignMemory`]).

pub mod block_pool;
#[cfg(test)]
mod block_pool_model;
mod coarse_clock;
mod device_memory;
#[cfg(test)]
mod fake_mapper;
mod foreign;
pub mod growable_pool;
#[cfg(test)]
mod growable_pool_model;
mod id_map;
mod manager;
#[cfg(test)]
mod manager_model;
mod mode;
mod ordering;
pub mod paged_pool;
#[cfg(test)]
mod paged_pool_model;
#[cfg(test)]
mod pool_model;
pub mod trace;
pub mod training_trace;
mod usage;

pub use device_memory::{Allocation, DeviceMemory};
pub use foreign::ForeignMemory;
pub use id_map::{FastMap, IdHasher, IdMap};
pub use manager::{MemoryLimits, MemoryManager, MemoryOptions, SliceInfo};
pub use mode::{MemoryAllocationMode, ModeTable, PersistentMemory};
pub use ordering::{HostOrdering, StreamOrdering, StreamPoint, StreamPoints};
pub use usage::{MemoryReport, MemoryUsage, PoolReport, format_bytes};
