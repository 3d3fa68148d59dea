#!/usr/bin/env python3
"""Reading a scalar back, the peer anchor for `cubert bench --only launch`'s
`cubert_read_4B_us` and `cubert_add1_read_us`.

For PyTorch and CuPy (each where it imports), on one float32 element on the current GPU:

- <peer>_read_4B_us: reading it back on an idle device (`x.item()`, `x.get()`);
- <peer>_add1_read_us: `x += 1` (in place), then reading it back: a step that reads its
  result. Every value read is checked against the count of adds.

Median of 2000 (200 with --quick) after a tenth as many unmeasured ones, wall time. Writes
$OUT/small_read.json in the figure format of the anchors' scripts (`figures.NAME = {value,
unit, note}`), which `cubert bench --compare` reads.

    python3 scripts/anchors/small_read.py [--quick]
"""

import json
import os
import statistics
import sys
import time


def timed(trips, trip):
    """Median microseconds of `trips` calls of `trip(i)`, after trips // 10 unmeasured."""
    warm = trips // 10
    samples = []
    for i in range(warm + trips):
        start = time.perf_counter()
        trip(i)
        elapsed = time.perf_counter() - start
        if i >= warm:
            samples.append(elapsed * 1e6)
    return statistics.median(samples)


def torch_figures(trips, figures, failures):
    import torch

    x = torch.full((1,), 0.5, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()

    def read(_):
        if x.item() != 0.5:
            failures.append("torch read")

    figures["torch_read_4B_us"] = {
        "value": timed(trips, read),
        "unit": "us",
        "note": f"x.item() of one float32 on an idle device, median of {trips}",
    }
    counter = torch.zeros(1, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()

    def add_read(i):
        counter.add_(1.0)
        if counter.item() != i + 1:
            failures.append(f"torch add + read {i}")

    figures["torch_add1_read_us"] = {
        "value": timed(trips, add_read),
        "unit": "us",
        "note": f"x.add_(1) then x.item(), median of {trips} (values checked)",
    }
    return f"torch {torch.__version__}, {torch.cuda.get_device_name()}"


def cupy_figures(trips, figures, failures):
    import cupy

    x = cupy.full((1,), 0.5, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()

    def read(_):
        if float(x.get()[0]) != 0.5:
            failures.append("cupy read")

    figures["cupy_read_4B_us"] = {
        "value": timed(trips, read),
        "unit": "us",
        "note": f"x.get() of one float32 on an idle device, median of {trips}",
    }
    counter = cupy.zeros((1,), dtype=cupy.float32)
    cupy.cuda.Device().synchronize()

    def add_read(i):
        counter.__iadd__(1.0)
        if float(counter.get()[0]) != i + 1:
            failures.append(f"cupy add + read {i}")

    figures["cupy_add1_read_us"] = {
        "value": timed(trips, add_read),
        "unit": "us",
        "note": f"x += 1 then x.get(), median of {trips} (values checked)",
    }
    return f"cupy {cupy.__version__}"


def main() -> int:
    trips = 200 if "--quick" in sys.argv[1:] else 2000
    figures, failures, info = {}, [], {}
    for name, measure in (("torch", torch_figures), ("cupy", cupy_figures)):
        try:
            info[name] = measure(trips, figures, failures)
        except ImportError as error:
            info[name] = f"not measured: {error}"
    report = {
        "script": "scripts/anchors/small_read.py",
        "info": info,
        "figures": figures,
        "failures": failures,
    }
    out = os.environ.get("OUT", "/tmp/anchors_out")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "small_read.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    for name, figure in figures.items():
        print(f"{name}: {figure['value']:.2f} {figure['unit']}")
    for failure in failures[:5]:
        print(f"FAILED: {failure}")
    print(f"wrote {path} ({info})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
