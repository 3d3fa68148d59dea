// Reading a scalar back in plain CUDA on one thread, the native anchor of `cubert bench --only
// launch`'s cubert_read_4B_us and cubert_add1_read_us (median of 2000 after 200 unmeasured,
// microseconds, wall time; every value read is checked):
//   read_4B:      cudaMemcpyAsync of one float into pinned memory + cudaStreamSynchronize,
//                 on an idle device (and into pageable memory with cudaMemcpy, as torch's
//                 .item() does);
//   add1_read:    x[0] += 1 in a one-thread kernel, then the same read.
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/small_read scripts/anchors/small_read.cu && /tmp/small_read
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
__global__ void add_one(float* x) { x[0] += 1.0f; }
static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static int failures = 0;
template <typename F> double median_us(F f) {
  std::vector<double> v;
  for (int i = 0; i < 2200; i++) {
    double t = now_us();
    f(i);
    if (i >= 200) v.push_back(now_us() - t);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
int main() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float *x, *counter, *pinned, pageable = 0;
  cudaMalloc(&x, 4);
  cudaMalloc(&counter, 4);
  cudaMallocHost(&pinned, 4);
  float half = 0.5f;
  cudaMemcpy(x, &half, 4, cudaMemcpyHostToDevice);
  cudaMemset(counter, 0, 4);
  cudaDeviceSynchronize();
  double pinned_read = median_us([&](int) {
    cudaMemcpyAsync(pinned, x, 4, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    failures += *pinned != 0.5f;
  });
  double pageable_read = median_us([&](int) {
    cudaMemcpy(&pageable, x, 4, cudaMemcpyDeviceToHost);
    failures += pageable != 0.5f;
  });
  double add_read = median_us([&](int i) {
    add_one<<<1, 1, 0, s>>>(counter);
    cudaMemcpyAsync(pinned, counter, 4, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    failures += *pinned != float(i + 1);
  });
  printf("{\"tool\": \"small_read.cu\", \"figures\": {\n");
  printf(" \"native_read_4B_us\": {\"value\": %.3f, \"unit\": \"us\", \"note\": \"cudaMemcpyAsync 4 B D2H into pinned memory + cudaStreamSynchronize, idle device, median of 2000\"},\n", pinned_read);
  printf(" \"native_pageable_read_4B_us\": {\"value\": %.3f, \"unit\": \"us\", \"note\": \"cudaMemcpy 4 B D2H into pageable memory, idle device, median of 2000\"},\n", pageable_read);
  printf(" \"native_add1_read_us\": {\"value\": %.3f, \"unit\": \"us\", \"note\": \"x[0] += 1 (one-thread kernel) then the pinned read, median of 2000 (values checked)\"}\n", add_read);
  printf("}, \"failures\": %d}\n", failures);
  return failures != 0;
}
