//! Asynchronous global-to-shared copies printed as CUDA: `copy_line_async::<N>` becomes one
//! `cp.async` (sm_80 and later) of the line's 4, 8 or 16 bytes, with the source size 0
//! when the copy isn't valid (the hardware fills zeros); `commit_async_copies()` and
//! `wait_async_copies(n)` become `cp.async.commit_group` and `cp.async.wait_group n`.
//!
//! A line takes the synchronous path, element by element through the checked accesses
//! (`cubert::load`, `shared_store`), when `cp.async` can't move it: a line of another size,
//! a source address not aligned to the line, in checked launches a line not wholly inside
//! the shared array or its buffer (the elements out of bounds are then reported), or a
//! device older than sm_80. Unchecked launches vouch for their accesses. Commits and waits are then
//! no-ops, which the language's semantics allow: a copy may land any time before its wait.

/// The device functions the printed code calls (after the cooperative helpers).
pub const HELPERS: &str = r#"
namespace cubert_lang {
template <typename T, int N>
__device__ __forceinline__ void copy_line_async(const cubert::Args& args, T* tile, unsigned n, unsigned shared_line, int b, cubert::u64 line, bool valid) {
    constexpr unsigned BYTES = (unsigned)(sizeof(T) * N);
    cubert::u64 first = line * (cubert::u64)N;
    cubert::u64 shared_first = (cubert::u64)shared_line * (cubert::u64)N;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (BYTES == 4 || BYTES == 8 || BYTES == 16) {
        const T* source = cubert::ptr<T>(args, b) + (valid ? first : 0);
#if CUBERT_CHECKED
        bool in_bounds = shared_first + N <= n && (!valid || first + N <= cubert::len<T>(args, b));
#else
        bool in_bounds = true;
#endif
        if (in_bounds && ((unsigned long long)source % BYTES) == 0) {
            unsigned destination = (unsigned)__cvta_generic_to_shared(tile + shared_first);
            unsigned source_bytes = valid ? BYTES : 0u;
            if constexpr (BYTES == 16) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                             :: "r"(destination), "l"(source), "r"(source_bytes) : "memory");
            } else {
                asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                             :: "r"(destination), "l"(source), "n"(BYTES), "r"(source_bytes) : "memory");
            }
            return;
        }
    }
#endif
    #pragma unroll
    for (int k = 0; k < N; ++k) {
        T value = valid ? cubert::load<T>(args, b, first + k) : zero_of<T>();
        cubert::u64 i = shared_first + k;
        shared_store<T>(args, tile, i > 0xffffffffull ? 0xffffffffu : (unsigned)i, n, value);
    }
}
__device__ __forceinline__ void commit_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int PENDING> __device__ __forceinline__ void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
#endif
}
} // namespace cubert_lang
"#;
