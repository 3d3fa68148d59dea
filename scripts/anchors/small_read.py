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

import statistics
import sys
import time

from anchor_report import write_report


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


def scalar_figures(peer, trips, figures, failures, *, full, sync, value_of, increment,
                   read_call, add_call):
    """`peer`'s two figures: reading one float32 back (`value_of`, shown as `read_call`),
    and adding 1 in place (`increment`, shown as `add_call`) then reading it, checked."""
    x = full(0.5)
    sync()

    def read(_):
        if value_of(x) != 0.5:
            failures.append(f"{peer} read")

    figures[f"{peer}_read_4B_us"] = {
        "value": timed(trips, read),
        "unit": "us",
        "note": f"{read_call} of one float32 on an idle device, median of {trips}",
    }
    counter = full(0.0)
    sync()

    def add_read(i):
        increment(counter)
        if value_of(counter) != i + 1:
            failures.append(f"{peer} add + read {i}")

    figures[f"{peer}_add1_read_us"] = {
        "value": timed(trips, add_read),
        "unit": "us",
        "note": f"{add_call} then {read_call}, median of {trips} (values checked)",
    }


def torch_figures(trips, figures, failures):
    import torch

    scalar_figures(
        "torch", trips, figures, failures,
        full=lambda value: torch.full((1,), value, dtype=torch.float32, device="cuda"),
        sync=torch.cuda.synchronize,
        value_of=lambda x: x.item(),
        increment=lambda x: x.add_(1.0),
        read_call="x.item()",
        add_call="x.add_(1)",
    )
    return f"torch {torch.__version__}, {torch.cuda.get_device_name()}"


def cupy_figures(trips, figures, failures):
    import cupy

    scalar_figures(
        "cupy", trips, figures, failures,
        full=lambda value: cupy.full((1,), value, dtype=cupy.float32),
        sync=cupy.cuda.Device().synchronize,
        value_of=lambda x: float(x.get()[0]),
        increment=lambda x: x.__iadd__(1.0),
        read_call="x.get()",
        add_call="x += 1",
    )
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
    path = write_report("small_read.json", report)
    for failure in failures[:5]:
        print(f"FAILED: {failure}")
    print(f"wrote {path} ({info})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
