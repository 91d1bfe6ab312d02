"""``aotpack record``: run a workload under Triton's JIT and write the recipe of what it compiled.

Every compilation comes through Triton's own hook (``knobs.runtime.jit_cache_hook``, called before
each compile with the signature, constants, attributes and options); launches are counted through
``knobs.runtime.launch_enter_hook``; what each ``@triton.autotune`` picked is read from its cache
when the recording stops. Both hooks are chained: one already installed still runs.

The recipe (``recipe_text``) lists each kernel once, as ``launch: triton`` (Triton's launch syntax,
see aot_kernels.Launcher) with exactly the variants seen: types, constexprs and options, and the
JIT's specialization class of every argument. Merging into an existing recipe keeps its other
kernels and adds up launch counts; the order is deterministic (diff-friendly).
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from . import facts
from ._temp import atomic_file
from .errors import RecordError

PLAIN = (int, float, bool, str)


@dataclass(frozen=True, kw_only=True)
class Compilation:
    """One compilation the JIT performed: the function, and what its code was specialized for."""

    module: str
    path: str | None  # the function's file, for kernels not importable by module
    function: str
    params: tuple[tuple[str, bool], ...]  # (name, is a constexpr), in the signature's order
    types: tuple[tuple[str, str], ...]  # runtime arguments: Triton type ('*fp16', 'i32'); '' when folded
    states: tuple[str, ...]  # runtime arguments: 'D', '1', 'N' or ''
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, Any], ...]  # launch options that change the code, where not Triton's defaults
    arch: int  # compute capability, e.g. 90
    launches: int = 0

    @property
    def ident(self) -> tuple[Any, ...]:
        return (self.module, self.function, self.arch, *self.variant)

    @property
    def variant(self) -> tuple[Any, ...]:
        """What a recipe row says of it (the kernel and the targets are said elsewhere)."""
        return (self.types, self.states, self.constexprs, self.num_warps, self.num_stages, self.options)


_DEFAULT_OPTIONS = {"num_ctas": 1, "maxnreg": None, "enable_fp_fusion": True, "launch_cooperative_grid": False,
                    "launch_pdl": False}  # fmt: skip


def plain(value: Any) -> Any:
    """A constexpr's value as the recipe holds it: tl.constexpr(0) is 0."""
    return value.value if type(value).__name__ == "constexpr" and hasattr(value, "value") else value


def compilation(fn: Any, compile: dict[str, Any]) -> Compilation:
    """A Compilation from the arguments Triton passes its jit_cache_hook."""
    jit = fn.jit_function
    signature, constants = compile["signature"], compile["constants"]
    attrs = compile["configs"][0] if compile.get("configs") else {}
    spec = json.loads(compile.get("specialization_data") or "{}")
    options = spec.get("options", {})
    types, states, consts = [], [], []
    for index, param in enumerate(jit.params):
        name = param.name
        if param.is_constexpr:
            consts.append((name, plain(constants.get((index,), param.default))))
            continue
        kind = signature.get(name, "")
        if kind == "constexpr":  # folded by the JIT: equal to 1, or None
            value = constants.get((index,))
            types.append((name, ""))
            states.append("1" if value == 1 else "N")
            continue
        divisible = any(a[0] == "tt.divisibility" and a[1] == 16 for a in attrs.get((index,), ()))
        types.append((name, ("*" if kind.startswith("*") else "") + _dtype(kind.lstrip("*"))))
        states.append("D" if divisible else "")
    kept = tuple((k, options[k]) for k in _DEFAULT_OPTIONS if k in options and options[k] != _DEFAULT_OPTIONS[k])
    arch = spec.get("target", {}).get("arch")  # Triton 3.9 serializes the target; 3.6: the device's binder has it
    if arch is None and "device" in compile:
        arch = getattr(jit.device_caches[compile["device"]][2], "arch", 0)
    return Compilation(
        module=jit.fn.__module__, path=_file_of(jit), function=jit.fn.__qualname__,
        params=tuple((p.name, bool(p.is_constexpr)) for p in jit.params), types=tuple(types),
        states=tuple(states), constexprs=tuple(consts), num_warps=int(compile["num_warps"]),
        num_stages=int(compile["num_stages"]), options=kept, arch=int(arch or 0),
    )  # fmt: skip


def _dtype(triton_name: str) -> str:
    """aotpack's name of a type in Triton's signature ('fp16', 'i32'; Triton's booleans are 'u1' or 'i1')."""
    known = facts.dtypes()
    if triton_name in known:
        return triton_name
    for name, d in known.items():
        if d.triton_name == triton_name:
            return name
    raise ValueError(f"type {triton_name!r} has no aotpack dtype")


