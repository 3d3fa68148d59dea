//! The plane group's multiply-accumulate (`plane_group_mma`), printed as CUDA: Hopper's
//! `wgmma.mma_async` on shared-memory descriptors, one instruction per 16 of K, fenced and
//! committed as one group, then waited for before the units go on (`plane_group_mma`) or
//! left in flight (`plane_group_mma_async`) until a `plane_group_mma_wait(n)`
//! (`wgmma.wait_group n`).
//!
//! The descriptors say "128-byte swizzle" and give the layouts of
//! [`cubert_lang::ir::group_mma`]: `A` K-major (eight-row groups 1024 bytes apart, the
//! next 16 columns 32 bytes on in the row), `B` N-major (`transpose-b`: panels of 64
//! columns `panel_stride` elements apart, eight-row groups 1024 bytes apart, the next 16
//! rows 2048 bytes on). The swizzle is applied by the hardware to shared addresses, which
//! is why a kernel that calls this aligns its shared arrays to 1024 bytes
//! (`Kernel::shared_alignment`, and `__align__(1024)` on the shared buffer).
//!
//! The tensor cores read shared memory through the async proxy: in such a kernel
//! `sync_cube` is preceded by `fence.proxy.async.shared::cta`, so that the writes (and
//! landed `cp.async` copies) before the barrier are visible to the multiply after it.
//!
//! `wgmma` is sm_90a's (the compiler targets `sm_90a` on compute capability 9.0); the
//! client refuses the operation elsewhere (`Features::plane_group_mma`) and the helper's
//! `static_assert` is a second guard. In checked launches the operands' placement is
//! tested first, and a misplaced operation is reported as an out-of-bounds shared access
//! and skipped (by the whole group: its values are the group's).

use super::cuda_type::name;
use cubert_lang::ElemType;
use cubert_lang::ir::GroupMmaShape;
use std::fmt::Write;

/// The widths of `B` the helpers implement.
const WIDTHS: [u32; 4] = [64, 128, 192, 256];

