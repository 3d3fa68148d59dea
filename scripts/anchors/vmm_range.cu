// What reserving an address range costs by size (16 GiB, the device's memory, twice it: the
// growable pool reserves twice the device's memory per stream), and the first 64 MiB chunks
// created, mapped and granted into it (microseconds, wall, one thread, three rounds).
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/vmm_range scripts/anchors/vmm_range.cu -lcuda && /tmp/vmm_range
// Figures: docs/benchmarks.md (2026-11-30, late night, the 2-GPU host's driver calls).
#include <cstdio>
#include <chrono>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); printf("%s failed: %s\n", #x, s); return 1; } } while (0)
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaFree(0);
  CUdevice dev; CK(cuCtxGetDevice(&dev));
  size_t free_b, total_b; cudaMemGetInfo(&free_b, &total_b);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  CUmemAccessDesc access = {};
  access.location = prop.location; access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t gran; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t sizes[] = {16ull << 30, total_b / gran * gran, 2 * (total_b / gran * gran)};
  for (int round = 0; round < 3; round++)
  for (size_t size : sizes) {
    CUdeviceptr range;
    double t = now_us();
    CK(cuMemAddressReserve(&range, size, 0, 0, 0));
    double reserve = now_us() - t;
    double first = 0, rest = 0;
    CUmemGenericAllocationHandle h[8];
    const size_t chunk = 64ull << 20;
    for (int i = 0; i < 8; i++) {
      t = now_us();
      CK(cuMemCreate(&h[i], chunk, &prop, 0));
      CK(cuMemMap(range + i * chunk, chunk, 0, h[i], 0));
      CK(cuMemSetAccess(range + i * chunk, chunk, &access, 1));
      double dt = now_us() - t;
      if (i == 0) first = dt; else rest += dt;
    }
    t = now_us();
    for (int i = 0; i < 8; i++) { CK(cuMemUnmap(range + i * chunk, chunk)); CK(cuMemRelease(h[i])); }
    double teardown = now_us() - t;
    t = now_us();
    CK(cuMemAddressFree(range, size));
    double freed = now_us() - t;
    printf("round %d range %zu GiB: reserve %.1f us, first 64 MiB chunk %.1f us, next 7 %.1f us each, teardown %.1f us, address free %.1f us\n",
           round, size >> 30, reserve, first, rest / 7, teardown, freed);
  }
  return 0;
}
