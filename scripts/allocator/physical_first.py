#!/usr/bin/env python3
"""A physical-first pool, simulated: blocks composed of views of free page runs.

The growable pool places blocks in an address range and backs them with chunks mapped
once; a chunk partly under a live block strands its free pages. This probe asks whether
the other order does better: physical pages are the truth, and each block of more than
1 MiB gets fresh addresses of its own, backed by mapping (again) whichever chunks hold
free pages, as *views*. `cuMemMap` maps a chunk only whole, so a block can be composed of
one run of free pages of one chunk (its other pages mapped around the block, unused), or of
a run that ends its chunk, whole free chunks, and a run that starts its chunk. In order, a
request takes:

1. a freed block's addresses again (the last 64 freed), if all their pages are still free:
   no driver call;
2. a run of free pages at the edge of a chunk, or a whole free chunk (best fit);
3. with `mid-first`, any run that fits next; with `glue-first`, a composition of the largest
   run ending a chunk, whole free chunks and the largest run starting one, when those hold
   enough pages, else any run that fits;
4. the composition above, with a new chunk for the pages still missing.

It prints peak physical / peak live (blocks of more than 1 MiB), chunks created, views
mapped, freed blocks taken back, and an estimate of the driver time: each view mapped,
granted and unmapped once (43 µs on an H200, `scripts/anchors/vmm_costs.cu`), each chunk
created (10 µs).

    python3 scripts/allocator/physical_first.py glue-first /tmp/traces/*.txt
"""
import sys

from va_extent import load

PAGE = 2 << 20
SMALL = 1 << 20
RECENT = 64


class Chunk:
    """A physical allocation of `pages` pages and which of them live blocks use."""

    def __init__(self, pages):
        self.pages = pages
        self.used = bytearray(pages)

    def free_runs(self):
        """The runs of free pages, as (first, past the last)."""
        runs, page = [], 0
        while page < self.pages:
            if self.used[page]:
                page += 1
                continue
            start = page
            while page < self.pages and not self.used[page]:
                page += 1
            runs.append((start, page))
        return runs


def simulate(events, mode):
    chunks, live, recent = [], {}, []
    physical = peak_physical = live_bytes = peak_live = 0
    created = views = reused = 0

    def mark(runs, used):
        for chunk, first, last in runs:
            for page in range(first, last):
                chunk.used[page] = used

    for kind, ident, size in events:
        if kind == "free":
            if ident in live:
                runs, size = live.pop(ident)
                live_bytes -= size
                mark(runs, 0)
                recent.append(runs)
                del recent[:-RECENT]
            continue
        if size <= SMALL:
            continue
        live_bytes += size
        peak_live = max(peak_live, live_bytes)
        need = -(-size // PAGE)
        # 1. A freed block's addresses, its pages still free.
        best = None
        for runs in recent:
            pages = sum(last - first for _, first, last in runs)
            if pages >= need and (best is None or pages < best[0]):
                if all(not chunk.used[p] for chunk, first, last in runs for p in range(first, last)):
                    best = (pages, runs)
        if best:
            recent.remove(best[1])
            take, left = [], need
            for chunk, first, last in best[1]:
                if left:
                    count = min(last - first, left)
                    take.append((chunk, first, first + count))
                    left -= count
            mark(take, 1)
            live[ident] = (take, size)
            reused += 1
            continue
        tails, heads, wholes, anywhere = [], [], [], None
        for chunk in chunks:
            for first, last in chunk.free_runs():
                length = last - first
                if first == 0 and last == chunk.pages:
                    wholes.append((length, chunk))
                elif last == chunk.pages:
                    tails.append((length, chunk, first))
                elif first == 0:
                    heads.append((length, chunk, last))
                if length >= need and (anywhere is None or length < anywhere[0]):
                    anywhere = (length, chunk, first)
        # 2. An edge run or a whole chunk: what is left stays at an edge.
        edge = None
        for length, chunk, first in tails:
            if length >= need and (edge is None or length < edge[0]):
                edge = (length, [(chunk, first, first + need)])
        for length, chunk, last in heads:
            if length >= need and (edge is None or length < edge[0]):
                edge = (length, [(chunk, last - need, last)])
        for length, chunk in wholes:
            if length >= need and (edge is None or length < edge[0]):
                edge = (length, [(chunk, 0, need)])
        if edge is None and anywhere is not None:
            glued = (max((t[0] for t in tails), default=0) + max((h[0] for h in heads), default=0)
                     + sum(length for length, _ in wholes))
            if mode == "mid-first" or glued < need:
                length, chunk, first = anywhere
                edge = (length, [(chunk, first, first + need)])
        if edge:
            mark(edge[1], 1)
            live[ident] = (edge[1], size)
            views += 1
            continue
        # 3-4. Glue the largest tail, whole chunks and the largest head; a new chunk for the rest.
        take, left = [], need
        tails.sort(key=lambda t: -t[0])
        heads.sort(key=lambda h: -h[0])
        wholes.sort(key=lambda w: -w[0])
        front = back = None
        if tails:
            length, chunk, _ = tails[0]
            count = min(length, left)
            front = (chunk, chunk.pages - count, chunk.pages)
            left -= count
        for length, chunk in wholes:
            if left and length <= left:
                take.append((chunk, 0, chunk.pages))
                left -= length
        if left and heads:
            length, chunk, _ = heads[0]
            count = min(length, left)
            back = (chunk, 0, count)
            left -= count
        if left:
            chunk = Chunk(left)
            chunks.append(chunk)
            created += 1
            physical += left * PAGE
            peak_physical = max(peak_physical, physical)
            take.append((chunk, 0, left))
        runs = ([front] if front else []) + take + ([back] if back else [])
        mark(runs, 1)
        live[ident] = (runs, size)
        views += len(runs)
    return peak_physical / peak_live, created, views, reused


def main():
    mode = sys.argv[1]
    for path in sys.argv[2:]:
        ratio, created, views, reused = simulate(load(path), mode)
        driver_ms = (views * 43 + created * 10) / 1000
        print(f"{path} ({mode}): peak physical / peak live {ratio:.4f}, chunks {created}, "
              f"views {views}, taken back {reused}, driver time about {driver_ms:.0f} ms")


if __name__ == "__main__":
    main()
