// Launch + wait round trips in plain CUDA on one thread: which wait is cheapest, and what an
// event record or query costs on the host (median of 2000 after 300 warm-ups, microseconds).
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/launch_wait scripts/anchors/launch_wait.cu -lcuda && /tmp/launch_wait
// Figures: docs/benchmarks.md (2026-11-28, latency paths).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void empty_k() {}
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
template <typename F> double median_us(F f) {
  std::vector<double> v;
  for (int i = 0; i < 300; i++) f();
  for (int i = 0; i < 2000; i++) { double t = now_us(); f(); v.push_back(now_us() - t); }
  std::sort(v.begin(), v.end()); return v[v.size() / 2];
}
int main() {
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  printf("launch+streamsync %.2f\n", median_us([&] { empty_k<<<1, 1, 0, s>>>(); cudaStreamSynchronize(s); }));
  printf("launch+record+eventsync %.2f\n", median_us([&] { empty_k<<<1, 1, 0, s>>>(); cudaEventRecord(e, s); cudaEventSynchronize(e); }));
  printf("launch+record+spin eventquery %.2f\n", median_us([&] { empty_k<<<1, 1, 0, s>>>(); cudaEventRecord(e, s); while (cudaEventQuery(e) == cudaErrorNotReady) {} }));
  printf("launch+spin streamquery %.2f\n", median_us([&] { empty_k<<<1, 1, 0, s>>>(); while (cudaStreamQuery(s) == cudaErrorNotReady) {} }));
  printf("launch only %.2f\n", median_us([&] { empty_k<<<1, 1, 0, s>>>(); }));
  cudaStreamSynchronize(s);
  printf("record only %.2f\n", median_us([&] { cudaEventRecord(e, s); }));
  printf("eventquery (done) %.2f\n", median_us([&] { cudaEventQuery(e); }));
  printf("streamquery (idle) %.2f\n", median_us([&] { cudaStreamQuery(s); }));
  CUcontext c; cuCtxGetCurrent(&c);
  printf("ctx push+pop %.2f\n", median_us([&] { cuCtxPushCurrent(c); CUcontext o; cuCtxPopCurrent(&o); }));
  return 0;
}
