"""Variant -> Artifact. Each backend (Triton today) implements ``Compiler``; ``COMPILERS`` maps a
recipe's backend name to it. ``compile_all`` runs the variants in parallel worker processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any, Protocol

from ..plan import Variant
from ..recipe import Backend, Kernel


@dataclass(frozen=True, kw_only=True)
class TmaLayout:
    """How the launcher encodes one host tensor descriptor (``cuTensorMapEncodeTiled``), as the
    compiler chose it: the box (outermost dimension first; it may be smaller than the recipe's
    block, which the kernel then loads in several boxes), swizzle and element type."""

    box: tuple[int, ...]
    swizzle: int  # CUtensorMapSwizzle
    elem_type: int  # CUtensorMapDataType (the host enum)
    elem_size: int


@dataclass(frozen=True, kw_only=True)
class LaunchNeeds:
    """What a launch must provide beyond grid, block and parameters."""

    scratch: tuple[int, int] = (0, 1)  # global scratch bytes per program and alignment
    profile_scratch: tuple[int, int] = (0, 1)  # the same for the profiler's buffer
    num_ctas: int = 1  # thread-block cluster size along x
    cooperative: bool = False
    pdl: bool = False  # programmatic dependent launch
    tma: tuple[TmaLayout, ...] | None = None  # per tensor-descriptor argument; None: passed decomposed


@dataclass(frozen=True)
class DriverFloor:
    """The oldest CUDA driver that loads a target's code (1000*major + 10*minor), and what set it."""

    cuda: int
    set_by: str  # the toolchain, such as "ptxas 12.2 (nvidia-cuda-nvcc-cu12 12.2.140)"


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A compiled variant: the cubin and what the launcher needs to know about it."""

    variant_id: str
    image: bytes
    entry: str
    shared: int  # dynamic shared memory a launch passes, when fixed at build time (Triton)
    static_shared: int  # shared memory the code declares itself (CUDA __shared__ arrays)
    num_warps: int  # 0 when the recipe gives the block shape (CUDA)
    extra_pointer_params: int  # trailing pointer params the compiler adds (Triton: scratch buffers)
    needs: LaunchNeeds = LaunchNeeds()
    metadata: tuple[tuple[str, str], ...]  # compiler facts for the manifest, as text
    # the driver its code needs, set by the toolchain that built it: a CUDA X.Y toolchain's code is taken as
    # needing an X.Y driver (minor-version compatibility is not relied on); None: the target's own floor
    driver_floor: DriverFloor | None = None


@dataclass(frozen=True, kw_only=True)
class Pruned:
    """A variant that did not compile, with the reason. ``fatal``: it compiled, but needs what the
    runtime cannot give it; the build fails rather than ship the rest without it."""

    variant_id: str
    reason: str
    fatal: bool = False


Outcome = Artifact | Pruned


class Compiler(Protocol):
    def versions(self) -> Mapping[str, str]:
        """Toolchain versions recorded in the manifest."""
        ...

    def check(self, kernels: Iterable[Kernel]) -> None:
        """Check the recipe against the kernel sources before compiling; raise RecipeError."""
        ...

    def compile(self, variant: Variant) -> Outcome:
        """Compile one variant (runs in a worker process)."""
        ...


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
    from .cuda import NvccCompiler
    from .triton import TritonCompiler

    found: dict[Backend, Compiler] = {}
    for backend, chosen in targets:
        if backend == "triton":
            found[backend] = TritonCompiler.find(chosen, cuda_floor, line_info)
        else:
            found[backend] = NvccCompiler.find(nvcc, cuda_floor)
    return found


def compile_all(
    variants: Iterable[Variant],
    compilers: Mapping[Backend, Compiler],
    jobs: int | None = None,
    executor: Executor | None = None,
    progress: Callable[[Variant, Outcome], None] | None = None,
    task: Callable[[Variant], tuple[Callable[[Any], Outcome], Any]] | None = None,
) -> dict[str, Outcome]:
    """Compile every variant; returns outcomes by variant id (in the plan's order). ``executor``
    may be any concurrent.futures.Executor (a process pool by default); ``task`` gives the function
    and argument it runs per variant (default: the backend's compile of the variant)."""
    variants = list(variants)
    own = executor is None
    if executor is None:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(variants)))
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        futures = {executor.submit(*(task(v) if task else (compilers[v.kernel.backend].compile, v))): v
                   for v in variants}  # fmt: skip
        done: dict[str, Outcome] = {}
        for future in as_completed(futures):
            variant = futures[future]
            outcome = future.result()
            done[variant.id] = outcome
            if progress is not None:
                progress(variant, outcome)
    finally:
        if own:
            executor.shutdown(cancel_futures=True)
    return {v.id: done[v.id] for v in variants}
