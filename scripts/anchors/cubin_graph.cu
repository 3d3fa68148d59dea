// A graph of 1000 launches of one kernel taken from a cubin (cuModuleLoad + cuLaunchKernel,
// one cube of 256 units, the argument block of an elementwise add over one f32), timed by
// events: how long the kernel itself takes per graph node, outside cubert. Pass cubins from
// cubert's kernel cache ([compilation] cache_dir) or compiled with nvcc -cubin:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/cubin_graph scripts/anchors/cubin_graph.cu -lcuda
//   /tmp/cubin_graph /tmp/kc/*.cubin
// The first function of each cubin is launched. Figures: docs/benchmarks.md (2026-11-28).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("FAIL %d line %d\n", (int)r_, __LINE__); return 1; } } while (0)
struct Args { void* b[3]; unsigned long long len[3]; unsigned long long info[1]; unsigned* status; unsigned nb, ni; };
int main(int argc, char** argv) {
  cudaFree(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float *x, *one; cudaMalloc(&x, 4); cudaMalloc(&one, 4); cudaMemset(x, 0, 4); float h = 1; cudaMemcpy(one, &h, 4, cudaMemcpyHostToDevice);
  Args a{}; a.b[0] = x; a.b[1] = one; a.b[2] = x; a.len[0] = a.len[1] = a.len[2] = 4; a.info[0] = 1; a.nb = 3; a.ni = 1;
  for (int f = 1; f < argc; f++) {
    CUmodule m; CK(cuModuleLoad(&m, argv[f]));
    unsigned count = 0; CK(cuModuleGetFunctionCount(&count, m));
    std::vector<CUfunction> fs(count); CK(cuModuleEnumerateFunctions(fs.data(), count, m));
    CUfunction fn = fs[0];
    const char* name; cuFuncGetName(&name, fn);
    void* params[] = {&a};
    cudaGraph_t g; cudaGraphExec_t e;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    for (int i = 0; i < 1000; i++) CK(cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, params, nullptr));
    cudaStreamEndCapture(s, &g); cudaGraphInstantiate(&e, g, 0);
    for (int i = 0; i < 3; i++) cudaGraphLaunch(e, s);
    cudaEvent_t t0, t1; cudaEventCreate(&t0); cudaEventCreate(&t1);
    std::vector<float> v;
    for (int r = 0; r < 30; r++) { cudaEventRecord(t0, s); cudaGraphLaunch(e, s); cudaEventRecord(t1, s); cudaEventSynchronize(t1); float ms; cudaEventElapsedTime(&ms, t0, t1); v.push_back(ms); }
    std::sort(v.begin(), v.end());
    printf("%s (%s): %.3f us/kernel\n", argv[f], name, v[15]);
  }
  float hx; cudaMemcpy(&hx, x, 4, cudaMemcpyDeviceToHost); printf("x = %.0f\n", hx);
  return 0;
}
