//! The plane's matrix multiply-accumulate (`plane_mma`), printed as CUDA: one
//! `mma.sync.aligned` on the fragments the units hold in local arrays, packed into 32-bit
//! registers (the lower index in the lower bits), as PTX lays them out. The inputs' type
//! picks the form ([`MmaShape`]): `m16n8k16` for `bf16`/`f16`, `m16n8k8` for `f32` (each
//! input rounded to TF32 by `cvt.rna.tf32.f32` first, as the language defines it) and
//! `m16n8k32` for `e4m3`/`e5m2` (either by either).
//!
//! `plane_load_a`/`plane_load_b` read the fragments from a shared array. `A` is one
//! `ldmatrix.x4` for every type (sm_75 and later: its 8 × 8 matrices of 16-bit elements
//! are 8 × 4 of `f32` or 8 × 16 of 8-bit ones, which is how those fragments are laid out)
//! when the rows are 16-byte aligned (`start` and `stride` multiples of 16 bytes) and
//! inside the array (in unchecked launches, which vouch for their accesses, only the
//! alignment is tested); `B` is one `ldmatrix.x2.trans` for 16-bit types under the same
//! conditions. Every other case (a transposed `B` of 32- or 8-bit elements, which
//! `ldmatrix` can't transpose, misaligned or out-of-bounds rows) loads element by element,
//! each element checked as `tile[i]` is. Every unit of the warp takes the same path, since
//! `start` and `stride` are the plane's (the language requires it).
//!
//! Tensor cores of these shapes exist from sm_80 (sm_89 for the 8-bit floats); the client
//! refuses a kernel that needs more than the device has (`Features::plane_mma`,
//! `Features::plane_mma_fp8`) before it is printed, and the helpers' `static_assert`s are
//! a second guard.

use super::cuda_type::name;
use cubert_lang::ElemType;
use cubert_lang::ir::{MmaOperand, MmaShape};

