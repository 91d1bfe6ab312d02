"""GPU time of launches, measured as METHOD.md asks: CUDA events around each launch, the L2 flushed
(a 256 MB memset queued) before each, warm-up first, the candidates interleaved rep by rep in an
order that rotates (drift and position hit all alike), medians."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

FLUSH = torch.empty(256 << 20, dtype=torch.int8, device="cuda")


def interleaved_ms(
    launches: dict[str, Callable[[], object]], reps: int, warmup: int, warmup_s: float = 0.0
) -> dict[str, float]:
    """Median milliseconds of each launch. Warm-up: ``warmup`` launches of each, repeated (with the
    flush) for at least ``warmup_s`` seconds when given (after compilations the GPU idled and its
    clocks dropped)."""
    start = time.perf_counter()
    while True:
        for launch in launches.values():
            for _ in range(warmup):
                if warmup_s:
                    FLUSH.zero_()
                launch()
        torch.cuda.synchronize()
        if time.perf_counter() - start >= warmup_s:
            break
    names = list(launches)
    events = {n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
              for n in names}  # fmt: skip
    for rep in range(reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            begin, end = events[name][rep]
            FLUSH.zero_()
            begin.record()
            launches[name]()
            end.record()
    torch.cuda.synchronize()
    return {n: statistics.median(s.elapsed_time(e) for s, e in events[n]) for n in names}
