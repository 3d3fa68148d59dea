//! Memory accounting: what a device holds and what of it is in use.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How much memory a device's manager holds and uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUsage {
    /// Live allocations (handles not yet released).
    pub number_allocs: u64,
    /// Bytes requested by live allocations.
    pub bytes_in_use: u64,
    /// Bytes lost to rounding in live allocations.
    pub bytes_padding: u64,
    /// Bytes the manager holds from the device (in use, padding and cached free blocks).
    pub bytes_reserved: u64,
}

impl MemoryUsage {
    /// Sum of two usages.
    pub fn combine(&self, other: &MemoryUsage) -> MemoryUsage {
        MemoryUsage {
            number_allocs: self.number_allocs + other.number_allocs,
            bytes_in_use: self.bytes_in_use + other.bytes_in_use,
            bytes_padding: self.bytes_padding + other.bytes_padding,
            bytes_reserved: self.bytes_reserved + other.bytes_reserved,
        }
    }
}

/// Formats a byte count with a binary unit (`1.50 MiB`).
// Hand-written rather than `bytesize`, whose display has one decimal: memory reports put
// figures side by side that differ in the second (31.98 GiB reserved for 31.92 GiB live).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

impl fmt::Display for MemoryUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} allocation(s), {} in use, {} padding, {} reserved",
            self.number_allocs,
            format_bytes(self.bytes_in_use),
            format_bytes(self.bytes_padding),
            format_bytes(self.bytes_reserved)
        )
    }
}

/// The state of one memory pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReport {
    /// Pool name (`small`, `large`, `persistent`).
    pub name: String,
    /// Raw allocations (segments) the pool holds.
    pub segments: u64,
    /// Bytes of those segments.
    pub bytes_reserved: u64,
    /// Bytes requested by live allocations in the pool.
    pub bytes_in_use: u64,
    /// Bytes lost to rounding in the pool.
    pub bytes_padding: u64,
    /// Live allocations in the pool.
    pub allocations: u64,
    /// Free blocks cached in the pool.
    pub free_blocks: u64,
    /// Largest free block in bytes.
    pub largest_free_block: u64,
}

/// A per-pool report of a device's memory, with totals and peaks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Totals.
    pub usage: MemoryUsage,
    /// One entry per pool.
    pub pools: Vec<PoolReport>,
    /// Highest `bytes_reserved` seen.
    pub peak_bytes_reserved: u64,
    /// Highest `bytes_in_use` seen.
    pub peak_bytes_in_use: u64,
    /// Raw allocations made from the device since the start.
    pub storage_allocations: u64,
    /// Raw allocations returned to the device since the start.
    pub storage_deallocations: u64,
    /// Physical allocations unmapped and mapped again at another address since the start
    /// (the growable pool's chunk moves: each costs an unmap, a map and an access grant,
    /// and no allocation).
    #[serde(default)]
    pub storage_remaps: u64,
    /// Wall time spent in the device's memory calls since the start: allocations and
    /// frees, and the growable pool's creates, maps, access grants, unmaps and releases.
    #[serde(default)]
    pub storage_time: std::time::Duration,
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.usage)?;
        writeln!(
            f,
            "{:<11} {:>8} {:>12} {:>12} {:>12} {:>8} {:>11} {:>14}",
            "pool",
            "segments",
            "reserved",
            "in use",
            "padding",
            "allocs",
            "free blocks",
            "largest free"
        )?;
        for pool in &self.pools {
            writeln!(
                f,
                "{:<11} {:>8} {:>12} {:>12} {:>12} {:>8} {:>11} {:>14}",
                pool.name,
                pool.segments,
                format_bytes(pool.bytes_reserved),
                format_bytes(pool.bytes_in_use),
                format_bytes(pool.bytes_padding),
                pool.allocations,
                pool.free_blocks,
                format_bytes(pool.largest_free_block)
            )?;
        }
        write!(
            f,
            "peak reserved {}, peak in use {}, device allocations {} (freed {}, remapped {}, \
             {:.3} ms in device memory calls)",
            format_bytes(self.peak_bytes_reserved),
            format_bytes(self.peak_bytes_in_use),
            self.storage_allocations,
            self.storage_deallocations,
            self.storage_remaps,
            self.storage_time.as_secs_f64() * 1e3
        )
    }
}

/// Runs `call` (a device memory call), adding its wall time to `total`: what
/// [`MemoryReport::storage_time`] sums.
pub(crate) fn timed<T>(total: &mut std::time::Duration, call: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let value = call();
    *total += started.elapsed();
    value
}
