"""The timing the torch anchors share: the median of CUDA-event timings on cuda:0."""

import torch


def median_ms(fn, reps=10):
    """Median milliseconds of `reps` timed calls of `fn`, after 3 warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]
