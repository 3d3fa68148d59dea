//! The CUDA C++ prelude prepended to every kernel compiled from source.
//!
//! It defines the kernel ABI (`cubert::Args`, see `kernel.rs`), the bounds-checked accessors,
//! and storage types for f16/bf16 and the 8-bit floats e4m3/e5m2 with round-to-nearest-even
//! conversions written out in plain integer code, so kernels need no CUDA headers (NVRTC
//! runs without include paths). On sm_89 and later, `float` to e4m3/e5m2 uses the native
//! `cvt.rn.satfinite` instruction for every value but NaN (which gives the canonical
//! `0x7f`, as the software path does); the software path is a port of `cubert-lang`'s
//! `fp8` module, bit for bit.
//!
//! `CUBERT_CHECKED` (0 or 1) selects checked or raw accesses; `CUBERT_VALIDATE` (0 or 1)
//! also prints every out-of-bounds access from the device. The runtime defines both when it
//! compiles a kernel for a launch's execution mode.

/// Version of the prelude; part of every compile-cache key.
pub const PRELUDE_VERSION: u32 = 6;

/// The prelude source.
pub const PRELUDE: &str = r#"
// ---- cubert prelude ------------------------------------------------------------------
#ifndef CUBERT_CHECKED
#define CUBERT_CHECKED 1
#endif
#ifndef CUBERT_VALIDATE
#define CUBERT_VALIDATE 0
#endif
#ifndef CUBERT_MAX_BUFFERS
#define CUBERT_MAX_BUFFERS 32
#endif
#ifndef CUBERT_MAX_INFO
#define CUBERT_MAX_INFO 64
#endif

extern "C" __device__ int vprintf(const char*, const char*);

struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };

namespace cubert {

typedef unsigned long long u64;
typedef unsigned int u32;

struct Args {
    void* buffers[CUBERT_MAX_BUFFERS];
    u64 lengths[CUBERT_MAX_BUFFERS];
    u64 info_words[CUBERT_MAX_INFO];
    u32* status;
    u32 num_buffers;
    u32 num_info;
};

// Global index helpers.
__device__ __forceinline__ u64 global_index_x() {
    return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;
}
__device__ __forceinline__ u64 grid_stride_x() {
    return (u64)gridDim.x * (u64)blockDim.x;
}

// Info words.
__device__ __forceinline__ u64 info(const Args& a, int i) { return a.info_words[i]; }
// The word is read whole (one 8-byte parameter load) and its low bytes reinterpreted: a
// byte-by-byte copy out of the parameter space compiles to a chain of narrow loads and
// shifts that sits before every use of the scalar.
template <typename T> __device__ __forceinline__ T scalar(const Args& a, int i) {
    static_assert(sizeof(T) <= sizeof(u64), "a scalar fits one info word");
    u64 word = a.info_words[i];
    T value;
    memcpy(&value, &word, sizeof(T));
    return value;
}

// Buffers.
template <typename T> __device__ __forceinline__ u64 len(const Args& a, int b) {
    return a.lengths[b] / sizeof(T);
}
template <typename T> __device__ __forceinline__ T* ptr(const Args& a, int b) {
    return static_cast<T*>(a.buffers[b]);
}
// Whether elements [0, end) of buffer b are in bounds (for unchecked fast paths).
template <typename T> __device__ __forceinline__ bool covers(const Args& a, int b, u64 end) {
    return end <= len<T>(a, b);
}

__device__ __noinline__ void out_of_bounds(const Args& a, int b, u64 i, u64 length, int is_store) {
    atomicAdd(a.status, 1u);
#if CUBERT_VALIDATE
    struct { const char* what; int buffer; unsigned long long index; unsigned long long length; } p
        = { is_store ? "store" : "load", b, i, length };
    vprintf("cubert: out-of-bounds %s of buffer %d, element %llu of %llu\n", (const char*)&p);
#endif
}

template <typename T> __device__ __forceinline__ T load(const Args& a, int b, u64 i) {
#if CUBERT_CHECKED
    u64 n = len<T>(a, b);
    if (i >= n) { out_of_bounds(a, b, i, n, 0); return T(); }
#endif
    return ptr<T>(a, b)[i];
}
template <typename T> __device__ __forceinline__ void store(const Args& a, int b, u64 i, T v) {
#if CUBERT_CHECKED
    u64 n = len<T>(a, b);
    if (i >= n) { out_of_bounds(a, b, i, n, 1); return; }
#endif
    ptr<T>(a, b)[i] = v;
}

// Half-precision storage types. The conversions are ports of the `half` crate's software
// conversions, so device casts give the same bits as the CPU backend.
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };

