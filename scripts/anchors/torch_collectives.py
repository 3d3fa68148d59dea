#!/usr/bin/env python3
"""torch.distributed all_gather, reduce_scatter and broadcast: the anchors for the
all-gather, reduce-scatter and broadcast figures of `cubert bench collective`.

Launch on the GPU machine, one process per GPU (N = number of GPUs):

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    torchrun --standalone --nproc_per_node=N scripts/anchors/torch_collectives.py [--quick]

The script forces those three variables itself before NCCL starts, so NVLink multicast is
never used whatever the caller's environment says.

For f32 buffers of 64 MiB and 1 GiB (64 MiB with --quick), the size of the largest buffer
as nccl-tests counts it (the gathered output, the scattered input, the broadcast buffer):

- dist.all_gather_into_tensor(out, part), dist.reduce_scatter_tensor(part, whole, SUM),
  dist.broadcast(buffer, src=0);
- each checked once from fresh inputs (rank r's input is base * (r + 1) + r, base an
  integer in [-8, 8], exact in f32), every element;
- timed with CUDA events around K back-to-back operations after a barrier (K = 20 up to
  256 MiB, 10 above; 10 trials, 3 with --quick), the slowest rank's median per operation;
- algbw = size / time; busbw = algbw * (n - 1) / n for the all-gather and reduce-scatter,
  algbw for the broadcast (nccl-tests' definitions; GB = 1e9 bytes).

Rank 0 prints `torch_<allgather|reducescatter|broadcast>_busbw_<size> VALUE GB/s` and
`..._time_<size> VALUE us` lines, the names of cubert's figures with `torch_` for
`cubert_`, and writes $OUT/torch_collectives.json when OUT is set. Exit status 0 only if
every check passed.
"""
import os

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

QUICK = "--quick" in sys.argv
MIB, GIB = 1 << 20, 1 << 30


def label(size):
    return f"{size // MIB}MiB" if size < GIB else f"{size // GIB}GiB"


def main():
    if "LOCAL_RANK" not in os.environ:
        print("FAIL run me under torchrun --standalone --nproc_per_node=N", flush=True)
        return 2
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group(backend="nccl", device_id=dev)
    rank, n = dist.get_rank(), dist.get_world_size()
    r0 = rank == 0
    sizes = [64 * MIB] if QUICK else [64 * MIB, GIB]
    largest = max(sizes) // 4
    base = torch.empty(largest, dtype=torch.float32, device=dev)
    if r0:
        g = torch.Generator(device=dev)
        g.manual_seed(1234)
        base.copy_(torch.randint(-8, 9, (largest,), generator=g, device=dev, dtype=torch.int32))
    dist.broadcast(base, src=0)
    s1, s0 = n * (n + 1) // 2, n * (n - 1) // 2

    def own(count, r=rank):
        return base[:count] * (r + 1) + r

    def make(kind, count):
        """(operation, expected result, result tensor, busbw factor) of `kind` over `count`."""
        part = count // n
        if kind == "allgather":
            send, recv = own(part), torch.empty(count, dtype=torch.float32, device=dev)
            return (lambda: dist.all_gather_into_tensor(recv, send),
                    lambda: torch.cat([own(part, r) for r in range(n)]), recv, (n - 1) / n)
        if kind == "reducescatter":
            send, recv = own(count), torch.empty(part, dtype=torch.float32, device=dev)
            return (lambda: dist.reduce_scatter_tensor(recv, send),
                    lambda: base[rank * part:(rank + 1) * part] * s1 + s0, recv, (n - 1) / n)
        buf = own(count)
        return lambda: dist.broadcast(buf, src=0), lambda: base[:count], buf, 1.0

    figures = {}
    all_ok = True
    for kind in ("allgather", "reducescatter", "broadcast"):
        for size in sizes:
            count = size // 4 // n * n
            op, expect, result, factor = make(kind, count)
            op()
            ok = torch.equal(result, expect())
            okt = torch.tensor([1 if ok else 0], dtype=torch.int32, device=dev)
            dist.all_reduce(okt, op=dist.ReduceOp.MIN)
            ok = bool(okt.item())
            all_ok &= ok
            k, trials = (20, 3 if QUICK else 10) if size <= 256 * MIB else (10, 2 if QUICK else 5)
            for _ in range(3):
                op()
            samples = []
            for _ in range(trials):
                torch.cuda.synchronize(dev)
                dist.barrier()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(k):
                    op()
                e1.record()
                e1.synchronize()
                samples.append(e0.elapsed_time(e1) * 1e3 / k)
            t = torch.tensor([statistics.median(samples)], dtype=torch.float64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            t_us = t.item()
            busbw = count * 4 / (t_us * 1e-6) / 1e9 * factor
            note = f"{n} GPUs, f32, K = {k}, {trials} trials, slowest rank's median, CUDA events"
            for name, value, unit in ((f"torch_{kind}_busbw_{label(size)}", busbw, "GB/s"),
                                      (f"torch_{kind}_time_{label(size)}", t_us, "us")):
                figures[name] = {"value": value, "unit": unit, "note": note}
                if r0:
                    print(f"{name} {value:.2f} {unit}{'' if ok else '  (CHECK FAILED)'}", flush=True)
            del op, expect, result
            torch.cuda.empty_cache()
    if r0:
        out = os.environ.get("OUT")
        if out:
            with open(os.path.join(out, "torch_collectives.json"), "w") as f:
                json.dump({"tool": "torch", "torch": torch.__version__, "world_size": n,
                           "device": torch.cuda.get_device_name(dev), "figures": figures}, f, indent=1)
        print("# torch_collectives: all checks passed" if all_ok else "FAIL torch_collectives", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
