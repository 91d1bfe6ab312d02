"""The backends behind one seam. Each states what the generic stages need (``BackendModule``, ``base.py``)
and compiles through its ``Compiler``; ``BACKENDS`` registers them by the recipe's backend name, and ``of``
gives a kernel's. ``compile_all`` runs the variants in parallel worker processes (or on any
``concurrent.futures`` executor)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any, TypeVar

from ..model import Backend, Kernel
from ..plan.variants import Variant
from .base import Artifact, BackendModule, Compiler, DriverFloor, Kept, LaunchNeeds, Outcome, Pruned, TmaLayout
from .cuda.backend import CUDA
from .triton.backend import TRITON

__all__ = ["BACKENDS", "TEMP_PREFIXES", "Artifact", "BackendModule", "Compiler", "DriverFloor", "Kept", "LaunchNeeds",
           "Outcome", "Pruned", "TmaLayout", "check_all", "compile_all", "compilers_for",
           "compilers_for_targets", "entry_of", "of", "targets_of"]  # fmt: skip

T = TypeVar("T")

BACKENDS: dict[Backend, BackendModule] = {"triton": TRITON, "cuda": CUDA}
TEMP_PREFIXES = tuple(prefix for backend in BACKENDS.values() for prefix in backend.temp_prefixes)


def of(kernel: Kernel) -> BackendModule:
    """The backend that builds the kernel."""
    return entry_of(BACKENDS, kernel)


def entry_of(table: Mapping[Backend, T], kernel: Kernel) -> T:
    """The kernel's entry in a table keyed by backend name (a build's compilers, their versions)."""
    return table[kernel.backend]


def compilers_for(
    kernels: Iterable[Kernel], nvcc: str | None = None, line_info: bool = False, cuda_floor: int | None = None
) -> dict[Backend, Compiler]:
    """One compiler per backend the kernels use, found and checked now (not in the workers).
    ``line_info``: Triton's cubins keep their line info (and with it the sources' absolute paths).
    ``cuda_floor``: the oldest CUDA driver the wheel must load on; every toolchain chosen must build
    for it (default: the oldest toolchain found that builds each target)."""
    return compilers_for_targets(targets_of(kernels), nvcc, line_info, cuda_floor)


def targets_of(kernels: Iterable[Kernel]) -> tuple[tuple[Backend, tuple[str, ...]], ...]:
    """Per backend the kernels use, the targets they build for (sorted)."""
    kernels = list(kernels)
    return tuple((backend, tuple(sorted({t for k in kernels if k.backend == backend for t in k.targets})))
                 for backend in sorted({k.backend for k in kernels}))  # fmt: skip


def compilers_for_targets(
    targets: Iterable[tuple[Backend, tuple[str, ...]]], nvcc: str | None, line_info: bool, cuda_floor: int | None
) -> dict[Backend, Compiler]:
    return {backend: BACKENDS[backend].compiler(chosen, nvcc, line_info, cuda_floor) for backend, chosen in targets}


def compile_all(
    variants: Iterable[Variant],
    compilers: Mapping[Backend, Compiler],
    jobs: int | None = None,
    executor: Executor | None = None,
    progress: Callable[[Variant, Outcome], None] | None = None,
    task: Callable[[Variant], tuple[Callable[[Any], Outcome], Any]] | None = None,
) -> list[tuple[Variant, Outcome]]:
    """Compile every variant; returns each with its outcome, in the plan's order. ``executor``
    may be any concurrent.futures.Executor (a process pool by default); ``task`` gives the function
    and argument it runs per variant (default: the backend's compile of the variant)."""
    variants = list(variants)
    own = executor is None
    if executor is None:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(variants)))
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        futures = {executor.submit(*(task(v) if task else (entry_of(compilers, v.kernel).compile, v))): i
                   for i, v in enumerate(variants)}  # fmt: skip
        done: dict[int, Outcome] = {}
        for future in as_completed(futures):
            i = futures[future]
            done[i] = future.result()
            if progress is not None:
                progress(variants[i], done[i])
    finally:
        if own:
            executor.shutdown(cancel_futures=True)
    return [(v, done[i]) for i, v in enumerate(variants)]


def check_all(compilers: Mapping[Backend, Compiler], kernels: Iterable[Kernel]) -> None:
    """Each compiler checks its backend's kernels against their sources, before anything compiles."""
    kernels = list(kernels)
    for backend, compiler in compilers.items():
        compiler.check([k for k in kernels if k.backend == backend])
