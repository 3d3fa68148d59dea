//! Variants of the standard kernels: one calling convention, several implementations.
//!
//! A backend may implement a standard kernel several ways (tile sizes, block sizes, vector
//! widths). Every variant takes exactly the buffers and info the kernel's calling
//! convention describes (see `standard`); only the work one cube does differs, and
//! [`StandardVariant::tile`] tells the launch helpers (`crate::tune::standard`) how much of
//! the output one cube covers, so they can size the grid. The autotuner picks among the
//! variants per input shape.
//!
//! The variant named [`StandardVariant::DEFAULT`] is the kernel `Runtime::standard_kernel`
//! builds, launched exactly as `crate::ops` launches it.
//!
//! Each variant has a [`Priority`], as every candidate of the autotuner does: the autotune
//! level decides which priorities are tried (`minimal`: high only; `balanced`: high and
//! normal; `full`: all), and higher priorities run first. It lives here, below `tune`,
//! because a variant names it and `tune` uses this module (`tune` re-exports it under its
//! old path, `tune::Priority`).

use crate::config::AutotuneLevel;
use serde::{Deserialize, Serialize};
use std::fmt;

/// When a kernel variant or autotune candidate is tried. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Tried first, at every level but `off`.
    High,
    /// Tried at `balanced` and `full`.
    Normal,
    /// Tried at `full` only.
    Low,
}

impl Priority {
    /// Whether candidates of this priority are tried at `level`.
    pub fn tried_at(self, level: AutotuneLevel) -> bool {
        match level {
            AutotuneLevel::Off => false,
            AutotuneLevel::Minimal => self == Priority::High,
            AutotuneLevel::Balanced => self != Priority::Low,
            AutotuneLevel::Full => true,
        }
    }

    /// The lowercase name (`high`, `normal`, `low`), as serialized and as hashed into a
    /// candidate set's checksum.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One implementation of a standard kernel, as a backend offers it.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct StandardVariant {
    /// Short name, unique among one kernel's variants on a backend (`default`,
    /// `t32x64r4`, `b128x128k8t8x8v4`...). The name encodes the parameters.
    pub name: String,
    /// Output one cube covers per step: for matmul `(columns, rows)` of the output tile;
    /// for reduce-sum `(rows, 1)`. Cubes stride over the rest, so any grid is correct;
    /// the tile only sizes the grid. Informative for the default variant, which is
    /// launched as `crate::ops` launches it.
    pub tile: (u32, u32),
    /// When the autotuner tries it (and at which levels).
    pub priority: Priority,
}

impl StandardVariant {
    /// The name of the default variant.
    pub const DEFAULT: &'static str = "default";

    /// A variant named `name` covering `tile` per cube.
    pub fn new(name: impl Into<String>, tile: (u32, u32), priority: Priority) -> Self {
        Self {
            name: name.into(),
            tile,
            priority,
        }
    }

    /// The default variant (the kernel `Runtime::standard_kernel` builds), covering `tile`.
    pub fn default_with_tile(tile: (u32, u32)) -> Self {
        Self::new(Self::DEFAULT, tile, Priority::High)
    }

    /// Whether this is the default variant.
    pub fn is_default(&self) -> bool {
        self.name == Self::DEFAULT
    }
}

impl fmt::Display for StandardVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_tried_at_their_levels() {
        use AutotuneLevel::*;
        assert!(!Priority::High.tried_at(Off));
        assert!(Priority::High.tried_at(Minimal));
        assert!(!Priority::Normal.tried_at(Minimal));
        assert!(Priority::Normal.tried_at(Balanced));
        assert!(!Priority::Low.tried_at(Balanced));
        assert!(Priority::Low.tried_at(Full));
    }
}
