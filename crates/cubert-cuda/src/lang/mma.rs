//! The plane's matrix multiply-accumulate (`plane_mma`), printed as CUDA: one
//! `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32` on the fragments the
//! units hold in local arrays (`float acc[4]`, `T a[8]`, `T b[4]`), packed two 16-bit
//! elements to a 32-bit register, the lower index in the lower half, as PTX lays them out.
//!
//! `plane_load_a`/`plane_load_b` read the fragments from a shared array with one `ldmatrix`
//! (sm_75 and later) when the operand's rows are 16-byte aligned (`start` and `stride`
//! multiples of 8 elements) and inside the array (in unchecked launches, which vouch for
//! their accesses, only the alignment is tested), and element by element otherwise, each
//! element checked as `tile[i]` is. Every unit of the warp takes the same path, since
//! `start` and `stride` are the plane's (the language requires it).
//!
//! Tensor cores of this shape exist from sm_80 (`Features::plane_mma`). On an older
//! device a kernel calling `plane_mma` fails to compile with the message of the
//! `static_assert` below; kernels that don't call it are unaffected (the helper is a
//! template, instantiated only by a call).

use super::cuda_type::name;
use cubert_lang::ElemType;
use cubert_lang::ir::MmaOperand;

/// The device functions the printed code calls.
pub const HELPERS: &str = r#"
namespace cubert_lang {
__device__ __forceinline__ unsigned mma_pair(cubert::bf16 lo, cubert::bf16 hi) {
    return (unsigned)lo.bits | ((unsigned)hi.bits << 16);
}
__device__ __forceinline__ unsigned mma_pair(cubert::f16 lo, cubert::f16 hi) {
    return (unsigned)lo.bits | ((unsigned)hi.bits << 16);
}
template <typename T> constexpr bool mma_is_bf16 = false;
template <> constexpr bool mma_is_bf16<cubert::bf16> = true;
// acc = A·B + acc over the plane: A 16x16 row-major, B 16x8 column-major, acc 16x8 in f32.
template <typename T>
__device__ __forceinline__ void plane_mma(float* acc, const T* a, const T* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned a0 = mma_pair(a[0], a[1]), a1 = mma_pair(a[2], a[3]);
    unsigned a2 = mma_pair(a[4], a[5]), a3 = mma_pair(a[6], a[7]);
    unsigned b0 = mma_pair(b[0], b[1]), b1 = mma_pair(b[2], b[3]);
    if constexpr (mma_is_bf16<T>) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
#else
    static_assert(sizeof(T) == 0, "plane_mma needs the tensor cores of sm_80 or later");
#endif
}
// The unit's lane in its warp.
__device__ __forceinline__ unsigned lane_id() {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}
// Element `start + row * stride + column` of a shared array, clamped past u32 (out of bounds).
__device__ __forceinline__ unsigned fragment_index(unsigned start, unsigned stride, unsigned row, unsigned column) {
    cubert::u64 i = (cubert::u64)start + (cubert::u64)row * stride + column;
    return i > 0xffffffffull ? 0xffffffffu : (unsigned)i;
}
// Whether 16 rows of `columns` elements from `start`, `stride` apart, lie inside an array of
// `n`. Unchecked launches promise it (the caller vouches for every access), which leaves
// only the alignment test, one the compiler usually decides from the index arithmetic.
__device__ __forceinline__ bool fragment_in_bounds(unsigned start, unsigned stride, unsigned columns, unsigned n) {
#if CUBERT_CHECKED
    return (cubert::u64)start + 15ull * stride + columns <= n;
#else
    return true;
#endif
}
template <typename T> __device__ __forceinline__ void unpack_pair(unsigned r, T& lo, T& hi) {
    lo.bits = (unsigned short)(r & 0xffffu);
    hi.bits = (unsigned short)(r >> 16);
}
// The unit's fragment of the 16x16 A operand at tile[start + r * stride + c]: one ldmatrix
// of four 8x8 matrices where the rows are 16-byte aligned and inside the array, else
// element by element (each load checked as `tile[i]` is).
template <typename T>
__device__ __forceinline__ void load_fragment_a(const cubert::Args& args, const T* tile, unsigned n, unsigned start, unsigned stride, T (&out)[8]) {
    unsigned lane = lane_id();
    // Both paths make the four packed registers, so that `plane_mma`'s packing of the
    // fragment after them folds away.
    unsigned r[4];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    if (((start | stride) & 7u) == 0 && fragment_in_bounds(start, stride, 16u, n)) {
        unsigned m = lane / 8u, row = lane % 8u;
        const T* p = tile + start + (row + (m & 1u) * 8u) * stride + (m >> 1) * 8u;
        unsigned address = (unsigned)__cvta_generic_to_shared(p);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address) : "memory");
    } else
