//! Allocation modes, per stream, with nestable persistent windows.
//!
//! In `Auto` mode requests go to the dynamic pools (best fit, split, coalesce). In
//! `Persistent` mode each request gets an exact-size block of its own that is never split or
//! merged, so long-lived buffers (weights, caches) don't fragment the dynamic pools; freed
//! persistent blocks are reused by later requests of exactly the same size in any mode.
//!
//! `set` changes a stream's base mode. Windows (`push`/`pop`) override it for a scope and
//! nest: the innermost open window wins, and closing it restores the one outside.
//!
//! [`PersistentMemory`] (`[memory] persistent`, or `ComputeClient::install_memory_pools`
//! at run time) decides what the modes mean for a device, as upstream CubeCL's option of
//! that name: whether `Auto` requests reuse free persistent blocks of their exact size,
//! whether `Persistent` requests are honoured, and whether every request is persistent.

use crate::stream::StreamId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What the allocation modes mean for a device (`[memory] persistent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PersistentMemory {
    /// `Persistent` requests get exact-size blocks; an `Auto` request first takes a free
    /// persistent block of exactly its size (weights freed and reallocated each step, as a
    /// training loop does, land in the same blocks), then the dynamic pools.
    #[default]
    SizeMatch,
    /// `Persistent` requests get exact-size blocks; `Auto` requests only use the dynamic
    /// pools (activations never take a block shaped for a weight: better for inference).
    Enabled,
    /// Every request uses the dynamic pools, whatever its mode (free persistent blocks stay
    /// cached until a cleanup gives them back).
    Disabled,
    /// Every request gets an exact-size persistent block, whatever its mode: nothing is
    /// split or shared, and a freed block serves only a request of its exact size, so
    /// workloads of varying sizes run out of memory sooner.
    Enforced,
}

impl PersistentMemory {
    /// Where a request made in `mode` goes: whether it gets a persistent block, and, if
    /// not, whether it may take a free persistent block of its exact size.
    pub fn placement(self, mode: MemoryAllocationMode) -> (bool, bool) {
        match (self, mode) {
            (Self::Enforced, _) => (true, false),
            (Self::Disabled, _) => (false, false),
            (_, MemoryAllocationMode::Persistent) => (true, false),
            (Self::SizeMatch, MemoryAllocationMode::Auto) => (false, true),
            (Self::Enabled, MemoryAllocationMode::Auto) => (false, false),
        }
    }
}

/// How new allocations are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryAllocationMode {
    /// Dynamic pools.
    #[default]
    Auto,
    /// Exact-size blocks that never fragment the dynamic pools.
    Persistent,
}

#[derive(Default)]
struct StreamModes {
    base: MemoryAllocationMode,
    windows: Vec<MemoryAllocationMode>,
}

/// The allocation mode of each stream.
#[derive(Default)]
pub struct ModeTable {
    streams: HashMap<StreamId, StreamModes>,
}

impl ModeTable {
    /// The mode new allocations on `stream` use.
    pub fn current(&self, stream: StreamId) -> MemoryAllocationMode {
        if self.streams.is_empty() {
            return MemoryAllocationMode::Auto;
        }
        match self.streams.get(&stream) {
            Some(modes) => modes.windows.last().copied().unwrap_or(modes.base),
            None => MemoryAllocationMode::Auto,
        }
    }

    /// Sets the base mode of `stream`.
    pub fn set(&mut self, stream: StreamId, mode: MemoryAllocationMode) {
        self.streams.entry(stream).or_default().base = mode;
        self.forget_if_default(stream);
    }

    /// Opens a window in `mode` on `stream`.
    pub fn push(&mut self, stream: StreamId, mode: MemoryAllocationMode) {
        self.streams.entry(stream).or_default().windows.push(mode);
    }

    /// Closes the innermost window of `stream`. Returns `false` if none was open.
    pub fn pop(&mut self, stream: StreamId) -> bool {
        let closed = self
            .streams
            .get_mut(&stream)
            .and_then(|modes| modes.windows.pop())
            .is_some();
        self.forget_if_default(stream);
        closed
    }

    fn forget_if_default(&mut self, stream: StreamId) {
        if let Some(modes) = self.streams.get(&stream)
            && modes.base == MemoryAllocationMode::Auto
            && modes.windows.is_empty()
        {
            self.streams.remove(&stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MemoryAllocationMode::*;

    #[test]
    fn nested_windows_restore_the_outer_mode() {
        let mut table = ModeTable::default();
        let stream = StreamId::new(3);
        table.push(stream, Persistent);
        table.push(stream, Auto);
        assert_eq!(table.current(stream), Auto);
        assert!(table.pop(stream));
        assert_eq!(table.current(stream), Persistent);
        assert!(table.pop(stream));
        assert_eq!(table.current(stream), Auto);
        assert!(!table.pop(stream));
    }

    #[test]
    fn modes_are_per_stream() {
        let mut table = ModeTable::default();
        table.set(StreamId::new(1), Persistent);
        assert_eq!(table.current(StreamId::new(1)), Persistent);
        assert_eq!(table.current(StreamId::new(2)), Auto);
    }
}
