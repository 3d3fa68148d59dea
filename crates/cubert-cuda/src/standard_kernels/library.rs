//! CUDA C++ of the standard kernels: templates over the element type, instantiated by
//! `kernels::standard_kernel` with one `extern "C"` entry point per kernel and type.
//!
//! Semantics match the CPU backend bit for bit where the CPU is exact: integers wrap,
//! float-to-integer casts saturate (NaN gives 0), half types convert like the `half` crate.
//! Elementwise kernels run a grid-stride loop; when every buffer covers the whole range they
//! skip the per-element bounds checks, and `float` add/mul/copy then move 16 bytes per load.

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

// ---- casts with Rust `as` semantics ------------------------------------------------------
// Everything goes through a "wide" value: double for floats, long long / unsigned long long
// for integers, so each pair needs only a from-wide and a to-wide conversion.
struct Wide { int kind; double f; long long i; unsigned long long u; };  // kind: 0 f, 1 i, 2 u

template <typename T> struct Cast;
#define CUBERT_CAST_SIGNED(T, LO, HI)                                                     \
    template <> struct Cast<T> {                                                          \
        static __device__ __forceinline__ Wide wide(T v) { Wide w; w.kind = 1; w.i = v; return w; } \
        static __device__ __forceinline__ T narrow(Wide w) {                              \
            if (w.kind == 0) {                                                            \
                if (w.f != w.f) return (T)0;                                              \
                if (w.f <= (double)(LO)) return (T)(LO);                                  \
                if (w.f >= (double)(HI)) return (T)(HI);                                  \
                return (T)__double2ll_rz(w.f);                                            \
            }                                                                             \
            return w.kind == 1 ? (T)w.i : (T)w.u;                                         \
        }                                                                                 \
    };
#define CUBERT_CAST_UNSIGNED(T, HI)                                                       \
    template <> struct Cast<T> {                                                          \
        static __device__ __forceinline__ Wide wide(T v) { Wide w; w.kind = 2; w.u = v; return w; } \
        static __device__ __forceinline__ T narrow(Wide w) {                              \
            if (w.kind == 0) {                                                            \
                if (!(w.f > 0.0)) return (T)0;                                            \
                if (w.f >= (double)(HI)) return (T)(HI);                                  \
                return (T)__double2ull_rz(w.f);                                           \
            }                                                                             \
            return w.kind == 1 ? (T)w.i : (T)w.u;                                         \
        }                                                                                 \
    };
CUBERT_CAST_SIGNED(signed char, -128, 127)
CUBERT_CAST_SIGNED(short, -32768, 32767)
CUBERT_CAST_SIGNED(int, -2147483648LL, 2147483647LL)
CUBERT_CAST_UNSIGNED(unsigned char, 255)
CUBERT_CAST_UNSIGNED(unsigned short, 65535)
CUBERT_CAST_UNSIGNED(unsigned int, 4294967295ULL)

// 64-bit integers: the bounds are not exact doubles, so compare against 2^63 / 2^64.
template <> struct Cast<long long> {
    static __device__ __forceinline__ Wide wide(long long v) { Wide w; w.kind = 1; w.i = v; return w; }
    static __device__ __forceinline__ long long narrow(Wide w) {
        if (w.kind == 0) {
            if (w.f != w.f) return 0;
            if (w.f <= -9223372036854775808.0) return (long long)0x8000000000000000ULL;
            if (w.f >= 9223372036854775808.0) return 0x7fffffffffffffffLL;
            return __double2ll_rz(w.f);
        }
        return w.kind == 1 ? w.i : (long long)w.u;
    }
};
template <> struct Cast<unsigned long long> {
    static __device__ __forceinline__ Wide wide(unsigned long long v) { Wide w; w.kind = 2; w.u = v; return w; }
    static __device__ __forceinline__ unsigned long long narrow(Wide w) {
        if (w.kind == 0) {
            if (!(w.f > 0.0)) return 0;
            if (w.f >= 18446744073709551616.0) return 0xffffffffffffffffULL;
            return __double2ull_rz(w.f);
        }
        return w.kind == 1 ? (unsigned long long)w.i : w.u;
    }
};
template <> struct Cast<double> {
    static __device__ __forceinline__ Wide wide(double v) { Wide w; w.kind = 0; w.f = v; return w; }
    static __device__ __forceinline__ double narrow(Wide w) {
        return w.kind == 0 ? w.f : (w.kind == 1 ? __ll2double_rn(w.i) : __ull2double_rn(w.u));
    }
};
template <> struct Cast<float> {
    static __device__ __forceinline__ Wide wide(float v) { Wide w; w.kind = 0; w.f = (double)v; return w; }
    static __device__ __forceinline__ float narrow(Wide w) {
        return w.kind == 0 ? __double2float_rn(w.f)
             : (w.kind == 1 ? __ll2float_rn(w.i) : __ull2float_rn(w.u));
    }
};
// Half types: from integers through f32 (as the `half` crate does), from doubles directly.
template <> struct Cast<f16> {
    static __device__ __forceinline__ Wide wide(f16 v) { Wide w; w.kind = 0; w.f = cubert::f16_to_f64(v); return w; }
    static __device__ __forceinline__ f16 narrow(Wide w) {
        if (w.kind == 0) return cubert::f64_to_f16(w.f);
        return cubert::f32_to_f16(w.kind == 1 ? __ll2float_rn(w.i) : __ull2float_rn(w.u));
    }
};
template <> struct Cast<bf16> {
    static __device__ __forceinline__ Wide wide(bf16 v) { Wide w; w.kind = 0; w.f = cubert::bf16_to_f64(v); return w; }
    static __device__ __forceinline__ bf16 narrow(Wide w) {
        if (w.kind == 0) return cubert::f64_to_bf16(w.f);
        return cubert::f32_to_bf16(w.kind == 1 ? __ll2float_rn(w.i) : __ull2float_rn(w.u));
    }
};