def _file_of(jit: Any) -> str | None:
    try:
        return str(os.path.realpath(jit.fn.__code__.co_filename))
    except AttributeError:
        return None


class Recording:
    """What the JIT compiled and launched while active; ``stop()`` also reads autotuner picks."""

    def __init__(self) -> None:
        self.compiled: dict[tuple[Any, ...], Compilation] = {}
        self.launches: dict[tuple[Any, ...], int] = {}
        self.picks: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.skipped: dict[str, str] = {}  # function -> why it cannot be recorded
        self._keys: dict[Any, tuple[Any, ...]] = {}  # the JIT's cache key -> our ident
        self._functions: dict[int, Any] = {}  # recorded JITFunctions by id
        self._handles: dict[int, tuple[Any, ...] | None] = {}  # a launched CUfunction -> ident
        self._previous: Any = None

    def on_compile(self, *, key: Any, repr: str, fn: Any, compile: dict[str, Any], is_manual_warmup: bool,
                   already_compiled: bool) -> Any:  # fmt: skip
        try:
            c = compilation(fn, compile)
        except Exception as exc:  # a format this release of Triton hooks differently: say so, never break the run
            self.skipped[f"{fn.module}:{fn.name}"] = f"could not read the compilation ({type(exc).__name__}: {exc})"
        else:
            bad = [n for n, v in c.constexprs if v is not None and not isinstance(v, PLAIN)]
            if bad or any(v is None for _, v in c.constexprs):
                what = ", ".join(bad) or ", ".join(n for n, v in c.constexprs if v is None)
                self.skipped[f"{c.module}:{c.function}"] = (
                    f"constexpr {what} takes a value that is not a number, "
                    "boolean or string (a dtype, function, tuple or None)"
                )
            else:
                self.compiled.setdefault(c.ident, c)
                self._keys[(id(fn.jit_function), str(key))] = c.ident
                self._functions[id(fn.jit_function)] = fn.jit_function
        return self._previous(key=key, repr=repr, fn=fn, compile=compile, is_manual_warmup=is_manual_warmup,
                              already_compiled=already_compiled) if self._previous else None  # fmt: skip

    def on_launch(self, metadata: Any) -> None:
        try:
            handle = metadata.get()["function"] if hasattr(metadata, "get") else None
        except Exception:  # launch metadata a kernel computes itself may fail; counting is best effort
            return
        if handle is None:
            return
        if handle not in self._handles:
            self._handles[handle] = self._ident_of(handle)
        ident = self._handles[handle]
        if ident is not None:
            self.launches[ident] = self.launches.get(ident, 0) + 1

    def _ident_of(self, handle: int) -> tuple[Any, ...] | None:
        """Which recorded compilation owns a launched function (read off the JIT's kernel caches)."""
        for jit_id, jit in self._functions.items():
            for caches in getattr(jit, "device_caches", {}).values():
                for key, kernel in caches[0].items():
                    if getattr(kernel, "function", None) == handle:
                        return self._keys.get((jit_id, str(key)))
        return None

    def start(self) -> None:
        from triton import knobs

        self._previous = knobs.runtime.jit_cache_hook
        knobs.runtime.jit_cache_hook = self.on_compile
        knobs.runtime.launch_enter_hook.add(self.on_launch)

    def stop(self) -> None:
        from triton import knobs

        knobs.runtime.jit_cache_hook = self._previous
        knobs.runtime.launch_enter_hook.remove(self.on_launch)
        for jit in self._functions.values():
            self._read_autotuner(jit)

    def _read_autotuner(self, jit: Any) -> None:
        """The picks of any @triton.autotune around ``jit`` in its module: key -> config."""
        module = sys.modules.get(jit.fn.__module__)
        for obj in list(vars(module).values()) if module else ():
            inner, hops = obj, 0
            while inner is not jit and hasattr(inner, "fn") and hops < 8:
                inner, hops = inner.fn, hops + 1
            if inner is not jit or not (hasattr(obj, "cache") and hasattr(obj, "configs")):
                continue
            tuner = obj
            while not hasattr(tuner, "keys"):  # @triton.heuristics outside @triton.autotune
                tuner = tuner.fn
            for key, config in tuner.cache.items():
                if not all(isinstance(v, PLAIN) for v in key):
                    continue
                pick = {"key": list(key), "config": {**config.kwargs, "num_warps": config.num_warps,
                                                     "num_stages": config.num_stages}}  # fmt: skip
                picks = self.picks.setdefault((jit.fn.__module__, jit.fn.__qualname__), [])
                if pick not in picks:
                    picks.append(pick)

    def compilations(self) -> list[Compilation]:
        return [replace(c, launches=self.launches.get(ident, 0)) for ident, c in self.compiled.items()]


