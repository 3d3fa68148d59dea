//! Lines printed as CUDA: `x.line::<N>(i)` and `y.set_line(i, v)` become vector loads and
//! stores.
//!
//! A line of `N` elements of `T` moves as `line<T, C>` structs of at most 16 bytes
//! (`float4` for four `f32`, two of them for eight), aligned to their size, when the whole
//! line is inside the buffer and its address is aligned; otherwise element by element
//! through the prelude's `cubert::load`/`store`, so an element out of bounds is skipped
//! and reported as any access is (in checked mode), and a view at an odd offset still
//! works.

/// The device functions the printed code calls.
pub const HELPERS: &str = r#"
namespace cubert_lang {
template <typename T, int C> struct alignas(sizeof(T) * C) line { T v[C]; };
// Elements per vector access for a line of N elements of T: at most 16 bytes.
template <typename T, int N> struct line_chunk {
    static constexpr int value = (int)(sizeof(T) * N <= 16 ? N : 16 / sizeof(T));
};
template <typename T, int N>
__device__ __forceinline__ void load_line(const cubert::Args& a, int b, cubert::u64 index, T (&out)[N]) {
    constexpr int C = line_chunk<T, N>::value;
    cubert::u64 first = index * (cubert::u64)N;
    const T* p = cubert::ptr<T>(a, b) + first;
    if (first + N <= cubert::len<T>(a, b) && ((unsigned long long)p % (sizeof(T) * C)) == 0) {
        #pragma unroll
        for (int c = 0; c < N; c += C) {
            line<T, C> chunk = *reinterpret_cast<const line<T, C>*>(p + c);
            #pragma unroll
            for (int k = 0; k < C; ++k) out[c + k] = chunk.v[k];
        }
    } else {
        #pragma unroll
        for (int k = 0; k < N; ++k) out[k] = cubert::load<T>(a, b, first + k);
    }
}
template <typename T, int N>
__device__ __forceinline__ void store_line(const cubert::Args& a, int b, cubert::u64 index, const T (&value)[N]) {
    constexpr int C = line_chunk<T, N>::value;
    cubert::u64 first = index * (cubert::u64)N;
    T* p = cubert::ptr<T>(a, b) + first;
    if (first + N <= cubert::len<T>(a, b) && ((unsigned long long)p % (sizeof(T) * C)) == 0) {
        #pragma unroll
        for (int c = 0; c < N; c += C) {
            line<T, C> chunk;
            #pragma unroll
            for (int k = 0; k < C; ++k) chunk.v[k] = value[c + k];
            *reinterpret_cast<line<T, C>*>(p + c) = chunk;
        }
    } else {
        #pragma unroll
        for (int k = 0; k < N; ++k) cubert::store<T>(a, b, first + k, value[k]);
    }
}
} // namespace cubert_lang
"#;