// A cast from S to D. Float-to-float goes through the exact source value.
template <typename S, typename D> __device__ __forceinline__ D cast(S v) {
    return Cast<D>::narrow(Cast<S>::wide(v));
}
// float -> f16 / bf16 round once, from the float itself (f32 -> f64 -> f16 would differ only
// by the half crate's truncation of f64 mantissas, which float values don't have).
template <> __device__ __forceinline__ f16 cast<float, f16>(float v) { return cubert::f32_to_f16(v); }
template <> __device__ __forceinline__ bf16 cast<float, bf16>(float v) { return cubert::f32_to_bf16(v); }
// Between half types the `half` crate goes through f32.
template <> __device__ __forceinline__ f16 cast<bf16, f16>(bf16 v) { return cubert::f32_to_f16(cubert::bf16_to_f32(v)); }
template <> __device__ __forceinline__ bf16 cast<f16, bf16>(f16 v) { return cubert::f32_to_bf16(cubert::f16_to_f32(v)); }
// Half to float and double in integer code: exact, NaN payloads kept as the `half` crate
// keeps them (a double-to-float conversion on the device need not keep them).
template <> __device__ __forceinline__ float cast<f16, float>(f16 v) { return cubert::f16_to_f32(v); }
template <> __device__ __forceinline__ float cast<bf16, float>(bf16 v) { return cubert::bf16_to_f32(v); }
template <> __device__ __forceinline__ double cast<f16, double>(f16 v) { return cubert::f16_to_f64(v); }
template <> __device__ __forceinline__ double cast<bf16, double>(bf16 v) { return cubert::bf16_to_f64(v); }
template <> __device__ __forceinline__ f16 cast<f16, f16>(f16 v) { return v; }
template <> __device__ __forceinline__ bf16 cast<bf16, bf16>(bf16 v) { return v; }

// Booleans are bytes: any non-zero value is true (1).
template <typename S> __device__ __forceinline__ bool is_nonzero(S v) { return v != (S)0; }
template <> __device__ __forceinline__ bool is_nonzero<f16>(f16 v) { return (v.bits & 0x7fffu) != 0; }
template <> __device__ __forceinline__ bool is_nonzero<bf16>(bf16 v) { return (v.bits & 0x7fffu) != 0; }

// ---- elementwise -------------------------------------------------------------------------
template <typename T> __device__ void fill(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    T value = cubert::scalar<T>(a, 1);
    if (cubert::covers<T>(a, 0, n)) {
        T* out = cubert::ptr<T>(a, 0);
        for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x()) out[i] = value;
    } else {
        for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
            cubert::store<T>(a, 0, i, value);
    }
}

template <typename T> __device__ void copy(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    if (cubert::covers<T>(a, 0, n) && cubert::covers<T>(a, 1, n)) {
        const T* src = cubert::ptr<T>(a, 0);
        T* dst = cubert::ptr<T>(a, 1);
        for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x()) dst[i] = src[i];
    } else {
        for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
            cubert::store<T>(a, 1, i, cubert::load<T>(a, 0, i));
    }
}

template <typename S, typename D> __device__ void cast_kernel(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
        cubert::store<D>(a, 1, i, cast<S, D>(cubert::load<S>(a, 0, i)));
}

template <typename S> __device__ void cast_to_bool(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
        cubert::store<unsigned char>(a, 1, i, is_nonzero<S>(cubert::load<S>(a, 0, i)) ? 1 : 0);
}

template <typename D> __device__ void cast_from_bool(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x()) {
        unsigned char v = cubert::load<unsigned char>(a, 0, i) != 0 ? 1 : 0;
        cubert::store<D>(a, 1, i, cast<unsigned char, D>(v));
    }
}

template <typename T, int OP> __device__ __forceinline__ T apply(T x, T y) {
    return OP == 0 ? Num<T>::add(x, y) : Num<T>::mul(x, y);
}

