//! CUDA C++ kernels shared by the GPU tests and the NVRTC compile test.

/// `x[i] *= factor` for `i < info[0]`, `factor = info[1]` as f32.
pub const SCALE: &str = r#"
extern "C" __global__ void scale(const __grid_constant__ cubert::Args a) {
    unsigned long long n = cubert::info(a, 0);
    float factor = cubert::scalar<float>(a, 1);
    for (unsigned long long i = cubert::global_index_x(); i < n; i += cubert::grid_stride_x())
        cubert::store<float>(a, 0, i, factor * cubert::load<float>(a, 0, i));
}
"#;

/// Copies the 16x16 f32 tile at element coordinates (info[0], info[1]) of a tensor map into
/// shared memory with the TMA engine, then to buffer 0.
pub const TMA_TILE_COPY: &str = r#"
__device__ __forceinline__ unsigned int shared_address(const void* p) {
    unsigned long long generic = (unsigned long long)p, shared;
    asm volatile("cvta.to.shared.u64 %0, %1;" : "=l"(shared) : "l"(generic));
    return (unsigned int)shared;
}
extern "C" __global__ void tma_tile_copy(const __grid_constant__ cubert::Args a,
                                         const __grid_constant__ CUtensorMap map) {
    __shared__ alignas(128) float tile[16 * 16];
    __shared__ alignas(8) unsigned long long barrier;
    unsigned int bar = shared_address(&barrier);
    unsigned int dst = shared_address(tile);
    int x = (int)cubert::info(a, 0), y = (int)cubert::info(a, 1);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(1));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(16 * 16 * 4) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(dst), "l"((unsigned long long)&map), "r"(x), "r"(y), "r"(bar) : "memory");
    }
    unsigned int done = 0;
    while (!done) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(0) : "memory");
    }
    for (int i = threadIdx.x; i < 256; i += blockDim.x) cubert::store<float>(a, 0, i, tile[i]);
}
"#;
