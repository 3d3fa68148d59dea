// Whether one physical allocation can be mapped at two addresses at once (the growable
// pool's "views", docs/allocator.md), what a second mapping costs, and whether a mapping
// may start at an offset into an allocation.
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/vmm_alias scripts/anchors/vmm_alias.cu -lcuda && /tmp/vmm_alias
// For allocations of 2 MiB to 1 GiB: create one, map it at address A, then again at B (two
// ranges); write a pattern through A with a kernel, read it back through B and compare on
// the host; write through B, read through A. Then 200 second mappings of 64 MiB (map + set
// access, wall microseconds per mapping) and their unmaps. Finally a map at a non-zero
// offset into an allocation, which prints the driver's answer. Figures: docs/benchmarks.md.
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); printf("%s failed: %s\n", #x, s); return 1; } } while (0)
#define CR(x) do { cudaError_t r = (x); if (r != cudaSuccess) { printf("%s failed: %s\n", #x, cudaGetErrorString(r)); return 1; } } while (0)
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

__global__ void fill(unsigned* p, size_t n, unsigned salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned)(i * 2654435761u) ^ salt;
}

// Counts the words of q that differ from what fill(salt) wrote.
__global__ void check(const unsigned* q, size_t n, unsigned salt, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    mine += q[i] != ((unsigned)(i * 2654435761u) ^ salt);
  if (mine) atomicAdd(wrong, mine);
}

int main() {
  CR(cudaFree(0));
  CUdevice dev; CK(cuCtxGetDevice(&dev));
  char name[256]; CK(cuDeviceGetName(name, sizeof name, dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemAccessDesc access = {};
  access.location = prop.location; access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  int driver; CK(cuDriverGetVersion(&driver));
  printf("device %s driver %d granularity %zu\n", name, driver, gran);
  unsigned long long* wrong; CR(cudaMalloc(&wrong, sizeof *wrong));
  int failures = 0;
  size_t sizes[] = {2ull << 20, 64ull << 20, 256ull << 20, 1024ull << 20};
  printf("MiB a_to_b_wrong b_to_a_wrong\n");
  for (size_t size : sizes) {
    CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, size, &prop, 0));
    CUdeviceptr a, b;
    CK(cuMemAddressReserve(&a, size, 0, 0, 0));
    CK(cuMemAddressReserve(&b, size, 0, 0, 0));
    CK(cuMemMap(a, size, 0, h, 0)); CK(cuMemSetAccess(a, size, &access, 1));
    CK(cuMemMap(b, size, 0, h, 0)); CK(cuMemSetAccess(b, size, &access, 1));
    size_t n = size / sizeof(unsigned);
    unsigned long long counts[2];
    for (int dir = 0; dir < 2; dir++) {
      unsigned* w = (unsigned*)(dir == 0 ? a : b);
      unsigned* r = (unsigned*)(dir == 0 ? b : a);
      unsigned salt = 0x9e3779b9u * (dir + 1) + (unsigned)(size >> 20);
      CR(cudaMemset(wrong, 0, sizeof *wrong));
      fill<<<1024, 256>>>(w, n, salt);
      check<<<1024, 256>>>(r, n, salt, wrong);
      CR(cudaDeviceSynchronize());
      CR(cudaMemcpy(&counts[dir], wrong, sizeof *wrong, cudaMemcpyDeviceToHost));
      failures += counts[dir] != 0;
    }
    printf("%zu %llu %llu\n", size >> 20, counts[0], counts[1]);
    CK(cuMemUnmap(a, size)); CK(cuMemUnmap(b, size));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(a, size)); CK(cuMemAddressFree(b, size));
  }
  // Second mappings of live allocations: map + set access, then unmap, per mapping.
  const size_t block = 64ull << 20, count = 200;
  std::vector<CUmemGenericAllocationHandle> hs(count);
  CUdeviceptr first, second;
  CK(cuMemAddressReserve(&first, block * count, 0, 0, 0));
  CK(cuMemAddressReserve(&second, block * count, 0, 0, 0));
  for (size_t i = 0; i < count; i++) {
    CK(cuMemCreate(&hs[i], block, &prop, 0));
    CK(cuMemMap(first + i * block, block, 0, hs[i], 0));
  }
  CK(cuMemSetAccess(first, block * count, &access, 1));
  for (int round = 0; round < 2; round++) {
    double t = now_us();
    for (size_t i = 0; i < count; i++) {
      CK(cuMemMap(second + i * block, block, 0, hs[i], 0));
      CK(cuMemSetAccess(second + i * block, block, &access, 1));
    }
    double mapped = now_us() - t;
    t = now_us();
    for (size_t i = 0; i < count; i++) CK(cuMemUnmap(second + i * block, block));
    double unmapped = now_us() - t;
    printf("second mapping of 64 MiB, round %d: map+set_access %.1f us, unmap %.1f us\n",
           round, mapped / count, unmapped / count);
  }
  // A mapping that starts inside an allocation.
  CUresult at_offset = cuMemMap(second, gran, gran, hs[0], 0);
  const char* answer; cuGetErrorString(at_offset, &answer);
  printf("map at offset %zu into an allocation: %s\n", gran, answer);
  if (at_offset == CUDA_SUCCESS) CK(cuMemUnmap(second, gran));
  for (size_t i = 0; i < count; i++) { CK(cuMemUnmap(first + i * block, block)); CK(cuMemRelease(hs[i])); }
  printf("%s\n", failures ? "FAIL: a write through one address was not read through the other"
                          : "ok: every write through one address read back through the other");
  return failures ? 1 : 0;
}
