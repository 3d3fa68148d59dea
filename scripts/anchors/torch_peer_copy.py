#!/usr/bin/env python3
"""PyTorch's GPU0 -> GPU1 copy, the peer anchor for `cubert bench collective`.

Measures, for a 1 GiB uint8 tensor (256 MiB with --quick):

- torch_peer_copy_<size>: `dst.copy_(src)` from cuda:0 to cuda:1 (a peer copy over NVLink
  where the devices can reach each other), timed with CUDA events on cuda:1's current
  stream, as cubert times its `to_client` on the destination's stream;
- torch_peer_copy_via_host_<size>: cuda:0 -> pinned host tensor -> cuda:1, wall time from
  the first copy to the end of the second (cubert's `[cuda] peer_copy = false` path).

Each copy is checked at the start, middle and end. Median of 10 timed copies after 2 warm-up
copies. Writes $OUT/torch_peer_copy.json in the figure format of the anchors' scripts
(`figures.NAME = {value, unit, note, samples}`), which `cubert bench --compare` reads.

    python3 scripts/anchors/torch_peer_copy.py [--quick]
"""

import statistics
import sys
import time

import torch

from anchor_report import write_report

GIB = 1 << 30
MIB = 1 << 20


def check(dst: torch.Tensor, src: torch.Tensor, what: str) -> None:
    n = src.numel()
    for start in (0, n // 2, n - 4096):
        a = src[start : start + 4096].cpu()
        b = dst[start : start + 4096].cpu()
        if not torch.equal(a, b):
            raise SystemExit(f"{what}: copy differs at byte {start}")


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    size = 256 * MIB if quick else GIB
    label = "256MiB" if quick else "1GiB"
    if torch.cuda.device_count() < 2:
        print("torch_peer_copy: needs 2 GPUs")
        return 1
    src = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda:0")
    dst = torch.empty(size, dtype=torch.uint8, device="cuda:1")
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    can_peer = torch.cuda.can_device_access_peer(1, 0)

    figures = {}

    # Direct copy, timed on cuda:1's stream.
    samples = []
    with torch.cuda.device(1):
        for rep in range(12):
            dst.zero_()
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            if rep >= 2:
                samples.append(size / (start.elapsed_time(end) / 1e3) / 1e9)
            if rep in (0, 11):
                check(dst, src, "peer copy")
    figures[f"torch_peer_copy_{label}"] = {
        "value": statistics.median(samples),
        "unit": "GB/s",
        "note": f"dst.copy_(src) cuda:0 -> cuda:1 (peer access: {can_peer}), CUDA events on cuda:1, median of 10",
        "samples": samples,
    }

    # Host round trip through pinned memory, wall time.
    samples = []
    for rep in range(12):
        dst.zero_()
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        t0 = time.perf_counter()
        pinned.copy_(src, non_blocking=True)
        torch.cuda.synchronize(0)
        dst.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize(1)
        elapsed = time.perf_counter() - t0
        if rep >= 2:
            samples.append(size / elapsed / 1e9)
        if rep in (0, 11):
            check(dst, src, "host round trip")
    figures[f"torch_peer_copy_via_host_{label}"] = {
        "value": statistics.median(samples),
        "unit": "GB/s",
        "note": "cuda:0 -> pinned host -> cuda:1, wall time, median of 10",
        "samples": samples,
    }

    report = {
        "script": "scripts/anchors/torch_peer_copy.py",
        "quick": quick,
        "info": {
            "devices": [torch.cuda.get_device_name(i) for i in range(2)],
            "torch": torch.__version__,
            "peer_access": can_peer,
        },
        "figures": figures,
        "failures": 0,
    }
    path = write_report("torch_peer_copy.json", report, digits=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
