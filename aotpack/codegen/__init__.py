"""Artifacts -> the generated sources of the wheel: C tables and launch glue, the CPython module,
the Python package (``__init__.py``, stubs) and the manifest. Everything here is plain text built
from frozen data, so tests check it without a compiler or a GPU."""

from __future__ import annotations

from dataclasses import dataclass

from ..compilers import Artifact, Outcome, Pruned
from ..plan import Variant
from ..recipe import Kernel, Recipe


@dataclass(frozen=True, kw_only=True)
class KernelBuild:
    """One kernel with its compiled and pruned variants, in plan order."""

    kernel: Kernel
    variants: tuple[tuple[Variant, Artifact], ...]
    pruned: tuple[tuple[Variant, Pruned], ...]
    min_driver: dict[str, int]  # target -> CUDA driver version its images need


@dataclass(frozen=True, kw_only=True)
class BuildInput:
    recipe: Recipe
    kernels: tuple[KernelBuild, ...]
    versions: tuple[tuple[str, str], ...]
    sources: tuple[tuple[str, str], ...] = ()  # (path relative to the recipe, sha256) of every input file


def group(
    recipe: Recipe,
    variants: tuple[Variant, ...],
    outcomes: dict[str, Outcome],
    min_driver: dict[tuple[str, str], int],
) -> tuple[KernelBuild, ...]:
    out = []
    for kernel in recipe.kernels:
        mine = [v for v in variants if v.kernel is kernel]
        built = tuple((v, o) for v in mine if isinstance(o := outcomes[v.id], Artifact))
        pruned = tuple((v, o) for v in mine if isinstance(o := outcomes[v.id], Pruned))
        drivers = {t: min_driver[kernel.name, t] for t in kernel.targets}
        out.append(KernelBuild(kernel=kernel, variants=built, pruned=pruned, min_driver=drivers))
    return tuple(out)
