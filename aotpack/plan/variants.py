"""Recipe -> the variants to compile: kernel x types x config x target x specialization class.

A specialization class says, per argument, what the variant's code assumes of it, in the terms
Triton's JIT specializes on: ``D`` (an integer divisible by 16, or a pointer aligned to 16 bytes),
``1`` (an integer equal to 1, folded into the code as a constant), ``N`` (an optional pointer passed
as None, folded too) or nothing. The runtime computes a call's states the same way and launches the
most specialized class built whose assumptions the call satisfies; the least specialized class
assumes nothing and runs any call.

Which classes a kernel gets is ``classes.specs`` (the classes of typical calls, their one-argument
relaxations, floors); a relaxation is built only for the configs the dispatcher can pick.
Variant ids are stable and readable: ``add/T=fp32,BLOCK=1024,w4,s1/sm_90a/DDDD``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .. import expr
from ..errors import UsageError
from ..model import Arg, Config, Kernel, Recipe, const_text
from ..states import NONE
from ..words import plural
from .classes import Spec, recorded_floors, specs

_TARGET = re.compile(r"^(sm|compute)_\d+a?$")


@dataclass(frozen=True, kw_only=True)
class VariantId:
    """A variant's name: ``kernel/point/target[/specialization]``, the point being the type binding
    and config label (``T=fp16,BLOCK=1024,w4,s3``). ``str()`` writes it (manifest, ``--select``,
    messages) and ``parse`` reads it back; a string constexpr may hold '/', the other fields may not."""

    kernel: str
    point: str
    target: str
    specialization: str = "plain"

    def __str__(self) -> str:
        tail = "" if self.specialization == "plain" else f"/{self.specialization}"
        return f"{self.kernel}/{self.point}/{self.target}{tail}"

    @staticmethod
    def parse(text: str) -> VariantId:
        kernel, _, rest = text.partition("/")
        head, _, last = rest.rpartition("/")
        if _TARGET.match(last):
            point, target, spec = head, last, "plain"
        else:
            point, _, target = head.rpartition("/")
            spec = last
        if not kernel or not point or not _TARGET.match(target):
            raise ValueError(f"{text!r} is not a variant id (kernel/point/target[/specialization])")
        return VariantId(kernel=kernel, point=point, target=target, specialization=spec)


@dataclass(frozen=True, kw_only=True)
class Variant:
    kernel: Kernel
    binding: tuple[tuple[str, str], ...]
    config: Config
    target: str
    spec: Spec

    @property
    def specialization(self) -> str:
        return self.spec.name

    @property
    def ident(self) -> VariantId:
        types = [f"{var}={dtype}" for var, dtype in self.binding]
        return VariantId(kernel=self.kernel.name, point=",".join([*types, self.config.label]), target=self.target,
                         specialization=self.spec.name)  # fmt: skip

    @property
    def id(self) -> str:
        return str(self.ident)

    @property
    def hinted(self) -> bool:
        return self.spec.level == "hinted"

    def state(self, arg: Arg) -> str:
        """What this variant's code assumes of the argument."""
        return self.spec.states[self.kernel.args.index(arg)]

    def dtype_of(self, arg_name: str) -> str:
        """The concrete element or scalar type of an argument in this variant."""
        arg = self.kernel.arg(arg_name)
        return dict(self.binding)[arg.dtype] if arg.typevar else arg.dtype


def unreachable(kernel: Kernel, config: Config, spec: Spec) -> str | None:
    """Why no call can select this config in this class, or None. A bound constexpr whose expression
    reads only the config's constexprs and whether optional arguments are None (which the class
    fixes) is evaluated now: where it differs from the config's value, no call can run the variant."""
    consts = {n: int(v) for n, v in config.constexprs if isinstance(v, int)}
    states = dict(zip((a.name for a in kernel.args), spec.states, strict=True))
    for name, e in kernel.bound:
        calls = expr.tensor_calls(e)
        if any(c.func != "none" for c in calls) or any(n.id not in consts for n in expr.names(e)):
            continue  # depends on the call's values
        tensors = {expr.unparse(c.args[0]): None if states[expr.unparse(c.args[0])] == NONE else object()
                   for c in calls}  # fmt: skip
        try:
            value = expr.evaluate(e, consts, tensors)  # type: ignore[arg-type]
        except (ZeroDivisionError, ValueError):
            return f"{name} = {expr.unparse(e)} cannot be evaluated"
        if value != consts.get(name):
            return f"{name} = {expr.unparse(e)} is {value}, not {config.value(name)}"
    return None


