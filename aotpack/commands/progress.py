"""The build's progress on stderr, as both front ends show it: ``aotpack build`` and the PEP 517 backend
(``build_meta``). The pipeline only reports outcomes (``pipeline.build.Progress``); what is shown, and the ETA,
is decided here.

Why not rich's progress bar: the line itself is a dozen lines of code here, and the ETA (paces per kernel and
backend) is what matters, which a progress library does not know; rich would be one more dependency in every
isolated build environment of every kernel project, for a line that a front end (pip, build) mostly captures
as a log anyway."""

from __future__ import annotations

import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TextIO

from ..backends import Outcome, Pruned
from ..plan.variants import Variant


class Progress:
    """Build progress on stderr: on a terminal one line, cut to its width and rewritten in place; in a log, a
    plain line per tenth of the work.

    The ETA counts each kernel's remaining variants at that kernel's own pace: kernels of one backend differ by
    tens of times (a matmul's configs against an element-wise add's, an nvcc variant against a Triton one). A
    kernel with none compiled yet goes at its backend's pace, and with none of its backend either, at the pace
    of everything compiled. Variants from the cache cost nothing and are no sample of any pace.

    A pace is wall time per completed variant: the time between one completion and the next is charged to the
    variant that completed (the first one also carries the pool's start). It is not divided by the number of
    compile processes: with ``-j N`` busy, completions come N times as often, so the wall time between them is
    already a variant's cost over N, and the remaining variants times that pace is the remaining wall time.
    Which kernel a stretch of time is charged to is blurred where the pool holds several kernels' variants at
    once; the pipeline submits the kernels' variants evenly interleaved (``pipeline.build.compile_order``), so
    the mix still to come is the mix already charged and the sum stays right."""

    def __init__(self, quiet: bool, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.stream = stream or sys.stderr
        self.tty, self.quiet, self.clock = self.stream.isatty(), quiet, clock
        self.planned(())

    def planned(self, variants: Sequence[Variant]) -> None:
        self.left = Counter(v.kernel.name for v in variants)  # variants still to come, per kernel
        self.backend = {v.kernel.name: v.kernel.backend for v in variants}
        self.total, self.done, self.cached, self.failed = len(variants), 0, 0, 0
        self.spent: dict[str, float] = dict.fromkeys(self.left, 0.0)  # seconds charged per kernel
        self.compiled: Counter[str] = Counter()  # variants compiled (not from the cache) per kernel
        self.start = self.last = self.clock()

    def eta(self) -> float:
        """Seconds until the last variant completes, at the paces measured so far."""
        return sum(n * self._pace(kernel) for kernel, n in self.left.items())

    def _pace(self, kernel: str) -> float:
        for group in ([kernel], [k for k, b in self.backend.items() if b == self.backend[kernel]], list(self.spent)):
            compiled = sum(self.compiled[k] for k in group)
            if compiled:
                return sum(self.spent[k] for k in group) / compiled
        return 0.0  # nothing compiled yet: no pace to tell

    def __call__(self, variant: Variant, outcome: Outcome, cached: bool) -> None:
        now = self.clock()
        kernel = variant.kernel.name
        self.done += 1
        self.left[kernel] -= 1
        self.cached += cached
        if not cached:
            self.spent[kernel] += now - self.last
            self.compiled[kernel] += 1
        self.last = now
        if isinstance(outcome, Pruned):
            self.failed += 1
            if not self.quiet:
                self._print(f"pruned {outcome.variant_id}: {outcome.reason}", final=True)
        if self.quiet:
            return
        line = (f"[{self.done}/{self.total}] {now - self.start:.0f}s, eta {self.eta():.0f}s, "
                f"{self.cached} cached, {self.failed} pruned  {variant.id}")  # fmt: skip
        if self.tty or self.done == self.total or self.done % max(1, self.total // 10) == 0:
            self._print(line, final=self.done == self.total)

    def _print(self, line: str, final: bool) -> None:
        if not self.tty:
            print(line, file=self.stream, flush=True)
            return
        width = shutil.get_terminal_size().columns - 1
        cut = line if len(line) <= width else line[: max(0, width - 1)] + "…"
        print(f"\r\033[K{cut}", end="\n" if final else "", file=self.stream, flush=True)