__device__ __forceinline__ f16 make_f16(u32 bits) { f16 h; h.bits = (unsigned short)bits; return h; }
__device__ __forceinline__ bf16 make_bf16(u32 bits) { bf16 h; h.bits = (unsigned short)bits; return h; }

__device__ __forceinline__ float f16_to_f32(f16 h) {
    u32 i = h.bits;
    if ((i & 0x7fffu) == 0) return __uint_as_float(i << 16);
    u32 sign = i & 0x8000u, exponent = i & 0x7c00u, mantissa = i & 0x03ffu;
    if (exponent == 0x7c00u) {
        if (mantissa == 0) return __uint_as_float((sign << 16) | 0x7f800000u);
        return __uint_as_float((sign << 16) | 0x7fc00000u | (mantissa << 13));
    }
    if (exponent == 0) {
        // Leading zeros of the 10-bit mantissa within the 16-bit word, less the 6 bits
        // above it (the `half` crate's rule): the smallest subnormal, 2^-24, has e = 9.
        u32 e = __clz(mantissa) - 22u;
        u32 exp32 = (127u - 15u - e) << 23;
        u32 man32 = (mantissa << (14u + e)) & 0x7fffffu;
        return __uint_as_float((sign << 16) | exp32 | man32);
    }
    return __uint_as_float((sign << 16) | (((exponent >> 10) + 112u) << 23) | (mantissa << 13));
}

// As the `half` crate: a NaN keeps its payload and gets the quiet bit (written with
// integers: a float-to-double conversion may not keep a NaN's payload on the device).
__device__ __forceinline__ double f16_to_f64(f16 h) {
    u32 i = h.bits;
    if ((i & 0x7c00u) == 0x7c00u && (i & 0x03ffu) != 0) {
        unsigned long long sign = (unsigned long long)(i & 0x8000u) << 48;
        unsigned long long payload = (unsigned long long)(i & 0x03ffu) << 42;
        return __longlong_as_double((long long)(sign | 0x7ff8000000000000ULL | payload));
    }
    return (double)f16_to_f32(h);
}

__device__ __forceinline__ f16 f32_to_f16(float value) {
    u32 x = __float_as_uint(value);
    u32 sign = x & 0x80000000u, exponent = x & 0x7f800000u, mantissa = x & 0x007fffffu;
    if (exponent == 0x7f800000u) {
        u32 nan_bit = mantissa == 0 ? 0u : 0x0200u;
        return make_f16((sign >> 16) | 0x7c00u | nan_bit | (mantissa >> 13));
    }
    u32 half_sign = sign >> 16;
    int half_exp = (int)(exponent >> 23) - 127 + 15;
    if (half_exp >= 0x1f) return make_f16(half_sign | 0x7c00u);
    if (half_exp <= 0) {
        if (14 - half_exp > 24) return make_f16(half_sign);
        u32 man = mantissa | 0x00800000u;
        u32 half_man = man >> (14 - half_exp);
        u32 round_bit = 1u << (13 - half_exp);
        if ((man & round_bit) != 0 && (man & (3u * round_bit - 1u)) != 0) half_man += 1;
        return make_f16(half_sign | half_man);
    }
    u32 bits = half_sign | ((u32)half_exp << 10) | (mantissa >> 13);
    u32 round_bit = 0x00001000u;
    if ((mantissa & round_bit) != 0 && (mantissa & (3u * round_bit - 1u)) != 0) bits += 1;
    return make_f16(bits);
}

__device__ __forceinline__ f16 f64_to_f16(double value) {
    unsigned long long val = (unsigned long long)__double_as_longlong(value);
    u32 x = (u32)(val >> 32);
    // The low word only matters as a sticky bit: any of it set means "above a tie".
    u32 sticky = (u32)val != 0u ? 1u : 0u;
    u32 sign = x & 0x80000000u, exponent = x & 0x7ff00000u, mantissa = x & 0x000fffffu;
    if (exponent == 0x7ff00000u) {
        u32 nan_bit = (mantissa == 0 && (u32)val == 0) ? 0u : 0x0200u;
        return make_f16((sign >> 16) | 0x7c00u | nan_bit | (mantissa >> 10));
    }
    u32 half_sign = sign >> 16;
    long long half_exp = (long long)(exponent >> 20) - 1023 + 15;
    if (half_exp >= 0x1f) return make_f16(half_sign | 0x7c00u);
    if (half_exp <= 0) {
        if (10 - half_exp > 21) return make_f16(half_sign);
        u32 man = mantissa | 0x00100000u;
        u32 half_man = man >> (11 - half_exp);
        u32 round_bit = 1u << (10 - half_exp);
        if ((man & round_bit) != 0 && ((man & (3u * round_bit - 1u)) | sticky) != 0) half_man += 1;
        return make_f16(half_sign | half_man);
    }
    u32 bits = half_sign | ((u32)half_exp << 10) | (mantissa >> 10);
    u32 round_bit = 0x00000200u;
    if ((mantissa & round_bit) != 0 && ((mantissa & (3u * round_bit - 1u)) | sticky) != 0) bits += 1;
    return make_f16(bits);
}