def _points(kernel: Kernel, winners_only: bool) -> list[tuple[tuple[tuple[str, str], ...], Config, Spec]]:
    """The (binding, config, class) triples some call can select, in plan order: for a recorded
    kernel (``launch: triton``), those it lists and their floors."""
    classes = specs(kernel)
    if kernel.specialization.recorded:  # each recorded variant, and its floors (classes.recorded_floors)
        spec_of = {s.states: s for s in classes}
        found = [(p.binding, p.config, spec_of[states]) for p in kernel.points
                 for states in (p.states, *recorded_floors(kernel, p.states))]  # fmt: skip
        return list(dict.fromkeys(found))
    picked = {kernel.default, *(r.config for r in (*kernel.rules, *kernel.validation))}  # what the dispatcher can pick
    pairs = [
        (config, spec)
        for config in kernel.configs
        if not winners_only or config in picked
        for spec in classes
        if (config in picked or not spec.picked_only) and unreachable(kernel, config, spec) is None
    ]
    return [(binding, config, spec) for binding in kernel.bindings for config, spec in pairs]


def plan_variants(recipe: Recipe, winners_only: bool = False) -> tuple[Variant, ...]:
    """Every variant of the recipe that some call can select, in a stable order; ``winners_only``
    keeps the configs some dispatch row picks, and each kernel's default."""
    return tuple(
        Variant(kernel=kernel, binding=binding, config=config, target=target, spec=spec)
        for kernel in recipe.kernels
        for points in [_points(kernel, winners_only)]  # the same for every target
        for target in kernel.targets
        for binding, config, spec in points
    )


def select(recipe: Recipe, patterns: tuple[str, ...], winners_only: bool = False) -> tuple[Recipe, tuple[Variant, ...]]:
    """``--only``: the recipe narrowed to the kernels and targets of the variants whose ids match a glob,
    and those variants plus what makes them work: their kernel's default config, for each type binding,
    target and class selected (the dispatcher falls back to it). No patterns: everything."""
    if not patterns:
        return recipe, plan_variants(recipe, winners_only)
    every = plan_variants(recipe, winners_only)
    chosen = [v for v in every if any(fnmatch.fnmatchcase(v.id, pattern) for pattern in patterns)]
    if not chosen:
        raise UsageError(f"--only {' --only '.join(patterns)}: no variant id matches (ids look like {every[0].id})")
    kept: dict[str, set[str]] = {}
    for v in chosen:
        kept.setdefault(v.kernel.name, set()).add(v.target)
    kernels = tuple(
        dataclasses.replace(k, targets=tuple(t for t in k.targets if t in kept[k.name]),
                            rules=tuple(r for r in k.rules if r.arch is None or r.arch in kept[k.name]),
                            validation=tuple(r for r in k.validation if r.arch in kept[k.name]))
        for k in recipe.kernels if k.name in kept
    )  # fmt: skip
    narrowed = dataclasses.replace(
        recipe, kernels=kernels, targets=tuple(t for t in recipe.targets if any(t in ts for ts in kept.values()))
    )
    ids = {v.id for v in chosen}
    classes = {(v.kernel.name, v.binding, v.target, v.spec) for v in chosen}
    variants = tuple(
        v for v in plan_variants(narrowed, winners_only)
        if v.id in ids or (v.config == v.kernel.default and (v.kernel.name, v.binding, v.target, v.spec) in classes)
    )  # fmt: skip
    return narrowed, variants


