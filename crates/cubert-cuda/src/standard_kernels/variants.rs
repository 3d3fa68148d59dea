//! The CUDA backend's variants of the standard matmul and reduce-sum, for the autotuner.
//!
//! Matmul variants (`b<BM>x<BN>k<BK>t<TM>x<TN>[v<VEC>]`) tile the output in `BM × BN`
//! blocks; each of the `(BN/TN) × (BM/TM)` threads accumulates `TM × TN` outputs in
//! registers, strided across the block so shared-memory reads and global stores are
//! contiguous per warp. Operand tiles of depth `BK` go through shared memory (the `lhs`
//! tile transposed and padded against bank conflicts); with `v<VEC>` the `rhs` tile is read
//! `VEC` elements per load when the buffers, `n` and the address allow it. Each output sums
//! over `p` in order, like the default kernel.
//!
//! Reduce-sum variants are the kernel language's shared kernel
//! (`cubert_runtime::kernel::standard::reduce`): `b<THREADS>v<1|4>` (a cube of THREADS units
//! per row, reading lines of 4 with `v4`) and `w<WARPS>v<1|4>` (a plane per row, WARPS
//! planes per cube: for many short rows). The default is `b256v4`.
//!
//! Every matmul variant reads through the checked accessors when a buffer doesn't cover
//! its matrix, so checked launches report out-of-bounds accesses as the default kernels do.
//! The default variant is the standard kernel itself.

use super::{LIBRARY, TILE};
use crate::CudaRuntime;
use crate::kernel::CudaKernel;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::kernel::standard::{RowSplit, reduce_sum_kernel};
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::Priority;
use cubert_runtime::{CubeDim, LaunchError};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// CUDA C++ of the variants (compiled after the prelude and `LIBRARY`).
pub const VARIANT_LIBRARY: &str = r#"
namespace cubert_std {

// VEC elements loaded at once.
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) VecN { T v[VEC]; };

// ---- matmul: BM x BN block tiles, TM x TN outputs per thread --------------------------
template <typename T, int BM, int BN, int BK, int TM, int TN, int VEC>
__device__ void matmul_blocked(const cubert::Args& a) {
    typedef typename Num<T>::Acc Acc;
    const int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
    __shared__ Acc As[BK][BM + 1];
    __shared__ Acc Bs[BK][BN];
    u64 m = cubert::info(a, 0), k = cubert::info(a, 1), n = cubert::info(a, 2);
    u64 tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
    const T* lhs = cubert::ptr<T>(a, 0);
    const T* rhs = cubert::ptr<T>(a, 1);
    bool fast = cubert::covers<T>(a, 0, m * k) && cubert::covers<T>(a, 1, k * n);
    bool vec_b = fast && VEC > 1 && (n % VEC) == 0 && (((u64)rhs) % (sizeof(T) * VEC)) == 0;
    for (u64 tile_y = blockIdx.y; tile_y < tiles_m; tile_y += gridDim.y) {
        for (u64 tile_x = blockIdx.x; tile_x < tiles_n; tile_x += gridDim.x) {
            u64 row0 = tile_y * BM, col0 = tile_x * BN;
            Acc acc[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = Num<T>::zero();
            for (u64 p0 = 0; p0 < k; p0 += BK) {
                for (int i = tid; i < BM * BK; i += THREADS) {
                    int r = i / BK, q = i % BK;
                    u64 row = row0 + r, p = p0 + q;
                    Acc v = Num<T>::zero();
                    if (row < m && p < k)
                        v = Num<T>::to_acc(fast ? lhs[row * k + p] : cubert::load<T>(a, 0, row * k + p));
                    As[q][r] = v;
                }
                if (vec_b) {
                    for (int i = tid; i < BK * (BN / VEC); i += THREADS) {
                        int q = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
                        u64 p = p0 + q, col = col0 + c;
                        if (p < k && col < n) {
                            VecN<T, VEC> v = *reinterpret_cast<const VecN<T, VEC>*>(rhs + p * n + col);
#pragma unroll
                            for (int j = 0; j < VEC; ++j) Bs[q][c + j] = Num<T>::to_acc(v.v[j]);
                        } else {
#pragma unroll
                            for (int j = 0; j < VEC; ++j) Bs[q][c + j] = Num<T>::zero();
                        }
                    }
                } else {
                    for (int i = tid; i < BK * BN; i += THREADS) {
                        int q = i / BN, c = i % BN;
                        u64 p = p0 + q, col = col0 + c;
                        Acc v = Num<T>::zero();
                        if (p < k && col < n)
                            v = Num<T>::to_acc(fast ? rhs[p * n + col] : cubert::load<T>(a, 1, p * n + col));
                        Bs[q][c] = v;
                    }
                }
                __syncthreads();
#pragma unroll
                for (int q = 0; q < BK; ++q) {
                    Acc ra[TM], rb[TN];
#pragma unroll
                    for (int i = 0; i < TM; ++i) ra[i] = As[q][ty + i * TY];
#pragma unroll
                    for (int j = 0; j < TN; ++j) rb[j] = Bs[q][tx + j * TX];
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int j = 0; j < TN; ++j)
                            acc[i][j] = Num<T>::acc_add(acc[i][j], Num<T>::acc_mul(ra[i], rb[j]));
                }
                __syncthreads();
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                u64 row = row0 + ty + i * TY;
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    u64 col = col0 + tx + j * TX;
                    if (row < m && col < n) cubert::store<T>(a, 2, row * n + col, Num<T>::from_acc(acc[i][j]));
                }
            }
        }
    }
}

} // namespace cubert_std
"#;