__device__ __forceinline__ float bf16_to_f32(bf16 b) {
    u32 i = b.bits;
    if ((i & 0x7fffu) > 0x7f80u) return __uint_as_float((i | 0x0040u) << 16);
    return __uint_as_float(i << 16);
}

__device__ __forceinline__ double bf16_to_f64(bf16 b) {
    u32 i = b.bits;
    if ((i & 0x7fffu) > 0x7f80u) {
        unsigned long long sign = (unsigned long long)(i & 0x8000u) << 48;
        unsigned long long payload = (unsigned long long)(i & 0x007fu) << 45;
        return __longlong_as_double((long long)(sign | 0x7ff8000000000000ULL | payload));
    }
    return (double)bf16_to_f32(b);
}

__device__ __forceinline__ bf16 f32_to_bf16(float value) {
    u32 x = __float_as_uint(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) return make_bf16((x >> 16) | 0x0040u);
    u32 round_bit = 0x00008000u;
    if ((x & round_bit) != 0 && (x & (3u * round_bit - 1u)) != 0) return make_bf16((x >> 16) + 1u);
    return make_bf16(x >> 16);
}

__device__ __forceinline__ bf16 f64_to_bf16(double value) {
    unsigned long long val = (unsigned long long)__double_as_longlong(value);
    u32 x = (u32)(val >> 32);
    u32 sticky = (u32)val != 0u ? 1u : 0u;
    u32 sign = x & 0x80000000u, exponent = x & 0x7ff00000u, mantissa = x & 0x000fffffu;
    if (exponent == 0x7ff00000u) {
        u32 nan_bit = (mantissa == 0 && (u32)val == 0) ? 0u : 0x0040u;
        return make_bf16((sign >> 16) | 0x7f80u | nan_bit | (mantissa >> 13));
    }
    u32 half_sign = sign >> 16;
    long long half_exp = (long long)(exponent >> 20) - 1023 + 127;
    if (half_exp >= 0xff) return make_bf16(half_sign | 0x7f80u);
    if (half_exp <= 0) {
        if (7 - half_exp > 21) return make_bf16(half_sign);
        u32 man = mantissa | 0x00100000u;
        u32 half_man = man >> (14 - half_exp);
        u32 round_bit = 1u << (13 - half_exp);
        if ((man & round_bit) != 0 && ((man & (3u * round_bit - 1u)) | sticky) != 0) half_man += 1;
        return make_bf16(half_sign | half_man);
    }
    u32 bits = half_sign | ((u32)half_exp << 7) | (mantissa >> 13);
    u32 round_bit = 0x00001000u;
    if ((mantissa & round_bit) != 0 && ((mantissa & (3u * round_bit - 1u)) | sticky) != 0) bits += 1;
    return make_bf16(bits);
}

// 8-bit float storage types: e4m3 ("E4M3FN": bias 7, 3 mantissa bits, no infinities, NaN
// 0x7f/0xff, max 448) and e5m2 (bias 15, 2 mantissa bits, infinities, max 57344). Ports of
// `cubert-lang`'s `fp8` module: to float exact (NaN: the quiet NaN of its sign); from float
// nearest-even, saturating to the largest finite value (infinities too: satfinite), NaN to
// 0x7f; from double rounded to odd at float first, so it rounds once.
struct e4m3 { unsigned char bits; };
struct e5m2 { unsigned char bits; };

__device__ __forceinline__ e4m3 make_e4m3(u32 bits) { e4m3 h; h.bits = (unsigned char)bits; return h; }
__device__ __forceinline__ e5m2 make_e5m2(u32 bits) { e5m2 h; h.bits = (unsigned char)bits; return h; }

