"""Recipe -> the variants to compile: kernel x types x config x target x specialization class.

A specialization class says, per argument, what the variant's code assumes of it, in the terms
Triton's JIT specializes on: ``D`` (an integer divisible by 16, or a pointer aligned to 16 bytes),
``1`` (an integer equal to 1, folded into the code as a constant), ``N`` (an optional pointer passed
as None, folded too) or nothing. The runtime computes a call's states the same way and launches the
most specialized class built whose assumptions the call satisfies; the least specialized class
assumes nothing and runs any call.

Classes come from two sources:
- the recipe's hints pin arguments: ``:16``/``:1`` make a ``hinted`` level (the hints assumed) and a
  ``safe`` one; ``:16!`` is assumed by every class (calls that break it are refused);
- every other integer and pointer argument of a Triton kernel is specialized as the JIT would, under
  the kernel's ``specialize:`` policy (``common`` by default, see ``auto_states``).
Variant ids are stable and readable: ``add/T=fp32,BLOCK=1024,w4,s1/sm_90a/hinted``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import re
from dataclasses import dataclass

from . import expr
from .errors import RecipeError
from .introspect import ANY, DIV16, NONE, ONE
from .model import Arg, Config, Kernel, Recipe

MAX_CLASSES = 256  # a `specialize: all` kernel past this many classes is refused
MAX_RELAXED = 3  # the common policy relaxes every subset of up to this many sizes


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A specialization class: per kernel argument, what its variants assume ("", "D", "1", "N")."""

    name: str
    states: tuple[str, ...]
    level: str  # "hinted", "safe" (the recipe's hints assumed or not), or "" for kernels without hints

    @property
    def degree(self) -> int:
        return sum(s in (DIV16, ONE) for s in self.states)

    def jit_terms(self, kernel: Kernel) -> dict[str, str]:
        """What the class assumes of each argument, as Triton's JIT keys name it."""
        return {a.name: s for a, s in zip(kernel.args, self.states, strict=True) if s}


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


def _hint_state(arg: Arg) -> str:
    return ONE if arg.hint == 1 else DIV16


def _auto(kernel: Kernel, arg: Arg) -> bool:
    """Whether the argument is specialized like the JIT does it (not pinned by a hint)."""
    if kernel.backend != "triton" or arg.hint is not None or arg.launch_only or arg.descriptor:
        return False
    return arg.kind in ("tensor", "int")


def unit_strides(kernel: Kernel) -> set[str]:
    """Integer arguments expected to be 1 in common calls: those whose default is ``stride(t, d)``
    for the innermost dimension ``d`` of ``t`` that the kernel's expressions read (a contiguous
    tensor's last stride)."""
    innermost: dict[str, int] = {}
    for e in kernel.call_exprs:
        for call in expr.tensor_calls(e):
            if call.func in ("size", "stride") and isinstance(call.args[1], expr.Num):
                name = expr.unparse(call.args[0])
                innermost[name] = max(innermost.get(name, 0), call.args[1].value)
    out = set()
    for arg in kernel.args:
        d = arg.default
        if isinstance(d, expr.Call) and d.func == "stride" and isinstance(d.args[1], expr.Num):
            tensor, dim = kernel.arg(expr.unparse(d.args[0])), d.args[1].value
            # the only dimension the recipe reads of a tensor may still be its rows: a stride 0 that the
            # tensor's extent multiplies ((rows - 1) * row_stride + cols) is an outer one
            outer = dim == 0 and tensor.extent is not None and arg.name in _multiplied(tensor.extent)
            if innermost.get(tensor.name) == dim and not outer:
                out.add(arg.name)
    return out


def _multiplied(e: expr.Expr) -> set[str]:
    """Names that appear as a factor of a product in the expression."""
    if isinstance(e, expr.BinOp):
        inner = _multiplied(e.left) | _multiplied(e.right)
        if e.op == "*":
            inner |= {n.id for n in expr.names(e.left) + expr.names(e.right)}
        return inner
    if isinstance(e, expr.Neg):
        return _multiplied(e.operand)
    if isinstance(e, expr.Call):
        return {n for a in e.args for n in _multiplied(a)}
    return set()