template <typename T, int OP> __device__ void binary(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    if (cubert::covers<T>(a, 0, n) && cubert::covers<T>(a, 1, n) && cubert::covers<T>(a, 2, n)) {
        const T* x = cubert::ptr<T>(a, 0);
        const T* y = cubert::ptr<T>(a, 1);
        T* out = cubert::ptr<T>(a, 2);
        for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
            out[i] = apply<T, OP>(x[i], y[i]);
    } else {
        for (u64 i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
            cubert::store<T>(a, 2, i, apply<T, OP>(cubert::load<T>(a, 0, i), cubert::load<T>(a, 1, i)));
    }
}

// float add/mul with 16-byte accesses when the buffers allow it. Each thread issues the
// loads of UNROLL float4 pairs before any store, so enough reads are in flight to saturate
// HBM even with a capped grid.
#define CUBERT_UNROLL 4
template <int OP> __device__ void binary_f32(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    const float* x = cubert::ptr<float>(a, 0);
    const float* y = cubert::ptr<float>(a, 1);
    float* out = cubert::ptr<float>(a, 2);
    bool aligned = (((u64)x | (u64)y | (u64)out) & 15ull) == 0;
    if (!aligned || !(cubert::covers<float>(a, 0, n) && cubert::covers<float>(a, 1, n)
                      && cubert::covers<float>(a, 2, n))) {
        binary<float, OP>(a);
        return;
    }
    u64 quads = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* out4 = reinterpret_cast<float4*>(out);
    u64 stride = cubert::grid_stride_x();
    for (u64 base = cubert::global_index_x(); base < quads; base += stride * CUBERT_UNROLL) {
        float4 p[CUBERT_UNROLL], q[CUBERT_UNROLL];
#pragma unroll
        for (int k = 0; k < CUBERT_UNROLL; ++k) {
            u64 i = base + (u64)k * stride;
            if (i < quads) { p[k] = x4[i]; q[k] = y4[i]; }
        }
#pragma unroll
        for (int k = 0; k < CUBERT_UNROLL; ++k) {
            u64 i = base + (u64)k * stride;
            if (i < quads) {
                float4 r;
                r.x = apply<float, OP>(p[k].x, q[k].x);
                r.y = apply<float, OP>(p[k].y, q[k].y);
                r.z = apply<float, OP>(p[k].z, q[k].z);
                r.w = apply<float, OP>(p[k].w, q[k].w);
                out4[i] = r;
            }
        }
    }
    for (u64 i = quads * 4 + cubert::global_index_x(); i < n; i += stride)
        out[i] = apply<float, OP>(x[i], y[i]);
}

__device__ void copy_f32(const cubert::Args& a) {
    u64 n = cubert::info(a, 0);
    const float* src = cubert::ptr<float>(a, 0);
    float* dst = cubert::ptr<float>(a, 1);
    bool aligned = (((u64)src | (u64)dst) & 15ull) == 0;
    if (!aligned || !(cubert::covers<float>(a, 0, n) && cubert::covers<float>(a, 1, n))) {
        copy<float>(a);
        return;
    }
    u64 quads = n / 4;
    const float4* s4 = reinterpret_cast<const float4*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    u64 stride = cubert::grid_stride_x();
    for (u64 base = cubert::global_index_x(); base < quads; base += stride * CUBERT_UNROLL) {
        float4 v[CUBERT_UNROLL];
#pragma unroll
        for (int k = 0; k < CUBERT_UNROLL; ++k) {
            u64 i = base + (u64)k * stride;
            if (i < quads) v[k] = s4[i];
        }
#pragma unroll
        for (int k = 0; k < CUBERT_UNROLL; ++k) {
            u64 i = base + (u64)k * stride;
            if (i < quads) d4[i] = v[k];
        }
    }
    for (u64 i = quads * 4 + cubert::global_index_x(); i < n; i += stride) dst[i] = src[i];
}

// ---- row sums: one block per row, grid-stride over rows ---------------------------------
#define CUBERT_REDUCE_THREADS 256
template <typename T> __device__ void reduce_sum(const cubert::Args& a) {
    typedef typename Num<T>::Acc Acc;
    __shared__ Acc partial[CUBERT_REDUCE_THREADS];
    u64 rows = cubert::info(a, 0), cols = cubert::info(a, 1);
    for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
        Acc sum = Num<T>::zero();
        for (u64 c = threadIdx.x; c < cols; c += blockDim.x)
            sum = Num<T>::acc_add(sum, Num<T>::to_acc(cubert::load<T>(a, 0, row * cols + c)));
        partial[threadIdx.x] = sum;
        __syncthreads();
        for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride)
                partial[threadIdx.x] = Num<T>::acc_add(partial[threadIdx.x], partial[threadIdx.x + stride]);
            __syncthreads();
        }
        if (threadIdx.x == 0) cubert::store<T>(a, 1, row, Num<T>::from_acc(partial[0]));
        __syncthreads();
    }
}

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
