//! Runs one launch: every cube of the grid, spread over the device's worker threads.
//!
//! Cubes are independent, so they run in any order and in parallel; a grid of one cube (or a
//! one-thread device) runs on the calling thread without touching the pool. Each worker
//! keeps a scratch buffer for shared memory, zeroed for every cube. A kernel error, a panic
//! inside the kernel, or an out-of-bounds access in a checked launch becomes the launch's
//! `ServerError`; the device is unaffected.
//!
//! Worker threads run cubes inside the launching task's [`TaskScope`]: a kernel that calls
//! its own client from a worker gets `CallError::Reentrant`, as it does on the runner
//! thread, instead of waiting for the task it is part of (a deadlock).
//!
//! A checked launch stops early once it has counted [`MAX_COUNTED_VIOLATIONS`]
//! out-of-bounds accesses ([`AccessChecker::gave_up`]): the cubes not yet started are
//! skipped, kernels with long loops (matmul) end theirs, and the error says so.
//! Without the cut a grid of 2^40 cubes on a 16-byte buffer would run for hours only to
//! report that every access missed.

use crate::kernel::{
    AccessChecker, CpuKernel, CubeContext, KernelError, MAX_COUNTED_VIOLATIONS, RawArray,
};
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::thread_role::TaskScope;
use cubert_runtime::{ExecutionMode, KernelMetadata, ServerError};
use rayon::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `kernel` over a grid of `count` cubes.
///
/// # Errors
/// [`ServerError::KernelFailed`] if the kernel returned an error or panicked,
/// [`ServerError::OutOfBounds`] if a checked launch accessed memory out of bounds (those
/// accesses did nothing).
pub fn execute(
    pool: &rayon::ThreadPool,
    kernel: &CpuKernel,
    count: (u32, u32, u32),
    buffers: &[RawArray],
    info: &[u64],
    mode: ExecutionMode,
) -> Result<(), ServerError> {
    let (x, y, z) = count;
    let total = u64::from(x) * u64::from(y) * u64::from(z);
    if total == 0 {
        return Ok(());
    }
    let checker = AccessChecker::new(kernel.name(), mode);
    let shared_bytes = kernel.shared_memory_bytes();
    let shared_words = shared_bytes.div_ceil(16);
    let cube_dim = kernel.cube_dim();
    // Kernels that take runs of cubes get, on a one-dimensional grid, runs of `run` cubes:
    // about eight per worker thread, so that threads that finish early take more.
    let run = if kernel.takes_cube_runs() && y == 1 && z == 1 && shared_bytes == 0 {
        let threads = pool.current_num_threads().max(1) as u64;
        (total / (threads * 8)).clamp(1, u64::from(u32::MAX))
    } else {
        1
    };
    let runs = total.div_ceil(run);
    let run_cube = |run_index: u64, scratch: &mut Vec<u128>| -> Result<(), KernelError> {
        let index = run_index * run;
        let cubes = run.min(total - index) as u32;
        if checker.gave_up() {
            return Err(KernelError::new(
                "cut short after too many out-of-bounds accesses",
            ));
        }
        // A one-dimensional grid (the common case) needs none of the three 64-bit divisions,
        // which cost about as much as the rest of a small cube's setup.
        let (cube_x, cube_y, cube_z) = if y == 1 && z == 1 {
            (index as u32, 0, 0)
        } else {
            (
                (index % u64::from(x)) as u32,
                ((index / u64::from(x)) % u64::from(y)) as u32,
                (index / (u64::from(x) * u64::from(y))) as u32,
            )
        };
        scratch.clear();
        scratch.resize(shared_words, 0);
        let mut ctx = CubeContext {
            cube_pos: (cube_x, cube_y, cube_z),
            cubes,
            cube_count: count,
            cube_dim,
            buffers,
            info,
            shared: scratch.as_mut_slice(),
            shared_bytes,
            checker: &checker,
        };
        kernel.run(&mut ctx)
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if runs == 1 || pool.current_num_threads() <= 1 {
            let mut scratch = Vec::new();
            (0..runs).try_for_each(|index| run_cube(index, &mut scratch))
        } else {
            let scope = TaskScope::current();
            pool.install(|| {
                (0..runs).into_par_iter().try_for_each_init(
                    || (scope.enter(), Vec::new()),
                    |(_, scratch), index| run_cube(index, scratch),
                )
            })
        }
    }));
    let failed = |reason: String| ServerError::KernelFailed {
        kernel: kernel.name().to_string(),
        reason,
        backtrace: BackTrace::capture(),
    };
    match outcome {
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with a non-text payload".into());
            Err(failed(format!("the kernel panicked: {message}")))
        }
        // The violation count only grows: a launch that gave up at any point gives up here.
        Ok(Err(_)) | Ok(Ok(())) if checker.gave_up() => Err(ServerError::OutOfBounds {
            kernel: kernel.name().to_string(),
            accesses: checker.violations(),
            first: format!(
                "{} (the launch was stopped after {MAX_COUNTED_VIOLATIONS} out-of-bounds \
                 accesses: the cubes not yet started did not run)",
                checker.first_violation().unwrap_or("(not recorded)")
            ),
            backtrace: BackTrace::capture(),
        }),
        Ok(Err(error)) => Err(failed(error.message().to_string())),
        Ok(Ok(())) if checker.violations() > 0 => Err(ServerError::OutOfBounds {
            kernel: kernel.name().to_string(),
            accesses: checker.violations(),
            first: checker
                .first_violation()
                .unwrap_or("(not recorded)")
                .to_string(),
            backtrace: BackTrace::capture(),
        }),
        Ok(Ok(())) if checker.races() > 0 => Err(ServerError::DataRace {
            kernel: kernel.name().to_string(),
            races: checker.races(),
            first: checker.first_race().unwrap_or("(not recorded)").to_string(),
            backtrace: BackTrace::capture(),
        }),
        Ok(Ok(())) => Ok(()),
    }
}
