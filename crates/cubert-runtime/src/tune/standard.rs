//! The standard matmul and reduce-sum through the tuner.
//!
//! Each backend offers variants of these kernels (`Runtime::standard_variants`: tile and
//! block sizes, vector widths). [`matmul_variant`] and [`reduce_sum_variant`] launch one
//! variant, sizing the grid from its tile (the default variant is launched exactly as
//! `crate::ops` launches it). [`matmul_candidates`] and [`reduce_sum_candidates`] turn the
//! variants into a [`CandidateSet`] (built once per runtime, element type and device kind,
//! then shared); [`matmul`] and [`reduce_sum`] run the tuned choice through the process's
//! tuner, and the `_tuned` forms through a tuner of the caller's.
//!
//! Keys: matmul `m`, `k`, `n` rounded up to powers of two plus the alignment of `n` (vector
//! accesses along rows); reduce-sum `rows`, `cols` likewise. Benchmark inputs have the
//! caller's exact shape, filled with small multiples of 1/8 (exact in every float type for
//! small sums, so variants summing in different orders agree), and a zeroed output; the
//! caller's buffers are never touched while tuning. Empty problems skip tuning.

use super::candidate::{Candidate, CandidateSet};
use super::check::OutputCheck;
use super::key::{TuneKey, alignment, anchor};
use super::tuner::{Tuner, global_tuner};
use crate::bytes::Bytes;
use crate::client::ComputeClient;
use crate::elem::ElemType;
use crate::error::{IoError, LaunchError, ServerError};
use crate::handle::Handle;
use crate::kernel::KernelMetadata;
use crate::kernel::StandardVariant;
use crate::kernel::standard::StandardKernel;
use crate::ops;
use crate::runtime::Runtime;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The inputs of a matmul: `out (m×n) = lhs (m×k) × rhs (k×n)`, row-major.
#[derive(Clone, Debug)]
pub struct MatmulProblem {
    /// Left operand, `m × k`.
    pub lhs: Handle,
    /// Right operand, `k × n`.
    pub rhs: Handle,
    /// Output, `m × n`.
    pub out: Handle,
    /// Rows of `lhs` and `out`.
    pub m: usize,
    /// Columns of `lhs`, rows of `rhs`.
    pub k: usize,
    /// Columns of `rhs` and `out`.
    pub n: usize,
    /// Element type of all three.
    pub elem: ElemType,
}

impl MatmulProblem {
    /// The problem `out (m×n) = lhs (m×k) × rhs (k×n)` of `elem`, on (clones of) these
    /// handles.
    pub fn new(
        (lhs, rhs, out): (&Handle, &Handle, &Handle),
        (m, k, n): (usize, usize, usize),
        elem: ElemType,
    ) -> Self {
        Self {
            lhs: lhs.clone(),
            rhs: rhs.clone(),
            out: out.clone(),
            m,
            k,
            n,
            elem,
        }
    }
}

/// The inputs of a reduce-sum: `out[r] = sum of row r` of a row-major `rows × cols` input.
#[derive(Clone, Debug)]
pub struct ReduceSumProblem {
    /// The matrix.
    pub input: Handle,
    /// One sum per row.
    pub out: Handle,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Element type of both.
    pub elem: ElemType,
}

/// Launches variant `variant` of matmul on `problem`.
///
/// # Errors
/// As [`ComputeClient::launch`], or an unknown variant.
pub fn matmul_variant<R: Runtime>(
    client: &ComputeClient<R>,
    variant: &StandardVariant,
    problem: &MatmulProblem,
) -> Result<(), LaunchError> {
    let MatmulProblem {
        lhs,
        rhs,
        out,
        m,
        k,
        n,
        elem,
    } = problem;
    if variant.is_default() {
        return ops::matmul(client, lhs, rhs, out, *m, *k, *n, *elem);
    }
    ops::check_matmul(lhs, rhs, out, (*m, *k, *n), *elem)?;
    let kernel = R::standard_kernel_variant(StandardKernel::Matmul(*elem), &variant.name)?;
    ops::launch_matmul(
        client,
        kernel,
        (lhs, rhs, out),
        (*m, *k, *n),
        *elem,
        variant.tile,
    )
}