/// The device functions the printed code calls.
pub const HELPERS: &str = r#"
namespace cubert_lang {
// The fragment types: 1 bf16, 2 f16, 3 f32 (TF32), 4 e4m3, 5 e5m2.
template <typename T> constexpr int mma_kind = 0;
template <> constexpr int mma_kind<cubert::bf16> = 1;
template <> constexpr int mma_kind<cubert::f16> = 2;
template <> constexpr int mma_kind<float> = 3;
template <> constexpr int mma_kind<cubert::e4m3> = 4;
template <> constexpr int mma_kind<cubert::e5m2> = 5;
// Elements of a fragment per 32-bit register.
template <typename T> constexpr unsigned mma_per_register = 4u / sizeof(T);
__device__ __forceinline__ unsigned mma_bits(cubert::bf16 v) { return v.bits; }
__device__ __forceinline__ unsigned mma_bits(cubert::f16 v) { return v.bits; }
__device__ __forceinline__ unsigned mma_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned mma_bits(cubert::e4m3 v) { return v.bits; }
__device__ __forceinline__ unsigned mma_bits(cubert::e5m2 v) { return v.bits; }
__device__ __forceinline__ void mma_set(cubert::bf16& e, unsigned bits) { e.bits = (unsigned short)bits; }
__device__ __forceinline__ void mma_set(cubert::f16& e, unsigned bits) { e.bits = (unsigned short)bits; }
__device__ __forceinline__ void mma_set(float& e, unsigned bits) { e = __uint_as_float(bits); }
__device__ __forceinline__ void mma_set(cubert::e4m3& e, unsigned bits) { e.bits = (unsigned char)bits; }
__device__ __forceinline__ void mma_set(cubert::e5m2& e, unsigned bits) { e.bits = (unsigned char)bits; }
// One register of a fragment: its elements e[0..R], the lowest index in the lowest bits.
template <typename T> __device__ __forceinline__ unsigned mma_pack(const T* e) {
    unsigned r = 0;
    #pragma unroll
    for (unsigned i = 0; i < mma_per_register<T>; ++i) r |= mma_bits(e[i]) << (i * 8u * (unsigned)sizeof(T));
    return r;
}
template <typename T> __device__ __forceinline__ void mma_unpack(unsigned r, T* e) {
    #pragma unroll
    for (unsigned i = 0; i < mma_per_register<T>; ++i) mma_set(e[i], r >> (i * 8u * (unsigned)sizeof(T)));
}
// The register the tensor cores read: TF32 for f32 (rounded to nearest, ties away from
// zero; a pure instruction, so a fragment used by several products is rounded once).
template <typename T> __device__ __forceinline__ unsigned mma_operand(const T* e) {
    unsigned r = mma_pack<T>(e);
    if constexpr (mma_kind<T> == 3) {
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(r)));
    }
    return r;
}
#define CUBERT_MMA(SHAPE, TYPES) \
    asm volatile("mma.sync.aligned." SHAPE ".row.col.f32." TYPES ".f32 " \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]) \
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]))
// acc = A·B + acc over the plane: A 16xK row-major, B Kx8 column-major, acc 16x8 in f32.
template <typename A, typename B>
__device__ __forceinline__ void plane_mma(float* acc, const A* a, const B* b) {
    constexpr unsigned R = mma_per_register<A>;
    constexpr int ka = mma_kind<A>, kb = mma_kind<B>;
    static_assert(R == mma_per_register<B> && (ka == kb || (ka >= 4 && kb >= 4)),
                  "plane_mma multiplies fragments of one type, or two 8-bit floats");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned ra[4], rb[2];
    #pragma unroll
    for (unsigned i = 0; i < 4u; ++i) ra[i] = mma_operand<A>(a + R * i);
    #pragma unroll
    for (unsigned i = 0; i < 2u; ++i) rb[i] = mma_operand<B>(b + R * i);
    if constexpr (ka == 1) {
        CUBERT_MMA("m16n8k16", "bf16.bf16");
    } else if constexpr (ka == 2) {
        CUBERT_MMA("m16n8k16", "f16.f16");
    } else if constexpr (ka == 3) {
        CUBERT_MMA("m16n8k8", "tf32.tf32");
    } else {
#if __CUDA_ARCH__ >= 890
        if constexpr (ka == 4 && kb == 4) {
            CUBERT_MMA("m16n8k32", "e4m3.e4m3");
        } else if constexpr (ka == 4) {
            CUBERT_MMA("m16n8k32", "e4m3.e5m2");
        } else if constexpr (kb == 4) {
            CUBERT_MMA("m16n8k32", "e5m2.e4m3");
        } else {
            CUBERT_MMA("m16n8k32", "e5m2.e5m2");
        }
#else
        static_assert(sizeof(A) == 0, "plane_mma on 8-bit floats needs sm_89 or later");
#endif
    }
#else
    static_assert(sizeof(A) == 0, "plane_mma needs the tensor cores of sm_80 or later");
#endif
}
#undef CUBERT_MMA
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
// Whether `rows` rows of `columns` elements from `start`, `stride` apart, lie inside an
// array of `n`. Unchecked launches promise it (the caller vouches for every access), which
// leaves only the alignment test, one the compiler usually decides from the index
// arithmetic.
__device__ __forceinline__ bool fragment_in_bounds(unsigned start, unsigned stride, unsigned rows, unsigned columns, unsigned n) {
#if CUBERT_CHECKED
    return (cubert::u64)start + (cubert::u64)(rows - 1u) * stride + columns <= n;
#else
    return true;
#endif
}
// The unit's fragment of the 16xK A operand at tile[start + r * stride + c]: one ldmatrix
// of four 8x8 matrices (of 16-bit elements: 8 x 16 bytes) where the rows are 16-byte
// aligned and inside the array, else element by element (each load checked as `tile[i]`
// is). Both paths make the four registers, so that `plane_mma`'s packing folds away.
template <typename T>
__device__ __forceinline__ void load_fragment_a(const cubert::Args& args, const T* tile, unsigned n, unsigned start, unsigned stride, T (&out)[4u * mma_per_register<T>]) {
    constexpr unsigned R = mma_per_register<T>;
    unsigned lane = lane_id();
    unsigned r[4];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    if (((start | stride) & (4u * R - 1u)) == 0 && fragment_in_bounds(start, stride, 16u, 8u * R, n)) {
        unsigned m = lane / 8u, row = lane % 8u;
        const T* p = tile + start + (row + (m & 1u) * 8u) * stride + (m >> 1) * 4u * R;
        unsigned address = (unsigned)__cvta_generic_to_shared(p);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address) : "memory");
    } else
