// What CUDA's virtual memory calls cost next to cudaMalloc, per call and per GiB, for the
// physical block sizes a growable pool may use (microseconds, wall, one thread).
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/vmm_costs scripts/anchors/vmm_costs.cu -lcuda && /tmp/vmm_costs
// For each block size, 8 GiB in blocks: cuMemCreate, cuMemMap (contiguous, one range),
// cuMemSetAccess once over all and once per block, cuMemUnmap, cuMemRelease; a "move"
// (unmap one block, map it elsewhere, set access on it) in a steady range; cudaMalloc and
// cudaFree of the same blocks. Figures: docs/benchmarks.md (issue 18, allocator).
#include <cstdio>
#include <vector>
#include <chrono>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); printf("%s failed: %s\n", #x, s); return 1; } } while (0)
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaFree(0);
  CUdevice dev; CK(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemAccessDesc access = {};
  access.location = prop.location; access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const size_t total = 8ull << 30;
  printf("granularity %zu\n", gran);
  printf("block_MiB op calls us_per_call us_per_GiB\n");
  size_t sizes[] = {2ull << 20, 16ull << 20, 64ull << 20, 256ull << 20, 1024ull << 20};
  for (int round = 0; round < 2; round++)
  for (size_t block : sizes) {
    size_t n = total / block;
    auto report = [&](const char* op, double us, size_t calls) {
      printf("%zu %s %zu %.2f %.1f\n", block >> 20, op, calls, us / calls, us / (double(total) / (1ull << 30)));
    };
    CUdeviceptr range; CK(cuMemAddressReserve(&range, total + block * 64, 0, 0, 0));
    std::vector<CUmemGenericAllocationHandle> h(n);
    double t = now_us();
    for (size_t i = 0; i < n; i++) CK(cuMemCreate(&h[i], block, &prop, 0));
    report("create", now_us() - t, n);
    t = now_us();
    for (size_t i = 0; i < n; i++) CK(cuMemMap(range + i * block, block, 0, h[i], 0));
    report("map", now_us() - t, n);
    t = now_us();
    CK(cuMemSetAccess(range, total, &access, 1));
    report("set_access_once", now_us() - t, 1);
    t = now_us();
    for (size_t i = 0; i < n; i++) CK(cuMemUnmap(range + i * block, block));
    report("unmap", now_us() - t, n);
    for (size_t i = 0; i < n; i++) CK(cuMemMap(range + i * block, block, 0, h[i], 0));
    t = now_us();
    for (size_t i = 0; i < n; i++) CK(cuMemSetAccess(range + i * block, block, &access, 1));
    report("set_access_per_block", now_us() - t, n);
    // Moves: the last 64 blocks' slots are free; move block i to the free slot.
    size_t moves = n < 200 ? n : 200;
    size_t slot = n;
    t = now_us();
    for (size_t i = 0; i < moves; i++) {
      CK(cuMemUnmap(range + i * block, block));
      CK(cuMemMap(range + slot * block, block, 0, h[i], 0));
      CK(cuMemSetAccess(range + slot * block, block, &access, 1));
      slot = i;  // the slot just vacated is the next free one... keeps one free slot moving
    }
    report("move", now_us() - t, moves);
    CK(cuCtxSynchronize());
    for (size_t i = 0; i < n + 64; i++) cuMemUnmap(range + i * block, block);
    t = now_us();
    for (size_t i = 0; i < n; i++) CK(cuMemRelease(h[i]));
    report("release", now_us() - t, n);
    CK(cuMemAddressFree(range, total + block * 64));
    std::vector<void*> p(n);
    t = now_us();
    for (size_t i = 0; i < n; i++) if (cudaMalloc(&p[i], block) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
    report("cudaMalloc", now_us() - t, n);
    t = now_us();
    for (size_t i = 0; i < n; i++) cudaFree(p[i]);
    report("cudaFree", now_us() - t, n);
  }
  return 0;
}
