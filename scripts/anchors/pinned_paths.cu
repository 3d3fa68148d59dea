// Which part of a 1 GiB pinned transfer's time is the copy, and which the way it is issued
// and waited for: plain CUDA's ways of moving 1 GiB between pinned host memory and the
// device, each timed by the wall clock (GB/s) and, where asynchronous, by device events too.
// The variants run round-robin (one repetition of each per round, 12 rounds) so that drift
// of the host or the link hits them alike; each figure is the median of its rounds.
//   sync         cudaMemcpy from / to cudaMallocHost memory (native_anchors.cu's figure)
//   async        cuMemcpyHtoDAsync / DtoHAsync on a non-blocking stream + cuStreamSynchronize,
//                cuMemHostAlloc(PORTABLE) memory (cubert's pinned pool), cudaMalloc'd device
//   async_event  the same, device time between two events around the copy
//   async_vmm    the same as async into device memory from cuMemCreate + cuMemMap (2 MiB
//                granularity, as cubert's growable pool maps it)
//   async_off512 async into the cudaMalloc'd buffer 512 bytes past its start (a pool's
//                block need not start on a page)
//   async_fresh  async, the host buffer written just before (untimed), as a program fills a
//                staging buffer and uploads it
//   async_poisoned async, the device buffer set by cuMemsetD8 just before (untimed)
//   async_hop    async, but another thread waits for the copy's event and wakes the issuing
//                thread through a condition variable (a completion thread's hand-off)
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/pinned_paths scripts/anchors/pinned_paths.cu -lcuda && /tmp/pinned_paths
// Figures: docs/benchmarks.md (issue 18, pinned transfers).
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#define CK(x) do { auto r = (x); if ((int)r != 0) { printf("%s failed: %d\n", #x, (int)r); exit(1); } } while (0)
static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
int main() {
  const size_t n = size_t(1) << 30;
  const int rounds = 12;
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  void *h_rt, *h_drv;
  CK(cudaMallocHost(&h_rt, n));
  CK(cuMemHostAlloc(&h_drv, n, CU_MEMHOSTALLOC_PORTABLE));
  memset(h_rt, 1, n);
  memset(h_drv, 1, n);
  void* d_rt;
  CK(cudaMalloc(&d_rt, n + (2 << 20)));
  // Device memory the way cubert's growable pool maps it.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle phys;
  CUdeviceptr d_vmm;
  CK(cuMemCreate(&phys, n, &prop, 0));
  CK(cuMemAddressReserve(&d_vmm, n, 0, 0, 0));
  CK(cuMemMap(d_vmm, n, 0, phys, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(d_vmm, n, &access, 1));
  CUstream stream;
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent start, end, done;
  CK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&end, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr d = (CUdeviceptr)d_rt;

  // The waiting thread of async_hop.
  std::mutex lock;
  std::condition_variable wake;
  bool pending = false, finished = false, stop = false;
  CUcontext context;
  CK(cuCtxGetCurrent(&context));
  std::thread waiter([&] {
    CK(cuCtxSetCurrent(context));
    std::unique_lock<std::mutex> guard(lock);
    while (true) {
      wake.wait(guard, [&] { return pending || stop; });
      if (stop) return;
      pending = false;
      guard.unlock();
      CK(cuEventSynchronize(done));
      guard.lock();
      finished = true;
      wake.notify_all();
    }
  });

  std::map<std::string, std::vector<double>> wall, device;
  for (int dir = 0; dir < 2; dir++) {
    bool h2d = dir == 0;
    auto copy_async = [&](CUdeviceptr dev) {
      if (h2d) CK(cuMemcpyHtoDAsync(dev, h_drv, n, stream));
      else CK(cuMemcpyDtoHAsync(h_drv, dev, n, stream));
    };
    std::vector<std::pair<std::string, std::function<void()>>> variants = {
        {"sync", [&] {
           if (h2d) CK(cudaMemcpy(d_rt, h_rt, n, cudaMemcpyHostToDevice));
           else CK(cudaMemcpy(h_rt, d_rt, n, cudaMemcpyDeviceToHost));
         }},
        {"async", [&] { copy_async(d); CK(cuStreamSynchronize(stream)); }},
        {"async_event", [&] {
           CK(cuEventRecord(start, stream));
           copy_async(d);
           CK(cuEventRecord(end, stream));
           CK(cuEventSynchronize(end));
         }},
        {"async_off512", [&] { copy_async(d + 512); CK(cuStreamSynchronize(stream)); }},
        {"async_vmm", [&] { copy_async(d_vmm); CK(cuStreamSynchronize(stream)); }},
        {"async_hop", [&] {
           copy_async(d);
           CK(cuEventRecord(done, stream));
           std::unique_lock<std::mutex> guard(lock);
           finished = false;
           pending = true;
           wake.notify_all();
           wake.wait(guard, [&] { return finished; });
         }},
    };
    // Untimed work before a variant's copy.
    auto before = [&](const std::string& name) {
      if (name == "async_fresh") memcpy(h_drv, h_rt, n);
      if (name == "async_poisoned") {
        CK(cuMemsetD8Async(d, 0x5a, n, stream));
        CK(cuStreamSynchronize(stream));
      }
    };
    variants.push_back({"async_fresh", [&] { copy_async(d); CK(cuStreamSynchronize(stream)); }});
    variants.push_back({"async_poisoned", [&] { copy_async(d); CK(cuStreamSynchronize(stream)); }});
    for (auto& [name, run] : variants) run();  // warm-up
    for (int round = 0; round < rounds; round++) {
      for (auto& [name, run] : variants) {
        before(name);
        CK(cudaDeviceSynchronize());
        double t0 = now_s();
        run();
        double seconds = now_s() - t0;
        std::string key = std::string(h2d ? "h2d_" : "d2h_") + name;
        wall[key].push_back(n / seconds / 1e9);
        if (name == "async_event") {
          float ms = 0;
          CK(cuEventElapsedTime(&ms, start, end));
          device[key].push_back(n / (ms / 1e3) / 1e9);
        }
      }
    }
  }
  {
    std::lock_guard<std::mutex> guard(lock);
    stop = true;
  }
  wake.notify_all();
  waiter.join();
  printf("pinned 1 GiB, median of %d rounds, GB/s\n", rounds);
  for (auto& [key, values] : wall) {
    printf("native_pinned_%s_wall %.2f (min %.2f, max %.2f)\n", key.c_str(), median(values),
           *std::min_element(values.begin(), values.end()),
           *std::max_element(values.begin(), values.end()));
  }
  for (auto& [key, values] : device) {
    printf("native_pinned_%s_device %.2f\n", key.c_str(), median(values));
  }
  return 0;
}