@contextlib.contextmanager
def recording(path: str | os.PathLike[str] | None = None, package: str = "recorded_kernels") -> Iterator[Recording]:
    """Record what Triton's JIT compiles inside the block; with ``path``, write (or merge into) that
    recipe on the way out, when anything was compiled."""
    rec = Recording()
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()
        if path is not None and rec.compiled:
            write(Path(path), rec, package)


def run_program(argv: list[str]) -> None:
    """Run ``python script.py args`` / ``python -m module args`` / ``script.py args`` in this process
    (so that the hooks see its kernels), as Python would run it."""
    if argv and Path(argv[0]).name.startswith("python"):
        argv = argv[1:]
    if not argv:
        raise RecordError("give the program to record after --, e.g. aotpack record -o r.yaml -- python run.py")
    saved = sys.argv[:], sys.path[:]
    try:
        if argv[0] == "-m":
            if len(argv) < 2:
                raise RecordError("-m needs a module name")
            sys.argv = argv[1:]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            if not Path(argv[0]).is_file():
                raise RecordError(f"no such program: {argv[0]}")
            sys.argv = argv
            sys.path.insert(0, str(Path(argv[0]).resolve().parent))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RecordError(f"the recorded program exited with status {exc.code}") from None
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]


# ---------------------------------------------------------------- the recipe


def write(path: Path, rec: Recording, package: str) -> None:
    """Write the recipe of a recording to ``path``, merged into what is there (atomically)."""
    existing = yaml.safe_load(path.read_text()) if path.is_file() else None
    text = recipe_text(rec.compilations(), rec.picks, path.parent, existing, package)
    with atomic_file(path) as f:
        f.write(text.encode())


def recipe_text(compiled: list[Compilation], picks: dict[tuple[str, str], list[dict[str, Any]]], folder: Path,
                existing: dict[str, Any] | None = None, package: str = "recorded_kernels") -> str:  # fmt: skip
    """The recipe (YAML text) of these compilations, merged into ``existing`` (a loaded recipe)."""
    base = existing or {}
    kernels: dict[str, Any] = dict(base.get("kernels") or {})
    by_source = {str(v.get("triton")): n for n, v in kernels.items() if isinstance(v, dict) and v.get("launch")}
    targets = set(base.get("targets") or ())
    groups: dict[str, list[Compilation]] = {}
    tuned: dict[str, list[dict[str, Any]]] = {}
    for c in compiled:
        source = _source(c, folder)
        groups.setdefault(source, []).append(c)
        tuned[source] = picks.get((c.module, c.function), [])
        if c.arch:
            targets.add(_target(c.arch))
    for source, group in sorted(groups.items()):
        name = by_source.get(source) or _kernel_name(source.rpartition(":")[2], set(kernels))
        old = kernels.get(name) if isinstance(kernels.get(name), dict) else None
        merged: dict[tuple[Any, ...], Compilation] = {}
        for c in [*(_compilations(old) if old else ()), *group]:  # one row twice (or per arch): add up launches
            same = merged.get(c.variant)
            merged[c.variant] = replace(c, launches=c.launches + (same.launches if same else 0))
        picked = [p for p in (old or {}).get("autotuned") or () if p not in tuned[source]] + tuned[source]
        kernels[name] = _kernel(source, list(merged.values()), picked)
        by_source[source] = name
    out = {
        "package": base.get("package", package),
        "version": str(base.get("version", "0.1.0")),
        "summary": base.get("summary", "Kernels recorded from a running workload by aotpack record"),
        "targets": sorted(targets),
        "kernels": {n: kernels[n] for n in sorted(kernels)},
    }
    return _dump(out)


def _target(arch: int) -> str:
    name = f"sm_{arch}"
    return f"{name}a" if name not in facts.archs() or not facts.archs()[name].triton else name


def _source(c: Compilation, folder: Path) -> str:
    if (c.module not in ("__main__", "__mp_main__") and _findable(c.module)) or c.path is None:
        return f"{c.module}:{c.function}"
    return f"{os.path.relpath(c.path, folder)}:{c.function}"


def _findable(module: str) -> bool:
    """Whether a fresh process can import the module by name (not one loaded from a file under a
    made-up name)."""
    import importlib.machinery

    try:  # the top-level name on sys.path (a module loaded from a file under a made-up name is not)
        return importlib.machinery.PathFinder.find_spec(module.partition(".")[0], sys.path) is not None
    except (ImportError, ValueError):
        return False