/// Launches variant `variant` of reduce-sum on `problem`.
///
/// # Errors
/// As [`ComputeClient::launch`], or an unknown variant.
pub fn reduce_sum_variant<R: Runtime>(
    client: &ComputeClient<R>,
    variant: &StandardVariant,
    problem: &ReduceSumProblem,
) -> Result<(), LaunchError> {
    let ReduceSumProblem {
        input,
        out,
        rows,
        cols,
        elem,
    } = problem;
    if variant.is_default() {
        return ops::reduce_sum(client, input, out, *rows, *cols, *elem);
    }
    ops::check_reduce_sum(input, out, *rows, *cols, *elem)?;
    let kernel = R::standard_kernel_variant(StandardKernel::ReduceSum(*elem), &variant.name)?;
    ops::launch_reduce_sum(
        client,
        kernel,
        (input, out),
        (*rows, *cols),
        *elem,
        variant.tile.0,
    )
}

/// `count` deterministic elements of `elem`: small multiples of 1/8 for floats, small
/// integers otherwise (see the module docs).
///
/// # Errors
/// [`IoError::OutOfMemory`] if `count` elements don't fit in host memory (the count comes
/// from a caller's shape: it is never allocated unchecked).
pub fn pattern(elem: ElemType, count: usize, seed: u32) -> Result<Bytes, IoError> {
    let len = count
        .checked_mul(elem.size())
        .ok_or_else(|| IoError::invalid(format!("{count} elements of {elem} overflow usize")))?;
    let mut bytes = Bytes::try_zeroed(len)?;
    let mut rng = fastrand::Rng::with_seed(u64::from(seed));
    for element in bytes.chunks_exact_mut(elem.size()) {
        let small = rng.i64(-8..=8);
        let value = small as f64 / 8.0;
        match elem {
            ElemType::F16 => element.copy_from_slice(&half::f16::from_f64(value).to_le_bytes()),
            ElemType::BF16 => element.copy_from_slice(&half::bf16::from_f64(value).to_le_bytes()),
            ElemType::F32 => element.copy_from_slice(&(value as f32).to_le_bytes()),
            ElemType::F64 => element.copy_from_slice(&value.to_le_bytes()),
            ElemType::Bool => element[0] = u8::from(small > 0),
            other => {
                let unsigned = matches!(
                    other,
                    ElemType::U8 | ElemType::U16 | ElemType::U32 | ElemType::U64
                );
                let int = if unsigned { small + 8 } else { small / 2 };
                element.copy_from_slice(&int.to_le_bytes()[..other.size()]);
            }
        }
    }
    Ok(bytes)
}

fn elements(count: Option<usize>, elem: ElemType, what: &str) -> Result<usize, ServerError> {
    count
        .and_then(|count| count.checked_mul(elem.size()))
        .ok_or_else(|| ServerError::Io(IoError::invalid(format!("the {what} is too large"))))
}

fn upload(client: &ComputeClient<impl Runtime>, data: Bytes) -> Result<Handle, ServerError> {
    Ok(client.create(data)?)
}

pub(super) fn matmul_inputs<R: Runtime>(
    client: &ComputeClient<R>,
    _key: &TuneKey,
    problem: &MatmulProblem,
) -> Result<MatmulProblem, ServerError> {
    let &MatmulProblem { m, k, n, elem, .. } = problem;
    let out_bytes = elements(m.checked_mul(n), elem, "output")?;
    elements(m.checked_mul(k), elem, "left operand")?;
    elements(k.checked_mul(n), elem, "right operand")?;
    Ok(MatmulProblem {
        lhs: upload(client, pattern(elem, m * k, 1)?)?,
        rhs: upload(client, pattern(elem, k * n, 2)?)?,
        out: upload(client, Bytes::try_zeroed(out_bytes)?)?,
        ..problem.clone()
    })
}