#endif
    {
        unsigned g = lane / 4u, t = lane % 4u;
        T e[8];
        #pragma unroll
        for (unsigned i = 0; i < 8u; ++i) {
            unsigned row = g + 8u * ((i / 2u) % 2u), column = 2u * t + (i % 2u) + 8u * (i / 4u);
            e[i] = shared_load<T>(args, tile, fragment_index(start, stride, row, column), n);
        }
        #pragma unroll
        for (unsigned i = 0; i < 4u; ++i) r[i] = mma_pair(e[2u * i], e[2u * i + 1u]);
    }
    #pragma unroll
    for (unsigned i = 0; i < 4u; ++i) unpack_pair(r[i], out[2u * i], out[2u * i + 1u]);
}
// The unit's fragment of the 16x8 B operand (k rows of 8 consecutive n) at
// tile[start + k * stride + n]: one transposing ldmatrix of two 8x8 matrices, or element
// by element as above.
template <typename T>
__device__ __forceinline__ void load_fragment_b(const cubert::Args& args, const T* tile, unsigned n, unsigned start, unsigned stride, T (&out)[4]) {
    unsigned lane = lane_id();
    unsigned r[2];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    if (((start | stride) & 7u) == 0 && fragment_in_bounds(start, stride, 8u, n)) {
        const T* p = tile + start + (lane % 16u) * stride;
        unsigned address = (unsigned)__cvta_generic_to_shared(p);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(address) : "memory");
    } else
#endif
    {
        unsigned g = lane / 4u, t = lane % 4u;
        T e[4];
        #pragma unroll
        for (unsigned i = 0; i < 4u; ++i) {
            unsigned row = 2u * t + (i % 2u) + 8u * (i / 2u);
            e[i] = shared_load<T>(args, tile, fragment_index(start, stride, row, g), n);
        }
        r[0] = mma_pair(e[0], e[1]);
        r[1] = mma_pair(e[2], e[3]);
    }
    unpack_pair(r[0], out[0], out[1]);
    unpack_pair(r[1], out[2], out[3]);
}
} // namespace cubert_lang
"#;

/// The call that loads fragment `out` (a local array of `elem`) of `operand` from the
/// shared array `tile` of `len` elements (printed names and values).
///
/// # Errors
/// A message naming what is wrong when `elem` isn't `bf16` or `f16`.
pub fn load_fragment(
    elem: ElemType,
    operand: MmaOperand,
    out: &str,
    tile: &str,
    len: u32,
    start: &str,
    stride: &str,
) -> Result<String, String> {
    let which = match operand {
        MmaOperand::A => "a",
        MmaOperand::B => "b",
    };
    match elem {
        ElemType::BF16 | ElemType::F16 => Ok(format!(
            "cubert_lang::load_fragment_{which}<{}>(args, {tile}, {len}u, {start}, {stride}, {out});",
            name(elem)
        )),
        other => Err(format!(
            "plane_load_{which} loads bf16 or f16 fragments, not {other}"
        )),
    }
}

/// The call of `plane_mma` on the fragment variables `acc`, `a` and `b` (printed names),
/// whose element type is `elem`.
///
/// # Errors
/// A message naming what is wrong when `elem` isn't `bf16` or `f16`.
pub fn call(elem: ElemType, acc: &str, a: &str, b: &str) -> Result<String, String> {
    match elem {
        ElemType::BF16 | ElemType::F16 => Ok(format!(
            "cubert_lang::plane_mma<{}>({acc}, {a}, {b});",
            name(elem)
        )),
        other => Err(format!(
            "plane_mma multiplies bf16 or f16 fragments, not {other}"
        )),
    }
}
