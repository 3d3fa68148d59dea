//! Units that cooperate, printed as CUDA: shared arrays, `sync_cube`, plane operations and
//! atomics.
//!
//! - **Shared arrays** are carved from the cube's dynamic shared memory
//!   (`extern __shared__ cubert_shared[]`) at the offsets `ir::Kernel::shared_arrays`
//!   gives, so the kernel's shared memory size is known before the launch and a launch that
//!   asks for more than the device has fails with `ResourceLimitError::SharedMemory`. An
//!   index out of bounds is skipped (a load gives zero) and, in checked mode, fails the
//!   launch like a global access.
//! - **Plane operations** work on the lanes of `__activemask()`: the units of the warp that
//!   reached the operation together. A reduction shuffles every lane's value to every lane
//!   and folds them in lane order from lane 0, with the language's arithmetic (wrapping
//!   integers, halves rounded after every step), so a float sum has the same bits as on
//!   the CPU. `plane_shuffle` from a lane that isn't active gives zero.
//! - **Atomics** (`i32`, `u32`, `f32`) are the hardware's `atomic*` functions; `f32` max
//!   and min are a compare-and-swap loop and `f32` compare-exchange compares bits. An index
//!   out of bounds does nothing and gives zero (reported in checked mode).

use super::cuda_type::name;
use cubert_lang::ElemType;
use cubert_lang::ir::{AtomicOp, PlaneOp};