def _kernel_name(function: str, taken: set[str]) -> str:
    base = function.split(".")[-1].lstrip("_") or "kernel"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _compilations(kernel: dict[str, Any]) -> list[Compilation]:
    """The compilations an earlier recording wrote as a kernel's variants (to merge a new one in)."""
    args = kernel.get("args") or {}
    out = []
    for row in kernel.get("variants") or ():
        binding = row.get("types") or {}
        config = dict(row["config"])
        warps, stages = int(config.pop("num_warps", 4)), int(config.pop("num_stages", 3))
        letters = str(row["class"])
        types = []
        for (name, kind), letter in zip(args.items(), letters, strict=False):
            dtype = str(kind).lstrip("*")
            dtype = binding.get(dtype, dtype)
            types.append((name, "" if letter in "1N" else ("*" if str(kind).startswith("*") else "") + dtype))
        out.append(Compilation(
            module="", path=None, function="", params=(), types=tuple(types),
            states=tuple("" if ch == "_" else ch for ch in letters), constexprs=tuple(config.items()),
            num_warps=warps, num_stages=stages, options=tuple((kernel.get("options") or {}).items()), arch=0,
            launches=int(row.get("launches", 0)),
        ))  # fmt: skip
    return out


def _kernel(source: str, group: list[Compilation], picks: list[dict[str, Any]]) -> Any:
    """A `launch: triton` kernel of the recipe from one function's compilations."""
    runtime = [n for n, _ in group[0].types]
    # a pointer argument's dtype per compilation; arguments whose columns agree share a type variable
    columns: dict[str, tuple[str, ...]] = {}
    scalar: dict[str, str] = {}
    for index, name in enumerate(runtime):
        kinds = [c.types[index][1] for c in group]
        known = [k for k in kinds if k]
        if any(k.startswith("*") for k in known):
            fill = next((k for k in known), "*i8")
            columns[name] = tuple((k or fill)[1:] for k in kinds)
        else:
            scalar[name] = max(set(known), key=known.count) if known else "i32"
    typevars: dict[tuple[str, ...], str] = {}
    for col in columns.values():
        if len(set(col)) > 1 and col not in typevars:
            typevars[col] = "T" if not typevars else f"T{len(typevars)}"
    args = {}
    for name in runtime:
        if name in columns:
            col = columns[name]
            args[name] = "*" + (typevars[col] if col in typevars else col[0])
        else:
            args[name] = scalar[name]
    types = {var: sorted(set(col)) for col, var in typevars.items()}
    rows = {}
    for i, c in enumerate(group):
        if any(c.types[j][1] and not c.types[j][1].startswith("*") and c.types[j][1] != scalar.get(n)
               for j, n in enumerate(runtime)):  # fmt: skip
            continue  # a scalar typed otherwise (an i64 past i32's range): another binding, not recorded
        row: dict[str, Any] = {}
        if typevars:
            row["types"] = {var: col[i] for col, var in typevars.items()}
        row["config"] = {**dict(c.constexprs), "num_warps": c.num_warps, "num_stages": c.num_stages}
        row["class"] = "".join(s or "_" for s in c.states)
        row["launches"] = c.launches
        rows[_row_key(row)] = row
    kernel: dict[str, Any] = {"triton": source, "launch": "triton"}
    if types:
        kernel["types"] = types
    kernel["args"] = args
    options = dict(group[0].options)
    if options:
        kernel["options"] = options
    kernel["variants"] = [rows[k] for k in sorted(rows)]
    if picks:
        unique = {json.dumps(p, sort_keys=True, default=str): p for p in picks}
        kernel["autotuned"] = [unique[k] for k in sorted(unique)]
    return kernel


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps([row.get("types"), row.get("config"), row.get("class")], sort_keys=True, default=str)


def _dump(recipe: dict[str, Any]) -> str:
    """YAML with one line per variant and per autotuner pick (diff-friendly)."""
    head = {k: v for k, v in recipe.items() if k != "kernels"}
    lines = ["# Written by aotpack record: the kernels a workload ran under Triton's JIT, each variant as the",
             "# JIT compiled it (types, constexprs and options, and its class: per argument D = 16-divisible or",
             "# aligned, 1 = equal to 1, N = None, _ = nothing). Build it with: aotpack build <this file>",
             yaml.safe_dump(head, sort_keys=False, width=1 << 16).rstrip(), "kernels:"]  # fmt: skip
    for name, kernel in recipe["kernels"].items():
        lines.append(f"  {_flow(name)}:")
        for key, value in kernel.items():
            if key in ("variants", "autotuned") and isinstance(value, list):
                lines.append(f"    {key}:")
                lines += [f"      - {_flow(row)}" for row in value]
            else:
                lines.append(f"    {key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()
