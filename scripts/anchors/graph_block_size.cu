// Graph replay of 1000 one-element kernels in plain CUDA, by threads per block: whether a
// one-element operation pays for launching 256 threads instead of 1 (it does not: the
// figures are within 0.02 us). Events around one replay, median of 30, microseconds per node.
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/graph_block_size scripts/anchors/graph_block_size.cu
//   /tmp/graph_block_size
// Figures: docs/benchmarks.md (2026-11-28, latency paths).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      printf("FAIL %s line %d\n", cudaGetErrorString(e_), __LINE__);            \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)
__global__ void add1_k(float* x) { x[0] += 1.0f; }
__global__ void empty_k() {}
template <typename F> double per_kernel(cudaStream_t s, F launch) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 1000; i++) launch();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(e, s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int r = 0; r < 30; r++) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(e, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    v.push_back(ms);
  }
  std::sort(v.begin(), v.end());
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
  return v[15];  // ms per 1000 kernels = us per kernel
}
int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* x;
  CK(cudaMalloc(&x, 4));
  CK(cudaMemset(x, 0, 4));
  printf("empty<<<1,1>>> %.3f\n", per_kernel(s, [&] { empty_k<<<1, 1, 0, s>>>(); }));
  for (int threads : {1, 32, 256})
    printf("add1<<<1,%d>>> %.3f\n", threads,
           per_kernel(s, [&] { add1_k<<<1, threads, 0, s>>>(x); }));
  return 0;
}
