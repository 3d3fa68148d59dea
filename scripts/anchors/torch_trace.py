#!/usr/bin/env python3
"""PyTorch's caching allocator on the allocation traces `cubert bench --only trace` replays.

    cubert bench --only trace --write-traces traces/ [--trace alloc_trace.txt]
    python3 scripts/anchors/torch_trace.py traces/*.txt [alloc_trace.txt]

Each trace file (`alloc ID SIZE` / `free ID` lines, `#` comments) is replayed as cubert's
bench replays it: `torch.empty(size, dtype=uint8)` per alloc, kept by id, `del` per free,
then a synchronize. Per trace and allocator (`torch`: the default caching allocator;
`torch_expandable`: `expandable_segments:True`), each in a fresh process (the setting must
be made before CUDA starts), it prints and writes:

- `<alloc>_trace[_MODEL]_reserved_over_live`: peak reserved / peak live requested;
- `<alloc>_trace[_MODEL]_replay_s` / `_replay_warm_s`: wall seconds from an empty cache
  (after `empty_cache`) and again with the cache populated;
- `<alloc>_trace[_MODEL]_device_allocs` / `_device_frees`: `num_device_alloc` /
  `num_device_free` of `torch.cuda.memory_stats` over the cold replay;
- `<alloc>_trace[_MODEL]_peak_reserved` (GiB).

`MODEL` is the file's stem (`transformer.txt` -> `transformer`); a file named
`alloc_trace.txt` (the anchors') has no `MODEL`, matching cubert's figure names. Writes
$OUT/torch_trace.json (`figures.NAME = {value, unit, note}`), which `cubert bench
--compare` reads.
"""

import json
import os
import subprocess
import sys
import time

GIB = 1 << 30
ALLOCATORS = [("torch", "expandable_segments:False"), ("torch_expandable", "expandable_segments:True")]


def read_trace(path):
    events = []
    for line in open(path):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "alloc":
            events.append((True, int(words[1]), int(words[2])))
        elif words[0] == "free":
            events.append((False, int(words[1]), 0))
    live, current, peak = {}, 0, 0
    for is_alloc, ident, size in events:
        if is_alloc:
            live[ident] = size
            current += size
            peak = max(peak, current)
        else:
            current -= live.pop(ident)
    return events, peak


def replay(torch, events, device):
    live = {}
    start = time.perf_counter()
    for is_alloc, ident, size in events:
        if is_alloc:
            live[ident] = torch.empty(size, dtype=torch.uint8, device=device)
        else:
            del live[ident]
    torch.cuda.synchronize(device)
    return time.perf_counter() - start


def child(path, label):
    """Runs in a fresh process whose PYTORCH_CUDA_ALLOC_CONF is set: prints one JSON line."""
    import torch

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.empty(1, device=device)  # starts CUDA and the allocator before the stats calls
    events, peak_live = read_trace(path)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    base_reserved = torch.cuda.memory_reserved(device)
    before = torch.cuda.memory_stats(device)
    cold = replay(torch, events, device)
    after = torch.cuda.memory_stats(device)
    # Less the 512-byte warm-up tensor's segment, still reserved.
    peak_reserved = torch.cuda.max_memory_reserved(device) - base_reserved
    warm = replay(torch, events, device)
    print(
        json.dumps(
            {
                "label": label,
                "peak_live": peak_live,
                "peak_reserved": peak_reserved,
                "cold": cold,
                "warm": warm,
                "allocs": after.get("num_device_alloc", 0) - before.get("num_device_alloc", 0),
                "frees": after.get("num_device_free", 0) - before.get("num_device_free", 0),
            }
        )
    )


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return 0
    paths = sys.argv[1:]
    if not paths:
        print(__doc__)
        return 2
    figures = {}

    def emit(name, value, unit, note):
        print(f"{name} {value:.6g} {unit}")
        figures[name] = {"value": float(value), "unit": unit, "note": note}

    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        model = "" if stem == "alloc_trace" else f"_{stem}"
        for label, setting in ALLOCATORS:
            env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=setting)
            run = subprocess.run(
                [sys.executable, __file__, "--child", path, label],
                env=env,
                capture_output=True,
                text=True,
            )
            lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
            if run.returncode != 0 or not lines:
                print(f"# {label} on {path} failed: {run.stderr.strip()[-400:]}")
                continue
            r = json.loads(lines[-1])
            name = f"{label}_trace{model}"
            emit(f"{name}_peak_reserved", r["peak_reserved"] / GIB, "GiB", f"max_memory_reserved ({setting})")
            emit(f"{name}_reserved_over_live", r["peak_reserved"] / r["peak_live"], "ratio", "peak reserved / peak live requested")
            emit(f"{name}_replay_s", r["cold"], "s", f"{path}: replay from an empty cache, wall, with synchronize")
            emit(f"{name}_replay_warm_s", r["warm"], "s", "the same replay again, the cache populated")
            emit(f"{name}_device_allocs", r["allocs"], "allocations", "num_device_alloc over the cold replay")
            emit(f"{name}_device_frees", r["frees"], "allocations", "num_device_free over the cold replay")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "torch_trace.json"), "w") as f:
            json.dump({"tool": "torch_trace", "figures": figures}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
