//! The plane's matrix multiply-accumulate (`plane_mma`), printed as CUDA: one
//! `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32` on the fragments the
//! units hold in local arrays (`float acc[4]`, `T a[8]`, `T b[4]`), packed two 16-bit
//! elements to a 32-bit register, the lower index in the lower half, as PTX lays them out.
//!
//! Tensor cores of this shape exist from sm_80 (`Features::plane_mma`). On an older
//! device a kernel calling `plane_mma` fails to compile with the message of the
//! `static_assert` below; kernels that don't call it are unaffected (the helper is a
//! template, instantiated only by a call).

use super::cuda_type::name;
use cubert_lang::ElemType;

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
} // namespace cubert_lang
"#;

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
