"""cuBLAS through torch: f32 matmul (TF32 off, so every product is an f32 FMA like
cubert's SIMT kernels), the figure `cubert bench tune --kernel matmul` is put next to.

    python3 scripts/anchors/torch_matmul.py [MxKxN ...]
"""

import sys

import torch

from cuda_timing import median_ms

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

shapes = sys.argv[1:] or ["1024x1024x1024", "4096x4096x4096", "8192x1024x4096"]
for shape in shapes:
    m, k, n = (int(x) for x in shape.split("x"))
    a = torch.rand(m, k, device="cuda")
    b = torch.rand(k, n, device="cuda")
    out = torch.empty(m, n, device="cuda")
    ms = median_ms(lambda: torch.matmul(a, b, out=out))
    print(f"torch f32 matmul {shape}: {ms:.3f} ms, {2 * m * k * n / ms / 1e6:.0f} GFLOP/s")