def plan_summary(recipe: Recipe, variants: tuple[Variant, ...], every: bool = False) -> list[str]:
    """Per kernel: its backend, the variants planned, its specialization classes, and the combinations skipped
    because no call can select them (with one reason; ``every``: each config and class, a line apiece); the
    totals; then what the recipe's ``widen:`` widens."""
    lines = []
    for kernel in recipe.kernels:
        mine = sum(v.kernel is kernel for v in variants)
        classes = specs(kernel)
        skips = [(c, s, r) for c in kernel.configs for s in classes if (r := unreachable(kernel, c, s)) is not None]
        skipped = len(skips) * len(kernel.bindings) * len(kernel.targets)
        why = f"; {skipped} skipped that no call can select (e.g. {skips[0][2]})" if skips else ""
        groups = [(what, [s.name for s in classes if s.origin == origin]) for origin, what in _ORIGINS]
        shown = "; ".join(f"{what} {', '.join(names)}" for what, names in groups if names)
        lines.append(f"{kernel.name} ({kernel.backend}): {plural(mine, 'variant')}; "
                     f"{plural(len(classes), 'class', 'classes')}: {shown}{why}")  # fmt: skip
        if every:
            lines += [f"  skipped {config.label} in class {spec.name}: {reason}" for config, spec, reason in skips]
    totals = plan_document(recipe, variants)["totals"]
    backends = ", ".join(f"{n} {b}" for b, n in totals["backends"].items())
    lines.append(f"total: {plural(totals['variants'], 'variant')} ({backends}) of "
                 f"{plural(totals['kernels'], 'kernel')}")  # fmt: skip
    if recipe.triton_cache:  # shipped as recorded, not planned
        kernels = [e for e in recipe.triton_cache if not e.module]
        modules = len(recipe.triton_cache) - len(kernels)
        what = []
        if kernels:
            tritons = ", ".join(sorted({e.triton for e in kernels}))
            targets = ", ".join(sorted({e.target for e in kernels}))
            what.append(f"{plural(len(kernels), 'kernel')} compiled by Triton {tritons} for {targets}")
        if modules:
            what.append(f"{plural(modules, 'module')} Triton built with a C compiler")
        shipped = plural(len(recipe.triton_cache), "Triton cache entry", "Triton cache entries")
        lines.append(f"triton_cache: {shipped} shipped as recorded ({'; '.join(what)}), served by activate() as "
                     "cache hits")  # fmt: skip
    if recipe.inductor_cache:  # shipped as recorded, loaded by activate()
        torches = ", ".join(sorted({s.torch for s in recipe.inductor_cache}))
        processes = plural(len(recipe.inductor_cache), "process", "processes")
        cpp = sum(s.cpp_kernels for s in recipe.inductor_cache)
        held = sum(len(s.cpp_objects) for s in recipe.inductor_cache)
        needs = (f"; their graphs' code calls for C++ kernels of Inductor's ({plural(cpp, 'call')}), which it builds "
                 f"when they load: {plural(held, 'shared object')} of them held (served under the recording's Python "
                 "on a CPU with its features), any other needs a C++ compiler where the program is served"
                 ) if cpp else ""  # fmt: skip
        lines.append(f"inductor_cache: torch.compile's caches of {processes} shipped as recorded (torch {torches}), "
                     f"loaded by activate(){needs}")  # fmt: skip
    for name, values in recipe.widen:  # its effect is in the variants above; this says where it comes from
        reached = [k.name for k in recipe.kernels if k.points and name in k.constexpr_names]
        shown = ", ".join(const_text(v) for v in values[:8]) + (", ..." if len(values) > 8 else "")
        lines.append(f"widen: {name} takes {shown} in every row of {', '.join(reached)}")
    return lines


def plan_document(recipe: Recipe, variants: tuple[Variant, ...]) -> dict[str, Any]:
    """``aotpack plan --json``: the kernels in the recipe's order, each with its backend and its variant ids in plan
    order, and the totals (variants, kernels, variants per backend). Its shape is docs/cli.md's; ``schema``
    changes with it, for a script that reads it."""
    backends = Counter(v.kernel.backend for v in variants)
    return {
        "schema": 1,
        "recipe": str(recipe.path),
        "package": recipe.package,
        "kernels": [
            {"name": k.name, "backend": k.backend, "variants": [v.id for v in variants if v.kernel is k]}
            for k in recipe.kernels
        ],
        "totals": {
            "variants": len(variants),
            "kernels": len(recipe.kernels),
            "backends": dict(sorted(backends.items())),
        },
    }


_ORIGINS = (("level", "hint levels"), ("typical", "typical calls"), ("recipe", "the recipe's"), ("floor", "floors"),
            ("relaxed", "one argument given up (dispatched configs only)"))  # fmt: skip