/// A matmul variant: block tile, depth, outputs per thread, vector width.
struct MatmulVariant {
    name: &'static str,
    block: (u32, u32),
    depth: u32,
    per_thread: (u32, u32),
    vec: u32,
    priority: Priority,
}

const fn mm(
    name: &'static str,
    (bm, bn, bk): (u32, u32, u32),
    per_thread: (u32, u32),
    vec: u32,
    priority: Priority,
) -> MatmulVariant {
    MatmulVariant {
        name,
        block: (bm, bn),
        depth: bk,
        per_thread,
        vec,
        priority,
    }
}

const MATMUL: [MatmulVariant; 8] = [
    mm("b64x64k8t4x4", (64, 64, 8), (4, 4), 1, Priority::High),
    mm("b128x128k8t8x8v4", (128, 128, 8), (8, 8), 4, Priority::High),
    mm("b64x64k16t4x4v4", (64, 64, 16), (4, 4), 4, Priority::Normal),
    mm("b128x64k8t8x4v4", (128, 64, 8), (8, 4), 4, Priority::Normal),
    mm("b32x32k16t2x2", (32, 32, 16), (2, 2), 1, Priority::Normal),
    mm(
        "b128x128k16t8x8v4",
        (128, 128, 16),
        (8, 8),
        4,
        Priority::Low,
    ),
    mm("b64x128k8t4x8v4", (64, 128, 8), (4, 8), 4, Priority::Low),
    mm("b32x64k8t2x4", (32, 64, 8), (2, 4), 1, Priority::Low),
];

/// The split of the default reduce-sum: a cube of 256 units per row, reading lines of 4.
pub const DEFAULT_REDUCE: RowSplit = RowSplit::Cube {
    units: 256,
    lines: true,
};

const fn per_cube(units: u32, lines: bool) -> RowSplit {
    RowSplit::Cube { units, lines }
}

const fn per_plane(planes: u32, lines: bool) -> RowSplit {
    RowSplit::Plane { planes, lines }
}

/// (name, split, priority) of the reduce-sum variants.
const REDUCE: [(&str, RowSplit, Priority); 7] = [
    ("w8v4", per_plane(8, true), Priority::High),
    ("b512v4", per_cube(512, true), Priority::High),
    ("b128v1", per_cube(128, false), Priority::Normal),
    ("w4v1", per_plane(4, false), Priority::Normal),
    ("b1024v4", per_cube(1024, true), Priority::Low),
    ("w4v4", per_plane(4, true), Priority::Low),
    ("b256v1", per_cube(256, false), Priority::Low),
];

/// The variants of `kernel`, the default first (matmul and reduce-sum have several; other
/// kernels only the default).
pub fn standard_variants(
    kernel: StandardKernel,
    _properties: &DeviceProperties,
) -> Vec<StandardVariant> {
    match kernel {
        StandardKernel::Matmul(_) => {
            std::iter::once(StandardVariant::default_with_tile((TILE, TILE)))
                .chain(
                    MATMUL
                        .iter()
                        .map(|v| StandardVariant::new(v.name, (v.block.1, v.block.0), v.priority)),
                )
                .collect()
        }
        StandardKernel::ReduceSum(_) => std::iter::once(StandardVariant::default_with_tile((1, 1)))
            .chain(REDUCE.iter().map(|(name, split, priority)| {
                StandardVariant::new(*name, (split.rows_per_cube(), 1), *priority)
            }))
            .collect(),
        _ => vec![StandardVariant::default_with_tile((1, 1))],
    }
}

fn unknown(kernel: StandardKernel, variant: &str) -> LaunchError {
    LaunchError::unknown(format!(
        "the cuda backend has no variant `{variant}` of `{kernel}`"
    ))
}

fn numeric(kernel: StandardKernel, elem: ElemType) -> Result<&'static str, LaunchError> {
    if elem == ElemType::Bool {
        return Err(LaunchError::unknown(format!(
            "the CUDA backend has no `{kernel}` kernel: arithmetic on booleans is not defined"
        )));
    }
    Ok(crate::lang::cuda_type::name(elem))
}