#endif
    {
        unsigned g = lane / 4u, t = lane % 4u;
        T e[4u * R];
        #pragma unroll
        for (unsigned i = 0; i < 4u * R; ++i) {
            unsigned reg = i / R;
            unsigned row = g + 8u * (reg % 2u), column = R * t + i % R + 4u * R * (reg / 2u);
            e[i] = shared_load<T>(args, tile, fragment_index(start, stride, row, column), n);
        }
        #pragma unroll
        for (unsigned i = 0; i < 4u; ++i) r[i] = mma_pack<T>(e + R * i);
    }
    #pragma unroll
    for (unsigned i = 0; i < 4u; ++i) mma_unpack<T>(r[i], out + R * i);
}
// The unit's fragment of the Kx8 B operand (k rows of 8 consecutive n) at
// tile[start + k * stride + n]: for 16-bit elements one transposing ldmatrix of two 8x8
// matrices where it applies, else element by element as above.
template <typename T>
__device__ __forceinline__ void load_fragment_b(const cubert::Args& args, const T* tile, unsigned n, unsigned start, unsigned stride, T (&out)[2u * mma_per_register<T>]) {
    constexpr unsigned R = mma_per_register<T>;
    unsigned lane = lane_id();
    unsigned r[2];
    bool transposed = false;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    if constexpr (R == 2u) {
        if (((start | stride) & 7u) == 0 && fragment_in_bounds(start, stride, 16u, 8u, n)) {
            const T* p = tile + start + (lane % 16u) * stride;
            unsigned address = (unsigned)__cvta_generic_to_shared(p);
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                         : "=r"(r[0]), "=r"(r[1]) : "r"(address) : "memory");
            transposed = true;
        }
    }
#endif
    if (!transposed) {
        unsigned g = lane / 4u, t = lane % 4u;
        T e[2u * R];
        #pragma unroll
        for (unsigned i = 0; i < 2u * R; ++i) {
            unsigned row = R * t + i % R + 4u * R * (i / R);
            e[i] = shared_load<T>(args, tile, fragment_index(start, stride, row, g), n);
        }
        #pragma unroll
        for (unsigned i = 0; i < 2u; ++i) r[i] = mma_pack<T>(e + R * i);
    }
    #pragma unroll
    for (unsigned i = 0; i < 2u; ++i) mma_unpack<T>(r[i], out + R * i);
}
} // namespace cubert_lang
"#;

/// The call that loads fragment `out` (a local array of `elem`) of `operand` from the
/// shared array `tile` of `len` elements (printed names and values).
///
/// # Errors
/// A message naming what is wrong when tensor cores don't multiply `elem`.
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
    if MmaShape::of(elem).is_none() {
        return Err(format!(
            "plane_load_{which} loads fragments of bf16, f16, f32, e4m3 or e5m2, not {elem}"
        ));
    }
    Ok(format!(
        "cubert_lang::load_fragment_{which}<{}>(args, {tile}, {len}u, {start}, {stride}, {out});",
        name(elem)
    ))
}

/// The call of `plane_mma` on the fragment variables `acc`, `a` and `b` (printed names),
/// whose element types are `a_elem` and `b_elem`.
///
/// # Errors
/// A message naming what is wrong when tensor cores don't multiply `a_elem` by `b_elem`.
pub fn call(
    a_elem: ElemType,
    b_elem: ElemType,
    acc: &str,
    a: &str,
    b: &str,
) -> Result<String, String> {
    if MmaShape::of_pair(a_elem, b_elem).is_none() {
        return Err(format!(
            "plane_mma multiplies fragments of one of bf16, f16, f32 (TF32), or of two 8-bit \
             floats, not {a_elem} by {b_elem}"
        ));
    }
    Ok(format!(
        "cubert_lang::plane_mma<{}, {}>({acc}, {a}, {b});",
        name(a_elem),
        name(b_elem)
    ))
}