def auto_states(kernel: Kernel) -> list[dict[str, str]]:
    """The automatic part of the classes, per the kernel's ``specialize:`` policy, over the
    arguments the JIT would specialize and the recipe does not pin:
    - ``none``: nothing assumed;
    - ``common`` (default): pointers aligned, unit strides 1 and every other integer divisible by 16
      (contiguous tensors with sizes that are multiples of 16); the same but with some sizes not
      divisible, and the row strides that equal them (see below); pointers aligned with unit strides
      equal to 1 (odd sizes); pointers aligned; nothing;
    - ``all``: every combination of what each argument can be (bounded by MAX_CLASSES).
    An argument takes only the states the kernel's Triton release gives it (``Arg.jit_states``)."""
    args = [a for a in kernel.args if _auto(kernel, a) and len(a.jit_states) > 1]
    if kernel.specialize == "none" or not args:
        return [{}]
    if kernel.specialize == "all":
        combos = list(itertools.product(*(a.jit_states for a in args)))
        if len(combos) > MAX_CLASSES:
            raise RecipeError(
                f"kernels.{kernel.name}.specialize: 'all' makes {len(combos)} classes (at most {MAX_CLASSES}); "
                "use 'common', or pin arguments with hints", kernel.where,
            )  # fmt: skip
        return [{a.name: s for a, s in zip(args, combo, strict=True)} for combo in combos]
    units = unit_strides(kernel)

    def level(aligned: bool, ones: bool, divisible: bool) -> dict[str, str]:
        out = {}
        for a in args:
            if a.pointer:
                out[a.name] = DIV16 if aligned and DIV16 in a.jit_states else ANY
            elif a.name in units and ONE in a.jit_states:
                out[a.name] = ONE if ones else ANY
            else:
                out[a.name] = DIV16 if divisible and DIV16 in a.jit_states else ANY
        return out

    common = level(True, True, True)
    # the common case but for some sizes (a batch, a row count, a length) that are not multiples of 16,
    # each taking along the row strides that equal it in contiguous tensors: every subset of up to
    # MAX_RELAXED sizes (beyond that, one size at a time), so that such calls still get the JIT's code
    strides = {a.name for a in args if isinstance(a.default, expr.Call) and a.default.func == "stride"}
    sizes = [a.name for a in args if not a.pointer and common[a.name] == DIV16 and a.name not in strides]
    partners = row_strides(kernel, units)
    subsets = (itertools.chain.from_iterable(itertools.combinations(sizes, n) for n in range(1, len(sizes) + 1))
               if len(sizes) <= MAX_RELAXED else ((size,) for size in sizes))  # fmt: skip
    relaxed = [{**common, **{n: ANY for size in subset for n in (size, *partners.get(size, ()))}} for subset in subsets]
    return [common, *relaxed, level(True, True, False), level(True, False, False), level(False, False, False)]


def row_strides(kernel: Kernel, units: set[str]) -> dict[str, tuple[str, ...]]:
    """For each size, the outer strides that equal it in a contiguous tensor, read off the extents:
    in ``(R - 1) * row_stride + (C - 1) * unit_stride + 1`` (or ``+ C``), ``row_stride`` is C's."""
    out: dict[str, list[str]] = {}
    for arg in kernel.args:
        if arg.extent is None:
            continue
        products = _products(arg.extent)
        inner = [n for n, stride in products if stride in units] + _bare_names(arg.extent)
        outer = [stride for _, stride in products if stride not in units]
        for size in inner:
            for stride in outer:
                if stride not in out.setdefault(size, []):
                    out[size].append(stride)
    return {size: tuple(strides) for size, strides in out.items()}


def _products(e: expr.Expr) -> list[tuple[str, str]]:
    """(size, stride) of each ``(size - 1) * stride`` or ``size * stride`` term of a sum."""
    if isinstance(e, expr.BinOp) and e.op in "+-":
        return _products(e.left) + _products(e.right)
    if isinstance(e, expr.BinOp) and e.op == "*" and isinstance(e.right, expr.Name):
        factor = e.left.left if isinstance(e.left, expr.BinOp) and e.left.op == "-" else e.left
        if isinstance(factor, expr.Name):
            return [(factor.id, e.right.id)]
    return []