fn reduce_inputs<R: Runtime>(
    client: &ComputeClient<R>,
    _key: &TuneKey,
    problem: &ReduceSumProblem,
) -> Result<ReduceSumProblem, ServerError> {
    let &ReduceSumProblem {
        rows, cols, elem, ..
    } = problem;
    elements(rows.checked_mul(cols), elem, "input")?;
    Ok(ReduceSumProblem {
        input: upload(client, pattern(elem, rows * cols, 3)?)?,
        out: upload(
            client,
            Bytes::try_zeroed(elements(Some(rows), elem, "output")?)?,
        )?,
        ..problem.clone()
    })
}

/// The key of a matmul problem (see the module docs).
pub fn matmul_key(problem: &MatmulProblem) -> TuneKey {
    TuneKey::default()
        .with("m", anchor(problem.m))
        .with("k", anchor(problem.k))
        .with("n", anchor(problem.n))
        .with("n_align", alignment(problem.n, 16))
}

/// The key of a reduce-sum problem (see the module docs).
pub fn reduce_sum_key(problem: &ReduceSumProblem) -> TuneKey {
    TuneKey::default()
        .with("rows", anchor(problem.rows))
        .with("cols", anchor(problem.cols))
        .with("cols_align", alignment(problem.cols, 16))
}

type SetCache = Mutex<HashMap<(TypeId, String, u64), Arc<dyn Any + Send + Sync>>>;

/// The candidate set of `operation` (`matmul_f32`) on `client`'s kind of device, built once
/// and shared.
pub(super) fn cached_set<R: Runtime, P: 'static>(
    client: &ComputeClient<R>,
    operation: String,
    build: impl FnOnce() -> Result<CandidateSet<R, P, ()>, LaunchError>,
) -> Result<Arc<CandidateSet<R, P, ()>>, LaunchError> {
    static SETS: OnceLock<SetCache> = OnceLock::new();
    let cache = SETS.get_or_init(Default::default);
    let id = (
        TypeId::of::<R>(),
        operation,
        client.utilities().properties_hash,
    );
    let found = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
        .cloned();
    if let Some(set) = found.and_then(|set| set.downcast::<CandidateSet<R, P, ()>>().ok()) {
        return Ok(set);
    }
    let set = Arc::new(build()?);
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, set.clone());
    Ok(set)
}

fn candidates<R: Runtime, P: 'static>(
    client: &ComputeClient<R>,
    kernel: StandardKernel,
    mut set: CandidateSet<R, P, ()>,
    run: fn(&ComputeClient<R>, &StandardVariant, &P) -> Result<(), LaunchError>,
) -> Result<CandidateSet<R, P, ()>, LaunchError> {
    // The default must build: a kernel the backend doesn't have (booleans) has no set.
    R::standard_kernel(kernel)?;
    for variant in R::standard_variants(kernel, client.properties()) {
        let identity = match R::standard_kernel_variant(kernel, &variant.name) {
            Ok(built) => built.id().to_string(),
            Err(error) => format!("{}: unavailable: {error}", variant.name),
        };
        let priority = variant.priority;
        let candidate = Candidate::new(variant.name.clone(), move |client, problem: &P| {
            run(client, &variant, problem).map_err(ServerError::from)
        });
        set.push(candidate.with_priority(priority).with_identity(identity));
    }
    Ok(set)
}

/// The matmul variants of `client`'s backend for `elem`, as a candidate set.
///
/// # Errors
/// [`LaunchError`] if the backend has no matmul for `elem` (booleans).
pub fn matmul_candidates<R: Runtime>(
    client: &ComputeClient<R>,
    elem: ElemType,
) -> Result<Arc<CandidateSet<R, MatmulProblem, ()>>, LaunchError> {
    let kernel = StandardKernel::Matmul(elem);
    cached_set(client, format!("{kernel}"), || {
        let set = CandidateSet::new(format!("{kernel}"), matmul_key, matmul_inputs::<R>)
            .with_check(OutputCheck::elements(elem, |client, p: &MatmulProblem| {
                client.read_one(p.out.clone())
            }));
        candidates(client, kernel, set, matmul_variant::<R>)
    })
}

