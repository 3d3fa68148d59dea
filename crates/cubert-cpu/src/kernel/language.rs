//! Kernels of the language on the CPU: a definition's native function as a [`CpuKernel`].
//!
//! The macro already wrote the kernel as Rust and rustc compiled it with the user's crate;
//! here each cube of a launch calls it with the launch's buffers, scalars and access
//! checker. Out-of-bounds accesses go to the launch's [`AccessChecker`], so the execution
//! modes behave as for every CPU kernel. Kernels whose cubes don't cooperate take runs of
//! cubes per call ([`CpuKernel::with_cube_runs`]), so a launch of many small cubes pays
//! one call per run, and an exclusive body (`lang::native::exclusive`) loops over the
//! whole run's elements.

use super::access::AccessChecker;
use super::{CpuKernel, KernelError};
use cubert_lang::KernelDefinition;
use cubert_lang::native::{AccessMonitor, Args, Unit};
use cubert_runtime::{CubeDim, ExecutionMode};
use std::panic::Location;

impl AccessMonitor for AccessChecker {
    fn out_of_bounds(&self, buffer: usize, index: u64, len: u64, store: bool, at: &Location<'_>) {
        if !self.checks() {
            return;
        }
        let what = if store { "store" } else { "load" };
        self.violation(|| {
            format!(
                "{what} of element {index} of buffer {buffer}, which has {len} elements, at {at}"
            )
        });
    }

    fn checks_races(&self) -> bool {
        self.mode() == ExecutionMode::Validate
    }

    fn data_race(&self, description: &str) {
        self.race(description);
    }

    fn gave_up(&self) -> bool {
        AccessChecker::gave_up(self)
    }

    fn kernel_error(&self, message: &str) {
        // Counted like a violation: the launch fails at the next sync with the message.
        self.violation(|| message.to_string());
    }
}

/// The CPU kernel running `definition`'s native function with cubes of `cube_dim` units.
///
/// The kernel declares the shared memory its IR lays out, so a launch asking for more than
/// the device's `max_shared_memory_size` is refused as on a GPU (the native shared arrays
/// themselves live in the worker thread's cube state, `lang::native::SharedMemory`).
pub fn language_kernel(definition: &KernelDefinition, cube_dim: CubeDim) -> CpuKernel {
    let native = definition.native().clone();
    let cooperative = definition.ir().is_ok_and(|kernel| kernel.is_cooperative());
    let shared = definition
        .ir()
        .map(|kernel| kernel.shared_memory_bytes())
        .unwrap_or(0);
    let kernel = CpuKernel::new(definition.id(), cube_dim, move |ctx| {
        // SAFETY: the executor hands each cube the launch's buffers, which the launch's
        // bindings keep alive until every cube ran; kernels write them only through atomic
        // accesses (`Array`) or, for hand-written kernels, disjoint ranges per cube.
        let args = unsafe { Args::new(ctx.buffers, ctx.info, ctx.checker) };
        let cube = Unit {
            unit_pos: (0, 0, 0),
            cube_pos: ctx.cube_pos,
            cube_dim: (cube_dim.x, cube_dim.y, cube_dim.z),
            cube_count: ctx.cube_count,
        };
        native(&cube, ctx.cubes, &args);
        Ok::<(), KernelError>(())
    });
    if shared > 0 {
        kernel.with_shared_memory(shared)
    } else if cooperative {
        kernel
    } else {
        // Cubes that don't cooperate share nothing: a call may run many.
        kernel.with_cube_runs()
    }
}
