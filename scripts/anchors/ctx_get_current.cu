// What one cuCtxGetCurrent costs on this host: an allocation on the caller's thread calls it
// twice (whether the thread suits the device's context, then binding it). Three rounds of
// 5 M calls with the primary context current.
//   nvcc -O2 -o /tmp/ctxget scripts/anchors/ctx_get_current.cu -lcuda && /tmp/ctxget
#include <cuda.h>
#include <chrono>
#include <cstdio>

int main() {
  CUdevice device;
  CUcontext context;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    std::printf("no CUDA device\n");
    return 1;
  }
  for (int round = 0; round < 3; round++) {
    const int calls = 5000000;
    CUcontext current;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; i++) {
      if (cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != context) {
        std::printf("cuCtxGetCurrent returned another context\n");
        return 1;
      }
    }
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls;
    std::printf("cuCtxGetCurrent %.1f ns/call\n", ns);
  }
  return 0;
}