/// The reduce-sum variants of `client`'s backend for `elem`, as a candidate set.
///
/// # Errors
/// [`LaunchError`] if the backend has no reduce-sum for `elem` (booleans).
pub fn reduce_sum_candidates<R: Runtime>(
    client: &ComputeClient<R>,
    elem: ElemType,
) -> Result<Arc<CandidateSet<R, ReduceSumProblem, ()>>, LaunchError> {
    let kernel = StandardKernel::ReduceSum(elem);
    cached_set(client, format!("{kernel}"), || {
        let set = CandidateSet::new(format!("{kernel}"), reduce_sum_key, reduce_inputs::<R>)
            .with_check(OutputCheck::elements(
                elem,
                |client, p: &ReduceSumProblem| client.read_one(p.out.clone()),
            ));
        candidates(client, kernel, set, reduce_sum_variant::<R>)
    })
}

/// Runs the fastest matmul variant for `problem`, tuning it with `tuner` first if needed.
///
/// # Errors
/// As [`Tuner::execute`]; [`ServerError::Launch`] for an element type without matmul.
pub fn matmul_tuned<R: Runtime>(
    tuner: &Tuner,
    client: &ComputeClient<R>,
    problem: &MatmulProblem,
) -> Result<(), ServerError> {
    if problem.m == 0 || problem.k == 0 || problem.n == 0 {
        let default = StandardVariant::default_with_tile((1, 1));
        return Ok(matmul_variant(client, &default, problem)?);
    }
    let set = matmul_candidates(client, problem.elem)?;
    tuner.execute(client, &set, problem)
}

/// Runs the fastest reduce-sum variant for `problem`, tuning it with `tuner` first if
/// needed.
///
/// # Errors
/// As [`Tuner::execute`]; [`ServerError::Launch`] for an element type without reduce-sum.
pub fn reduce_sum_tuned<R: Runtime>(
    tuner: &Tuner,
    client: &ComputeClient<R>,
    problem: &ReduceSumProblem,
) -> Result<(), ServerError> {
    if problem.rows == 0 || problem.cols == 0 {
        let default = StandardVariant::default_with_tile((1, 1));
        return Ok(reduce_sum_variant(client, &default, problem)?);
    }
    let set = reduce_sum_candidates(client, problem.elem)?;
    tuner.execute(client, &set, problem)
}

/// `out = lhs × rhs` (as `ops::matmul`) with the variant the process's tuner picks.
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

/// Row sums (as `ops::reduce_sum`) with the variant the process's tuner picks.
///
/// # Errors
/// As [`reduce_sum_tuned`].
pub fn reduce_sum<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    out: &Handle,
    rows: usize,
    cols: usize,
    elem: ElemType,
) -> Result<(), ServerError> {
    let problem = ReduceSumProblem {
        input: input.clone(),
        out: out.clone(),
        rows,
        cols,
        elem,
    };
    reduce_sum_tuned(global_tuner(), client, &problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_deterministic_small_values_of_the_right_size() {
        for elem in ElemType::ALL {
            let bytes = pattern(elem, 100, 7).unwrap();
            assert_eq!(bytes.len(), 100 * elem.size(), "{elem}");
            assert_eq!(bytes, pattern(elem, 100, 7).unwrap());
        }
        let floats: Vec<f32> = pattern(ElemType::F32, 1000, 1)
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert!(
            floats
                .iter()
                .all(|v| v.abs() <= 1.0 && (v * 8.0).fract() == 0.0)
        );
        assert!(floats.iter().any(|v| *v != floats[0]));
    }

    #[test]
    fn a_pattern_larger_than_host_memory_is_an_error_not_an_abort() {
        let error = pattern(ElemType::F32, 99_999_999 * 99_999_999, 1).unwrap_err();
        assert!(matches!(error, IoError::OutOfMemory { .. }), "{error}");
        let overflow = pattern(ElemType::F64, usize::MAX / 4, 1).unwrap_err();
        assert!(overflow.to_string().contains("overflow"), "{overflow}");
    }
}
