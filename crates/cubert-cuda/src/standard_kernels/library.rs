//! CUDA C++ of the standard kernel the backend still writes itself, matmul (the others come
//! from the kernel language): templates over the element type, instantiated by
//! `standard_kernels::standard_kernel` with one `extern "C"` entry point per type.
//!
//! Semantics match the CPU backend bit for bit where the CPU is exact: integers wrap, half
//! types accumulate in `float`.

/// The template library (compiled after the prelude).
pub const LIBRARY: &str = r#"
namespace cubert_std {
using cubert::u64;
using cubert::u32;
using cubert::f16;
using cubert::bf16;

// ---- arithmetic: wrapping integers, half types computed in float ----------------------
template <typename T> struct Num;

#define CUBERT_INT_NUM(T, U)                                                              \
    template <> struct Num<T> {                                                           \
        typedef T Acc;                                                                    \
        static __device__ __forceinline__ T add(T a, T b) { return (T)((U)a + (U)b); }    \
        static __device__ __forceinline__ T mul(T a, T b) { return (T)((U)a * (U)b); }    \
        static __device__ __forceinline__ T tzero() { return (T)0; }                      \
        static __device__ __forceinline__ Acc zero() { return (T)0; }                     \
        static __device__ __forceinline__ Acc to_acc(T v) { return v; }                   \
        static __device__ __forceinline__ T from_acc(Acc v) { return v; }                 \
        static __device__ __forceinline__ Acc acc_add(Acc a, Acc b) { return add(a, b); } \
        static __device__ __forceinline__ Acc acc_mul(Acc a, Acc b) { return mul(a, b); } \
    };
CUBERT_INT_NUM(signed char, unsigned int)
CUBERT_INT_NUM(short, unsigned int)
CUBERT_INT_NUM(int, unsigned int)
CUBERT_INT_NUM(long long, unsigned long long)
CUBERT_INT_NUM(unsigned char, unsigned int)
CUBERT_INT_NUM(unsigned short, unsigned int)
CUBERT_INT_NUM(unsigned int, unsigned int)
CUBERT_INT_NUM(unsigned long long, unsigned long long)

#define CUBERT_FLOAT_NUM(T)                                                               \
    template <> struct Num<T> {                                                           \
        typedef T Acc;                                                                    \
        static __device__ __forceinline__ T add(T a, T b) { return a + b; }               \
        static __device__ __forceinline__ T mul(T a, T b) { return a * b; }               \
        static __device__ __forceinline__ T tzero() { return (T)0; }                      \
        static __device__ __forceinline__ Acc zero() { return (T)0; }                     \
        static __device__ __forceinline__ Acc to_acc(T v) { return v; }                   \
        static __device__ __forceinline__ T from_acc(Acc v) { return v; }                 \
        static __device__ __forceinline__ Acc acc_add(Acc a, Acc b) { return a + b; }     \
        static __device__ __forceinline__ Acc acc_mul(Acc a, Acc b) { return a * b; }     \
    };
CUBERT_FLOAT_NUM(float)
CUBERT_FLOAT_NUM(double)

#define CUBERT_HALF_NUM(T, TO, FROM)                                                      \
    template <> struct Num<T> {                                                           \
        typedef float Acc;                                                                \
        static __device__ __forceinline__ T add(T a, T b) { return FROM(TO(a) + TO(b)); } \
        static __device__ __forceinline__ T mul(T a, T b) { return FROM(TO(a) * TO(b)); } \
        static __device__ __forceinline__ T tzero() { T z; z.bits = 0; return z; }        \
        static __device__ __forceinline__ Acc zero() { return 0.0f; }                     \
        static __device__ __forceinline__ Acc to_acc(T v) { return TO(v); }               \
        static __device__ __forceinline__ T from_acc(Acc v) { return FROM(v); }           \
        static __device__ __forceinline__ Acc acc_add(Acc a, Acc b) { return a + b; }     \
        static __device__ __forceinline__ Acc acc_mul(Acc a, Acc b) { return a * b; }     \
    };
CUBERT_HALF_NUM(f16, cubert::f16_to_f32, cubert::f32_to_f16)
CUBERT_HALF_NUM(bf16, cubert::bf16_to_f32, cubert::f32_to_bf16)

// ---- matmul: 16x16 output tiles through shared memory, grid-stride over tiles ------------
#define CUBERT_TILE 16
template <typename T> __device__ void matmul(const cubert::Args& a) {
    typedef typename Num<T>::Acc Acc;
    __shared__ Acc tile_a[CUBERT_TILE][CUBERT_TILE];
    __shared__ Acc tile_b[CUBERT_TILE][CUBERT_TILE];
    u64 m = cubert::info(a, 0), k = cubert::info(a, 1), n = cubert::info(a, 2);
    u64 tiles_m = (m + CUBERT_TILE - 1) / CUBERT_TILE, tiles_n = (n + CUBERT_TILE - 1) / CUBERT_TILE;
    for (u64 ty = blockIdx.y; ty < tiles_m; ty += gridDim.y) {
        for (u64 tx = blockIdx.x; tx < tiles_n; tx += gridDim.x) {
            u64 row = ty * CUBERT_TILE + threadIdx.y, col = tx * CUBERT_TILE + threadIdx.x;
            Acc acc = Num<T>::zero();
            for (u64 p0 = 0; p0 < k; p0 += CUBERT_TILE) {
                u64 pa = p0 + threadIdx.x, pb = p0 + threadIdx.y;
                tile_a[threadIdx.y][threadIdx.x] = (row < m && pa < k)
                    ? Num<T>::to_acc(cubert::load<T>(a, 0, row * k + pa)) : Num<T>::zero();
                tile_b[threadIdx.y][threadIdx.x] = (pb < k && col < n)
                    ? Num<T>::to_acc(cubert::load<T>(a, 1, pb * n + col)) : Num<T>::zero();
                __syncthreads();
                for (int p = 0; p < CUBERT_TILE; ++p)
                    acc = Num<T>::acc_add(acc, Num<T>::acc_mul(tile_a[threadIdx.y][p], tile_b[p][threadIdx.x]));
                __syncthreads();
            }
            if (row < m && col < n) cubert::store<T>(a, 2, row * n + col, Num<T>::from_acc(acc));
        }
    }
}

} // namespace cubert_std
"#;