/// The call and cube dim of variant `variant` of `kernel`.
fn call(kernel: StandardKernel, variant: &str) -> Result<(String, CubeDim), LaunchError> {
    match kernel {
        StandardKernel::Matmul(elem) => {
            let ty = numeric(kernel, elem)?;
            let v = MATMUL
                .iter()
                .find(|v| v.name == variant)
                .ok_or_else(|| unknown(kernel, variant))?;
            let ((bm, bn), (tm, tn)) = (v.block, v.per_thread);
            Ok((
                format!(
                    "cubert_std::matmul_blocked<{ty}, {bm}, {bn}, {}, {tm}, {tn}, {}>(a);",
                    v.depth, v.vec
                ),
                CubeDim::new_2d(bn / tn, bm / tm),
            ))
        }
        _ => Err(unknown(kernel, variant)),
    }
}

/// The names of every non-default variant of `kernel` the backend writes itself (matmul;
/// the reduce-sum variants come from the kernel language: [`reduce_sum_splits`]).
pub fn variant_names(kernel: StandardKernel) -> Vec<&'static str> {
    match kernel {
        StandardKernel::Matmul(_) => MATMUL.iter().map(|v| v.name).collect(),
        _ => Vec::new(),
    }
}

/// The entry point, CUDA C++ source (without the prelude) and cube dim of a non-default
/// variant.
///
/// # Errors
/// [`LaunchError`] for an unknown variant or booleans.
pub fn variant_source(
    kernel: StandardKernel,
    variant: &str,
) -> Result<(String, String, CubeDim), LaunchError> {
    let (call, cube_dim) = call(kernel, variant)?;
    let entry = format!("{}__{variant}", kernel.name());
    let source = format!(
        "{LIBRARY}\n{VARIANT_LIBRARY}\nextern \"C\" __global__ void {entry}(const __grid_constant__ cubert::Args a) {{ {call} }}\n"
    );
    Ok((entry, source, cube_dim))
}

/// Every reduce-sum variant's name and split, the default first.
pub fn reduce_sum_splits() -> Vec<(&'static str, RowSplit)> {
    std::iter::once((StandardVariant::DEFAULT, DEFAULT_REDUCE))
        .chain(REDUCE.iter().map(|(name, split, _)| (*name, *split)))
        .collect()
}

/// Variant `variant` of the reduce-sum of `elem`, from the kernel language.
///
/// # Errors
/// An unknown variant, booleans, or the build error (NVRTC).
pub fn reduce_sum_variant(elem: ElemType, variant: &str) -> Result<CudaKernel, LaunchError> {
    let kernel = StandardKernel::ReduceSum(elem);
    let (_, split) = reduce_sum_splits()
        .into_iter()
        .find(|(name, _)| *name == variant)
        .ok_or_else(|| unknown(kernel, variant))?;
    reduce_sum_kernel::<CudaRuntime>(elem, variant, split)
}

/// Variant `variant` of `kernel` (the default is the standard kernel), built once and
/// cached.
///
/// # Errors
/// As [`variant_source`].
pub fn variant_kernel(kernel: StandardKernel, variant: &str) -> Result<CudaKernel, LaunchError> {
    if let StandardKernel::ReduceSum(elem) = kernel {
        return reduce_sum_variant(elem, variant);
    }
    if variant == StandardVariant::DEFAULT {
        return super::standard_kernel(kernel);
    }
    type Cache = Mutex<HashMap<(StandardKernel, String), CudaKernel>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let id = (kernel, variant.to_string());
    if let Some(built) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
    {
        return Ok(built.clone());
    }
    let (entry, source, cube_dim) = variant_source(kernel, variant)?;
    let built = CudaKernel::from_cuda(format!("{kernel}/{variant}"), entry, source, cube_dim)
        .with_args_capacity(super::STANDARD_ARGS);
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, built.clone());
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_unique_name_and_fits_a_block() {
        for kernel in [StandardKernel::Matmul(ElemType::F32)] {
            let names = variant_names(kernel);
            let mut unique = names.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), names.len());
            for name in names {
                let (entry, source, dim) = variant_source(kernel, name).unwrap();
                assert!(source.contains(&entry));
                assert!(
                    dim.num_elems() <= 1024 && dim.num_elems() % 32 == 0,
                    "{name}"
                );
            }
        }
        for v in &MATMUL {
            assert_eq!(v.block.0 % v.per_thread.0, 0, "{}", v.name);
            assert_eq!(v.block.1 % (v.per_thread.1 * v.vec), 0, "{}", v.name);
        }
        let splits = reduce_sum_splits();
        let mut names: Vec<_> = splits.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), splits.len());
        for (name, split) in splits {
            let units = split.cube_dim().num_elems();
            assert!(units <= 1024 && units % 32 == 0, "{name}");
        }
    }
}
