#!/usr/bin/env python3
"""How far a placement policy alone spreads a trace's large blocks over an address range.

Replays allocation traces (`alloc ID SIZE` / `free ID`, as `cubert bench --only trace
--write-traces DIR` writes them, and `../shared/anchors/alloc_trace.txt`) through a plain
heap: blocks of more than 1 MiB (the growable pool's requests; smaller ones go to the small
pool) rounded to 512 bytes, placed in a free hole chosen by the policy or at the end,
holes merged with their neighbours when blocks are freed, the end pulled back when the last
block goes. It prints, per policy, the largest extent the heap reached over the largest live
total: what a pool that maps pages under its whole extent and never moves them would hold
(PyTorch's expandable segments, cubert's growable pool with no chunk moves).

    python3 scripts/allocator/va_extent.py /tmp/traces/*.txt
    python3 scripts/allocator/va_extent.py --dump /tmp/traces/mlp.txt   # best fit's heap at its largest extent
    python3 scripts/allocator/va_extent.py --oracle /tmp/traces/*.txt    # lifetimes known in advance

Policies: `best` (smallest hole that fits, lowest address on ties), `first` (lowest
address), `last` (highest address), `worst` (largest hole).

`--oracle` reads each block's lifetime (events until its free) from the trace itself, which no
allocator can, and keeps blocks living longer than a threshold in a heap of their own, both
heaps best fit; it prints the largest sum of the two extents over the largest live total,
per threshold: the most separating blocks by lifetime could give a pool whose pages follow
each heap's growing end.
"""
import bisect
import sys

ALIGN = 512
SMALL = 1 << 20
POLICIES = ("best", "first", "last", "worst")


def load(path):
    """The trace's events as (kind, id, size) tuples."""
    events = []
    with open(path) as trace:
        for line in trace:
            if line.startswith("#") or not line.strip():
                continue
            parts = line.split()
            events.append((parts[0], int(parts[1]), int(parts[2]) if parts[0] == "alloc" else 0))
    return events


class Heap:
    """Holes below a growing end; a block goes to the hole `policy` picks, or at the end."""

    def __init__(self, policy="best"):
        self.policy = policy
        self.holes = []  # (offset, size), sorted by offset, all below `end`
        self.end = 0

    def alloc(self, size):
        """The offset of a new block of `size` bytes."""
        holes = self.holes
        fits = [j for j, (_, hole) in enumerate(holes) if hole >= size]
        if not fits:
            self.end += size
            return self.end - size
        if self.policy == "best":
            j = min(fits, key=lambda j: (holes[j][1], holes[j][0]))
        elif self.policy == "first":
            j = fits[0]
        elif self.policy == "last":
            j = fits[-1]
        else:
            j = max(fits, key=lambda j: holes[j][1])
        offset, hole = holes[j]
        if hole > size:
            holes[j] = (offset + size, hole - size)
        else:
            holes.pop(j)
        return offset

    def free(self, offset, size):
        """Frees a block, merged with neighbouring holes; the end pulled back past it."""
        holes = self.holes
        i = bisect.bisect_left(holes, (offset, 0))
        if i > 0 and holes[i - 1][0] + holes[i - 1][1] == offset:
            i -= 1
            offset, size = holes[i][0], holes[i][1] + size
            holes.pop(i)
        if i < len(holes) and offset + size == holes[i][0]:
            size += holes[i][1]
            holes.pop(i)
        if offset + size == self.end:
            self.end = offset
        else:
            holes.insert(i, (offset, size))


def extent_over_live(events, policy, dump=False):
    """Largest extent / largest live total of the trace's large blocks under `policy`; with
    `dump`, also prints the heap (blocks and holes, MiB) when the extent was largest."""
    heap = Heap(policy)
    live = {}
    live_bytes = peak_live = peak_end = 0
    snapshot = None
    for index, (kind, ident, size) in enumerate(events):
        if kind == "alloc":
            if size <= SMALL:
                continue
            size = -(-size // ALIGN) * ALIGN
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
            live[ident] = (heap.alloc(size), size)
            if heap.end > peak_end:
                peak_end = heap.end
                if dump:
                    snapshot = (index, live_bytes, sorted(live.values()), list(heap.holes))
        elif ident in live:
            offset, size = live.pop(ident)
            live_bytes -= size
            heap.free(offset, size)
    if snapshot:
        index, live_then, blocks, free = snapshot
        mib = float(1 << 20)
        print(f"largest extent {peak_end / mib:.1f} MiB at event {index} of {len(events)}, "
              f"{live_then / mib:.1f} MiB live then (peak {peak_live / mib:.1f})")
        for offset, size, kind in sorted([(o, s, "block") for o, s in blocks] + [(o, s, "hole") for o, s in free]):
            print(f"{offset / mib:10.1f} {size / mib:8.1f} {kind}")
    return peak_end / peak_live


def split_by_lifetime(events, threshold):
    """Largest sum of extents / largest live total with blocks living more than `threshold`
    events in a heap of their own (lifetimes read from the trace)."""
    freed_at = {ident: index for index, (kind, ident, _) in enumerate(events) if kind == "free"}
    heaps = (Heap(), Heap())
    live = {}
    live_bytes = peak_live = peak_extent = 0
    for index, (kind, ident, size) in enumerate(events):
        if kind == "alloc":
            if size <= SMALL:
                continue
            size = -(-size // ALIGN) * ALIGN
            heap = heaps[0] if freed_at.get(ident, len(events)) - index > threshold else heaps[1]
            live[ident] = (heap, heap.alloc(size), size)
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
            peak_extent = max(peak_extent, heaps[0].end + heaps[1].end)
        elif ident in live:
            heap, offset, size = live.pop(ident)
            live_bytes -= size
            heap.free(offset, size)
    return peak_extent / peak_live


def main():
    if sys.argv[1:2] == ["--oracle"]:
        for path in sys.argv[2:]:
            events = load(path)
            thresholds = (10, 30, 100, 300, 1000, 3000, len(events) // 4, len(events) // 2)
            figures = " ".join(f"{t}:{split_by_lifetime(events, t):.4f}" for t in thresholds)
            print(f"{path}: {figures}")
        return
    if sys.argv[1:2] == ["--dump"]:
        for path in sys.argv[2:]:
            extent_over_live(load(path), "best", dump=True)
        return
    for path in sys.argv[1:]:
        events = load(path)
        figures = " ".join(f"{policy} {extent_over_live(events, policy):.4f}" for policy in POLICIES)
        print(f"{path}: {figures}")


if __name__ == "__main__":
    main()
