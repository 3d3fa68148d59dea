#!/usr/bin/env python3
"""PyTorch's vector add and device-to-device copy, the peers of `cubert bench --only bandwidth`.

Prints, on cuda:0, the median of 10 timings (CUDA events, after 3 warm-ups):

- torch_d2d_copy_4GiB: `y.copy_(x)` of 1 Gi f32 (bytes read + written), as
  `cubert_d2d_copy_4GiB` counts them;
- torch_vadd_f32_256M: `torch.add(a, b, out=c)` of 256 Mi f32 (3 x N x 4 bytes), as
  `cubert_vadd_f32_256M` counts them.

    python3 scripts/anchors/torch_elementwise.py
"""

import torch
from cuda_timing import median_ms
x = torch.rand(1 << 30, device="cuda"); y = torch.empty_like(x)
t = median_ms(lambda: y.copy_(x)); print("torch_d2d_copy_4GiB %.1f GB/s" % (2 * 4 * (1 << 30) / (t / 1e3) / 1e9))
del x, y
n = 256 << 20
a = torch.rand(n, device="cuda"); b = torch.rand(n, device="cuda"); c = torch.empty_like(a)
t = median_ms(lambda: torch.add(a, b, out=c)); print("torch_vadd_f32_256M %.1f GB/s" % (3 * 4 * n / (t / 1e3) / 1e9))