/// The device functions the printed code calls (after the generator's other helpers).
pub const HELPERS: &str = r#"
namespace cubert_lang {
// A value of any scalar type from lane `lane` of `mask` (moved as its bits).
template <typename T>
__device__ __forceinline__ T shfl(unsigned mask, T v, unsigned lane) {
    if constexpr (sizeof(T) <= 4) {
        union { T value; unsigned int bits; } in, out;
        in.bits = 0;
        in.value = v;
        out.bits = __shfl_sync(mask, in.bits, lane);
        return out.value;
    } else {
        union { T value; unsigned long long bits; } in, out;
        in.value = v;
        out.bits = __shfl_sync(mask, in.bits, lane);
        return out.value;
    }
}
template <typename T> __device__ __forceinline__ T zero_of() {
    T out;
    memset(&out, 0, sizeof(T));
    return out;
}
// One step of a reduction, with the language's arithmetic.
template <typename T> __device__ __forceinline__ T lane_add(T a, T b) {
    return (T)((unsigned long long)a + (unsigned long long)b);
}
__device__ __forceinline__ float lane_add(float a, float b) { return a + b; }
__device__ __forceinline__ double lane_add(double a, double b) { return a + b; }
__device__ __forceinline__ cubert::f16 lane_add(cubert::f16 a, cubert::f16 b) {
    return cubert::f32_to_f16(h2f(a) + h2f(b));
}
__device__ __forceinline__ cubert::bf16 lane_add(cubert::bf16 a, cubert::bf16 b) {
    return cubert::f32_to_bf16(h2f(a) + h2f(b));
}
template <typename T> __device__ __forceinline__ T lane_min(T a, T b) { return b < a ? b : a; }
__device__ __forceinline__ float lane_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double lane_min(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ cubert::f16 lane_min(cubert::f16 a, cubert::f16 b) {
    return cubert::f32_to_f16(fminf(h2f(a), h2f(b)));
}
__device__ __forceinline__ cubert::bf16 lane_min(cubert::bf16 a, cubert::bf16 b) {
    return cubert::f32_to_bf16(fminf(h2f(a), h2f(b)));
}
template <typename T> __device__ __forceinline__ T lane_max(T a, T b) { return b > a ? b : a; }
__device__ __forceinline__ float lane_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double lane_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ cubert::f16 lane_max(cubert::f16 a, cubert::f16 b) {
    return cubert::f32_to_f16(fmaxf(h2f(a), h2f(b)));
}
__device__ __forceinline__ cubert::bf16 lane_max(cubert::bf16 a, cubert::bf16 b) {
    return cubert::f32_to_bf16(fmaxf(h2f(a), h2f(b)));
}
// Reductions over the active lanes, in lane order (0: sum from zero, 1: min, 2: max).
template <int OP, typename T> __device__ __forceinline__ T plane_reduce(T v) {
    unsigned mask = __activemask();
    T acc = zero_of<T>();
    bool first = true;
    // Not unrolled: ptxas (CUDA 13) fails to allocate registers for the unrolled f32 sum.
    #pragma unroll 1
    for (unsigned lane = 0; lane < 32u; ++lane) {
        T x = shfl(mask, v, lane);
        if ((mask >> lane) & 1u) {
            if (OP == 0) acc = lane_add(acc, x);
            else if (first) acc = x;
            else if (OP == 1) acc = lane_min(acc, x);
            else acc = lane_max(acc, x);
            first = false;
        }
    }
    return acc;
}
template <typename T> __device__ __forceinline__ T plane_shuffle(T v, unsigned lane) {
    unsigned mask = __activemask();
    lane &= 31u;
    T x = shfl(mask, v, lane);
    return ((mask >> lane) & 1u) ? x : zero_of<T>();
}
__device__ __forceinline__ bool plane_all(bool v) { return __all_sync(__activemask(), v) != 0; }
__device__ __forceinline__ bool plane_any(bool v) { return __any_sync(__activemask(), v) != 0; }

// Shared arrays: an index out of bounds is skipped and reported in checked mode.
template <typename T>
__device__ __forceinline__ T shared_load(const cubert::Args& a, const T* array, unsigned i, unsigned n) {
    if (i < n) return array[i];
#if CUBERT_CHECKED
    cubert::out_of_bounds(a, -1, i, n, 0);
#endif
    return zero_of<T>();
}
template <typename T>
__device__ __forceinline__ void shared_store(const cubert::Args& a, T* array, unsigned i, unsigned n, T v) {
    if (i < n) { array[i] = v; return; }
#if CUBERT_CHECKED
    cubert::out_of_bounds(a, -1, i, n, 1);
#endif
}
template <typename T>
__device__ __forceinline__ T* shared_slot(const cubert::Args& a, T* array, unsigned i, unsigned n) {
    if (i < n) return array + i;
#if CUBERT_CHECKED
    cubert::out_of_bounds(a, -1, i, n, 1);
#endif
    return nullptr;
}
template <typename T>
__device__ __forceinline__ T* global_slot(const cubert::Args& a, int b, cubert::u64 i) {
    cubert::u64 n = cubert::len<T>(a, b);
    if (i < n) return cubert::ptr<T>(a, b) + i;
#if CUBERT_CHECKED
    cubert::out_of_bounds(a, b, i, n, 1);
#endif
    return nullptr;
}

// Atomics on a slot (null: out of bounds, nothing happens, the result is zero).
template <typename T> __device__ __forceinline__ T atomic_add(T* p, T v) { return p ? atomicAdd(p, v) : (T)0; }
template <typename T> __device__ __forceinline__ T atomic_exchange(T* p, T v) { return p ? atomicExch(p, v) : (T)0; }
template <typename T> __device__ __forceinline__ T atomic_max(T* p, T v) { return p ? atomicMax(p, v) : (T)0; }
template <typename T> __device__ __forceinline__ T atomic_min(T* p, T v) { return p ? atomicMin(p, v) : (T)0; }
template <typename T> __device__ __forceinline__ T atomic_compare_exchange(T* p, T compare, T v) {
    return p ? atomicCAS(p, compare, v) : (T)0;
}
template <bool MAX> __device__ __forceinline__ float atomic_float_extreme(float* p, float v) {
    if (!p) return 0.0f;
    unsigned* bits = reinterpret_cast<unsigned*>(p);
    unsigned old = *bits, assumed;
    do {
        assumed = old;
        float current = __uint_as_float(assumed);
        float next = MAX ? fmaxf(current, v) : fminf(current, v);
        old = atomicCAS(bits, assumed, __float_as_uint(next));
    } while (old != assumed);
    return __uint_as_float(old);
}
template <> __device__ __forceinline__ float atomic_max<float>(float* p, float v) { return atomic_float_extreme<true>(p, v); }
template <> __device__ __forceinline__ float atomic_min<float>(float* p, float v) { return atomic_float_extreme<false>(p, v); }
template <> __device__ __forceinline__ float atomic_compare_exchange<float>(float* p, float compare, float v) {
    if (!p) return 0.0f;
    return __uint_as_float(atomicCAS(reinterpret_cast<unsigned*>(p), __float_as_uint(compare), __float_as_uint(v)));
}
} // namespace cubert_lang
"#;

/// The expression of plane reduction `op` of `value` (a C++ expression of type `elem`).
pub fn plane(op: PlaneOp, elem: ElemType, value: &str) -> String {
    let ty = name(elem);
    match op {
        PlaneOp::Sum => format!("cubert_lang::plane_reduce<0, {ty}>({value})"),
        PlaneOp::Min => format!("cubert_lang::plane_reduce<1, {ty}>({value})"),
        PlaneOp::Max => format!("cubert_lang::plane_reduce<2, {ty}>({value})"),
        PlaneOp::All => format!("cubert_lang::plane_all({value})"),
        PlaneOp::Any => format!("cubert_lang::plane_any({value})"),
    }
}

/// The expression of atomic `op` on `slot` (a `T*`, null when out of bounds).
pub fn atomic(op: AtomicOp, elem: ElemType, slot: &str, value: &str, compare: &str) -> String {
    let ty = name(elem);
    match op {
        AtomicOp::Add => format!("cubert_lang::atomic_add<{ty}>({slot}, {value})"),
        AtomicOp::Max => format!("cubert_lang::atomic_max<{ty}>({slot}, {value})"),
        AtomicOp::Min => format!("cubert_lang::atomic_min<{ty}>({slot}, {value})"),
        AtomicOp::Exchange => format!("cubert_lang::atomic_exchange<{ty}>({slot}, {value})"),
        AtomicOp::CompareExchange => {
            format!("cubert_lang::atomic_compare_exchange<{ty}>({slot}, {compare}, {value})")
        }
    }
}
