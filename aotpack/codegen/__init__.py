"""Artifacts -> the generated sources of the wheel: C tables and launch glue, the C API, the CPython module,
the Python package (``__init__.py``, stubs) and the manifest. Everything here is plain text built
from frozen data, so tests check it without a compiler or a GPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import backends, facts
from ..backends import Artifact, DriverFloor, Outcome, Pruned
from ..model import Kernel, Recipe
from ..plan.variants import Variant


@dataclass(frozen=True, kw_only=True)
class KernelBuild:
    """One kernel with its compiled and pruned variants, in plan order."""

    kernel: Kernel
    variants: tuple[tuple[Variant, Artifact], ...]
    pruned: tuple[tuple[Variant, Pruned], ...]
    min_driver: dict[str, DriverFloor]  # target -> the CUDA driver its images need, and what set that

    @property
    def caller_launches(self) -> bool:
        """Launched with its backend's own syntax (Triton's ``kernel[grid](...)``: the caller gives grid and
        config): a Python launcher only, no dispatch call or C API."""
        return backends.of(self.kernel).caller_launches(self.kernel)


@dataclass(frozen=True, kw_only=True)
class BuildInput:
    recipe: Recipe
    kernels: tuple[KernelBuild, ...]
    versions: tuple[tuple[str, str], ...]
    sources: tuple[tuple[str, str], ...] = ()  # (path relative to the recipe, sha256) of every input file


def group(recipe: Recipe, outcomes: Sequence[tuple[Variant, Outcome]]) -> tuple[KernelBuild, ...]:
    """The outcomes (in plan order) per kernel of the recipe."""
    out = []
    for kernel in recipe.kernels:
        built = tuple((v, o) for v, o in outcomes if v.kernel is kernel and isinstance(o, Artifact))
        pruned = tuple((v, o) for v, o in outcomes if v.kernel is kernel and isinstance(o, Pruned))
        drivers = {t: driver_floor(t, [a for v, a in built if v.target == t]) for t in kernel.targets}
        out.append(KernelBuild(kernel=kernel, variants=built, pruned=pruned, min_driver=drivers))
    return tuple(out)


def driver_floor(target: str, built: list[Artifact]) -> DriverFloor:
    """The driver a target's images need: the newest any toolchain that built them needs, or the
    target's own floor when that is newer (or nothing was built)."""
    arch = facts.target(target).arch
    floors = [a.driver_floor for a in built if a.driver_floor is not None]
    newest = max(floors, key=lambda f: f.cuda, default=None)
    if newest is None or newest.cuda < arch.min_driver_cuda:
        return DriverFloor(arch.min_driver_cuda, f"{target} itself")
    return newest
