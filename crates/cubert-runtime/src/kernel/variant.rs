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

use crate::tune::Priority;
use serde::{Deserialize, Serialize};
use std::fmt;

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
