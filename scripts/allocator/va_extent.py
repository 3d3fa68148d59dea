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

Policies: `best` (smallest hole that fits, lowest address on ties), `first` (lowest
address), `last` (highest address), `worst` (largest hole).
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


def extent_over_live(events, policy, dump=False):
    """Largest extent / largest live total of the trace's large blocks under `policy`; with
    `dump`, also prints the heap (blocks and holes, MiB) when the extent was largest."""
    holes = []  # (offset, size), sorted by offset, all below `end`
    end = 0
    live = {}
    live_bytes = peak_live = peak_end = 0
    snapshot = None

    def free_hole(offset, size):
        nonlocal end
        i = bisect.bisect_left(holes, (offset, 0))
        if i > 0 and holes[i - 1][0] + holes[i - 1][1] == offset:
            i -= 1
            offset, size = holes[i][0], holes[i][1] + size
            holes.pop(i)
        if i < len(holes) and offset + size == holes[i][0]:
            size += holes[i][1]
            holes.pop(i)
        if offset + size == end:
            end = offset
        else:
            holes.insert(i, (offset, size))

    for index, (kind, ident, size) in enumerate(events):
        if kind == "alloc":
            if size <= SMALL:
                continue
            size = -(-size // ALIGN) * ALIGN
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
            fits = [j for j, (_, hole) in enumerate(holes) if hole >= size]
            if fits:
                if policy == "best":
                    j = min(fits, key=lambda j: (holes[j][1], holes[j][0]))
                elif policy == "first":
                    j = fits[0]
                elif policy == "last":
                    j = fits[-1]
                else:
                    j = max(fits, key=lambda j: holes[j][1])
                offset, hole = holes[j]
                if hole > size:
                    holes[j] = (offset + size, hole - size)
                else:
                    holes.pop(j)
                live[ident] = (offset, size)
            else:
                live[ident] = (end, size)
                end += size
            if end > peak_end:
                peak_end = end
                if dump:
                    snapshot = (index, live_bytes, sorted(live.values()), list(holes))
        elif ident in live:
            offset, size = live.pop(ident)
            live_bytes -= size
            free_hole(offset, size)
    if snapshot:
        index, live_then, blocks, free = snapshot
        mib = float(1 << 20)
        print(f"largest extent {peak_end / mib:.1f} MiB at event {index} of {len(events)}, "
              f"{live_then / mib:.1f} MiB live then (peak {peak_live / mib:.1f})")
        for offset, size, kind in sorted([(o, s, "block") for o, s in blocks] + [(o, s, "hole") for o, s in free]):
            print(f"{offset / mib:10.1f} {size / mib:8.1f} {kind}")
    return peak_end / peak_live


def main():
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