def _bare_names(e: expr.Expr) -> list[str]:
    """Names added bare to a sum (``... + n_cols``): sizes with an implicit unit stride."""
    if isinstance(e, expr.BinOp) and e.op == "+":
        return _bare_names(e.left) + _bare_names(e.right)
    return [e.id] if isinstance(e, expr.Name) else []


_LETTER = {DIV16: "D", ONE: "1", NONE: "N", ANY: "_"}  # how a class name spells each argument's state


def specs(kernel: Kernel) -> tuple[Spec, ...]:
    """The kernel's specialization classes, most specialized first."""
    if kernel.launch == "triton":  # the classes a recording saw, spelt over the arguments the JIT keys
        keyed = [len(a.jit_states) > 1 or a.optional for a in kernel.args]
        recorded = dict.fromkeys(p.states for p in kernel.points)
        return tuple(sorted(
            (Spec(name="".join(_LETTER[st] for st, k in zip(states, keyed, strict=True) if k) or "plain",
                  states=states, level="") for states in recorded),
            key=lambda s: -s.degree,
        ))  # fmt: skip
    pinned = [a for a in kernel.args if a.hint is not None and not a.required]
    levels = ("hinted", "safe") if pinned else ("",)
    autos = auto_states(kernel)
    optional = [a for a in kernel.args if a.optional]
    auto_names = [a.name for a in kernel.args if any(a.name in s for s in autos) or a.optional]
    out: dict[tuple[str, ...], Spec] = {}
    for lvl in levels:
        for auto in autos:
            for nones in itertools.product((False, True), repeat=len(optional)):
                absent = {a.name for a, none in zip(optional, nones, strict=True) if none}
                states = []
                for a in kernel.args:
                    if a.name in absent:
                        states.append(NONE)
                    elif a.hint is not None and (a.required or lvl == "hinted"):
                        states.append(_hint_state(a))
                    else:
                        states.append(auto.get(a.name, ANY))
                code = "".join(_LETTER[st] for a, st in zip(kernel.args, states, strict=True) if a.name in auto_names)
                name = "-".join(p for p in (lvl, code) if p) or "plain"
                out.setdefault(tuple(states), Spec(name=name, states=tuple(states), level=lvl))
    return tuple(sorted(out.values(), key=lambda s: -s.degree))


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
    kernel (``launch: triton``), exactly those it lists."""
    classes = specs(kernel)
    if kernel.launch == "triton":
        spec_of = {s.states: s for s in classes}
        return [(p.binding, p.config, spec_of[p.states]) for p in kernel.points]
    pairs = [
        (config, spec)
        for config in kernel.configs
        if not winners_only or config == kernel.default or any(r.config == config for r in kernel.rules)
        for spec in classes
        if unreachable(kernel, config, spec) is None
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
        raise RecipeError(f"no variant id matches {', '.join(patterns)} (ids look like {every[0].id})")
    kept: dict[str, set[str]] = {}
    for v in chosen:
        kept.setdefault(v.kernel.name, set()).add(v.target)
    kernels = tuple(
        dataclasses.replace(k, targets=tuple(t for t in k.targets if t in kept[k.name]),
                            rules=tuple(r for r in k.rules if r.arch is None or r.arch in kept[k.name]))
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


def plan_summary(recipe: Recipe, variants: tuple[Variant, ...]) -> list[str]:
    """Per kernel: the variants planned, its specialization classes, and the combinations skipped
    because no call can select them (with one reason)."""
    lines = []
    for kernel in recipe.kernels:
        mine = sum(v.kernel is kernel for v in variants)
        classes = specs(kernel)
        reasons = [r for c in kernel.configs for s in classes if (r := unreachable(kernel, c, s)) is not None]
        skipped = len(reasons) * len(kernel.bindings) * len(kernel.targets)
        why = f"; {skipped} skipped that no call can select (e.g. {reasons[0]})" if reasons else ""
        names = ", ".join(s.name for s in classes)
        lines.append(f"{kernel.name}: {mine} variants; {len(classes)} classes ({names}){why}")
    return lines
