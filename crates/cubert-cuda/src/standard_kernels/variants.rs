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
//! Reduce-sum variants are `b<THREADS>[v<VEC>]` (one block per row, warp-shuffle reduction,
//! then across warps through shared memory) and `w<WARPS>[v<VEC>]` (one warp per row,
//! `WARPS` rows per block: for many short rows).
//!
//! Every variant reads through the checked accessors when a buffer doesn't cover its
//! matrix, so checked launches report out-of-bounds accesses as the default kernels do.
//! The default variant is the standard kernel itself.

use super::{LIBRARY, TILE};
use crate::kernel::CudaKernel;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::StandardVariant;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::properties::DeviceProperties;
use cubert_runtime::tune::Priority;
use cubert_runtime::{CubeDim, LaunchError};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// CUDA C++ of the variants (compiled after the prelude and `LIBRARY`).
pub const VARIANT_LIBRARY: &str = r#"
namespace cubert_std {

// Warp shuffles of accumulators: native types as they are, small integers through int.
template <typename A> __device__ __forceinline__ A shfl_down(A v, int offset) {
    return (A)__shfl_down_sync(0xffffffffu, (int)v, offset);
}
__device__ __forceinline__ int shfl_down(int v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ unsigned int shfl_down(unsigned int v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ long long shfl_down(long long v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ unsigned long long shfl_down(unsigned long long v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ float shfl_down(float v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double shfl_down(double v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }

template <typename T> __device__ __forceinline__ typename Num<T>::Acc warp_sum(typename Num<T>::Acc v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = Num<T>::acc_add(v, shfl_down(v, offset));
    return v;
}

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

// ---- row sums ------------------------------------------------------------------------
// The sum of this thread's share of row `row`: columns lane, lane + stride, ...
template <typename T, int VEC>
__device__ __forceinline__ typename Num<T>::Acc row_share(const cubert::Args& a, u64 row, u64 cols,
                                                          int lane, int stride, bool fast, bool vec) {
    typedef typename Num<T>::Acc Acc;
    Acc sum = Num<T>::zero();
    const T* in = cubert::ptr<T>(a, 0);
    if (vec) {
        const VecN<T, VEC>* base = reinterpret_cast<const VecN<T, VEC>*>(in + row * cols);
        for (u64 c = lane; c < cols / VEC; c += stride) {
            VecN<T, VEC> v = base[c];
#pragma unroll
            for (int j = 0; j < VEC; ++j) sum = Num<T>::acc_add(sum, Num<T>::to_acc(v.v[j]));
        }
    } else if (fast) {
        for (u64 c = lane; c < cols; c += stride) sum = Num<T>::acc_add(sum, Num<T>::to_acc(in[row * cols + c]));
    } else {
        for (u64 c = lane; c < cols; c += stride)
            sum = Num<T>::acc_add(sum, Num<T>::to_acc(cubert::load<T>(a, 0, row * cols + c)));
    }
    return sum;
}

// One block of THREADS per row.
template <typename T, int THREADS, int VEC> __device__ void reduce_block(const cubert::Args& a) {
    typedef typename Num<T>::Acc Acc;
    __shared__ Acc warp_sums[THREADS / 32];
    u64 rows = cubert::info(a, 0), cols = cubert::info(a, 1);
    bool fast = cubert::covers<T>(a, 0, rows * cols);
    bool vec = fast && VEC > 1 && cols % VEC == 0 && (((u64)cubert::ptr<T>(a, 0)) % (sizeof(T) * VEC)) == 0;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
        Acc sum = warp_sum<T>(row_share<T, VEC>(a, row, cols, threadIdx.x, THREADS, fast, vec));
        if (lane == 0) warp_sums[warp] = sum;
        __syncthreads();
        if (warp == 0) {
            sum = lane < THREADS / 32 ? warp_sums[lane] : Num<T>::zero();
            sum = warp_sum<T>(sum);
            if (lane == 0) cubert::store<T>(a, 1, row, Num<T>::from_acc(sum));
        }
        __syncthreads();
    }
}

// One warp per row, WARPS rows per block.
template <typename T, int WARPS, int VEC> __device__ void reduce_warp(const cubert::Args& a) {
    u64 rows = cubert::info(a, 0), cols = cubert::info(a, 1);
    bool fast = cubert::covers<T>(a, 0, rows * cols);
    bool vec = fast && VEC > 1 && cols % VEC == 0 && (((u64)cubert::ptr<T>(a, 0)) % (sizeof(T) * VEC)) == 0;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (u64 row = (u64)blockIdx.x * WARPS + warp; row < rows; row += (u64)gridDim.x * WARPS) {
        typename Num<T>::Acc sum = warp_sum<T>(row_share<T, VEC>(a, row, cols, lane, 32, fast, vec));
        if (lane == 0) cubert::store<T>(a, 1, row, Num<T>::from_acc(sum));
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

/// One block per row (`Block(threads)`) or one warp per row (`Warp(warps)`).
#[derive(Clone, Copy)]
enum ReduceShape {
    Block(u32),
    Warp(u32),
}

const REDUCE: [(&str, ReduceShape, u32, Priority); 8] = [
    ("b256v4", ReduceShape::Block(256), 4, Priority::High),
    ("w8v4", ReduceShape::Warp(8), 4, Priority::High),
    ("b512v4", ReduceShape::Block(512), 4, Priority::Normal),
    ("b128v1", ReduceShape::Block(128), 1, Priority::Normal),
    ("w4v1", ReduceShape::Warp(4), 1, Priority::Normal),
    ("b1024v4", ReduceShape::Block(1024), 4, Priority::Low),
    ("w4v4", ReduceShape::Warp(4), 4, Priority::Low),
    ("b256v1", ReduceShape::Block(256), 1, Priority::Low),
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
            .chain(REDUCE.iter().map(|(name, shape, _, priority)| {
                let rows = match shape {
                    ReduceShape::Block(_) => 1,
                    ReduceShape::Warp(warps) => *warps,
                };
                StandardVariant::new(*name, (rows, 1), *priority)
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
        StandardKernel::ReduceSum(elem) => {
            let ty = numeric(kernel, elem)?;
            let (_, shape, vec, _) = REDUCE
                .iter()
                .find(|(name, ..)| *name == variant)
                .ok_or_else(|| unknown(kernel, variant))?;
            Ok(match shape {
                ReduceShape::Block(threads) => (
                    format!("cubert_std::reduce_block<{ty}, {threads}, {vec}>(a);"),
                    CubeDim::new_1d(*threads),
                ),
                ReduceShape::Warp(warps) => (
                    format!("cubert_std::reduce_warp<{ty}, {warps}, {vec}>(a);"),
                    CubeDim::new_1d(warps * 32),
                ),
            })
        }
        _ => Err(unknown(kernel, variant)),
    }
}

/// The names of every non-default variant of `kernel`.
pub fn variant_names(kernel: StandardKernel) -> Vec<&'static str> {
    match kernel {
        StandardKernel::Matmul(_) => MATMUL.iter().map(|v| v.name).collect(),
        StandardKernel::ReduceSum(_) => REDUCE.iter().map(|(name, ..)| *name).collect(),
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

/// Variant `variant` of `kernel` (the default is the standard kernel), built once and
/// cached.
///
/// # Errors
/// As [`variant_source`].
pub fn variant_kernel(kernel: StandardKernel, variant: &str) -> Result<CudaKernel, LaunchError> {
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
        for kernel in [
            StandardKernel::Matmul(ElemType::F32),
            StandardKernel::ReduceSum(ElemType::F32),
        ] {
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
    }
}