/// The device functions the printed code calls (printed only into kernels that use the
/// operation).
pub fn helpers() -> String {
    let mut out = String::from(
        r#"
namespace cubert_lang {
// A shared-memory matrix descriptor with the 128-byte swizzle (PTX's "matrix descriptor":
// address, leading and stride byte offsets in 16-byte units, layout type 1 in bits 62-63).
__device__ __forceinline__ cubert::u64 group_mma_descriptor(const void* p, unsigned leading, unsigned stride) {
    unsigned address = (unsigned)__cvta_generic_to_shared(p);
    return (cubert::u64)((address >> 4) & 0x3fffu) | ((cubert::u64)((leading >> 4) & 0x3fffu) << 16)
        | ((cubert::u64)((stride >> 4) & 0x3fffu) << 32) | (1ull << 62);
}
template <typename T, unsigned N> struct group_mma_issue;
// Pins the accumulator to its registers around the multiply (an empty asm that reads and
// writes each): the compiler then neither copies nor moves them while a batch is in
// flight, which would make ptxas wait for the batch right after issuing it.
template <unsigned N>
__device__ __forceinline__ void group_mma_fence_operands(float* acc) {
    #pragma unroll
    for (unsigned i = 0; i < N / 2u; ++i) asm volatile("" : "+r"(reinterpret_cast<unsigned*>(acc)[i]) :: "memory");
}
"#,
    );
    for n in WIDTHS {
        for (ty, ptx) in [("cubert::bf16", "bf16"), ("cubert::f16", "f16")] {
            let count = n / 2;
            let registers = (0..count)
                .map(|i| format!("%{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let operands = (0..count)
                .map(|i| format!("\"+r\"(d[{i}])"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(
                out,
                r#"template <> struct group_mma_issue<{ty}, {n}u> {{
    static __device__ __forceinline__ void run(float* acc, cubert::u64 a, cubert::u64 b) {{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        unsigned* d = reinterpret_cast<unsigned*>(acc);
        asm volatile("{{\n.reg .pred p;\nsetp.ne.b32 p, %{scale}, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} {{{registers}}}, %{da}, %{db}, p, 1, 1, 0, 1;\n}}\n"
            : {operands}
            : "l"(a), "l"(b), "r"(1));
#endif
    }}
}};
"#,
                da = count,
                db = count + 1,
                scale = count + 2,
            );
        }
    }
    out.push_str(
        r#"// acc (64 x N, f32, N / 2 per unit) += A (64 x K) . B (K x N), the operands in the
// swizzled layouts of the language's plane_group_mma (see cubert_lang::ir::group_mma).
// WAIT: the synchronous form (wait for this batch); else the batch stays in flight until a
// plane_group_mma_wait covers it.
template <typename T, unsigned N, unsigned K, bool WAIT>
__device__ __forceinline__ void plane_group_mma(const cubert::Args& args, float* acc,
        const T* a, unsigned a_len, unsigned a_start,
        const T* b, unsigned b_len, unsigned b_start, unsigned panel_stride) {
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(sizeof(T) == 0, "plane_group_mma needs wgmma: sm_90a");
#endif
#if CUBERT_CHECKED
    {
        bool a_ok = (a_start % 16u) == 0 && a_start % 64u + K <= 64u && a_start % 512u < 64u
            && (cubert::u64)(a_start - a_start % 512u) + 64u * 64u <= a_len;
        bool b_ok = (b_start % 512u) == 0 && (panel_stride % 512u) == 0
            && (cubert::u64)b_start + (cubert::u64)panel_stride * (N / 64u - 1u) + K * 64u <= b_len;
        if (!a_ok || !b_ok) {
            if (!a_ok) cubert::out_of_bounds(args, -1, a_start, a_len, 0);
            else cubert::out_of_bounds(args, -1, b_start, b_len, 0);
            return;
        }
    }
#endif
    group_mma_fence_operands<N>(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    #pragma unroll
    for (unsigned s = 0; s < K / 16u; ++s) {
        cubert::u64 da = group_mma_descriptor(a + a_start + 16u * s, 16u, 1024u);
        cubert::u64 db = group_mma_descriptor(b + b_start + 1024u * s, panel_stride * 2u, 1024u);
        group_mma_issue<T, N>::run(acc, da, db);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if constexpr (WAIT) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    group_mma_fence_operands<N>(acc);
}
// Waits until at most PENDING of the group's batches are in flight.
template <unsigned PENDING>
__device__ __forceinline__ void plane_group_mma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory");
#endif
}
// The barrier of a kernel that calls plane_group_mma: shared writes before it become
// visible to the tensor cores' reads after it.
__device__ __forceinline__ void sync_cube_for_group_mma() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
}
} // namespace cubert_lang
"#,
    );
    out
}

/// The call of `plane_group_mma` (or, `asynchronous`, `plane_group_mma_async`) of shape
/// `n` × `k` on accumulator `acc` (`accumulators` `f32`), tiles `a` and `b` of `elem`
/// (`a_len` and `b_len` elements) and the printed values.
///
/// # Errors
/// A message naming what is wrong when the shape or type isn't one the operation has.
#[allow(clippy::too_many_arguments)]
pub fn call(
    elem: ElemType,
    (accumulators, n, k, asynchronous): (u32, u32, u32, bool),
    acc: &str,
    (a, a_len, a_start): (&str, u32, &str),
    (b, b_len, b_start, panel_stride): (&str, u32, &str, &str),
) -> Result<String, String> {
    if !GroupMmaShape::multiplies(elem) {
        return Err(format!(
            "plane_group_mma multiplies bf16 or f16 tiles, not {elem}"
        ));
    }
    let shape = GroupMmaShape::new(n, k)?;
    if accumulators < shape.accumulators() {
        return Err(format!(
            "plane_group_mma into N = {n} columns on an accumulator of {accumulators} f32"
        ));
    }
    Ok(format!(
        "cubert_lang::plane_group_mma<{ty}, {n}u, {k}u, {wait}>(args, {acc}, {a}, {a_len}u, \
         {a_start}, {b}, {b_len}u, {b_start}, {panel_stride});",
        ty = name(elem),
        n = shape.n,
        wait = !asynchronous,
    ))
}
