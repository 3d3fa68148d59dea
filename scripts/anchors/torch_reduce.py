#!/usr/bin/env python3
"""PyTorch's row sums, the peer of `cubert bench tune --kernel reduce-sum` on a GPU.

For each ROWSxCOLS shape of f32 (the bench's default GPU shapes unless given), prints the
median of 10 timings (CUDA events, after 3 warm-ups) of `torch.sum(x, dim=1, out=y)` as
GB/s of bytes read and written (4 x (rows x cols + rows)), as the bench counts them.

    python3 scripts/anchors/torch_reduce.py [4096x4096 ...]
"""

import sys
import torch
from cuda_timing import median_ms


shapes = sys.argv[1:] or ["4096x4096", "16384x16384", "1048576x64", "4194304x16", "64x4194304"]
for shape in shapes:
    rows, cols = (int(part) for part in shape.split("x"))
    x = torch.rand(rows, cols, device="cuda")
    y = torch.empty(rows, device="cuda")
    t = median_ms(lambda: torch.sum(x, dim=1, out=y))
    gbs = 4 * (rows * cols + rows) / (t / 1e3) / 1e9
    print("torch_reduce_sum_%s %.3f ms %.1f GB/s" % (shape, t, gbs))
    del x, y