// The value of 8-bit float `bits` with `man` mantissa bits, bias `bias`, largest finite
// code `max_code`, and infinity at `max_code + 1` if `inf`.
__device__ __forceinline__ float fp8_to_f32(u32 bits, u32 man, int bias, u32 max_code, bool inf) {
    u32 sign = (bits & 0x80u) << 24;
    u32 mag = bits & 0x7fu;
    if (mag > max_code + (inf ? 1u : 0u)) return __uint_as_float(sign | 0x7fc00000u);
    if (inf && mag == max_code + 1u) return __uint_as_float(sign | 0x7f800000u);
    u32 exponent = mag >> man, mantissa = mag & ((1u << man) - 1u);
    float m;
    if (exponent == 0u) {
        m = (float)mantissa * __uint_as_float((u32)(127 + 1 - bias - (int)man) << 23);
    } else {
        m = __uint_as_float(((u32)((int)exponent - bias + 127) << 23) | (mantissa << (23u - man)));
    }
    return __uint_as_float(sign | __float_as_uint(m));
}

// As `fp8_to_f32`, to double, a NaN built with integers (see f16_to_f64).
__device__ __forceinline__ double fp8_to_f64(u32 bits, u32 man, int bias, u32 max_code, bool inf) {
    if ((bits & 0x7fu) > max_code + (inf ? 1u : 0u)) {
        unsigned long long sign = (unsigned long long)(bits & 0x80u) << 56;
        return __longlong_as_double((long long)(sign | 0x7ff8000000000000ULL));
    }
    return (double)fp8_to_f32(bits, man, bias, max_code, inf);
}

__device__ __forceinline__ u32 f32_to_fp8(float value, u32 man, int bias, u32 max_code) {
    u32 x = __float_as_uint(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fu;
    u32 sign = (x >> 24) & 0x80u;
    u32 field = (x >> 23) & 0xffu;
    u32 significand = field == 0u ? (x & 0x7fffffu) : ((x & 0x7fffffu) | 0x800000u);
    int exponent = field == 0u ? -126 : (int)field - 127;
    int biased = exponent + bias;
    int drop = 23 - (int)man + (biased >= 1 ? 0 : 1 - biased);
    if (drop > 31) drop = 31;
    u32 kept = significand >> drop;
    u32 rest = significand & ((1u << drop) - 1u);
    u32 half = 1u << (drop - 1);
    if (rest > half || (rest == half && (kept & 1u) != 0u)) kept += 1u;
    u32 code = biased >= 1 ? (((u32)(biased - 1)) << man) + kept : kept;
    if (code > max_code) code = max_code;
    return sign | code;
}

// `value` rounded toward zero to float, the last bit set if that dropped anything.
__device__ __forceinline__ float f64_to_f32_odd(double value) {
    if (value != value) return __uint_as_float(0x7fc00000u);
    float t = __double2float_rz(value);
    if ((double)t != value) t = __uint_as_float(__float_as_uint(t) | 1u);
    return t;
}

__device__ __forceinline__ float e4m3_to_f32(e4m3 v) { return fp8_to_f32(v.bits, 3u, 7, 0x7eu, false); }
__device__ __forceinline__ float e5m2_to_f32(e5m2 v) { return fp8_to_f32(v.bits, 2u, 15, 0x7bu, true); }
__device__ __forceinline__ double e4m3_to_f64(e4m3 v) { return fp8_to_f64(v.bits, 3u, 7, 0x7eu, false); }
__device__ __forceinline__ double e5m2_to_f64(e5m2 v) { return fp8_to_f64(v.bits, 2u, 15, 0x7bu, true); }

__device__ __forceinline__ e4m3 f32_to_e4m3(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (value == value) {
        unsigned short pair;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(value));
        return make_e4m3(pair & 0xffu);
    }
#endif
    return make_e4m3(f32_to_fp8(value, 3u, 7, 0x7eu));
}

__device__ __forceinline__ e5m2 f32_to_e5m2(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (value == value) {
        unsigned short pair;
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(value));
        return make_e5m2(pair & 0xffu);
    }
#endif
    return make_e5m2(f32_to_fp8(value, 2u, 15, 0x7bu));
}

__device__ __forceinline__ e4m3 f64_to_e4m3(double value) { return f32_to_e4m3(f64_to_f32_odd(value)); }
__device__ __forceinline__ e5m2 f64_to_e5m2(double value) { return f32_to_e5m2(f64_to_f32_odd(value)); }

} // namespace cubert
// ---- end of cubert prelude -----------------------------------------------------------
"#;
