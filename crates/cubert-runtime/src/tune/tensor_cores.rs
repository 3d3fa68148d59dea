//! The tensor-core matmuls (`kernel::standard::matmul_mma`, and
//! `kernel::standard::matmul_group_mma` on Hopper) through the tuner.
//!
//! The candidates are the tilings of [`tensor_core_tilings`] that run the type on the
//! device and fit its shared memory, the first being the default; each runs its kernel
//! (arguments checked, then an unchecked launch). The set's operation is `matmul_tensor_cores_<elem>`
//! and its key the standard matmul's ([`matmul_key`]: `m`, `k`, `n` rounded up to powers of
//! two and the alignment of `n`), so a choice is cached per shape class, in memory and on
//! disk, as every tuned kernel's. Benchmarks run on inputs of the caller's shape filled with
//! the standard pattern (multiples of 1/8 in [-1, 1], whose sums are exact in `f32`), so
//! the check compares their outputs bit for bit.

use super::candidate::{Candidate, CandidateSet};
use super::check::OutputCheck;
use super::standard::{MatmulProblem, cached_set, matmul_inputs, matmul_key};
use super::tuner::{Tuner, global_tuner};
use crate::client::ComputeClient;
use crate::elem::ElemType;
use crate::error::{LaunchError, ServerError};
use crate::handle::Handle;
use crate::kernel::Priority;
use crate::kernel::standard::tensor_cores::tensor_core_tilings;
use crate::runtime::Runtime;
use std::sync::Arc;

/// The tensor-core matmul's tilings that fit `client`'s device, as a candidate set for
/// `elem` (`bf16`, `f16`, or `f32` multiplied as TF32).
///
/// # Errors
/// [`LaunchError::Unsupported`] where the device has no tensor cores
/// (`Features::plane_mma`), for another element type, or when no tiling fits the device's
/// shared memory.
pub fn matmul_candidates<R: Runtime>(
    client: &ComputeClient<R>,
    elem: ElemType,
) -> Result<Arc<CandidateSet<R, MatmulProblem, ()>>, LaunchError> {
    if !client.features().plane_mma {
        return Err(LaunchError::unsupported(format!(
            "the tensor-core matmul: the {} device has no tensor cores (Features::plane_mma)",
            R::name()
        )));
    }
    if !matches!(elem, ElemType::BF16 | ElemType::F16 | ElemType::F32) {
        return Err(LaunchError::unsupported(format!(
            "the tensor-core matmul multiplies bf16, f16 or f32 (as TF32), not {elem}"
        )));
    }
    let operation = format!("matmul_tensor_cores_{elem}");
    cached_set(client, operation.clone(), || {
        let mut set = CandidateSet::new(operation, matmul_key, matmul_inputs::<R>).with_check(
            OutputCheck::elements(elem, |client, problem: &MatmulProblem| {
                client.read_one(problem.out.clone())
            }),
        );
        let shared_max = client.properties().hardware.max_shared_memory_size;
        let fitting = tensor_core_tilings(client.features(), elem, shared_max);
        for (index, tiling) in fitting.into_iter().enumerate() {
            // The default and the next two are tried at every level, the rest from
            // `balanced` on.
            let priority = if index < 3 {
                Priority::High
            } else {
                Priority::Normal
            };
            let candidate = Candidate::new(tiling.name(), move |client, p: &MatmulProblem| {
                tiling
                    .launch(client, (&p.lhs, &p.rhs, &p.out), (p.m, p.k, p.n), p.elem)
                    .map_err(ServerError::from)
            });
            set.push(
                candidate
                    .with_priority(priority)
                    .with_identity(tiling.name()),
            );
        }
        if set.is_empty() {
            return Err(LaunchError::unsupported(format!(
                "the tensor-core matmul: no tiling fits the device's {shared_max} bytes of \
                 shared memory"
            )));
        }
        Ok(set)
    })
}

/// Runs the fastest tiling for `problem`, tuning it with `tuner` first if needed.
///
/// # Errors
/// As [`matmul_candidates`] and [`Tuner::execute`] (a candidate's errors: the arguments'
/// checks of `matmul_tensor_cores`).
pub fn matmul_tuned<R: Runtime>(
    tuner: &Tuner,
    client: &ComputeClient<R>,
    problem: &MatmulProblem,
) -> Result<(), ServerError> {
    let set = matmul_candidates(client, problem.elem)?;
    if problem.m == 0 || problem.k == 0 || problem.n == 0 {
        // Nothing to tune: the first tiling that fits the device (the set has one) checks
        // the arguments and fills `out` with zeros.
        let shared_max = client.properties().hardware.max_shared_memory_size;
        let tilings = tensor_core_tilings(client.features(), problem.elem, shared_max);
        let Some(default) = tilings.first() else {
            return Err(LaunchError::unsupported(format!(
                "the tensor-core matmul: no tiling of {} fits the device's {shared_max} bytes \
                 of shared memory",
                problem.elem
            ))
            .into());
        };
        return Ok(default.launch(
            client,
            (&problem.lhs, &problem.rhs, &problem.out),
            (problem.m, problem.k, problem.n),
            problem.elem,
        )?);
    }
    tuner.execute(client, &set, problem)
}

/// `out = lhs × rhs` on tensor cores (`bf16`/`f16` in and out, or `f32` as TF32; `f32`
/// sums) with the tiling
/// the process's tuner picks for the shape.
///
/// # Errors
/// As [`matmul_tuned`].
#[allow(clippy::too_many_arguments)]
pub fn matmul<R: Runtime>(
    client: &ComputeClient<R>,
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    m: usize,
    k: usize,
    n: usize,
    elem: ElemType,
) -> Result<(), ServerError> {
    let problem = MatmulProblem::new((lhs, rhs, out), (m, k, n), elem);
    matmul_tuned(global_tuner(), client, &problem)
}
