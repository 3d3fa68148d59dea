// What one node of a CUDA graph costs on the device, by what its kernel does, where its data
// lies and how it is launched (microseconds per node, event time of one replay of 1000
// dependent nodes / 1000, median of 30). A node's time follows the kernel's memory accesses
// and the address they go to (the L2 slice the counter lives in), not its block size or its
// parameter block; a graph of empty kernels measures the launch path alone.
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/graph_kernels scripts/anchors/graph_kernels.cu && /tmp/graph_kernels
// Empty kernels: native_graph_empty_per_kernel_us. x[0] += 1 with x at 32 addresses 512 KiB
// apart in one 16 MiB allocation: native_graph_add1_by_address_{min,median,max}_us; ops::add's
// work (x[0] = x[0] + y[0], 256 threads, y 256 KiB past x) the same way:
// native_graph_add_by_address_{min,median,max}_us, next to cubert's
// cubert_graph_add_by_address_* (bench --only launch).
// Kernels, each at 1, 32 and 256 threads in one block:
//   add1      x[0] += 1 (one load, one store; native_anchors.cu's graph kernel), 8-byte parameters
//   add_ptrs  o[i] = x[i] + y[i] with i < n (two loads, one store; ops::add's work), 32 bytes
//   add72     the same work reading cubert's argument block of 3 buffers and 1 info word
//             (72 bytes, passed as __grid_constant__, as cubert's kernels take it)
// Figures: docs/benchmarks.md (issue 18, graph replay).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t r = (x); if (r != cudaSuccess) { printf("%s failed: %s\n", #x, cudaGetErrorString(r)); return 1; } } while (0)
struct Args72 { void* b[3]; unsigned long long len[3]; unsigned long long info[1]; unsigned* status; unsigned nb, ni; };
__global__ void empty() {}
__global__ void add1(float* x) { x[0] += 1.0f; }
__global__ void add_ptrs(const float* x, const float* y, float* o, unsigned long long n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = x[i] + y[i];
}
__global__ void add72(const __grid_constant__ Args72 a) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < a.info[0]) ((float*)a.b[2])[i] = ((const float*)a.b[0])[i] + ((const float*)a.b[1])[i];
}
// Per-node device time of a graph of 1000 launches made by `launch`.
template <class F> double graph_us(cudaStream_t s, F launch) {
  cudaGraph_t g; cudaGraphExec_t e;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < 1000; i++) launch();
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&e, g, 0);
  for (int i = 0; i < 3; i++) cudaGraphLaunch(e, s);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<double> v;
  for (int r = 0; r < 30; r++) {
    cudaEventRecord(e0, s); cudaGraphLaunch(e, s); cudaEventRecord(e1, s); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); v.push_back(ms * 1e3 / 1000);
  }
  std::sort(v.begin(), v.end());
  cudaEventDestroy(e0); cudaEventDestroy(e1);
  cudaGraphExecDestroy(e); cudaGraphDestroy(g);
  return v[v.size() / 2];
}
int main() {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *x, *y; CK(cudaMalloc(&x, 1024)); CK(cudaMalloc(&y, 1024));
  CK(cudaMemset(x, 0, 1024)); CK(cudaMemset(y, 0, 1024));
  Args72 a = {}; a.b[0] = x; a.b[1] = y; a.b[2] = x; a.len[0] = a.len[1] = a.len[2] = 1; a.info[0] = 1; a.nb = 3; a.ni = 1;
  printf("native_graph_empty_per_kernel_us %.3f\n", graph_us(s, [&] { empty<<<1, 1, 0, s>>>(); }));
  float* area; CK(cudaMalloc(&area, 16 << 20)); CK(cudaMemset(area, 0, 16 << 20));
  std::vector<double> by_address;
  for (size_t offset = 0; offset < (16u << 20); offset += 512u << 10) {
    float* at = area + offset / sizeof(float);
    by_address.push_back(graph_us(s, [&] { add1<<<1, 1, 0, s>>>(at); }));
  }
  std::vector<double> add_by_address;
  for (size_t offset = 0; offset < (16u << 20); offset += 512u << 10) {
    float* at = area + offset / sizeof(float);
    float* next = at + (256u << 10) / sizeof(float);
    add_by_address.push_back(graph_us(s, [&] { add_ptrs<<<1, 256, 0, s>>>(at, next, at, 1); }));
  }
  auto report = [](const char* name, std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    printf("%s_min_us %.3f\n%s_median_us %.3f\n%s_max_us %.3f\n", name, v.front(), name,
           v[v.size() / 2], name, v.back());
  };
  report("native_graph_add1_by_address", by_address);
  report("native_graph_add_by_address", add_by_address);
  printf("threads add1_us add_ptrs_us add72_us\n");
  for (int t : {1, 32, 256}) {
    double one = graph_us(s, [&] { add1<<<1, t, 0, s>>>(x); });
    double two = graph_us(s, [&] { add_ptrs<<<1, t, 0, s>>>(x, y, x, 1); });
    double block = graph_us(s, [&] { add72<<<1, t, 0, s>>>(a); });
    printf("%d %.3f %.3f %.3f\n", t, one, two, block);
  }
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  return 0;
}
