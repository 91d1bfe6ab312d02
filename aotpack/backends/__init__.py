"""Variant -> Artifact. Each backend implements ``Compiler`` (``base.py``); ``BACKENDS`` maps a
recipe's backend name to the function that finds and checks its toolchain. ``compile_all`` runs the
variants in parallel worker processes (or on any ``concurrent.futures`` executor)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

from ..model import Backend, Kernel
from ..plan.variants import Variant
from .base import Artifact, Compiler, DriverFloor, LaunchNeeds, Outcome, Pruned, TmaLayout
from .cuda.compiler import NvccCompiler
from .triton.compiler import TritonCompiler

__all__ = ["BACKENDS", "Artifact", "Compiler", "DriverFloor", "LaunchNeeds", "Outcome", "Pruned", "TmaLayout",
           "compile_all", "compilers_for", "compilers_for_targets", "targets_of"]  # fmt: skip

# backend name -> (its targets, nvcc given by the user, keep line info, the CUDA driver floor) -> its compiler
BACKENDS: dict[Backend, Callable[[tuple[str, ...], str | None, bool, int | None], Compiler]] = {
    "triton": TritonCompiler.for_build,
    "cuda": NvccCompiler.for_build,
}


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
    return {backend: BACKENDS[backend](chosen, nvcc, line_info, cuda_floor) for backend, chosen in targets}


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
        futures = {executor.submit(*(task(v) if task else (compilers[v.kernel.backend].compile, v))): i
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
