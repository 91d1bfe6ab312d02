"""Recipe -> the variants to compile: kernel x types x config x target x specialization.

A kernel whose signature carries divisibility hints gets two variants per point: ``hinted``
(compiled assuming the hints hold; launched only when the call satisfies them) and ``safe``.
Required hints (``:16!``) are assumed by every variant; the runtime refuses calls that break them.
Variant ids are stable and readable: ``add/T=fp32,BLOCK=1024,w4,s1/sm_90a/hinted``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Literal

from .errors import RecipeError
from .recipe import Arg, Config, Kernel, Recipe

Specialization = Literal["hinted", "safe", "plain"]


@dataclass(frozen=True, kw_only=True)
class Variant:
    kernel: Kernel
    binding: tuple[tuple[str, str], ...]
    config: Config
    target: str
    specialization: Specialization

    @property
    def id(self) -> str:
        types = [f"{var}={dtype}" for var, dtype in self.binding]
        point = ",".join([*types, self.config.label])
        tail = "" if self.specialization == "plain" else f"/{self.specialization}"
        return f"{self.kernel.name}/{point}/{self.target}{tail}"

    @property
    def hinted(self) -> bool:
        return self.specialization == "hinted"

    def assumes(self, arg: Arg) -> bool:
        """Whether this variant's code assumes the argument's hint."""
        return arg.hint is not None and (arg.required or self.hinted)

    def dtype_of(self, arg_name: str) -> str:
        """The concrete element or scalar type of an argument in this variant."""
        arg = self.kernel.arg(arg_name)
        return dict(self.binding)[arg.dtype] if arg.typevar else arg.dtype


def specializations(kernel: Kernel) -> tuple[Specialization, ...]:
    has_hints = any(a.hint and not a.required for a in kernel.args)
    return ("hinted", "safe") if has_hints else ("plain",)


def plan_variants(recipe: Recipe, select: tuple[str, ...] = (), winners_only: bool = False) -> tuple[Variant, ...]:
    """Every variant of the recipe in a stable order; ``select`` keeps ids matching any glob;
    ``winners_only`` keeps the configs some dispatch row picks, and each kernel's default."""
    variants = tuple(
        Variant(kernel=kernel, binding=binding, config=config, target=target, specialization=spec)
        for kernel in recipe.kernels
        for target in kernel.targets
        for binding in kernel.bindings
        for config in kernel.configs
        if not winners_only or config == kernel.default or any(r.config == config for r in kernel.rules)
        for spec in specializations(kernel)
    )
    if not select:
        return variants
    chosen = tuple(v for v in variants if any(fnmatch.fnmatchcase(v.id, pattern) for pattern in select))
    if not chosen:
        raise RecipeError(f"no variant id matches {', '.join(select)} (ids look like {variants[0].id})")
    for kernel in recipe.kernels:
        if not any(v.kernel is kernel and v.config == kernel.default for v in chosen):
            raise RecipeError(
                f"the selection leaves kernel {kernel.name!r} without its default config "
                f"{kernel.default.label}; widen the selection"
            )
    return chosen
