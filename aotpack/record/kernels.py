"""A recording as recipe data: each recorded function one ``launch: triton`` kernel (Triton's launch syntax, see
_aotpack_runtime.Launcher) with exactly the variants seen, a row each (types, constexprs and options, and the JIT's
specialization class of every argument), and what its @triton.autotune picked. Merged into an existing recipe's
data, a kernel the recording has too keeps its rows as they are (their launch counts included) and takes the
rows and picks it lacks; the order is deterministic (diff-friendly)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .. import facts, recorded
from ..errors import RecordError, UsageError
from ..model import TRITON_DEFAULT_STAGES, TRITON_DEFAULT_WARPS
from ..states import NONE, ONE, letters
from ..values import Widened
from . import descriptors
from .events import Compilation, Function, Json, Row
from .widen import widened


def recipe_data(compiled: list[Compilation], picks: dict[str, list[Json]],
                existing: dict[str, Any] | None = None, package: str = "recorded_kernels",
                widen: dict[str, list[Widened]] | None = None,
                dropped: dict[str, str] | None = None, tritons: set[str] | None = None,
                cached: Iterable[str] = (), identities: dict[str, str] | None = None,
                inductor: bool = False) -> dict[str, Any]:  # fmt: skip
    """The recipe of these compilations as data, merged into ``existing`` (a loaded recipe): the rows of a
    kernel the recording has too stay as they are (their launch counts included); ``tritons``: the releases
    the program ran (the recipe's ``triton:``). ``widen`` joins the recipe's ``widen:``, which it keeps, and the
    rows of every kernel recorded take its values (those kept, those new, those a report adds). ``cached``: the
    targets (backend:arch) of Triton cache entries the recording copied, which the recipe's ``triton_cache:``
    folder holds (kept as named); their CUDA archs join the targets. ``identities``: the source identity
    (``activate()``'s) of each of ``existing``'s kernels -> its name: a compiled function is the kernel of the same
    source however the recipe spells its file; one written by hand keeps its grid (the rows are said dropped).
    ``inductor``: the recording saved torch.compile's caches, which the recipe's ``inductor_cache:`` folder holds."""
    base = existing or {}
    widen = _joined(base.get("widen") or {}, widen or {})
    kernels: dict[str, Any] = dict(base.get("kernels") or {})
    by_source = {str(v.get("triton")): n for n, v in kernels.items() if isinstance(v, dict) and v.get("launch")}
    targets = set(listed(base.get("targets")))
    groups: dict[str, list[Compilation]] = {}
    tuned: dict[str, list[Json]] = {}
    for c in compiled:
        source = c.function.ref
        groups.setdefault(source, []).append(c)
        tuned[source] = picks.get(c.function.identity, [])
        if c.arch:
            targets.add(_target(c.arch))
    for source, group in sorted(groups.items()):
        # a kernel recorded by module path before its source was written out takes the rows (its triton: stays)
        known = (by_source.get(source) or by_source.get(group[0].function.module_ref)
                 or (identities or {}).get(group[0].function.identity))  # fmt: skip
        if known is not None and not (isinstance(kernels.get(known), dict) and kernels[known].get("launch")):
            if dropped is not None:  # written by hand: the recipe's grid is what the build makes of it
                dropped[source] = (f"the recipe's kernel {known!r}, written by hand, is this function: its grid "
                                   f"builds it, and these {len(group)} compilations are not added as rows")  # fmt: skip
            continue
        name = known or _kernel_name(source.rpartition(":")[2], set(kernels))
        old = kernels.get(name) if isinstance(kernels.get(name), dict) else None
        kept = {c.variant: c for c in compilations_of(old)} if old is not None else {}
        fresh: dict[Row, Compilation] = {}
        for c in group:  # one row twice (per arch): launches added up
            same = fresh.get(c.variant)
            fresh[c.variant] = replace(c, launches=c.launches + (same.launches if same else 0))
        recorded, now = [str(n) for n in (old or {}).get("args") or ()], [n for n, _ in group[0].types]
        if kept and recorded != now:
            raise RecordError(
                f"kernel {name} of the recipe was recorded with the arguments ({', '.join(recorded)}); "
                f"{source} now takes ({', '.join(now)}): delete kernel {name} from the "
                "recipe (or record into another recipe) and record again"
            )
        rows = widened([*kept.values(), *(c for v, c in fresh.items() if v not in kept)], widen)
        widened_rows = [c for c in rows if any(isinstance(v, list) for _, v in c.constexprs)]
        rows = [c for c in rows if not any(w is not c and _covers(w, c) for w in widened_rows)]
        picked = list((old or {}).get("autotuned") or ())  # a key picked already keeps its pick, as a row does
        seen = {_tuned_key(p) for p in picked}
        for pick in tuned[source]:  # (an autotuner times anew each run, and may pick another config for a key)
            if _tuned_key(pick) not in seen:
                seen.add(_tuned_key(pick))
                picked.append(pick)
        ref = str(old["triton"]) if old is not None else source
        kernels[name] = _kernel(ref, rows, picked, {} if dropped is None else dropped)
        by_source[source] = name
    _check_widen(widen, kernels)
    cached = list(cached)
    targets.update(_target(int(arch)) for backend, _, arch in (t.partition(":") for t in cached)
                   if backend == "cuda" and arch.isdigit())  # fmt: skip
    top = _top(base, package, _release(base.get("triton"), tritons or set()), bool(cached), inductor)
    return {**top, **({"widen": widen} if widen else {}),
            # (none where only host modules or torch.compile's CPU graphs were recorded: no kernel needs one)
            **({"targets": sorted(targets)} if targets else {}),
            "kernels": {n: kernels[n] for n in sorted(kernels)}}  # fmt: skip


def _top(base: dict[str, Any], package: str, release: str | None, cached: bool, inductor: bool) -> dict[str, Any]:
    """The recipe's keys above its kernels, as ``base`` (the recipe recorded into) has them, else new."""
    folder = base.get("triton_cache") or ("triton-cache" if cached else None)
    graphs = base.get("inductor_cache") or ("inductor-cache" if inductor else None)
    return {"package": base.get("package", package), "version": str(base.get("version", "0.1.0")),
            "summary": base.get("summary", "Kernels recorded from a running workload by aotpack record"),
            **({"triton": release} if release else {}), **({"triton_cache": folder} if folder else {}),
            **({"inductor_cache": graphs} if graphs else {})}  # fmt: skip


def _joined(kept: dict[str, list[Widened]], given: dict[str, list[Widened]]) -> dict[str, list[Widened]]:
    """The recipe's ``widen:`` with what ``--widen`` adds: a constexpr's values as kept, then those new (1 and
    true are two values), so that a recipe widened once stays as it is."""
    out = {name: list(values) for name, values in kept.items()}
    for name, values in given.items():
        have = out.setdefault(name, [])
        have += [v for v in values if (type(v), v) not in {(type(h), h) for h in have}]
    return out


def _check_widen(widen: dict[str, list[Widened]], kernels: dict[str, Any]) -> None:
    """Each constexpr widened is one of a recorded kernel's, as the build checks (``recipe.read``): written
    into the recipe, a misspelt name would make it one no build reads."""
    names = {
        str(n)
        for kernel in kernels.values()
        if isinstance(kernel, dict) and kernel.get("launch")
        for row in kernel.get("variants") or ()
        for n in row.get("config") or {}
    } - {"num_warps", "num_stages"}
    for name in sorted(set(widen) - names):
        theirs = f" (their constexprs: {', '.join(sorted(names))})" if names else ""
        raise UsageError(f"--widen {name}=...: no recorded kernel takes a constexpr {name!r}{theirs}; widen one of "
                          "theirs")  # fmt: skip


def _release(named: Any, ran: set[str]) -> str | None:
    """The recipe's ``triton:``: the release the recording ran, which is the code its rows are; a recipe that
    names one keeps it when the recording ran that release (3.6 names every 3.6.x)."""
    if len(ran) > 1:
        raise RecordError(f"the program's processes ran Triton {' and '.join(sorted(ran))}: a recipe is one "
                          "release's code; record each under one Triton")  # fmt: skip
    if named is None:
        return next(iter(ran), None)
    for version in ran:
        if version != str(named) and not version.startswith(f"{named}."):
            raise RecordError(f"the recipe names triton: {named}, and the program ran Triton {version}: its rows "
                              f"would be another release's code; record under Triton {named}, or into another "
                              "recipe")  # fmt: skip
    return str(named)


def _covers(wide: Compilation, c: Compilation) -> bool:
    """Whether a widened row's product holds compilation ``c``'s (a row of a value, or widened to fewer)."""
    if (wide.types, wide.states, wide.num_warps, wide.num_stages, wide.options) != (
        c.types,
        c.states,
        c.num_warps,
        c.num_stages,
        c.options,
    ):
        return False
    mine = dict(c.constexprs)
    return set(mine) == {n for n, _ in wide.constexprs} and all(
        _value_keys(mine[n]) <= _value_keys(v) for n, v in wide.constexprs
    )


def _value_keys(value: Json) -> set[str]:
    """A constexpr's value, or its values where widened, as comparable keys (1 and true are two values)."""
    return {json.dumps([str(type(v)), v], sort_keys=True) for v in (value if isinstance(value, list) else [value])}


def _target(arch: int) -> str:
    name = f"sm_{arch}"
    return f"{name}a" if name not in facts.archs() or not facts.archs()[name].triton else name


def _kernel_name(function: str, taken: set[str]) -> str:
    base = function.split(".")[-1].lstrip("_") or "kernel"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


_MERGED = Function(module="", qualname="", name="", identity="")  # rows of an earlier recording


def compilations_of(kernel: dict[str, Any]) -> list[Compilation]:
    """The compilations an earlier recording wrote as a kernel's variants (to merge a new one in)."""
    args = kernel.get("args") or {}
    out = []
    for row in kernel.get("variants") or ():
        binding = row.get("types") or {}
        config = dict(row["config"])
        warps = int(config.pop("num_warps", TRITON_DEFAULT_WARPS))
        stages = int(config.pop("num_stages", TRITON_DEFAULT_STAGES))
        states = letters(str(row["class"]), [str(name) for name in args])
        if isinstance(states, str):  # (record/existing.py checks a recipe's rows before they are read here)
            raise RecordError(f"a row of {kernel.get('triton')}: class {row['class']!r}: {states}")
        types = []
        for (name, kind), state in zip(args.items(), states, strict=True):
            desc = descriptors.parse(str(kind))
            if desc is not None:  # the row's own dtype and block
                types.append((name, descriptors.concrete(str(kind), binding.get(desc[0], desc[0]), config)))
                continue
            dtype = str(kind).lstrip("*")
            dtype = binding.get(dtype, dtype)
            types.append((name, "" if state in (ONE, NONE) else ("*" if str(kind).startswith("*") else "") + dtype))
        out.append(Compilation(
            function=_MERGED, params=(), types=tuple(types),
            states=states, constexprs=tuple(config.items()),
            num_warps=warps, num_stages=stages, options=tuple((kernel.get("options") or {}).items()), arch=0,
            launches=int(row.get("launches", 0)),
        ))  # fmt: skip
    return out


def _kernel(source: str, group: list[Compilation], picks: list[Json], dropped: dict[str, str]) -> Any:
    """A `launch: triton` kernel of the recipe from one function's compilations."""
    runtime = [n for n, _ in group[0].types]

    def drop(c: Compilation, why: str) -> None:
        config = ", ".join(f"{k}={v!r}" for k, v in c.constexprs)
        dropped[f"{source} ({config or 'no constexprs'}, num_warps={c.num_warps})"] = why

    group, blocks = descriptors.blocks(runtime, group, drop)
    columns, scalar = _columns(runtime, group, blocks)
    typevars: dict[tuple[str, ...], str] = {}
    for col in columns.values():
        if len(set(col)) > 1 and col not in typevars:
            typevars[col] = "T" if not typevars else f"T{len(typevars)}"
    args = {}
    for name in runtime:
        if name in blocks:
            col = columns[name]
            args[name] = descriptors.spelled(typevars[col] if col in typevars else col[0], blocks[name])
        elif name in columns:
            col = columns[name]
            args[name] = "*" + (typevars[col] if col in typevars else col[0])
        else:
            args[name] = scalar[name]
    types = {var: sorted(set(col)) for col, var in typevars.items()}
    rows = {}
    for i, c in enumerate(group):
        other = [(n, c.types[j][1]) for j, n in enumerate(runtime)
                 if c.types[j][1] and not c.types[j][1].startswith("*") and n not in blocks
                 and c.types[j][1] != scalar.get(n)]  # fmt: skip
        if other:  # a scalar the JIT typed otherwise here (an i64 past i32's range): one type per argument
            drop(c, ", ".join(f"{n} was {t}" for n, t in other) + " here, " + ", ".join(f"{scalar[n]} in the "
                 "kernel's other variants" for n, _ in other[:1]) + ": a recipe kernel takes one type per scalar "
                 "argument; record this call into a recipe of its own")  # fmt: skip
            continue
        row = recorded.row(types={var: col[i] for col, var in typevars.items()}, states=c.states,
                           config={**dict(c.constexprs), "num_warps": c.num_warps, "num_stages": c.num_stages},
                           launches=c.launches)  # fmt: skip
        rows[recorded.row_order(row)] = row
    kernel: dict[str, Any] = {"triton": source, "launch": "triton"}
    if types:
        kernel["types"] = types
    kernel["args"] = args
    options = dict(group[0].options)
    if options:
        kernel["options"] = options
    kernel["variants"] = [rows[k] for k in sorted(rows)]
    if picks:
        unique = {recorded.pick_order(p): p for p in picks}
        kernel["autotuned"] = [unique[k] for k in sorted(unique)]
    return kernel


def _columns(runtime: list[str], group: list[Compilation],
             blocks: dict[str, descriptors.Block]) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:  # fmt: skip
    """A pointer's (or descriptor's) dtype per compilation, by argument (arguments whose columns agree share a
    type variable), and each scalar's type (the most frequent)."""
    columns: dict[str, tuple[str, ...]] = {}
    scalar: dict[str, str] = {}
    for index, name in enumerate(runtime):
        kinds = [c.types[index][1] for c in group]
        known = [k for k in kinds if k]
        if name in blocks:
            columns[name] = tuple(descriptors.dtype(k) for k in kinds)
        elif any(k.startswith("*") for k in known) or all(c.states[index] == NONE for c in group):
            fill = next((k for k in known if k.startswith("*")), "*i8")  # always None: any pointer type serves
            columns[name] = tuple((k or fill)[1:] for k in kinds)
        else:
            scalar[name] = max(set(known), key=known.count) if known else "i32"
    return columns, scalar


def _tuned_key(pick: Json) -> str:
    """The autotuner key a pick is for (one pick per key)."""
    return json.dumps(pick.get("key") if isinstance(pick, dict) else pick, sort_keys=True, default=str)


def listed(value: Any) -> list[Any]:
    """A list the recipe may write as its one value (``targets: sm_90a``)."""
    return [value] if isinstance(value, str) else list(value or ())
